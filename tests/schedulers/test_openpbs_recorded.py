"""What a real OpenPBS 23.06 server printed, replayed: the five places where it disagreed with hpcdist.

No PBS server can run where the tests run, so `qsub` and `qstat` here are a STAND-IN
(tests/recorded/replay.py) that prints, word for word, what the real server printed to hpcdist
(tests/recorded/openpbs/, copied from /work/shared/reference/openpbs/; SOURCE.md there says how
it was captured). Each test names the recorded files it replays. The job scripts are hpcdist's
own, rendered by `hpcdist submit`; where a test runs one, it sets the variables PBS's mom sets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from launch import clean_env

from hpcdist import jobs
from hpcdist.schedulers.base import CANCELLED, FAILED, JobId
from hpcdist.schedulers.pbs.qstat import parse_qstat_pro_json

HERE = Path(__file__).resolve().parents[1]
RECORDED = HERE / "recorded" / "openpbs"
REPLAY = HERE / "recorded" / "replay.py"


def recorded(name: str) -> str:
    return (RECORDED / name).read_text()


def section(name: str, heading: str) -> dict:
    """One command's answer in a recorded transcript (``== <command>``, ``rc=``, ``--stdout``,
    ``--stderr``), as a replay answer: the first section whose heading starts with ``heading``
    (``""``: the one before the first heading)."""
    chunks, current = [], ["", []]
    for line in recorded(name).split("\n"):
        if line.startswith("== "):
            chunks.append(current)
            current = [line[3:], []]
        else:
            current[1].append(line)
    chunks.append(current)
    title, lines = next(chunk for chunk in chunks if chunk[0].startswith(heading))
    rc = int(lines[0].removeprefix("rc="))
    out, err = lines.index("--stdout"), lines.index("--stderr")
    return {"rc": rc, "stdout": "\n".join(lines[out + 1:err]) + "\n",
            "stderr": "\n".join(lines[err + 1:]).strip() + "\n"}


def replay(tmp_path, plan: dict) -> dict:
    """An environment whose qsub and qstat are the stand-in, answering as ``plan`` says."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("qsub", "qstat"):
        if not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(REPLAY)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    env = clean_env(HPCDIST_REPLAY=str(tmp_path / "plan.json"), HPCDIST_RETRY_DELAY="0.1")
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return env


def calls(tmp_path, tool: str) -> list[dict]:
    path = tmp_path / "plan.json.calls"
    return [c for c in map(json.loads, path.read_text().splitlines()) if c["tool"] == tool] if path.exists() else []


