"""Issue 32 on the real clusters: a 2-node training sent from the laptop to Slurm (the ``cluster``
fixture) and to OpenPBS (``openpbs_cluster``), followed to its end with ``logs -f``, its status the
same from the laptop as on the login node, another job cancelled; one ssh login for all of it.

The login node is each cluster's head as root (the test clusters run root's jobs), reached by the
laptop's own ssh (tests/sshlogin.py: the laptop's user, its ~/.ssh/config, a real sshd). Slurm's
head is this machine's namespace; OpenPBS's head is a namespace of its own, entered by its
``remote_hpcdist``, a two-line wrapper on the login node (tests/cluster/openpbs.sh exec pbshead),
as a site's login shell would put PBS's commands on the PATH.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

import openpbs
import sshlogin
import testcluster
from sshlogin import as_user
from test_remote import git, hpcdist

pytestmark = pytest.mark.skipif(sshlogin.missing() is not None, reason=f"{sshlogin.missing()}")

QUICKSTART = testcluster.ROOT / "examples" / "quickstart.py"
SLOW = "import time\nfor i in range(300):\n    print(f'step {i}', flush=True)\n    time.sleep(1)\n"
VENV_BIN = os.path.dirname(sys.executable)


def slurm_setup(state, folder: str):
    """The profile's lines for the Slurm cluster, and `hpcdist ARGS` as typed on its head."""
    env = testcluster.client_env(state, PYTHONPATH=str(testcluster.ROOT))
    words = ["env", f"SLURM_CONF={env['SLURM_CONF']}", "PDSH_RCMD_TYPE=ssh", f"PATH={env['PATH']}",
             f"PYTHONPATH={testcluster.ROOT}", sys.executable, "-m", "hpcdist"]
    profile = f'scheduler = "slurm"\nremote_hpcdist = "{" ".join(words)}"\n'

    def on_head(*args):
        return subprocess.run([sys.executable, "-m", "hpcdist", *args], cwd=folder, env=env, capture_output=True,
                              text=True, timeout=120)
    return profile, on_head, ("node1", "node2")


def pbs_setup(pbs, folder: str):
    wrapper = os.path.join(os.path.dirname(folder), "pbs-head-hpcdist")  # one word: remote_hpcdist is a command line
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\n# hpcdist run on the PBS head, in this folder, with what hpcdist set for it.\n"
                f"here=$PWD\nPBSX_ROOT={openpbs.STATE} PBS_EXEC={openpbs.PBS_EXEC} "
                f"exec bash {openpbs.OPENPBS_SH} exec {openpbs.HEAD} env "
                f"HPCDIST_JOBS_DIR=\"${{HPCDIST_JOBS_DIR:-}}\" "
                f"HPCDIST_NO_DEFAULT_PROFILE=\"${{HPCDIST_NO_DEFAULT_PROFILE:-}}\" "
                f"HPCDIST_EXPECT_VERSION=\"${{HPCDIST_EXPECT_VERSION:-}}\" "
                f"PYTHONPATH={testcluster.ROOT} PATH={openpbs.PBS_EXEC}/bin:{VENV_BIN}:/usr/bin:/bin "
                f"sh -c 'cd \"$1\" && shift && exec {sys.executable} -m hpcdist \"$@\"' sh \"$here\" \"$@\"\n")
    os.chmod(wrapper, 0o755)
    profile = f'scheduler = "pbs"\nvenv = "{sys.prefix}"\nremote_hpcdist = "{wrapper}"\n'

    def on_head(*args):
        return pbs.hpcdist(*args, cwd=folder, timeout=120)
    return profile, on_head, openpbs.NODES


@pytest.fixture
def slurm(cluster, tmp_path):
    # A laptop user of its own for each cluster: their tests may run beside each other.
    login = sshlogin.LoginNode("root", "hpcd-laptop-s")
    folder = str(tmp_path / "cluster jobs")  # a space: every word is quoted on the way
    os.makedirs(folder)
    yield laptop_project(login, folder, *slurm_setup(cluster, folder))
    login.stop()


@pytest.fixture
def pbs(openpbs_cluster, tmp_path):
    login = sshlogin.LoginNode("root", "hpcd-laptop-p")
    folder = str(tmp_path / "cluster jobs")
    os.makedirs(folder)
    yield laptop_project(login, folder, *pbs_setup(openpbs_cluster, folder))
    login.stop()


def laptop_project(login_as_root, folder: str, profile: str, on_head, nodes):
    """The laptop's git tree: the training, a slow job, and its profile for the cluster."""
    laptop = login_as_root.laptop.pw_name
    project = os.path.join(login_as_root.laptop.pw_dir, "proj")
    shutil.rmtree(project, ignore_errors=True)
    as_user(laptop, ["mkdir", project]).check_returncode()
    login_as_root.write(laptop, f"{project}/quickstart.py", QUICKSTART.read_text())
    login_as_root.write(laptop, f"{project}/slow.py", SLOW)
    login_as_root.write(laptop, f"{project}/hpcdist.toml",
                        f'default = "cluster"\n[profiles.cluster]\nremote = "login"\nremote_folder = "{folder}"\n'
                        + profile)
    git(project, "init", "-q", user=laptop)
    git(project, "add", ".", user=laptop)
    git(project, "commit", "-qm", "init", user=laptop)
    return project, on_head, nodes, login_as_root


def test_a_2_node_training_from_the_laptop_to_slurm(slurm):
    training_from_the_laptop(*slurm)


def test_a_2_node_training_from_the_laptop_to_openpbs(pbs):
    training_from_the_laptop(*pbs)


def training_from_the_laptop(project, on_head, nodes, login):
    def laptop(*args, timeout=120):
        return hpcdist(project, *args, user=login.laptop.pw_name, timeout=timeout)

    connected = laptop("connect", "cluster")
    assert connected.returncode == 0, connected.err
    logins = open(login.log.name).read().count("Accepted publickey")

    submitted = laptop("submit", "--nodes", "2", "--walltime", "10m", "quickstart.py", "--steps", "20")
    assert submitted.returncode == 0, submitted.err
    job = submitted.out.strip()
    follow = laptop("logs", "-f", job, timeout=300)
    assert follow.returncode == 0, f"{testcluster.log_excerpt(follow.out)}\n{follow.err}"
    assert sorted(re.findall(r"\[(\w+)\] rank (\d)/2", follow.out)) == [(nodes[0], "0"), (nodes[1], "1")], follow.out
    assert "identical on all ranks: True" in follow.out

    mine = laptop("status", "--json", job)
    head = on_head("status", "--json", job)
    assert mine.returncode == 0 and head.returncode == 0, mine.err + head.stderr
    assert json.loads(mine.out) == json.loads(head.stdout)
    assert json.loads(mine.out)[0]["state"] == "COMPLETED"

    slow = laptop("submit", "slow.py")
    assert slow.returncode == 0, slow.err
    other = slow.out.strip()
    assert laptop("cancel", other).returncode == 0
    deadline = time.monotonic() + 120
    while "CANCELLED" not in (state := laptop("status", "--json", other).out):
        assert time.monotonic() < deadline, state
        time.sleep(2)
    # All of it over the one login `connect` made.
    assert open(login.log.name).read().count("Accepted publickey") == logins
