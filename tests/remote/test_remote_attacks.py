"""Remote use under attack (issue 39, items 2, 7-10, 19-23): the login node of tests/remote/test_remote.py
(a real sshd on 127.0.0.1, users of its own, tests/sshlogin.py), a second login user in a shared
group for what another member of a project can do, and the laptop's ssh, PATH and records broken
as they break on a laptop. Every command is typed on the laptop as its user."""

from __future__ import annotations

import grp
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

import sshlogin
from sshlogin import LAPTOP_USER, LOGIN_USER, PYTHON, PYTHONPATH, REMOTE_HPCDIST, as_user
from test_remote import login  # noqa: F401 (the login node fixture, one sshd per module)
from test_remote import PROFILE, connect, git, hpcdist, new_project, submitted

pytestmark = [pytest.mark.skipif(sshlogin.missing() is not None, reason=f"{sshlogin.missing()}"),
              pytest.mark.xdist_group("remote-ssh")]

#: Another member of the login user's project group, on the login node.
MEMBER, GROUP = "hpcd-member", "hpcd-proj"
#: A profile of the laptop's own for jobs run on the laptop itself (the local backend, no ssh).
HERE = f'''
[profiles.here]
scheduler = "local"
launcher = "none"
python = "{PYTHON}"
env = {{ PYTHONPATH = "{PYTHONPATH}" }}
'''
#: The laptop's hpcdist renders those itself: it needs jinja2 (the test python's packages).
HERE_ENV = {"PYTHONPATH": PYTHONPATH}


@pytest.fixture
def project(login):
    return new_project(login, PROFILE + HERE)


@pytest.fixture(scope="module")
def member(login):
    """A second user of the login node, and a group that the login user and they share."""
    try:
        grp.getgrnam(GROUP)
    except KeyError:
        subprocess.run(["groupadd", GROUP], check=True)
        sshlogin._record(f"group {GROUP} (groupadd, for tests/remote/test_remote_attacks.py's project space)")
    sshlogin._user(MEMBER)
    for user in (LOGIN_USER, MEMBER):
        if user not in grp.getgrnam(GROUP).gr_mem:
            subprocess.run(["usermod", "-a", "-G", GROUP, user], check=True)
    return MEMBER


@pytest.fixture
def project_space(member):
    """A group project space as clusters make them: setgid, group-writable, not sticky."""
    space = tempfile.mkdtemp(prefix="hpcd-proj-")
    shutil.chown(space, "root", GROUP)
    os.chmod(space, 0o2775)
    yield space
    shutil.rmtree(space, ignore_errors=True)


def snapshot_of(done) -> str:
    return re.search(r"code snapshot (\w+)", done.err).group(1)


def slow_hpcdist(login, seconds: float = 3) -> str:
    """A remote_hpcdist that waits ``seconds`` before it runs: time to look at the login node."""
    path = os.path.join(login.login.pw_dir, "slow-hpcdist")
    login.write(LOGIN_USER, path, f"#!/bin/sh\nsleep {seconds}\nexec {REMOTE_HPCDIST} \"$@\"\n")
    os.chmod(path, 0o755)
    return "~/slow-hpcdist"


def processes(user: str, of: str = LOGIN_USER) -> str:
    """`ps` as ``user`` sees the login user's processes: command lines, and environments where it
    may read them (`e`; the laptop's own processes, on this same machine, are the laptop's)."""
    return as_user(user, ["ps", "-ww", "e", "-o", "args", "-u", of]).stdout.decode(errors="replace")