def hpcdist(*args, cwd, env, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcdist", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def recorded_job(tmp_path, job_id: str, **extra) -> str:
    """A job folder as `hpcdist submit` leaves it: its path."""
    draft = jobs.Draft(str(tmp_path / ".hpcdist" / "jobs"), "arr")
    draft.commit({"job_id": job_id, "cluster": None, "scheduler": "pbs", "dialect": "pro", "job_name": "arr",
                  "workdir": str(tmp_path), "log": os.path.join(draft.path, "job.log"), "submitted_at": 0.0,
                  "command_line": "hpcdist submit", **extra})
    return draft.path


def status_row(tmp_path, env) -> dict:
    proc = hpcdist("status", "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    (row,) = json.loads(proc.stdout)
    return row


# ------------------------------------------------------------------ 1. job history off (the default)

#: `qstat -f -F json -x ID` with job history off: no Jobs, "not configured to maintain job history", exit 0.
NO_HISTORY = section("nohistory_qstat_running_job.txt", "qstat -f -F json -x")
#: `qstat -f ID` about a job that has ended, with history off: "Unknown Job Id", exit 153.
GONE = section("nohistory_qstat_finished_job.txt", "qstat -f 6.pbshead")
#: `qstat -f -F json ID` (no -x) about the running job: its entry (the recorded one of job 6 is cut short in
#: the transcript, so the running job 35's, its id replaced by 6's).
RUNNING = {"stdout_file": "qstat_json_running.json"}


def test_history_off_a_running_job_is_running(tmp_path):
    """Replays nohistory_qstat_running_job.txt (-x: no Jobs, the history line on stderr) and
    qstat_json_running.json (the answer without -x): hpcdist said "unknown"."""
    env = replay(tmp_path, {"qstat": [{"if": ["-x"], "answers": [NO_HISTORY]}, {"answers": [RUNNING]}],
                            "replace": {"35.pbshead": "6.pbshead"}})
    recorded_job(tmp_path, "6.pbshead")
    row = status_row(tmp_path, env)
    assert row["state"] == "RUNNING", row


@pytest.mark.parametrize("code", [0, 3])
def test_history_off_wait_ends_with_the_jobs_exit_code(tmp_path, code):
    """Replays nohistory_hpcdist_submit_wait.txt's server: running, then gone ("Unknown Job Id",
    nohistory_qstat_finished_job.txt); the job's exit_code file (written here by the stand-in qsub,
    as the job script's EXIT trap writes it) says how it ended. hpcdist gave up after 60 s, exit 1."""
    env = replay(tmp_path, {"qsub": [{"answers": [{"stdout": "6.pbshead\n", "files": {"exit_code": f"{code}\n"}}]}],
                            "qstat": [{"if": ["-x"], "answers": [NO_HISTORY]}, {"answers": [RUNNING, GONE]}],
                            "replace": {"35.pbshead": "6.pbshead"}})
    (tmp_path / "train.py").write_text("")
    proc = hpcdist("submit", "--scheduler", "pbs", "--launcher", "none", "--wait", "train.py", cwd=tmp_path, env=env,
                   timeout=50)
    assert proc.returncode == code, proc.stderr
    assert "job 6.pbshead is running" in proc.stderr
    assert f"job 6.pbshead is {'completed' if code == 0 else 'failed'}" in proc.stderr, proc.stderr


# ------------------------------------------------------------------ 2, 3. array parents

def test_the_parent_of_an_array_with_a_failed_subjob_reads_as_failed():
    """qstat_json_array_one_subjob_exit3.json: the parent says Exit_status 0, substate 93 (failed)."""
    state = parse_qstat_pro_json(recorded("qstat_json_array_one_subjob_exit3.json"), JobId("12[].pbshead"))
    assert (state.state, state.exit_code) == (FAILED, None), state
    assert "and failed" in state.reason


def test_the_parent_of_a_cancelled_array_reads_as_cancelled():
    """qstat_json_array_cancelled.json: the parent says Exit_status 1, substate 91 (deleted)."""
    state = parse_qstat_pro_json(recorded("qstat_json_array_cancelled.json"), JobId("13[].pbshead"))
    assert state.state == CANCELLED, state
    # A subjob deleted while it ran still reads as cancelled (271 = 256 + SIGTERM).
    assert parse_qstat_pro_json(recorded("qstat_json_array_cancelled.json"), JobId("13[1].pbshead")).state == CANCELLED


def test_status_of_an_array_with_a_failed_subjob_is_failed_with_its_exit_code(tmp_path):
    """Replays qstat_json_array_one_subjob_exit3.json (hpcdist_array_one_subjob_exit3.txt: hpcdist said
    completed, 0). The subjobs' exit_code files say which one failed, and how."""
    env = replay(tmp_path, {"qstat": [{"answers": [{"stdout_file": "qstat_json_array_one_subjob_exit3.json"}]}]})
    folder = recorded_job(tmp_path, "12[].pbshead")
    for index, code in ((1, 0), (2, 3), (3, 0)):
        Path(folder, f"exit_code.{index}").write_text(f"{code}\n")
    Path(folder, "exit_code").write_text("0\n")  # the shared file of old scripts: the last subjob's
    row = status_row(tmp_path, env)
    assert (row["state"], row["exit_code"]) == ("FAILED", 3), row
    assert "subjob 2 exited 3" in row["reason"], row


def test_an_array_pbs_says_failed_stays_failed_when_no_subjob_recorded_a_failure(tmp_path):
    """Replays qstat_json_array_one_subjob_exit3.json; the failed subjob left no exit_code file
    (killed before its EXIT trap ran): the files that say 0 do not make the array completed."""
    env = replay(tmp_path, {"qstat": [{"answers": [{"stdout_file": "qstat_json_array_one_subjob_exit3.json"}]}]})
    folder = recorded_job(tmp_path, "12[].pbshead")
    for index in (1, 3):
        Path(folder, f"exit_code.{index}").write_text("0\n")
    row = status_row(tmp_path, env)
    assert (row["state"], row["exit_code"]) == ("FAILED", None), row


def test_history_off_an_array_whose_subjob_wrote_no_exit_code_is_failed_not_completed(tmp_path):
    """Replays nohistory_qstat_finished_job.txt ("Unknown Job Id": the server forgot the array, its
    id replaced by 12[]'s). Subjobs 1 and 3 wrote 0; subjob 2, deleted alone by ``qdel 12[2]``
    (submitit's subjob cancel) while it ran, wrote none: hpcdist said completed (the clean-clone
    run of 16498c3, test_submitit_pbs_api.py's subjob cancel)."""
    env = replay(tmp_path, {"qstat": [{"if": ["-x"], "answers": [NO_HISTORY]}, {"answers": [GONE]}],
                            "replace": {"6.pbshead": "12[].pbshead"}})
    folder = recorded_job(tmp_path, "12[].pbshead")
    Path(folder, "spec.json").write_text(json.dumps({"array": "1-3"}))
    for index in (1, 3):
        Path(folder, f"exit_code.{index}").write_text("0\n")
    row = status_row(tmp_path, env)
    assert (row["state"], row["exit_code"]) == ("FAILED", None), row
    assert "subjob(s) 2 wrote no exit_code file" in row["reason"], row
    Path(folder, "exit_code.2").write_text("0\n")  # each wrote one: the array completed
    assert status_row(tmp_path, env)["state"] == "COMPLETED"


def test_status_of_a_cancelled_array_is_cancelled(tmp_path):
    """Replays qstat_json_array_cancelled.json (hpcdist_array_cancel.txt: hpcdist said failed, 1)."""
    env = replay(tmp_path, {"qstat": [{"answers": [{"stdout_file": "qstat_json_array_cancelled.json"}]}]})
    recorded_job(tmp_path, "13[].pbshead")
    assert status_row(tmp_path, env)["state"] == "CANCELLED"


# ------------------------------------------------------------------ 4. each subjob's log and exit code

def test_each_subjob_writes_its_own_log_and_exit_code(tmp_path):
    """`hpcdist submit --array 1-3` through the stand-in qsub (it prints 12[].pbshead, as
    qsub_outputs.txt shows for an array); then the rendered job script runs three times, as PBS's mom
    runs a subjob (PBS_ARRAY_INDEX, PBS_JOBID, PBS_NODEFILE, PBS_O_WORKDIR set), its output where
    PBS puts it (the -o path, ^array_index^ replaced by the index). Subjob 2 exits 3. The server
    replays qstat_json_array_one_subjob_exit3.json. hpcdist gave every subjob one log and one
    exit_code file: each overwrote the others."""
    env = replay(tmp_path, {"qsub": [{"answers": [{"stdout": "12[].pbshead\n"}]}],
                            "qstat": [{"answers": [{"stdout_file": "qstat_json_array_one_subjob_exit3.json"}]}]})
    (tmp_path / "train.py").write_text("import os, sys\nindex = os.environ['PBS_ARRAY_INDEX']\n"
                                       "print('subjob', index)\nsys.exit(3 if index == '2' else 0)\n")
    proc = hpcdist("submit", "--scheduler", "pbs", "--launcher", "none", "--array", "1-3", "train.py",
                   cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    (qsub,) = calls(tmp_path, "qsub")
    output = qsub["argv"][qsub["argv"].index("-o") + 1]
    assert "^array_index^" in output, qsub["argv"]  # PBS Pro names each subjob's output by its index
    script = qsub["argv"][-1]
    (tmp_path / "nodes").write_text("localhost\n")
    for index in (1, 2, 3):
        mom = {**env, "PBS_ARRAY_INDEX": str(index), "PBS_JOBID": f"12[{index}].pbshead",
               "PBS_NODEFILE": str(tmp_path / "nodes"), "PBS_O_WORKDIR": str(tmp_path)}
        log = tmp_path / output.replace("^array_index^", str(index))
        with open(log, "w") as out:
            ran = subprocess.run(["bash", script], cwd=tmp_path, env=mom, stdout=out, stderr=subprocess.STDOUT,
                                 timeout=120)
        assert ran.returncode == (3 if index == 2 else 0), log.read_text()
    row = status_row(tmp_path, env)
    assert (row["state"], row["exit_code"]) == ("FAILED", 3), row
    logs = hpcdist("logs", "12[].pbshead", cwd=tmp_path, env=env)
    assert logs.returncode == 0, logs.stderr
    for index in (1, 2, 3):
        assert f"subjob {index}\n" in logs.stdout
        assert f"==> hpcdist: job 12[].pbshead subjob {index}, log" in logs.stdout


def test_torque_appends_the_index_to_each_subjobs_log(tmp_path):
    """Torque's server appends -<index> to an array's -o path itself (job_clone in
    adaptivecomputing/torque src/server/job_func.c): hpcdist reads each subjob's log there."""
    folder = Path(recorded_job(tmp_path, "12[].torque-head"))
    record = json.loads((folder / "record.json").read_text())
    from hpcdist.schedulers.registry import get

    given, prefix, suffix = get("pbs", "torque").array_log(record["log"])
    assert given == record["log"] and (prefix, suffix) == (record["log"] + "-", "")
    for index in (2, 1):
        Path(f"{prefix}{index}{suffix}").write_text(f"subjob {index}\n")
    job = jobs.Job(str(folder))
    job.update(subjob_logs=[prefix, suffix])
    assert [path for _, path in jobs.Job(str(folder)).logs] == [f"{prefix}1", f"{prefix}2"]


# ------------------------------------------------------------------ 5. the resubmitted job; the walltime

def test_a_resubmitted_job_gets_none_of_the_old_jobs_per_job_variables(tmp_path):
    """`hpcdist requeue` inside job 19, its environment as PBS and the script left it: the
    Variable_List that job 20 got through `qsub -V` (qstat_json_requeue_resubmitted_20.json, less
    the HPCDIST_RESTART_COUNT that -v added), plus a setting of the user's own. The stand-in qsub
    prints 20.pbshead and records the environment it was given: hpcdist passed 19's MASTER_PORT,
    MASTER_ADDR, PBS_JOBID, TMPDIR and HPCDIST_* on, and the script kept the old MASTER_PORT."""
    job = json.loads(recorded("qstat_json_requeue_resubmitted_20.json"))["Jobs"]["20.pbshead"]
    inherited = {k: str(v) for k, v in job["Variable_List"].items() if k != "HPCDIST_RESTART_COUNT"}
    env = replay(tmp_path, {"qsub": [{"answers": [{"stdout": "20.pbshead\n"}]}]})
    folder = recorded_job(tmp_path, "19.pbshead")
    (tmp_path / "job.sh").write_text("#!/bin/bash\n")
    environ = {**inherited, "PATH": env["PATH"], "HPCDIST_REPLAY": env["HPCDIST_REPLAY"], "MY_DATA": "/data/set1",
               "PBS_O_WORKDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "hpcdist", "requeue", "--scheduler", "pbs", "--max", "1", "--script",
                           str(tmp_path / "job.sh"), "--job-dir", folder], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    (qsub,) = calls(tmp_path, "qsub")
    assert "-V" in qsub["argv"] and "depend=afterany:19.pbshead" in qsub["argv"]
    given = qsub["env"]
    old = [name for name in ("MASTER_ADDR", "MASTER_PORT", "PBS_JOBID", "PBS_NODEFILE", "TMPDIR", "HPCDIST_JOB_ID",
                             "HPCDIST_HOSTFILE", "HPCDIST_NODEFILE", "HPCDIST_STOP_FILE") if name in given]
    assert old == [], {name: given[name] for name in old}
    assert given["MY_DATA"] == "/data/set1" and given["HOME"] == "/home/pbsuser"  # the rest goes on


def test_a_users_own_master_port_is_set_again_by_the_resubmitted_script(tmp_path):
    """The resubmission drops MASTER_PORT from qsub's environment; one the user gave (--env) is the
    job's set-up's to write again (and a port of the submitting shell's is not: the job's wins)."""
    (tmp_path / "train.py").write_text("")
    proc = hpcdist("render", "--scheduler", "pbs", "--env", "MASTER_PORT=29511", "train.py", cwd=tmp_path,
                   env=clean_env())
    assert proc.returncode == 0, proc.stderr
    assert "export MASTER_PORT=29511\n" in proc.stdout
    setup = proc.stdout.split("job-setup", 1)[1].split("\nsource", 1)[0]
    assert "--master-port 29511" in setup
    nodes = tmp_path / "nodes"
    nodes.write_text("n1\nn2\n")
    job = dict(PBS_JOBID="12.pbshead", PBS_NODEFILE=str(nodes))
    for env in (clean_env(**job), clean_env(**job, MASTER_PORT="4242", MASTER_ADDR="login1")):
        argv = ["job-setup", "--scheduler", "pbs", "--dir", str(tmp_path)]
        assert hpcdist(*argv, "--master-port", "29511", cwd=tmp_path, env=env).returncode == 0
        assert "export MASTER_PORT=29511\n" in (tmp_path / "job.env").read_text()
        assert hpcdist(*argv, cwd=tmp_path, env=env).returncode == 0
        written = (tmp_path / "job.env").read_text()
        port = int(written.split("export MASTER_PORT=", 1)[1].split("\n", 1)[0])
        assert 20000 <= port < 30000 and "export MASTER_ADDR=n1\n" in written  # drawn by job-setup, not 4242


def test_a_walltime_kill_ends_wait_with_124_and_says_the_walltime_killed_it(tmp_path):
    """Replays qstat_json_walltime_killed.json (Exit_status -29, JOB_EXEC_KILL_WALLTIME): in
    hpcdist_walltime_1m.txt `--wait` exited 227 (-29 as an exit status)."""
    env = replay(tmp_path, {"qsub": [{"answers": [{"stdout": "10.pbshead\n"}]}],
                            "qstat": [{"answers": [{"stdout_file": "qstat_json_walltime_killed.json"}]}]})
    (tmp_path / "train.py").write_text("")
    proc = hpcdist("submit", "--scheduler", "pbs", "--launcher", "none", "--walltime", "1m", "--wait", "train.py",
                   cwd=tmp_path, env=env)
    assert proc.returncode == 124, proc.stderr
    assert "job 10.pbshead was killed at its walltime limit" in proc.stderr, proc.stderr
