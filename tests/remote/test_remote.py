"""Jobs sent from a laptop to a login node over ssh (issue 32): a real sshd and two users of their
own (tests/sshlogin.py), the laptop's own ~/.ssh/config naming the login node, the login node's
hpcdist this checkout's, `--scheduler local` there (the Slurm and OpenPBS clusters' rows are in
tests/remote/test_remote_clusters.py). Every command is run as the laptop's user, as typed there."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time

import pytest

import sshlogin
from report_page import opened, same_numbers
from sshlogin import LAPTOP_USER, LOGIN_USER, PYTHON, PYTHONPATH, REMOTE_HPCDIST, as_user

pytestmark = [pytest.mark.skipif(sshlogin.missing() is not None, reason=f"{sshlogin.missing()}"),
              # One test process for them all: they share the laptop's and the login node's users.
              pytest.mark.xdist_group("remote-ssh")]

TRAIN = '''import os, sys, time
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0.1
print("argv:", sys.argv[3:], "secret:", os.environ.get("LAPTOP_SECRET"), "cwd:", os.getcwd(), flush=True)
for i in range(steps):
    print(f"step {i} committed", flush=True)
    time.sleep(pause)
'''

PROFILE = f'''default = "cluster"
[profiles.cluster]
remote = "login"
remote_hpcdist = "{REMOTE_HPCDIST}"
scheduler = "local"
launcher = "none"
python = "{PYTHON}"
env = {{ PYTHONPATH = "{PYTHONPATH}" }}
'''


@pytest.fixture(scope="module")
def login():
    node = sshlogin.LoginNode()
    yield node
    node.stop()


@pytest.fixture
def project(login):
    return new_project(login)


def new_project(login, profile: str = PROFILE) -> str:
    """The laptop's git tree (~/proj, committed), no connection open, nothing on the login node yet."""
    laptop = login.laptop.pw_name
    as_user(laptop, ["ssh", "-O", "exit", "-o", "ControlPath=~/.cache/hpcdist-ssh/%C", "login"])
    shutil.rmtree(os.path.join(login.login.pw_dir, "hpcdist"), ignore_errors=True)
    path = os.path.join(login.laptop.pw_dir, "proj")
    shutil.rmtree(path, ignore_errors=True)
    as_user(laptop, ["mkdir", path]).check_returncode()
    login.write(laptop, f"{path}/train.py", TRAIN)
    login.write(laptop, f"{path}/hpcdist.toml", profile)
    git(path, "init", "-q", user=laptop)
    git(path, "add", ".", user=laptop)
    git(path, "commit", "-qm", "init", user=laptop)
    return path


def git(path: str, *args: str, user: str = LAPTOP_USER) -> None:
    as_user(user, ["git", "-C", path, "-c", "user.name=me", "-c", "user.email=me@laptop", *args]).check_returncode()


def hpcdist(project: str, *args: str, env: dict | None = None, timeout: float = 120,
            user: str = LAPTOP_USER) -> subprocess.CompletedProcess:
    """``hpcdist ARGS`` typed on the laptop (by ``user``), in the project."""
    done = as_user(user, [PYTHON, "-m", "hpcdist", *args], cwd=project, timeout=timeout,
                   env={"PYTHONPATH": sshlogin.ROOT, **(env or {})})
    done.out, done.err = done.stdout.decode(), done.stderr.decode()
    return done


def on_login(*args: str) -> subprocess.CompletedProcess:
    """``hpcdist ARGS`` typed on the login node, in its hpcdist folder."""
    folder = os.path.join(sshlogin.pwd.getpwnam(LOGIN_USER).pw_dir, "hpcdist")
    done = as_user(LOGIN_USER, [PYTHON, "-m", "hpcdist", *args], cwd=folder, env={"PYTHONPATH": PYTHONPATH})
    done.out, done.err = done.stdout.decode(), done.stderr.decode()
    return done


def connect(project: str) -> None:
    done = hpcdist(project, "connect", "cluster")
    assert done.returncode == 0, done.err
    assert "connected to login: hpcdist 0.1.0 there" in done.err


