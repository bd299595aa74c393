"""Hydra's launcher for PBS (PBS Pro, OpenPBS, Torque) through hpcdist's submitit plugin:
``python app.py --multirun hydra/launcher=submitit_pbs lr=1e-3,3e-4``, as hydra-submitit-launcher's
``submitit_slurm`` is for Slurm. Hydra finds it in the ``hydra_plugins`` namespace package (no
``__init__.py`` in ``hydra_plugins/`` itself: hydra-submitit-launcher's folder lies beside it)."""