def laptop_ssh_pids() -> list[int]:
    """The laptop's ssh commands of the moment that run a command over the master (not the master)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                words = f.read().split(b"\0")
            owner = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
        if owner == sshlogin.pwd.getpwnam(LAPTOP_USER).pw_uid and words[0] == b"ssh" and b"ControlMaster=no" in words:
            pids.append(int(pid))
    return pids


def test_a_group_member_cannot_swap_my_remote_code(project, login, member, project_space):
    """Item 2: a remote folder another user could replace (a group-writable parent that is not
    sticky), or one they own or can write, is refused; the code there is never trusted."""
    connect(project)
    mine = os.path.join(project_space, "mine")
    first = hpcdist(project, "submit", "--remote-folder", mine, "train.py", "1")
    assert first.returncode == 1, first.err
    assert (f"hpcdist submit: error: the login node login: {project_space} (mode drwxrwsr-x, owner root) lets other "
            f"users rename {mine} and put a folder of theirs in its place") in first.err, first.err
    assert "chmod +t" in first.err and "remote_folder" in first.err
    # The owner makes the space sticky: the folder is the user's own, and the member cannot move it.
    os.chmod(project_space, 0o3775)
    ok = hpcdist(project, "submit", "--remote-folder", mine, "train.py", "1")
    assert ok.returncode == 0, ok.err
    digest = snapshot_of(ok)
    moved = as_user(MEMBER, ["mv", mine, mine + ".old"])
    assert moved.returncode != 0, "the sticky space let another member move the folder"
    # A folder another member made first, holding "my" snapshot: theirs, refused.
    theirs = os.path.join(project_space, "theirs")
    planted = as_user(MEMBER, ["sh", "-c", f'mkdir -p "$0/code/{digest}" && echo "print(\\"planted\\")" > '
                               f'"$0/code/{digest}/train.py"', theirs])
    assert planted.returncode == 0, planted.stderr
    refused = hpcdist(project, "submit", "--remote-folder", theirs, "train.py", "1")
    assert refused.returncode == 1
    assert f"the login node login: {theirs} is owned by {MEMBER}, not by you" in refused.err, refused.err
    # My own folder, its snapshot made group-writable (an older hpcdist under umask 002): refused.
    os.chmod(os.path.join(mine, "code", digest), 0o2775)
    writable = hpcdist(project, "submit", "--remote-folder", mine, "train.py", "1")
    assert writable.returncode == 1
    assert (f"the login node login: {mine}/code/{digest} is mode drwxrwsr-x: other users can change the code your "
            f"jobs run; chmod -R go-w") in writable.err, writable.err


def test_a_connection_that_stops_answering_is_an_error_in_bounded_time(project, login):
    """Item 7: the login node stops answering (its sshd processes stopped: the network gone behind
    an open TCP connection): `status` ends with an error, `logs -f` says the connection dropped."""
    connect(project)
    job = submitted(hpcdist(project, "submit", "train.py", "40", "0.3"))
    follow = subprocess.Popen(["runuser", "-u", LAPTOP_USER, "--", "env", "-i", f"HOME={login.laptop.pw_dir}",
                               "PATH=/usr/bin:/bin", "LANG=C.UTF-8", f"PYTHONPATH={sshlogin.ROOT}",
                               PYTHON, "-m", "hpcdist", "logs", "-f", job], cwd=project,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(3)
    stopped = login.sessions()
    try:
        for pid in stopped:
            os.kill(pid, 19)  # SIGSTOP
        start = time.monotonic()
        status = hpcdist(project, "status", job, timeout=75)
        took = time.monotonic() - start
        assert status.returncode == 1, status.err
        assert took < 60, took
        assert ("hpcdist status: error: ssh to login: the connection was lost (no answer for 30 s, or the network "
                "went down); open it again with: hpcdist connect cluster") in status.err, status.err
    finally:
        for pid in stopped:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
    connect(project)
    out, err = follow.communicate(timeout=120)
    assert follow.returncode == 0, err.decode()
    assert "the connection dropped after byte" in err.decode(), err.decode()
    assert out.count(b"step 39 committed") == 1 and out.count(b"step 0 committed") == 1


def test_secrets_never_reach_the_login_nodes_process_list(project, login, member):
    """Item 8: --env and a profile's env go with the snapshot (stdin), never as arguments: another
    user's `ps` on the login node does not see them while the submit runs; the job has them."""
    connect(project)
    slow = slow_hpcdist(login)
    submit = subprocess.Popen(["runuser", "-u", LAPTOP_USER, "--", "env", "-i", f"HOME={login.laptop.pw_dir}",
                               "PATH=/usr/bin:/bin", "LANG=C.UTF-8", f"PYTHONPATH={sshlogin.ROOT}",
                               PYTHON, "-m", "hpcdist", "submit", "--remote-hpcdist", slow,
                               "--env", "LAPTOP_SECRET=tok-8c1f-secret", "train.py", "1"], cwd=project,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen, saw_submit = "", False
    while submit.poll() is None:
        listed = processes(MEMBER)
        seen += "\n".join(line for line in listed.splitlines() if "tok-8c1f" in line)
        saw_submit = saw_submit or "slow-hpcdist" in listed
        time.sleep(0.1)
    out, err = submit.communicate()
    assert submit.returncode == 0, err.decode()
    assert saw_submit, "the submit was never seen running on the login node"
    assert seen == "", seen
    follow = hpcdist(project, "logs", "-f", out.decode().strip())
    assert "secret: tok-8c1f-secret" in follow.out, follow.out + follow.err


def test_a_submit_whose_answer_is_lost_says_it_may_have_been_submitted(project, login):
    """Item 9: the laptop's ssh dies while the login node submits: "may have been submitted", the
    way to check, and what is known recorded; `status` then finds the job and records it."""
    connect(project)
    slow = slow_hpcdist(login)
    submit = subprocess.Popen(["runuser", "-u", LAPTOP_USER, "--", "env", "-i", f"HOME={login.laptop.pw_dir}",
                               "PATH=/usr/bin:/bin", "LANG=C.UTF-8", f"PYTHONPATH={sshlogin.ROOT}",
                               PYTHON, "-m", "hpcdist", "submit", "--remote-hpcdist", slow, "train.py", "2"],
                              cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while "slow-hpcdist" not in processes(MEMBER):
        assert time.monotonic() < deadline and submit.poll() is None
        time.sleep(0.1)
    for pid in laptop_ssh_pids():  # the laptop's side dies; the login node's goes on
        os.kill(pid, 9)
    out, err = submit.communicate(timeout=60)
    err = err.decode()
    assert submit.returncode == 1, err
    assert ("hpcdist submit: error: ssh to login: the connection ended before the login node answered: the job may "
            "have been submitted. Check with `hpcdist status` before you submit again") in err, err
    time.sleep(5)  # the login node's submit ends
    status = hpcdist(project, "status", "--json")
    assert status.returncode == 0, status.err
    (row,) = json.loads(status.out)
    assert "recorded job" in status.err and row["job_id"] in status.err, status.err
    follow = hpcdist(project, "logs", "-f", row["job_id"])  # found by its id: recorded on the laptop now
    assert follow.returncode == 0 and "step 1 committed" in follow.out, follow.err


def test_a_banner_on_the_login_shells_stdout_is_not_taken_for_the_answer(project, login):
    """Item 9: a login shell that prints a banner on stdout (a .bashrc's echo)."""
    bashrc = os.path.join(login.login.pw_dir, ".bashrc")
    before = open(bashrc).read() if os.path.exists(bashrc) else None
    login.write(LOGIN_USER, bashrc, "echo 'Welcome to login: mind the quota'\nprintf 'no newline'\n"
                + (before or ""))
    try:
        connect(project)
        job = submitted(hpcdist(project, "submit", "train.py", "2"))
        assert re.fullmatch(r"\d+", job), job
        logs = hpcdist(project, "logs", "-f", job)
        assert logs.returncode == 0 and "argv: []" in logs.out, logs.out
        assert "Welcome" not in logs.out + logs.err and "no newline" not in logs.out + logs.err
        rows = json.loads(hpcdist(project, "status", "--json").out)
        assert [r["job_id"] for r in rows] == [job]
    finally:
        if before is None:
            os.unlink(bashrc)
        else:
            login.write(LOGIN_USER, bashrc, before)


def test_a_torn_line_in_the_laptops_records_is_skipped_with_one_warning(project, login):
    """Item 10: a line cut short (a full laptop disk) in .hpcdist/remote/jobs."""
    connect(project)
    job = submitted(hpcdist(project, "submit", "train.py", "1"))
    records = os.path.join(project, ".hpcdist", "remote", "jobs")
    with open(records, "a") as f:
        f.write('{"job_id": "12')
    status = hpcdist(project, "status")
    assert status.returncode == 0, status.err
    assert re.search(rf"^{job} +train +local", status.out, re.M), status.out
    warning = ("hpcdist status: warning: .hpcdist/remote/jobs line 2 is not a record hpcdist wrote (cut short, or "
               "changed by hand); skipped")
    assert status.err.count(warning) == 1 and "Traceback" not in status.err, status.err
    for args in (("logs", job), ("cancel", "999999"), ("watch", "--once", "999999"), ("status", "999999")):
        done = hpcdist(project, *args)
        assert "Traceback" not in done.err, (args, done.err)
    local = hpcdist(project, "status", "999999")  # not a remote record: a local job's lookup, as before
    assert "no job '999999'" in local.err, local.err


def test_status_with_remote_folder_and_remote_hpcdist_flags(project, login):
    """Item 19: --remote-folder and --remote-hpcdist with `status --remote HOST`, as the docs say."""
    connect(project)
    shutil.rmtree(os.path.join(login.login.pw_dir, "elsewhere"), ignore_errors=True)
    job = submitted(hpcdist(project, "submit", "--remote-folder", "elsewhere", "train.py", "1"))
    status = hpcdist(project, "status", "--json", "--remote", "login", "--remote-folder", "elsewhere",
                     "--remote-hpcdist", REMOTE_HPCDIST)
    assert status.returncode == 0, status.err
    assert [row["job_id"] for row in json.loads(status.out)] == [job]


def test_a_local_job_with_a_remote_jobs_id_is_not_guessed(project, login):
    """Item 20: a job run here and one sent to the cluster with the same id: `cancel ID` says
    so and how to choose, and cancels neither."""
    local = submitted(hpcdist(project, "submit", "--profile", "here", "train.py", "200", "0.5", env=HERE_ENV))
    connect(project)
    remote = submitted(hpcdist(project, "submit", "train.py", "200", "0.5"))
    records = os.path.join(project, ".hpcdist", "remote", "jobs")
    with open(records) as f:
        entry = json.loads(f.readline())
    login.write(LAPTOP_USER, records, json.dumps({**entry, "job_id": local}) + "\n")  # the cluster gave the same id
    cancel = hpcdist(project, "cancel", local)
    assert cancel.returncode == 1
    assert (f"hpcdist cancel: error: the laptop: job {local} names a job run here (.hpcdist/jobs/train-") \
        in cancel.err, cancel.err
    assert "and one sent to cluster: cancel the one here with `hpcdist cancel .hpcdist/jobs/train-" in cancel.err
    assert f"the cluster's with `hpcdist cancel --remote cluster {local}`" in cancel.err
    status = hpcdist(project, "status")  # neither was cancelled
    assert re.search(rf"^{local} +train +local +running", status.out, re.M), status.out
    assert re.search(rf"^{remote} +train +local +running", status.out, re.M), status.out
    folder = re.search(r"hpcdist cancel (\.hpcdist/jobs/train-\S+)`", cancel.err).group(1)
    assert hpcdist(project, "cancel", folder).returncode == 0
    assert hpcdist(project, "cancel", "--remote", "cluster", remote).returncode == 0


def test_snapshot_errors_name_the_file(project, login):
    """Item 21: a file name that is not UTF-8, an unreadable tracked file, a FIFO under --include."""
    connect(project)
    latin = os.path.join(project.encode(), b"caf\xe9.txt")
    as_user(LAPTOP_USER, ["sh", "-c", 'echo x > "$0"', latin]).check_returncode()
    git(project, "add", "-A")
    bad_name = hpcdist(project, "submit", "train.py", timeout=30)
    assert bad_name.returncode == 1 and "Traceback" not in bad_name.err, bad_name.err
    assert ("hpcdist submit: error: the laptop: 'caf\\xe9.txt' (tracked by git) has a name that is not UTF-8") \
        in bad_name.err, bad_name.err
    git(project, "rm", "-q", "--cached", os.fsdecode(latin))
    os.unlink(latin)
    secret = os.path.join(project, "private.txt")
    login.write(LAPTOP_USER, secret, "x\n")
    git(project, "add", "private.txt")
    os.chmod(secret, 0)
    unreadable = hpcdist(project, "submit", "train.py", timeout=30)
    assert unreadable.returncode == 1 and "Traceback" not in unreadable.err, unreadable.err
    assert "hpcdist submit: error: the laptop: cannot read private.txt (tracked by git): Permission denied" \
        in unreadable.err, unreadable.err
    os.chmod(secret, 0o600)
    as_user(LAPTOP_USER, ["mkdir", f"{project}/data"]).check_returncode()
    as_user(LAPTOP_USER, ["mkfifo", f"{project}/data/pipe"]).check_returncode()
    fifo = hpcdist(project, "submit", "--include", "data", "train.py", timeout=30)
    assert fifo.returncode == 1, fifo.err
    assert "hpcdist submit: error: the laptop: --include 'data': data/pipe is a FIFO, not a file" in fifo.err, fifo.err


def test_no_ssh_on_the_laptop_is_one_line_and_local_jobs_still_work(project, login):
    """Item 22: ssh missing from the laptop's PATH."""
    connect(project)
    remote = submitted(hpcdist(project, "submit", "train.py", "1"))
    local = submitted(hpcdist(project, "submit", "--profile", "here", "train.py", "1", env=HERE_ENV))
    bare = os.path.join(login.laptop.pw_dir, "no-ssh")
    as_user(LAPTOP_USER, ["mkdir", "-p", bare]).check_returncode()
    for program in ("git", "sh", "tar"):
        if not os.path.exists(f"{bare}/{program}"):
            os.symlink(shutil.which(program), f"{bare}/{program}")
    env = {"PATH": bare, **HERE_ENV}
    status = hpcdist(project, "status", env=env)
    fix = ("ssh (OpenSSH's client) is not on this laptop's PATH: install it (apt install openssh-client, "
           "or your system's package), or put it on the PATH")
    assert status.returncode == 1 and "Traceback" not in status.err, status.err
    assert status.err.strip().splitlines() == [f"hpcdist status: error: the laptop: {fix}; the jobs sent to "
                                               f"clusters are shown as unknown"], status.err
    assert re.search(rf"^{local} +train +local", status.out, re.M), status.out
    assert re.search(rf"^{remote} +train +local +unknown", status.out, re.M), status.out
    logs = hpcdist(project, "logs", remote, env=env)
    assert logs.returncode == 1 and logs.err.strip() == f"hpcdist logs: error: the laptop: {fix}", logs.err
    submit = hpcdist(project, "submit", "train.py", env=env)
    assert submit.returncode == 1 and submit.err.strip() == f"hpcdist submit: error: the laptop: {fix}", submit.err
    assert hpcdist(project, "logs", local, env=env).returncode == 0


def test_a_snapshot_partly_purged_on_the_cluster_is_sent_again(project, login):
    """Item 23: the scratch purge removed some of a snapshot's files; the next submit resends it."""
    connect(project)
    first = hpcdist(project, "submit", "train.py", "1")
    submitted(first)
    code = os.path.join(login.login.pw_dir, "hpcdist", "code", snapshot_of(first))
    os.unlink(os.path.join(code, "train.py"))
    again = hpcdist(project, "submit", "train.py", "2")
    job = submitted(again)
    assert re.search(r"sent \d+ bytes", again.err), again.err
    follow = hpcdist(project, "logs", "-f", job)
    assert follow.returncode == 0 and "step 1 committed" in follow.out, follow.out + follow.err