def submitted(done) -> str:
    assert done.returncode == 0, done.err
    return done.out.strip()


def accepted(login) -> int:
    """How many ssh connections the login node's sshd has let in so far."""
    with open(login.log.name) as f:
        return f.read().count("Accepted publickey")


def master_bytes_written(project: str) -> int:
    """What the laptop's master connection has written so far (its process's write count: the
    bytes it sent through the socket to the login node, and ssh's own few writes)."""
    check = as_user(LAPTOP_USER, ["ssh", "-O", "check", "-o", "ControlPath=~/.cache/hpcdist-ssh/%C", "login"])
    pid = int(re.search(r"pid=(\d+)", check.stderr.decode()).group(1))
    with open(f"/proc/{pid}/io") as f:
        return int(re.search(r"wchar: (\d+)", f.read()).group(1))


def test_without_a_connection_a_command_says_so_and_prints_the_one_to_run(project, login):
    before = accepted(login)
    done = hpcdist(project, "submit", "train.py")
    assert done.returncode == 1
    assert done.err.strip() == ("hpcdist submit: error: ssh to login: no connection to login is open (hpcdist prompts "
                                "for a password or second factor only when you connect); open one with: "
                                "hpcdist connect cluster")
    assert accepted(login) == before  # it did not try to log in (BatchMode or not)
    assert not os.path.exists(os.path.join(login.login.pw_dir, "hpcdist"))


def test_one_login_then_every_command_over_it(project, login):
    connect(project)
    after_connect = accepted(login)
    job = submitted(hpcdist(project, "submit", "train.py", "2"))
    follow = hpcdist(project, "logs", "-f", job)
    assert follow.returncode == 0, follow.err
    status = hpcdist(project, "status")
    cancel_job = submitted(hpcdist(project, "submit", "train.py", "100", "1"))
    assert hpcdist(project, "cancel", cancel_job).returncode == 0
    hpcdist(project, "status", cancel_job)
    # Six commands, no new login: each went over the one connection `connect` opened.
    assert accepted(login) == after_connect
    assert re.search(rf"^{job} +train +local +completed +0", status.out, re.M), status.out


def test_an_uncommitted_change_runs_and_is_said(project, login):
    connect(project)
    login.write(LAPTOP_USER, f"{project}/train.py", TRAIN.replace("committed", "uncommitted"))
    done = hpcdist(project, "submit", "train.py", "2")
    job = submitted(done)
    assert "with uncommitted changes to train.py" in done.err
    login.write(LAPTOP_USER, f"{project}/notes.txt", "not in git\n")
    again = hpcdist(project, "submit", "train.py", "1")  # the laptop's own .hpcdist/ is not counted
    assert again.returncode == 0 and "1 untracked file(s) left out (notes.txt...)" in again.err, again.err
    follow = hpcdist(project, "logs", "-f", job)
    assert follow.returncode == 0, follow.err
    assert "step 1 uncommitted" in follow.out
    # The job ran from its snapshot on the cluster, not from anything of the laptop's.
    cwd = re.search(r"cwd: (\S+)", follow.out).group(1)
    assert cwd.startswith(os.path.join(login.login.pw_dir, "hpcdist", "code") + "/")


def test_a_queued_job_runs_the_code_it_was_sent_with(project, login):
    connect(project)
    job = submitted(hpcdist(project, "submit", "train.py", "2", "2"))
    # Edited on the laptop while the job runs: a new snapshot for the next job, not this one's.
    login.write(LAPTOP_USER, f"{project}/train.py", TRAIN.replace("committed", "edited later"))
    follow = hpcdist(project, "logs", "-f", job)
    assert "step 1 committed" in follow.out and "edited later" not in follow.out


