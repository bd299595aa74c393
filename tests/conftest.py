import glob
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

# tests/launch.py is imported as a helper module by the tests beside it.
sys.path.insert(0, os.path.dirname(__file__))
# Each folder of tests too (tests/<package folder>/, docs/testing.md): a test imports another's
# helpers by module name (`from test_submit import hpcdist`), whichever folder either lies in.
# pytest itself puts a test's own folder on sys.path only when it collects that file.
_TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path[1:1] = sorted({os.path.dirname(path) for path in glob.glob(f"{_TESTS}/*/test_*.py")})


import pytest  # noqa: E402

import openpbs  # noqa: E402
import ci_skips  # noqa: E402
import testcluster  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: Hypothesis's caches go to a temporary folder, not into the clone's .hypothesis/.
_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="hpcdist-hypothesis-")


# ------------------------------------------------------------------ the suite leaves the clone as it found it


def _in_repo() -> set[str]:
    """What lies in the clone besides its tracked files (ignored files too, by top folder), and
    the job folders of its own .hpcdist/ (where `hpcdist submit` run there records jobs)."""
    found = set()
    jobs = ROOT / ".hpcdist" / "jobs"
    if jobs.is_dir():
        found.update(f".hpcdist/jobs/{name}" for name in os.listdir(jobs))
    elif (ROOT / ".hpcdist").exists():
        found.add(".hpcdist")
    if shutil.which("git") and (ROOT / ".git").exists():
        proc = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=normal"], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        found.update(line[3:] for line in proc.stdout.splitlines()
                     # Python's and pytest's own caches; and test-output/, where failed cluster tests leave
                     # logs on purpose.
                     if line[:2] in ("??", "!!") and "__pycache__" not in line and "test-output/" not in line
                     and not line[3:].startswith(".pytest_cache"))
    return found


def _is_worker(config) -> bool:
    """A pytest-xdist worker (scripts/test.sh runs three): the clone is checked by the controller,
    once all of them have ended, not by a worker while the other one's test runs."""
    return hasattr(config, "workerinput")


def pytest_configure(config):
    # Under CI=true a skip that is not opt-in fails (tests/ci_skips.py): a plugin of its own, as this
    # file has a pytest_runtest_makereport of its own.
    if not config.pluginmanager.is_registered(ci_skips):
        config.pluginmanager.register(ci_skips, "ci_skips")


def pytest_sessionstart(session):
    from hypothesis import configuration

    configuration.set_hypothesis_home_dir(_HYPOTHESIS_HOME)
    if not _is_worker(session.config):
        session.config._hpcdist_in_repo = _in_repo()
    if not os.environ.get("HPCDIST_INSTALL_RECORD"):
        # What the test cluster installs during this run, for the closing summary (scripts/test.sh
        # sets its own, to which scripts/bootstrap.sh has added what it installed).
        fd, path = tempfile.mkstemp(prefix="hpcdist-installed.")
        os.close(fd)
        os.environ["HPCDIST_INSTALL_RECORD"] = session.config._hpcdist_own_record = path


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_HYPOTHESIS_HOME, ignore_errors=True)
    before = getattr(session.config, "_hpcdist_in_repo", None)
    if before is None:
        return
    left = sorted(_in_repo() - before)
    session.config._hpcdist_left = left
    if left and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    left = getattr(config, "_hpcdist_left", [])
    if left:
        terminalreporter.section("files the tests left in the clone", red=True)
        terminalreporter.write_line(f"The tests must work in temporary folders; these appeared in {ROOT}:")
        for path in left:
            terminalreporter.write_line(f"  {path}")
    record = os.environ.get("HPCDIST_INSTALL_RECORD")
    lines = []
    if record and os.path.exists(record):
        with open(record, errors="replace") as f:
            lines = [line.rstrip("\n") for line in f if line.strip()]
    own = getattr(config, "_hpcdist_own_record", None)
    if own:
        os.unlink(own)
    terminalreporter.section("installed on this machine during this run")
    if not lines:
        terminalreporter.write_line("nothing (what the tests need was there already; see docs/guide/install.md)")
        return
    for line in lines:
        terminalreporter.write_line(line)
    if any("apt-get install" in line and "slurm" in line for line in lines):
        terminalreporter.write_line(
            "These stay installed. Slurm's commands (sbatch, squeue, scancel, and its qsub/qstat) have no "
            "configuration and no controller outside the tests: `hpcdist submit --scheduler slurm|pbs` here says so; "
            "use --scheduler local. apt also enabled the munge and ssh services (sshd on port 22), which "
            "a machine running systemd starts; slurmctld and slurmd stay off without /etc/slurm/slurm.conf.")


