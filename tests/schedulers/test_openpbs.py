"""PBS Pro on a real OpenPBS 23.06 server: the rows our Slurm-dressed-as-PBS cannot show.

A server (``pbshead``) and two moms (``pbsn1``, ``pbsn2``), each its own network and host name
(tests/openpbs.py). Jobs are submitted with ``hpcdist submit --scheduler pbs`` from the head, as
root (the server's acl_roots allows it, as the Slurm test cluster runs root's jobs). What is real:
qsub, qstat, qdel, pbs_sched's placement and comments, the moms' node files, spooled and direct
(``-k oed``) logs, job history on and off, pbsdsh, ``-W depend``, flatuid. Open MPI is Debian's
(no ``tm``: mpirun reaches pbsn2 over ssh, as on many sites) and MPICH is Debian's Hydra.
Torque has no server here: its rows stay on the Slurm personality (tests/launchers/test_matrix.py), as do
the Cray PALS rows (a stand-in ``mpiexec`` that needs the Slurm cluster's Open MPI set-up).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
import threading
import time
import uuid

import pytest

import testcluster
from launch import check_framework_views, wait_for

ROOT = testcluster.ROOT
QUICKSTART = ROOT / "examples" / "quickstart.py"
FAILING = ROOT / "tests" / "job_scripts" / "failing_rank.py"

ROWS = {
    "torchrun": [],
    "torchrun-pbsdsh": ["--pbs-spread", "pbsdsh"],
    "mpirun": ["--launcher", "mpirun"],
    "mpirun-mpich": ["--launcher", "mpirun", "--mpi", "mpich"],
    "deepspeed-pdsh": ["--launcher", "deepspeed"],
    "deepspeed-no-ssh": ["--launcher", "deepspeed", "--no-ssh"],
    "accelerate": ["--launcher", "accelerate"],
}
#: A slow job for the rows that stop one: a line every second, for a minute.
SLOW = "import time\nfor i in range(60):\n    print(f'step {i}', flush=True)\n    time.sleep(1)\n"


@pytest.fixture
def pbs(openpbs_cluster):
    """The server as it is shipped, job history off (a row that wants it on says so): what a row
    before it set does not decide what this one sees."""
    openpbs_cluster.history(False)
    return openpbs_cluster


def submit(pbs, cwd, *args, wait=True, timeout=300):
    proc = pbs.hpcdist("submit", "--scheduler", "pbs", "--venv", sys.prefix, "--json",
                       *(["--wait"] if wait else []), *args, cwd=cwd, timeout=timeout)
    first = proc.stdout.splitlines()[0] if proc.stdout.startswith("{") else "{}"
    return proc, json.loads(first).get("job_id", "")


def row_of(pbs, cwd, job_id) -> dict:
    proc = pbs.hpcdist("status", "--json", job_id, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    return row


def test_each_host_starts_as_a_fresh_machine_with_its_own_sshd(pbs):
    """A fresh machine has no /run/sshd (only an sshd service makes it; CI's run once failed every
    OpenPBS row with "Missing privilege separation directory"). Each host's /run is its own, empty
    at the start: the cluster came up only if its own script made what its sshd needs, wherever the
    machine's /run stands. Root on pbsn1 reaches pbsn2 by ssh, as mpirun and pdsh do."""
    for host in pbs.NODES:
        listing = pbs.on(host, "ls -A /run")
        assert listing.returncode == 0, listing.stderr
        assert listing.stdout.split() == ["sshd"], f"{host}'s /run holds the machine's: {listing.stdout}"
    proc = pbs.on("pbsn1", f"{pbs.STATE}/bin/ssh pbsn2 hostname")  # the jobs' ssh, first on their PATH
    assert (proc.returncode, proc.stdout.strip()) == (0, "pbsn2"), proc.stderr


@pytest.mark.parametrize("row,history", [*((row, False) for row in ROWS), ("torchrun", True)],
                         ids=[*ROWS, "torchrun-history-on"])