def test_an_unchanged_tree_is_not_sent_twice(project, login):
    with open(f"{project}/weights.bin", "wb") as f:
        f.write(os.urandom(300_000))  # incompressible: the archive is at least this big
    subprocess.run(["chown", f"{LAPTOP_USER}:{LAPTOP_USER}", f"{project}/weights.bin"], check=True)
    git(project, "add", "weights.bin")
    git(project, "commit", "-qm", "weights")
    connect(project)
    start = master_bytes_written(project)
    first = hpcdist(project, "submit", "train.py", "1")
    submitted(first)
    middle = master_bytes_written(project)
    second = hpcdist(project, "submit", "train.py", "1")
    submitted(second)
    end = master_bytes_written(project)
    assert re.search(r"sent \d+ bytes", first.err) and "already there, nothing sent" in second.err
    assert middle - start > 300_000, (start, middle)
    assert end - middle < 30_000, (middle, end)
    # Gone from the cluster (cleaned by hand): the laptop's record of it is wrong, and it is sent again.
    shutil.rmtree(os.path.join(login.login.pw_dir, "hpcdist", "code"))
    third = hpcdist(project, "submit", "train.py", "1")
    submitted(third)
    assert re.search(r"sent \d+ bytes", third.err) and master_bytes_written(project) - end > 300_000


