"""Each scheduler's in-job variable names are written once, in its ``hpcdist/schedulers/<name>_job.py``:
the rank resolver (``hpcdist.env``, and ``hpcdist.rank``) reads them from there once it has loaded that
module for the allocation, never before.

The few that every rank's lookup tests before it loads anything of a scheduler (pbsdsh's markers,
srun's step id, a PBS batch job's) are named in ``hpcdist.env`` too: each module costs a lookup ~1%
of Python's start and tests/project/test_layout.py keeps them all out of it, while the login side (a render
loads ``slurm_job`` and ``pbs_job``) cannot load ``hpcdist.env`` for them. They are held equal here.
"""

import pathlib
import re

import hpcdist.env
from hpcdist.env import detectors
from hpcdist.schedulers.lsf import job as lsf_job
from hpcdist.schedulers.pbs import job as pbs_job
from hpcdist.schedulers.slurm import job as slurm_job

NAME = re.compile(r"""["']((?:SLURM|PBS|LSB)_[A-Z_]+)["']""")
#: Named in hpcdist.env as well, and why: tested before any scheduler module is loaded.
BEFORE_LOADING = {
    "PBS_VNODENUM": "pbsdsh's marker (detectors.PBSDSH)",
    "PBS_NODEFILE": "pbsdsh's marker; a PBS batch job's, for the warning that no launcher started the process",
    "PBS_JOBID": "a PBS batch job's, for that warning",
    "SLURM_STEP_ID": "srun's task marker (detectors.in_srun_task, SLURM.markers)",
}


def names_in(paths) -> set:
    return {name for path in paths for name in NAME.findall(pathlib.Path(path).read_text(encoding="utf-8"))}


def test_the_rank_side_names_no_variable_of_a_schedulers_job_module_but_those_tested_before_loading():
    env_side = names_in([*pathlib.Path(hpcdist.env.__file__).parent.glob("*.py"),
                         pathlib.Path(hpcdist.env.__file__).parent.parent / "rank.py"])
    job_side = names_in(m.__file__ for m in (slurm_job, pbs_job, lsf_job))
    assert sorted((env_side & job_side) - set(BEFORE_LOADING)) == []
    assert set(BEFORE_LOADING) <= env_side & job_side  # the list says no more than it must


def test_the_names_tested_before_loading_are_the_schedulers_own():
    assert detectors.PBSDSH.markers == (detectors.PBSDSH.variables["rank"][0], pbs_job.NODEFILE)
    assert set(detectors.PBSDSH.markers) <= pbs_job.PER_JOB  # what a resubmitted job must not inherit
    assert detectors.SLURM.markers[1] == slurm_job.STEP_ID
    assert pbs_job.JOB_ID_VARIABLES == ("PBS_JOBID",) and pbs_job.NODEFILE == "PBS_NODEFILE"