def test_trains_on_both_moms(row, history, pbs, tmp_path):
    """2 nodes x 2 ranks: ranks 0-3 on pbsn1 and pbsn2, local ranks 0 and 1 on each, the loss
    identical on every rank, the job completed (with job history off, the server's default, and
    on: qstat then keeps the finished job). The folder has a space in its name (but for
    DeepSpeed's pdsh runner, which refuses one: tests/project/test_bad_input.py)."""
    if history:  # off: the pbs fixture's
        pbs.history(True)
    cwd = tmp_path / ("runs" if row == "deepspeed-pdsh" else "my runs")
    cwd.mkdir()
    shutil.copy(QUICKSTART, cwd)
    proc, job_id = submit(pbs, cwd, "--nodes", "2", "--procs-per-node", "2", *ROWS[row], "quickstart.py",
                          "--steps", "20")
    out = proc.stdout
    assert proc.returncode == 0, f"{testcluster.log_excerpt(out)}\n{proc.stderr}"
    seen = re.findall(r"\[([\w.-]+)\] rank (\d)/(\d) local (\d)/(\d) node (\d)", out)
    assert sorted(int(r[1]) for r in seen) == [0, 1, 2, 3], testcluster.log_excerpt(out)
    for host in ("pbsn1", "pbsn2"):
        assert sorted(int(r[3]) for r in seen if r[0] == host) == [0, 1], testcluster.log_excerpt(out)
    assert "identical on all ranks: True" in out
    assert row_of(pbs, cwd, job_id)["state"] == "COMPLETED"
    # A job that succeeded reads as one: no agent's trace at the end (torchrun's first node hosts
    # the rendezvous store; an agent still in its exit barrier when it left wrote 43 lines of them).
    errors = [line for line in out.splitlines() if re.search(r"Traceback|Error|\bE\d{4} ", line)]
    assert errors == [], testcluster.log_excerpt(out)


@pytest.mark.parametrize("row", ["torchrun", "torchrun-pbsdsh", "mpirun", "deepspeed-pdsh", "deepspeed-no-ssh",
                                 "accelerate"])
def test_a_failed_rank_fails_the_job_and_is_named(row, pbs, tmp_path):
    """Rank 3 (on pbsn2) raises at step 5 while the others sleep: the job ends within 60 s, reads
    failed, and `hpcdist logs` names rank 3 on pbsn2. (Real pbsdsh exits 0 whatever its task did:
    the job fails because hpcdist's agents watch each other.)"""
    shutil.copy(FAILING, tmp_path)
    run_id = uuid.uuid4().hex
    proc, job_id = submit(pbs, tmp_path, "--nodes", "2", "--procs-per-node", "2", *ROWS[row], "failing_rank.py",
                          "--fail-rank", "3", "--how", "raise", "--run-id", run_id)
    ended = time.time()
    assert proc.returncode != 0, testcluster.log_excerpt(proc.stdout)
    failed_at = float(re.search(r"failing now: ([\d.]+)", proc.stdout).group(1))
    assert ended - failed_at < 60, testcluster.log_excerpt(proc.stdout)
    assert row_of(pbs, tmp_path, job_id)["state"] == "FAILED"
    logs = pbs.hpcdist("logs", job_id, cwd=tmp_path)
    summary = re.search(r"the first to fail: (.*)", logs.stderr)
    assert summary and re.match(r"rank 3 (\(local rank 1\) )?on pbsn2", summary.group(1)), logs.stderr
    assert "ValueError: injected failure at step 5" in summary.group(1)
    if row == "torchrun-pbsdsh":  # pbsdsh exited 0: hpcdist's watcher of the agents saw node2's fail
        assert "hpcdist: the agent on node 1 (pbsn2) ended with status 1;" in proc.stdout, proc.stdout
    assert not testcluster.leftover_processes(f"--run-id {run_id}")


