"""Run commands under the real launchers installed here, for the tests.

Every run has a timeout: a launcher that hangs fails the test instead of CI.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import pytest

#: Variables of an enclosing launcher or job that must not leak into a test launch.
_LEAKY_PREFIXES = (
    "SLURM_", "PBS_", "OMPI_", "PMI_", "PMIX_", "MPI_LOCAL", "MV2_", "PALS_", "FLUX_", "LSB_",
    "JSM_", "HOROVOD_", "TORCHELASTIC_", "HPCDIST_",
)
_LEAKY = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "LOCAL_SIZE", "NODE_RANK",
          "GROUP_RANK", "CROSS_RANK", "MASTER_ADDR", "MASTER_PORT")

HPCDIST = f"{shlex.quote(sys.executable)} -m hpcdist"


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_LEAKY_PREFIXES) and k not in _LEAKY}
    # The interpreter's own bin first, so launchers start this venv's python.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.update(extra)
    return env


def need(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        pytest.skip(f"{program} is not installed (scripts/bootstrap.sh installs it as root)")
    return path


#: Python lines that leave an Open MPI rank with no rank variables, as a launcher that sets none
#: would (PMIX_RANK stays: MPI_Init needs it): hpcdist.env then asks mpi4py discovery, which starts MPI.
HIDE_OPENMPI_RANKS = ("import os\nfor _k in ('OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE', "
                      "'OMPI_COMM_WORLD_LOCAL_RANK', 'OMPI_COMM_WORLD_LOCAL_SIZE'):\n"
                      "    os.environ.pop(_k, None)\n")


def framework_views(out: str) -> list[dict]:
    """The ``VIEW {json}`` lines of tests/job_scripts/framework_view.py: ranks share one output, so a line
    may run into another's."""
    return [json.JSONDecoder().raw_decode(out, m.end())[0] for m in re.finditer(r"VIEW ", out)]


def openmpi_run(np: int) -> list[str]:
    argv = [need("mpirun.openmpi"), "-np", str(np), "--oversubscribe"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    return argv


def mpich_run(np: int) -> list[str]:
    return [need("mpiexec.mpich"), "-n", str(np)]


def torchrun(nproc: int, no_python: bool = True) -> list[str]:
    pytest.importorskip("torch", reason="torch is not installed (scripts/bootstrap.sh installs it)")
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--standalone"]
    return argv + (["--no-python"] if no_python else [])


def run(argv: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{argv[0]} did not finish within {timeout} s: {e.stdout}\n{e.stderr}")
    assert proc.returncode == 0, f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def env_json_per_process(launch: list[str], out_dir, env: dict[str, str], shell_prefix: str = "") -> list[dict]:
    """Each process the launcher starts runs ``hpcdist env --json`` into its own file."""
    # Not $$: torchrun's ${local_rank} substitution turns it into "$".
    child = f'exec > "$(mktemp -p {shlex.quote(str(out_dir))} env.XXXXXX)"; {shell_prefix}{HPCDIST} env --json'

    run(launch + ["sh", "-c", child], env)
    return [json.loads(open(path).read()) for path in sorted(glob.glob(f"{out_dir}/env.*"))]


def wait_for(predicate, timeout: float, what: str):
    """``predicate()``'s first true value, asked every half second at first, then less often (up
    to every 2 s: many predicates run `hpcdist status`, and a 3-minute wait asking every half
    second spent the CPU the jobs it waits for need); an AssertionError naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = 0.5
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(2.0, pause * 1.25)
    raise AssertionError(f"no {what} within {timeout:g} s")


def check_framework_views(out: str, hosts: tuple, excerpt: str) -> None:
    """tests/job_scripts/framework_view.py's 4 ranks on 2 hosts: each framework's view equals hpcdist's,
    ranks 0-3 once each, local ranks 0 and 1 on each host, the parameters equal on all ranks."""
    views = framework_views(out)
    assert len(views) == 4, excerpt
    for v in views:
        theirs, ours = v["theirs"], v["ours"]
        assert {k: theirs[k] for k in theirs if k != "environment"} == {k: ours[k] for k in theirs
                                                                           if k != "environment"}, v
        assert ours["world_size"] == 4 and v["gathered"] == 4 and v["same_on_all"], v
    assert sorted(v["ours"]["rank"] for v in views) == [0, 1, 2, 3], excerpt
    for host in hosts:
        assert sorted(v["ours"]["local_rank"] for v in views if v["host"] == host) == [0, 1], excerpt
    assert len({v["checksum"] for v in views}) == 1, excerpt
