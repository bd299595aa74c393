"""PBS (PBS Pro, OpenPBS, Torque): everything hpcdist knows of it, in one folder.

Where it runs: ``submit`` (qsub, qstat, qdel, the #PBS lines), ``qstat`` (reading qstat's answers),
``request`` (the grammar of -l select/nodes/place), ``limits`` (the site's array and per-user caps)
and the template ``pbs.sh.j2`` on the login node; ``job`` (the job's id, its node file, the retry
words) and ``pbsdsh`` (one agent per node) inside the job,
cheap enough to import in every rank.
"""