#: The tests on one cluster run in one test process, one after the other (scripts/test.sh runs three
#: with pytest-xdist's --dist loadgroup): each cluster is one set of hosts that its tests share.
CLUSTER_GROUPS = {"cluster": "slurm-cluster", "openpbs_cluster": "openpbs-cluster"}
#: The mark of a row that asks for a cluster with request.getfixturevalue (a parametrized fixture).
CLUSTER_MARKS = {"cluster": "slurm_cluster", "openpbs_cluster": "openpbs_cluster"}


def pytest_collection_modifyitems(config, items):
    """A test in a cluster's group: it takes the cluster's fixture, or is marked ``slurm_cluster`` or
    ``openpbs_cluster`` (a row that asks for the cluster with request.getfixturevalue: in the other
    process it would wait for the cluster's lock until the first one's session ends, and a session
    holding the other cluster's lock and asking for this one waits for ever: a parametrized fixture
    that asked for both, unmarked, once stopped a full run at 84%)."""
    for item in items:
        for fixture, group in CLUSTER_GROUPS.items():
            if fixture in item.fixturenames or item.get_closest_marker(CLUSTER_MARKS[fixture]):
                item.add_marker(pytest.mark.xdist_group(group))
    if getattr(config.option, "loadgroup", False):  # in a test process of --dist loadgroup
        _group_suffix(items)


def _group_suffix(items) -> None:
    """``NODEID@GROUP``, by which xdist's controller keeps a group in one process. pytest-xdist 3.8
    writes it into ``item._nodeid``, which pytest 9 no longer reads (its node ids are ``_id``): its
    groups were spread over both processes, and one waited for the other's cluster lock."""
    try:
        from _pytest.nodeid import coerce_node_id
    except ImportError:  # an older pytest: xdist's own suffix works there
        return
    for item in items:
        names = sorted({str(mark.args[0]) for mark in item.iter_markers("xdist_group") if mark.args})
        if names and "@" not in item.nodeid:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(names)}")


@pytest.fixture(scope="session")
def colleague():
    """A second real user on this machine (``useradd``; the tests run as root): ``(name, uid)``.
    For what another user of a shared login node can do to your jobs, run as them with ``runuser``."""
    import pwd

    name = "hpcdist-colleague"
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True, capture_output=True)
        entry = pwd.getpwnam(name)
    return name, entry.pw_uid


@pytest.fixture
def shared_folder(tmp_path_factory):
    """A project folder everyone may write, sticky as /tmp is (others cannot remove your files,
    but can add their own): outside pytest's private tmp folders, which other users cannot reach."""
    path = tempfile.mkdtemp(prefix="hpcdist-shared-", dir="/tmp")
    os.chmod(path, 0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster():
    """The 2-host test cluster, up for the whole session (see tests/testcluster.py)."""
    reason = testcluster.why_not()
    if reason:
        pytest.skip(reason)
    with testcluster.exclusive():  # one test session at a time on the one cluster
        state = testcluster.up(2)
        try:
            yield state
        finally:
            testcluster.down()


@pytest.fixture(scope="session")
def openpbs_cluster():
    """The real OpenPBS (a server and 2 moms), up for the whole session (see tests/openpbs.py)."""
    reason = openpbs.why_not()
    if reason:
        pytest.skip(reason)
    with testcluster.exclusive("/tmp/hpcdist-openpbs.lock"):  # one test session at a time
        openpbs.install()
        openpbs.start()
        try:
            yield openpbs
        finally:
            openpbs.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed cluster test leaves the daemons' logs in test-output/<test>/."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed and testcluster.is_up:
        saved = testcluster.save_daemon_logs(item.nodeid)
        if saved:
            report.sections.append(("cluster daemons' logs", f"saved in {saved}"))

# Hypothesis profiles for tests without their own max_examples (tests/project/test_fuzz.py):
# "ci" by default; HPCDIST_FUZZ=long for the opt-in long run (100x the examples, no deadline).
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("ci", max_examples=1000, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=100_000, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
settings.load_profile("long" if os.environ.get("HPCDIST_FUZZ") == "long" else "ci")