def test_logs_follow_resumes_after_the_connection_drops_without_losing_or_repeating(project, login):
    connect(project)
    job = submitted(hpcdist(project, "submit", "train.py", "30", "0.3"))
    env = {"PYTHONPATH": sshlogin.ROOT}
    follow = subprocess.Popen(["runuser", "-u", LAPTOP_USER, "--", "env", "-i", f"HOME={login.laptop.pw_dir}",
                               "PATH=/usr/bin:/bin", "LANG=C.UTF-8", *(f"{k}={v}" for k, v in env.items()),
                               PYTHON, "-m", "hpcdist", "logs", "-f", job], cwd=project,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(4)
    for pid in login.sessions():  # the login node's end of the connection: the network is gone
        os.kill(pid, 15)
    time.sleep(3)
    connect(project)  # the user opens it again, in another terminal
    out, err = follow.communicate(timeout=120)
    assert follow.returncode == 0, err.decode()
    assert "the connection dropped after byte" in err.decode()
    (row,) = json.loads(on_login("status", "--json", job).out)  # this job's log, as the login node has it
    with open(row["log"], "rb") as f:
        assert out == f.read()
    assert out.count(b"step 29 committed") == 1 and out.count(b"step 0 committed") == 1


def test_status_on_the_laptop_and_on_the_login_node_agree(project, login):
    connect(project)
    job = submitted(hpcdist(project, "submit", "train.py", "1"))
    assert hpcdist(project, "logs", "-f", job).returncode == 0
    laptop = hpcdist(project, "status", "--json", job)
    there = on_login("status", "--json", job)
    assert laptop.returncode == there.returncode == 0, laptop.err + there.err
    assert json.loads(laptop.out) == json.loads(there.out)
    by_name = hpcdist(project, "status", job, "--remote", "cluster", "--json")  # flags after the job too
    assert by_name.returncode == 0 and json.loads(by_name.out) == json.loads(there.out), by_name.err
    assert json.loads(laptop.out)[0]["state"] == "COMPLETED"
    assert hpcdist(project, "status").out == on_login("status").out


def test_status_without_a_connection_shows_what_the_laptop_knows_and_says_so(project, login):
    connect(project)
    job = submitted(hpcdist(project, "submit", "train.py", "1"))
    assert hpcdist(project, "disconnect", "cluster").returncode == 0
    status = hpcdist(project, "status")
    assert status.returncode == 1
    assert re.search(rf"^{job} +train +local +unknown +on cluster: no connection$", status.out, re.M), status.out
    assert status.err == ("hpcdist status: error: ssh to login: no connection is open; its jobs are shown as unknown. "
                          "Open one with: hpcdist connect cluster\n")


def test_cancel_from_the_laptop(project, login):
    connect(project)
    job = submitted(hpcdist(project, "submit", "train.py", "200", "0.5"))
    assert hpcdist(project, "cancel", job).returncode == 0
    time.sleep(1)
    status = hpcdist(project, "status", job)
    assert re.search(rf"^{job} +train +local +cancelled", status.out, re.M), status.out + status.err


#: A loop that counts its steps for `hpcdist watch` (hpcdist.env.step(): no optimizer, no launcher).
WATCHED = """import os, time
os.environ.setdefault("RANK", "0")
from hpcdist import env
for i in range(600):
    env.step()
    time.sleep(0.1)
"""


def committed_and_connected(login, project: str, name: str, text: str) -> None:
    """The script ``name`` committed in the laptop's project, and the connection opened."""
    login.write(LAPTOP_USER, f"{project}/{name}", text)
    git(project, "add", name)
    git(project, "commit", "-qm", name)
    connect(project)


def test_watch_and_stacks_from_the_laptop(project, login):
    """`watch --once`, `watch --json` and `stacks` of a job sent from here: the login node's
    commands, each over the one connection, the job named as the laptop knows it."""
    committed_and_connected(login, project, "watched.py", WATCHED)
    before = accepted(login)
    job = submitted(hpcdist(project, "submit", "--env", "HPCDIST_PROGRESS_INTERVAL=0.5", "watched.py"))
    deadline = time.monotonic() + 60
    while True:
        shown = hpcdist(project, "watch", "--json", job)
        assert shown.returncode == 0, shown.err
        ranks = json.loads(shown.out)["ranks"]
        if ranks and ranks[0].get("step", 0) > 0:
            break
        assert time.monotonic() < deadline, shown.out
        time.sleep(0.5)
    once = hpcdist(project, "watch", "--once", job)
    assert once.returncode == 0, once.err
    assert re.match(rf"job {job} \(local, running\): 1 rank\(s\) on 1 node\(s\)", once.out), once.out
    assert re.search(r"^\S+ +0 +\d+ .* training$", once.out, re.M), once.out
    stacks = hpcdist(project, "stacks", job)
    assert stacks.returncode == 0, stacks.err
    assert "watched.py" in stacks.out and "rank 0" in stacks.out, stacks.out
    assert hpcdist(project, "cancel", job).returncode == 0
    # Live (not a terminal here: one screen after another), until the job has ended.
    live = hpcdist(project, "watch", "--interval", "0.5", job, timeout=60)
    assert live.returncode != 0, live.err  # as --wait: a cancelled job is no success
    assert re.search(rf"^job {job} \(local, cancelled\)", live.out, re.M), live.out
    # On a terminal (script(1) gives it one) each screen is drawn over the last.
    on_tty = as_user(LAPTOP_USER, ["script", "-qec", f"{PYTHON} -m hpcdist watch --interval 0.5 {job}", "/dev/null"],
                     cwd=project, env={"PYTHONPATH": sshlogin.ROOT}, timeout=60)
    assert on_tty.returncode != 0, on_tty.stdout  # the same on a terminal
    assert f"\033[H\033[Jjob {job} (local, cancelled)".encode() in on_tty.stdout, on_tty.stdout
    assert accepted(login) == before


#: A short run that counts its steps, for `hpcdist report` (its monitor looks every 0.5 s).
REPORTED = """import os, time
os.environ.setdefault("RANK", "0")
from hpcdist import env
for i in range(40):
    env.step()
    time.sleep(0.1)
"""


def test_report_from_the_laptop_writes_the_page_here_with_the_login_node_s_numbers(project, login, tmp_path):
    """Issue 49: `hpcdist report JOB` of a job sent from here: the login node's `report --data`
    over the one connection, the page drawn and written on the laptop; its numbers those of the
    laptop's `status --json` and `watch --json` of the job; opened in headless Chromium."""
    committed_and_connected(login, project, "reported.py", REPORTED)
    before = accepted(login)
    job = submitted(hpcdist(project, "submit", "--env", "HPCDIST_PROGRESS_INTERVAL=0.5", "reported.py"))
    assert hpcdist(project, "logs", "-f", job, timeout=180).returncode == 0  # to its end
    # The laptop's python without matplotlib (this checkout alone on its path): the page with its
    # tables, and stderr says which figures it left out and what draws them.
    bare = hpcdist(project, "report", job)
    assert bare.returncode == 0 and bare.out.splitlines() == [f"report-{job}.html"], bare.err
    if subprocess.run([PYTHON, "-c", "import matplotlib"], capture_output=True).returncode != 0:  # a system's own
        assert re.match(r"hpcdist report: matplotlib is not installed here: the page has its "
                        r"tables but not its figures \(.*each rank's steps over the run\); pip install "
                        r"'hpcdist\[report\]' draws them\n", bare.err), bare.err
        with open(os.path.join(project, f"report-{job}.html")) as f:
            assert "<svg" not in f.read()
    os.unlink(os.path.join(project, f"report-{job}.html"))  # the system's python may have drawn it
    with_it = {"PYTHONPATH": PYTHONPATH}  # and the test's packages, matplotlib among them
    bad = hpcdist(project, "report", job, "-o", "/no/such/folder/run.html", env=with_it)  # before anything is asked
    assert (bad.returncode, bad.err) == (1, "hpcdist report: error: -o /no/such/folder/run.html: the folder "
                                            "/no/such/folder does not exist; create it, or name a file in one that "
                                            "does (as -o report.html)\n"), bad.err
    done = hpcdist(project, "report", "-o", "run.html", job, env=with_it)
    assert done.returncode == 0, done.err
    page = os.path.join(project, "run.html")
    assert done.out.splitlines() == ["run.html"], done.out
    assert os.stat(page).st_uid == login.laptop.pw_uid  # written here, by the laptop's user
    shown = tmp_path / "run.html"
    shutil.copy(page, shown)
    text, cells = opened(shown)
    (row,) = json.loads(hpcdist(project, "status", "--json", job).out)
    snapshot = json.loads(hpcdist(project, "watch", "--json", job).out)
    assert row["state"] == "COMPLETED" and snapshot["ranks"][0]["step"] > 0, (row, snapshot)
    same_numbers(cells, row, snapshot)
    assert "<svg" in text and f"hpcdist report: job {job} (reported)" in text, text[:3000]
    # --remote CLUSTER names the cluster by hand; the default page's name is the job's; nothing on the login node.
    by_name = hpcdist(project, "report", "--remote", "cluster", job, env=with_it)
    assert by_name.returncode == 0 and by_name.out.splitlines() == [f"report-{job}.html"], by_name.err
    assert os.path.isfile(os.path.join(project, f"report-{job}.html"))
    there = subprocess.run(["find", login.login.pw_dir, "-name", "*.html"], capture_output=True, text=True).stdout
    assert there == "", there
    assert accepted(login) == before


def test_each_command_is_one_round_trip_over_the_one_login(project, login):
    """Issue 32's budget: every command but `connect` logs in no more, and runs one ssh session
    (besides ssh -O check, which asks the local master and crosses no network). An ssh on the
    laptop's PATH counts the sessions. The times of `status` on both sides are printed (pytest
    -s), not asserted."""
    shim = os.path.join(login.laptop.pw_dir, "shim")
    counted = os.path.join(login.laptop.pw_dir, "ssh-calls")
    as_user(LAPTOP_USER, ["mkdir", "-p", shim]).check_returncode()
    login.write(LAPTOP_USER, f"{shim}/ssh", f'#!/bin/sh\nprintf "%s\\n" "$*" >> {counted}\nexec /usr/bin/ssh "$@"\n')
    os.chmod(f"{shim}/ssh", 0o755)
    env = {"PATH": f"{shim}:/usr/local/bin:/usr/bin:/bin"}
    connect(project)
    before = accepted(login)
    job = ""

    def sessions(*args) -> int:
        login.write(LAPTOP_USER, counted, "")
        done = hpcdist(project, *args, env=env)
        # logs -f ends with the job's own exit status, not 0: it was cancelled just before (143 or
        # 1, as the local backend records it: docs/decisions.md).
        assert (done.returncode != 0) if "-f" in args else (done.returncode == 0), done.err
        with open(counted) as f:
            calls = f.read().splitlines()
        return done, sum(" -O " not in f" {call} " for call in calls)

    done, n = sessions("submit", "train.py", "50", "0.2")
    job = done.out.strip()
    counts = {"submit": n}
    for args in (("status",), ("status", job), ("logs", job), ("watch", "--once", job),
                 ("report", "--data", job), ("cancel", job), ("logs", "-f", job)):
        counts[" ".join(args)] = sessions(*args)[1]
    print("ssh sessions per command:", counts)
    assert set(counts.values()) == {1}, counts
    assert accepted(login) == before
    laptop, there = [], []
    for _ in range(5):
        start = time.perf_counter()
        assert hpcdist(project, "status", job).returncode == 0
        laptop.append(time.perf_counter() - start)
        start = time.perf_counter()
        assert on_login("status", job).returncode == 0
        there.append(time.perf_counter() - start)
    print(f"status {job}: from the laptop {min(laptop) * 1000:.0f} ms, on the login node {min(there) * 1000:.0f} ms "
          f"(best of 5; both include runuser's start)")


def test_nothing_of_the_laptop_reaches_the_login_node(project, login):
    connect(project)
    job = submitted(hpcdist(project, "submit", "train.py", "1", env={"LAPTOP_SECRET": "s3cret"}))
    follow = hpcdist(project, "logs", "-f", job)
    assert "secret: None" in follow.out
    base = os.path.join(login.login.pw_dir, "hpcdist")
    found = subprocess.run(["grep", "-rlE", f"{LAPTOP_USER}|s3cret", base], capture_output=True, text=True)
    assert found.stdout == "", found.stdout  # no file there names the laptop's user, home or secret
    script = hpcdist(project, "render", "train.py")
    assert script.returncode == 0, script.err
    assert script.out.startswith("#!/bin/bash") and LAPTOP_USER not in script.out


def test_a_laptop_path_is_refused_before_anything_is_sent(project, login):
    connect(project)
    done = hpcdist(project, "submit", "--source", f"{project}/env.sh", "train.py")
    assert done.returncode == 1
    assert done.err.startswith(f"hpcdist submit: error: the laptop: '{project}/env.sh' names a path on this laptop")
    assert not os.path.exists(os.path.join(login.login.pw_dir, "hpcdist", "code"))
    # A path under the home that the laptop does not have is the cluster's (the same /home/me there).
    there = hpcdist(project, "submit", "--env", f"DATA={login.laptop.pw_dir}/not-here/data", "train.py", "1")
    assert there.returncode == 0, there.err


def test_hostile_words_reach_the_training_as_typed(project, login):
    connect(project)
    words = ["$(touch /tmp/hpcdist-pwned)", "a'b", '"; touch /tmp/hpcdist-pwned; "', "two words", "`id`"]
    job = submitted(hpcdist(project, "submit", "--remote-folder", "my jobs/$x", "train.py", "1", "0", *words))
    done = hpcdist(project, "logs", "-f", job)
    assert f"argv: {words!r}" in done.out, done.out + done.err
    assert not os.path.exists("/tmp/hpcdist-pwned")
    assert os.path.isdir(os.path.join(login.login.pw_dir, "my jobs", "$x", ".hpcdist", "jobs"))


def test_errors_say_where_they_happened(project, login):
    connect(project)
    missing = hpcdist(project, "submit", "--remote-hpcdist", "/opt/none/bin/hpcdist", "train.py")
    assert missing.returncode == 1
    assert ("\nhpcdist submit: error: the login node login: `/opt/none/bin/hpcdist` failed there (not found): install "
            "hpcdist 0.1.0 there") in missing.err, missing.err
    # Another version there. The command checks the version the laptop sends it, in its own process;
    # `connect` asks `hpcdist --version`, which an older one answers too: here a stand-in answering
    # as an older hpcdist would (no second version is installed).
    newer = as_user(LOGIN_USER, [PYTHON, "-m", "hpcdist", "status"],  # as a newer laptop's command reaches it
                    env={"PYTHONPATH": PYTHONPATH, "HPCDIST_EXPECT_VERSION": "9.9"})
    assert (newer.returncode, newer.stderr) == (3, b"hpcdist-remote: version hpcdist 0.1.0\n")
    old = os.path.join(login.login.pw_dir, "old-hpcdist")
    login.write(LOGIN_USER, old, "#!/bin/sh\necho hpcdist 0.0.9\n")
    os.chmod(old, 0o755)
    login.write(LAPTOP_USER, f"{project}/hpcdist.toml", PROFILE.replace(REMOTE_HPCDIST, old))
    other = hpcdist(project, "connect", "cluster")
    not_json = hpcdist(project, "submit", "train.py")  # its answer is no JSON: said, no traceback
    login.write(LAPTOP_USER, f"{project}/hpcdist.toml", PROFILE)
    assert not_json.returncode == 1 and not_json.err.splitlines()[-1] == (
        f"hpcdist submit: error: the login node login: `{old} submit --json` printed 'hpcdist 0.0.9', not the JSON "
        "hpcdist prints: check that remote_hpcdist names hpcdist 0.1.0 there")
    assert other.returncode == 1
    assert other.err.splitlines()[-1] == (
        "hpcdist connect: error: the login node login: its hpcdist is 'hpcdist 0.0.9', this laptop's is hpcdist "
        "0.1.0: the two must be the same version; install hpcdist 0.1.0 there (pip install hpcdist==0.1.0) or that "
        "one here")
    # The scheduler's refusal, said by the login node's hpcdist, marked as from there.
    slurm = hpcdist(project, "submit", "--scheduler", "slurm", "train.py")
    assert slurm.returncode == 1
    assert re.search(r"^login: hpcdist submit: error: .*sbatch", slurm.err, re.M), slurm.err
    # ssh itself: a host the laptop's ssh cannot reach has no connection to use.
    nowhere = hpcdist(project, "status", "--remote", "nosuchhost.invalid")
    assert nowhere.returncode == 1 and "ssh to nosuchhost.invalid: no connection" in nowhere.err
    bad = hpcdist(project, "submit", "--remote", "two words", "train.py")
    assert bad.returncode == 1 and "--remote 'two words'" in bad.err and "the laptop" in bad.err


@pytest.fixture(scope="module")
def otp_login():
    """A login node that asks for a one-time password after the key (PAM's pam_oath), with users
    of its own."""
    node = sshlogin.LoginNode("hpcd-login-o", "hpcd-laptop-o", otp=True)
    yield node
    node.stop()


def test_a_second_factor_is_asked_by_connect_only(otp_login):
    project = new_project(otp_login)
    user = otp_login.laptop.pw_name

    def laptop(*args, wrong=False):
        return hpcdist(project, *args, user=user, env=otp_login.askpass_env(wrong))

    refused = laptop("connect", "cluster", wrong=True)  # the second factor is checked, not only asked
    assert refused.returncode == 1 and "hpcdist connect: error: ssh to login: ssh could not connect" in refused.err
    assert "no connection to login is open" in laptop("status", "--remote", "cluster").err
    connected = laptop("connect", "cluster")
    assert connected.returncode == 0, connected.err
    asked = otp_login.questions()
    assert len(asked) >= 2 and all("One-time password" in q for q in asked), asked
    job = submitted(laptop("submit", "train.py", "2"))
    assert laptop("logs", "-f", job).returncode == 0
    assert re.search(rf"^{job} +train +local +completed", laptop("status").out, re.M)
    other = submitted(laptop("submit", "train.py", "100", "1"))
    assert laptop("cancel", other).returncode == 0
    assert laptop("render", "train.py").returncode == 0
    # Six commands after connect, and not one question more.
    assert otp_login.questions() == asked