@pytest.mark.parametrize("history", [False, True], ids=["history-off", "history-on"])
def test_a_killed_job_never_reads_completed(history, pbs, tmp_path):
    """A running job deleted with qdel, one cancelled with hpcdist, one killed at its walltime, and
    a queued one cancelled: none reads completed, with the server's job history off (its default:
    qstat then forgets a job as it ends) and on."""
    pbs.history(history)
    (tmp_path / "slow.py").write_text(SLOW)
    run_id = f"run-{uuid.uuid4().hex}"  # an argument the script ignores: its processes, found after
    ids = {}
    for name, extra in (("qdel", []), ("cancel", []), ("walltime", ["--walltime", "0:00:08"])):
        proc, ids[name] = submit(pbs, tmp_path, "--launcher", "none", *extra, "slow.py", run_id, wait=False)
        assert proc.returncode == 0, proc.stderr
    # Queued behind the others (it waits for the qdel one to end), then cancelled.
    proc, ids["queued"] = submit(pbs, tmp_path, "--launcher", "none", "--dependency", f"afterok:{ids['qdel']}",
                                 "slow.py", wait=False)
    assert proc.returncode == 0, proc.stderr
    wait_for(lambda: all("step 2" in (pbs.hpcdist("logs", ids[n], cwd=tmp_path).stdout) for n in ("qdel", "cancel")),
             60, "the two jobs' logs live (-k oed) at step 2")
    for name in ("queued", "cancel"):  # the queued one first: PBS deletes it when its afterok fails
        proc = pbs.hpcdist("cancel", ids[name], cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    assert pbs.on(pbs.HEAD, f"qdel {ids['qdel']}").returncode == 0
    rows = {name: wait_for(lambda n=name: (r := row_of(pbs, tmp_path, ids[n]))["state"] not in ("PENDING", "RUNNING")
                           and r, 90, f"the {name} job's end") for name in ids}
    states = {n: r["state"] for n, r in rows.items()}
    assert (states["cancel"], states["queued"]) == ("CANCELLED", "CANCELLED"), rows
    # OpenPBS keeps Exit_status 0 for a job qdel ended: the job's own record of SIGTERM tells.
    assert states["qdel"] in ("FAILED", "CANCELLED") and rows["qdel"]["exit_code"] == 143, rows["qdel"]
    assert states["walltime"] in ("FAILED", "TIMEOUT"), rows["walltime"]
    waited = pbs.hpcdist("status", ids["walltime"], cwd=tmp_path)
    assert "completed" not in waited.stdout, waited.stdout
    # Nothing of a killed job is left on any node (issue 37 item 2: cancel, qdel and the walltime too).
    assert not testcluster.leftover_processes(run_id)


def test_a_running_jobs_log_is_followed_live(pbs, tmp_path):
    """PBS spools a job's output on its first node and copies it at the end; hpcdist's `-k oed`
    writes it in place: `hpcdist logs -f` shows the steps while the job runs, and ends when the job
    is cancelled, with a status that is not success."""
    (tmp_path / "slow.py").write_text(SLOW)
    proc, job_id = submit(pbs, tmp_path, "--launcher", "none", "slow.py", wait=False)
    assert proc.returncode == 0, proc.stderr
    assert "#PBS -k oed" in (tmp_path / ".hpcdist" / "jobs").joinpath(
        next(p.name for p in (tmp_path / ".hpcdist" / "jobs").iterdir()), "job.sh").read_text()
    followed = tmp_path / "followed.txt"
    ended = []
    follower = threading.Thread(target=lambda: ended.append(pbs.on(
        pbs.HEAD, f"{shlex.quote(sys.executable)} -m hpcdist logs -f {job_id} >followed.txt 2>&1", cwd=tmp_path,
        timeout=120)))
    follower.start()
    try:
        wait_for(lambda: "step 3" in followed.read_text() if followed.exists() else False, 60,
                 "step 3 shown by `hpcdist logs -f` while the job runs")
        assert row_of(pbs, tmp_path, job_id)["state"] == "RUNNING", followed.read_text()
    finally:
        cancel = pbs.hpcdist("cancel", job_id, cwd=tmp_path)
        follower.join(90)
    assert cancel.returncode == 0, cancel.stderr
    assert ended and ended[0].returncode != 0, followed.read_text()
    # The follower's copy of the record may predate the cancel (CI once read FAILED here).
    assert row_of(pbs, tmp_path, job_id)["state"] == "CANCELLED", followed.read_text()


def test_a_request_on_fewer_hosts_fails_at_once_naming_both_numbers(pbs, tmp_path):
    """A job-wide request (-l ncpus=, Gadi's shape) lands on one host of a stock server: the job
    must not start a 2-node launcher that waits for a node that never comes."""
    shutil.copy(QUICKSTART, tmp_path)
    started = time.monotonic()
    proc, job_id = submit(pbs, tmp_path, "--nodes", "2", "--procs-per-node", "1", "--request", "job-wide",
                          "quickstart.py", timeout=120)
    assert proc.returncode != 0
    assert time.monotonic() - started < 60, proc.stdout
    assert re.search(r"the job asked for 2 nodes but PBS_NODEFILE=\S+ lists 1 \(pbsn\d\)", proc.stdout), proc.stdout
    assert "job-wide request" in proc.stdout
    assert row_of(pbs, tmp_path, job_id)["state"] == "FAILED"


def test_wait_stops_on_a_job_that_can_never_run(pbs, tmp_path):
    """4 nodes asked of a 3-node server (its third offline: tests/openpbs.py's SPARE): pbs_sched
    comments "Can Never Run" and the job stays queued for ever; --wait stops with PBS's comment."""
    shutil.copy(QUICKSTART, tmp_path)
    proc, job_id = submit(pbs, tmp_path, "--nodes", "4", "quickstart.py", timeout=120)
    try:
        assert proc.returncode == 1, proc.stderr
        assert re.search(r"can never run as asked \(Can Never Run: [^)]*nodes", proc.stderr), proc.stderr
    finally:
        pbs.hpcdist("cancel", job_id, cwd=tmp_path)


#: A training that stops on the walltime warning (hpcdist.signals), and has nothing left in run 2.
STOPS_ON_WARNING = """
import os, sys, time
from hpcdist.signals import StopRequest

if int(os.environ.get("HPCDIST_RESTART_COUNT") or 0):
    print("run 2: nothing left to do", flush=True)
    sys.exit(0)
stop = StopRequest()
for _ in range(1200):
    if stop.agreed():
        print(f"stopped: {stop.reason}", flush=True)
        sys.exit(0)
    time.sleep(0.1)
sys.exit("no warning came in 120 s")
"""


@pytest.mark.parametrize("flatuid", [True, False], ids=["flatuid", "stock-server"])
def test_a_job_resubmits_itself_from_its_node_or_says_why_not(flatuid, pbs, tmp_path):
    """--requeue on PBS: the script's own timer warns the training 40 s before a 1-minute walltime,
    the training stops, and the job goes on as a new job (qsub from pbsn1: PBS's own qsub, -W
    depend=afterany). On a stock server (flatuid False) that qsub is refused ("Bad UID for job
    execution"): the log says what that means and what the admins can allow, and `hpcdist doctor`
    in a job says so before a long job relies on it."""
    pbs.qmgr(f"set server flatuid = {flatuid}")
    try:
        (tmp_path / "stub.py").write_text(STOPS_ON_WARNING)
        proc, job_id = submit(pbs, tmp_path, "--launcher", "none", "--requeue", "1", "--walltime", "1m",
                              "--signal-margin", "40s", "stub.py", wait=False)
        assert proc.returncode == 0, proc.stderr
        row = wait_for(lambda: (r := row_of(pbs, tmp_path, job_id))["state"] not in ("PENDING", "RUNNING") and r,
                       180, "the job's end")
        log = pbs.hpcdist("logs", job_id, cwd=tmp_path).stdout
        if flatuid:
            assert (row["state"], row["restarts"]) == ("COMPLETED", 1), f"{row}\n{log}"
            assert "resubmitted as job" in log and "run 2: nothing left to do" in log, log
        else:
            assert row["state"] != "COMPLETED", f"{row}\n{log}"
            assert "Bad UID for job execution" in log, log
            assert "flatuid" in log and "hosts.equiv" in log and "from a login node" in log, log
            (tmp_path / "doctor.py").write_text(
                "import subprocess, sys\n"
                "sys.exit(subprocess.run([sys.executable, '-m', 'hpcdist', 'doctor'])"
                ".returncode)\n")
            proc, _ = submit(pbs, tmp_path, "--launcher", "none", "doctor.py", timeout=120)
            assert "--requeue resubmits the job from here, and qsub from this node fails" in proc.stdout, proc.stdout
            assert "flatuid" in proc.stdout, proc.stdout
    finally:
        pbs.qmgr("set server flatuid = True")


def test_a_ddp_training_stopped_by_the_scripts_own_warning_goes_on_from_its_checkpoint(pbs, tmp_path):
    """The DDP example on 2 nodes, --requeue: the script's own timer warns it 60 s before the
    walltime, every rank stops at one step after a checkpoint, the job resubmits itself from pbsn1
    (-W depend=afterany) and the new job goes on from that step to the end; job history on, as
    sites that requeue keep it. (That the result equals an uninterrupted run bit for bit is proven
    on the Slurm cluster: tests/injob/test_preemption.py.)"""
    pbs.history(True)
    # The time before the warning (60 s) is what a run has for its start and its steps. Under the
    # suite's load a start took 29-62 s with 4 ranks on the 2 cores (CI, 2026-11-29: 7 runs of a
    # 30 s window made 25 of 40 steps): so one rank a node, a 60 s window, and restarts to spare.
    # 60 steps of 1 s: an idle first run stops near step 45, and the second one ends the chain.
    proc, job_id = submit(pbs, tmp_path, "--nodes", "2", "--procs-per-node", "1", "--requeue", "8",
                          "--walltime", "2m", "--signal-margin", "60s",
                          str(ROOT / "examples" / "ddp" / "train.py"), "--steps", "60",
                          "--save-every", "5", "--log-every", "1", "--deterministic", "--resume",
                          "--step-delay", "1", "--checkpoint-dir", "ckpt", wait=False)
    assert proc.returncode == 0, proc.stderr
    row = wait_for(lambda: (r := row_of(pbs, tmp_path, job_id))["state"] not in ("PENDING", "RUNNING") and r,
                   1200, "the chain's end")
    log = pbs.hpcdist("logs", job_id, cwd=tmp_path).stdout
    assert (row["state"], row["exit_code"]) == ("COMPLETED", 0), \
        f"{row}\n{testcluster.log_excerpt(log)}"
    assert row["restarts"] >= 1 and row["current_job_id"] != job_id, row
    assert "walltime warning (SIGUSR2)" in log and "resubmitted as job" in log, testcluster.log_excerpt(log)
    stopped = [int(s) for s in re.findall(r"(?m)^stopped at step (\d+) \(", log)]
    resumed = [int(s) for s in re.findall(r"(?m)^resumed from \S+ at step (\d+)$", log)]
    assert stopped and resumed and resumed[0] == stopped[0] and 0 < resumed[-1] < 60, testcluster.log_excerpt(log)


#: A training that takes no stop request: the warning by hand cannot end it, so the job's own
#: processes can be looked at after it.


@pytest.mark.parametrize("history", [False, True], ids=["history-off", "history-on"])
def test_an_array_with_a_failed_subjob_is_failed_and_each_log_is_kept(history, pbs, tmp_path):
    """`--array 1-3` on the real server, subjob 2 exits 3: `--wait` fails, the array reads failed
    (OpenPBS keeps Exit_status 0 on the parent; with history off qstat forgets it), and `hpcdist
    logs` shows each subjob's own log."""
    pbs.history(history)
    (tmp_path / "train.py").write_text("import os, sys\nindex = os.environ['PBS_ARRAY_INDEX']\n"
                                       "print('subjob', index)\nsys.exit(3 if index == '2' else 0)\n")
    proc, job_id = submit(pbs, tmp_path, "--launcher", "none", "--array", "1-3", "train.py", timeout=180)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    row = wait_for(lambda: (r := row_of(pbs, tmp_path, job_id))["state"] not in ("PENDING", "RUNNING") and r,
                   60, "the array's end")
    assert row["state"] == "FAILED", row
    logs = pbs.hpcdist("logs", job_id, cwd=tmp_path).stdout
    for index in (1, 2, 3):
        assert f"subjob {index}\n" in logs, logs


@pytest.mark.parametrize("framework", ["fabric", "accelerate"])
def test_the_framework_sees_hpcdist_ranks_under_torchrun(framework, pbs, tmp_path):
    """tests/launchers/test_frameworks.py's check on a real PBS job, where no Slurm variable is about: every
    rank's Lightning Fabric or accelerate view equals hpcdist's, and the parameters agree."""
    shutil.copy(ROOT / "tests" / "job_scripts" / "framework_view.py", tmp_path)
    proc, _ = submit(pbs, tmp_path, "--nodes", "2", "--procs-per-node", "2", "framework_view.py",
                     "--framework", framework)
    excerpt = testcluster.log_excerpt(proc.stdout)
    assert proc.returncode == 0, f"{excerpt}\n{proc.stderr}"
    check_framework_views(proc.stdout, ("pbsn1", "pbsn2"), excerpt)


#: What the site presets ask of a server, as their sites define it (a stock server has none of it):
#: qmgr directives, each run once (an existing one is left as it is).
SITE_SERVER = ("create resource system type=string, flag=h", "create resource filesystems type=string",
               "create resource ngpus type=long, flag=nh",
               *(f"create queue {q} queue_type=execution, enabled=true, started=true"
                 for q in ("debug", "main", "gpuvolta")))


@pytest.mark.parametrize("site", ["polaris", "aurora", "derecho", "gadi"])
def test_a_sites_request_is_taken_as_written_by_a_server_that_has_its_resources(site, pbs, tmp_path):
    """A preset's script, `qsub -h` by hand on the real server once it has the site's queue and
    resources (held: nothing runs, PALS is not here): taken, and the job's Resource_List, queue and
    project are what the #PBS lines say."""
    for directive in SITE_SERVER:
        pbs.on(pbs.HEAD, f"qmgr -c {shlex.quote(directive)}")
    (tmp_path / "train.py").write_text("print('hello')\n")
    proc = pbs.hpcdist("render", "--profile", site, "--nodes", "2", "--account", "A1", "--project", "a00",
                       "--walltime", "10m", "train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "job.sh").write_text(proc.stdout)
    directives = dict(line[5:].split(" ", 1) for line in proc.stdout.splitlines() if line.startswith("#PBS "))
    resources = [line[8:] for line in proc.stdout.splitlines() if line.startswith("#PBS -l ")]
    taken = pbs.on(pbs.HEAD, "qsub -h job.sh", cwd=tmp_path)
    assert taken.returncode == 0, taken.stderr
    job_id = taken.stdout.strip()
    try:
        (job,) = json.loads(pbs.qstat("-f", "-F", "json", job_id))["Jobs"].values()
        listed = job["Resource_List"]
        for resource in resources:
            name, value = resource.split("=", 1)
            assert str(listed.get(name)) == value, (resource, listed)
        assert job["queue"] == directives["-q"] and job["project"] == directives["-P"], job
        assert job["Account_Name"] == directives["-A"], job
    finally:
        pbs.on(pbs.HEAD, f"qdel {job_id}")


@pytest.mark.parametrize("history", [False, True], ids=["history-off", "history-on"])
def test_cancel_of_a_job_that_has_ended_says_so_and_its_record_stays_true(history, pbs, tmp_path):
    """`hpcdist cancel` of a job that completed: "qdel ... failed: qdel: Unknown Job Id" (history
    off) or "Job has finished" (on); now "has already ended" (exit 1, as for a local job), and it
    stays COMPLETED."""
    pbs.history(history)
    (tmp_path / "ok.py").write_text("print('done')\n")
    done, job_id = submit(pbs, tmp_path, "--launcher", "none", "ok.py", timeout=120)
    assert done.returncode == 0, done.stderr
    proc = pbs.hpcdist("cancel", job_id, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert f"job {job_id} has already ended (completed, exit 0): nothing to cancel" in proc.stderr
    assert row_of(pbs, tmp_path, job_id)["state"] == "COMPLETED"
