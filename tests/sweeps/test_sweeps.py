"""Sweeps (hpcdist.sweeps): the product of --sweep values, the file formats, the split under a
site's caps, the caps as the schedulers print them, the rendered case block, the parameter table,
and the refusals before the queue. The clusters' rows: tests/sweeps/test_sweeps_cluster.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hpcdist.sweeps import arrays, limits, table
from hpcdist.sweeps.sets import MAX_SETS, parameter_sets, product, read_file
from hpcdist.validate import ValidationError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def hpcdist(*args, cwd):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "hpcdist", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


# -- the sets ------------------------------------------------------------------------------------

def test_the_product_varies_the_last_key_fastest_in_the_order_given():
    sets = product(["lr=1e-3,3e-4", "batch=32,64,128"])
    assert sets[:3] == [{"lr": "1e-3", "batch": "32"}, {"lr": "1e-3", "batch": "64"}, {"lr": "1e-3", "batch": "128"}]
    assert len(sets) == 6 and len({tuple(s.items()) for s in sets}) == 6


@pytest.mark.parametrize("sweeps, words", [
    (["lr="], "--sweep 'lr=': the key lr has no values"),
    (["lr"], "a sweep is KEY=VALUES"),
    (["lr=1,2", "lr=3"], "the key lr is swept twice"),
    (["lr=1,,2"], "an empty value"),
    (["lr=1,1"], "the value 1 of lr is given twice"),
    (["-lr=1"], "is not a parameter name"),
])
def test_a_bad_sweep_is_refused_naming_the_field_the_value_and_the_fix(sweeps, words):
    with pytest.raises(ValidationError) as e:
        product(sweeps)
    assert words in str(e.value) and e.value.fix


def test_more_sets_than_allowed_are_refused():
    with pytest.raises(ValidationError, match=f"at most {MAX_SETS:,}"):
        product(["a=" + ",".join(map(str, range(1000))), "b=" + ",".join(map(str, range(101)))])


def test_the_file_formats_give_the_same_sets(tmp_path):
    want = [{"lr": "0.001", "batch": "32", "name": "a b"}, {"lr": "0.0003", "batch": "64", "name": "c"}]
    (tmp_path / "s.txt").write_text("# lr sweep\nlr=0.001 batch=32 name='a b'\n\nlr=0.0003 batch=64 name=c\n")
    (tmp_path / "s.json").write_text(json.dumps([{"lr": 0.001, "batch": 32, "name": "a b"},
                                                 {"lr": 0.0003, "batch": 64, "name": "c"}]))
    (tmp_path / "s.yaml").write_text("- {lr: 0.001, batch: 32, name: a b}\n- {lr: 0.0003, batch: 64, name: c}\n")
    for name in ("s.txt", "s.json", "s.yaml"):
        assert read_file(str(tmp_path / name)) == want, name


@pytest.mark.parametrize("text, words", [
    ("[]", "holds no parameter sets"),
    ('[{"lr": 1}, {"batch": 2}]', "every set must name the same keys"),
    ('[{"lr": 1}, {"lr": 1}]', "is the same as set 1"),
    ('[{"lr": [1, 2]}]', "a parameter is text or a number"),
    ("{", "is not JSON"),
])
def test_a_bad_file_is_refused_naming_the_set(tmp_path, text, words):
    (tmp_path / "s.json").write_text(text)
    with pytest.raises(ValidationError, match="--sweep-file") as e:
        read_file(str(tmp_path / "s.json"))
    assert words in str(e.value)


def test_a_line_without_key_value_names_the_file_and_line(tmp_path):
    (tmp_path / "s.txt").write_text("lr=1\nbatch\n")
    with pytest.raises(ValidationError, match=r"s.txt:2.*'batch' is not KEY=VALUE"):
        read_file(str(tmp_path / "s.txt"))


def test_sweep_and_sweep_file_together_are_refused(tmp_path):
    with pytest.raises(ValidationError, match="were both given"):
        parameter_sets(["lr=1,2"], str(tmp_path / "x"))


# -- the caps and the split ----------------------------------------------------------------------

def test_the_split_runs_every_set_once_under_the_cap_without_a_tail_of_one():
    for count, cap in [(25, 10), (10_000, 1001), (21, 10), (7, 7), (1, 5), (1001, 1000), (6, 1)]:
        parts = limits.split(count, cap)
        assert [i for r in parts for i in r] == list(range(count))
        assert all(len(r) <= cap for r in parts) and len(parts) == -(-count // cap)
        if count > 1 and cap > 1:
            assert min(len(r) for r in parts) > 1, (count, cap, parts)
    assert [len(r) for r in limits.split(25, 10)] == [9, 8, 8]
    assert limits.split(0, 10) == []
    with pytest.raises(ValueError, match="cap 0"):
        limits.split(3, 0)


QMGR = """Server pbshead
    server_state = Active
    max_array_size = 10
    max_queued = [u:PBS_GENERIC=20], [u:alice=5], [o:PBS_ALL=100]
"""


def test_the_caps_are_read_as_the_schedulers_print_them():
    from hpcdist.schedulers.pbs import limits as pbs_limits
    from hpcdist.schedulers.slurm import limits as slurm_limits

    assert pbs_limits.parse_array(QMGR) == (10, "max_array_size")
    assert pbs_limits.parse_array("Server x\n    max_job_array_size = 64\n") == (64, "max_job_array_size")  # Torque
    assert pbs_limits.parse_array("Server x\n") is None
    assert slurm_limits.parse_array("MaxArraySize            = 1001\nMaxJobCount = 10000\n") == 1001
    assert pbs_limits.parse_queued(QMGR, "alice") == (5, "max_queued")
    assert pbs_limits.parse_queued(QMGR, "bob") == (20, "max_queued")
    assert pbs_limits.parse_queued("Queue workq\n    max_user_queuable = 7\n", "bob") == (7, "max_user_queuable")
    assert slurm_limits.parse_sacctmgr("\n50\n\n20\n") == 20
    assert slurm_limits.parse_sacctmgr("\n\n") is None


def test_where_the_scheduler_cannot_be_asked_the_profile_key_or_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no qmgr, qstat, scontrol, sacctmgr
    assert limits.array_cap("pbs", {"max_array_size": 500}) == limits.Limit(
        500, "--max-array-size or profile key max_array_size")
    assert limits.array_cap("slurm") == limits.Limit(None, "no limit known")
    assert limits.job_cap("slurm", {"max_submit_jobs": 8}).source == "--max-submit-jobs or profile key max_submit_jobs"
    assert limits.array_cap("pbs").words() == "no limit known"


def test_the_lower_of_the_schedulers_cap_and_the_given_one_wins(tmp_path, monkeypatch):
    """A stand-in qmgr (a script printing what OpenPBS's prints, tests/sweeps/test_sweeps_cluster.py reads
    the real one): the lower of the server's word and the cap given wins, and a listing without the
    attribute is PBS's default."""
    qmgr = tmp_path / "qmgr"
    qmgr.write_text(f"#!/bin/sh\ncat <<'EOF'\n{QMGR}EOF\n")
    qmgr.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert limits.array_cap("pbs", {"max_array_size": 500}) == limits.Limit(10, "qmgr -c 'list server' max_array_size")
    # A cap given below the server's (a queue's) wins: the server's answer once hid it.
    assert limits.array_cap("pbs", {"max_array_size": 2}) == limits.Limit(
        2, "--max-array-size or profile key max_array_size")
    qmgr.write_text("#!/bin/sh\necho 'Server pbshead'\n")
    assert limits.array_cap("pbs") == limits.Limit(
        10000, "qmgr -c 'list server': max_array_size not set, PBS's default")


def test_limits_is_light():
    code = "import sys, hpcdist.sweeps.limits; print(sorted(m for m in sys.modules if m.startswith('hpcdist')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "['hpcdist', 'hpcdist.frozen', 'hpcdist.sweeps', 'hpcdist.sweeps.limits']"


# -- the script --------------------------------------------------------------------------------

def test_a_sweep_renders_one_array_whose_subjob_reads_its_set_by_index(tmp_path):
    (tmp_path / "train.py").write_text("")
    proc = hpcdist("submit", "--dry-run", "--scheduler", "pbs", "--sweep", "lr=1e-3,3e-4", "--sweep", "name=a b,c",
                   "--max-running", "2", "--max-array-size", "100", "train.py", "--epochs", "3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    script = proc.stdout
    assert "#PBS -J 0-3%2" in script
    assert "case \"${PBS_ARRAY_INDEX:-}\" in\n  0) HPCDIST_SWEEP_SET=0 sweep_lr=1e-3 sweep_name='a b' ;;" in script
    assert "  3) HPCDIST_SWEEP_SET=3 sweep_lr=3e-4 sweep_name=c ;;" in script
    assert 'train.py --epochs 3 --lr "$sweep_lr" --name "$sweep_name"' in script
    assert "--pass sweep_lr --pass sweep_name --pass HPCDIST_SWEEP_SET" in " ".join(script.replace("\\\n", " ").split())
    assert "4 set(s) in 1 array(s)" in proc.stderr
    # The case block runs as written: subjob 2 gets set 2, its value with a space one word.
    case = script[script.index("case "):script.index("esac") + 4]
    out = subprocess.run(["bash", "-c", f"set -u; PBS_ARRAY_INDEX=2; {case}; "
                          f"printf '%s|' \"$sweep_lr\" \"$sweep_name\""],
                         capture_output=True, text=True)
    assert out.stdout == "3e-4|a b|"
    bad = subprocess.run(["bash", "-c", f"PBS_ARRAY_INDEX=9; {case}"], capture_output=True, text=True)
    assert bad.returncode == 2 and "no parameter set for subjob 9" in bad.stderr


def test_slurm_arrays_take_max_running_and_write_a_log_per_task(tmp_path):
    (tmp_path / "train.py").write_text("")
    proc = hpcdist("submit", "--dry-run", "--scheduler", "slurm", "--sweep", "lr=1,2,3", "--max-running", "2",
                   "--max-array-size", "2", "train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "#SBATCH --array=0-1%2" in proc.stdout and "3 set(s) in 2 array(s)" in proc.stderr
    assert "(the array cap: 2 (--max-array-size or profile key max_array_size)" in proc.stderr


@pytest.mark.parametrize("scheduler, line", [("slurm", "#SBATCH --array=0-5%2"), ("pbs", "#PBS -J 0-5%2"),
                                             ("torque", "#PBS -t 0-5%2")])
def test_max_running_limits_a_plain_array_from_the_api_as_from_the_cli(tmp_path, monkeypatch, scheduler, line):
    """``hpcdist.submit(array=..., max_running=N)`` once dropped N (only the CLI added the ``%N``):
    the script the API submits (its :func:`hpcdist.api.job_spec`) and the CLI's hold the same line."""
    from hpcdist import api
    from hpcdist.submission.render import render

    (tmp_path / "train.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HPCDIST_NO_DEFAULT_PROFILE", "1")
    where = {"scheduler": "pbs", "dialect": "torque"} if scheduler == "torque" else {"scheduler": scheduler}
    script = render(api.job_spec("train.py", array="0-5%4", max_running=2, **where))
    assert line in script.splitlines(), script
    flags = ["--scheduler", "pbs", "--dialect", "torque"] if scheduler == "torque" else ["--scheduler", scheduler]
    proc = hpcdist("render", *flags, "--array", "0-5", "--max-running", "2", "train.py", cwd=tmp_path)
    assert line in proc.stdout.splitlines(), proc.stderr
    with pytest.raises(ValidationError, match="--max-running 2: it limits the subjobs of an array or a sweep"):
        api.job_spec("train.py", max_running=2, **where)


def test_every_built_spec_carries_max_running_and_a_profiles_is_blamed_on_its_file(tmp_path):
    """The ``%N`` is folded where the spec is built (one pass, for the CLI, the API and a direct
    ``hpcdist.submission.submit.submit(spec)``); a profile's max_running with no array names the file."""
    from hpcdist.submission.profiles import ProfileError, build, load_profile

    spec = _spec(tmp_path, array="0-5%4", max_running=2)
    assert spec.array == "0-5%2" and spec.max_running == 2
    (tmp_path / "hpcdist.toml").write_text('[profiles.site]\nscheduler = "pbs"\nmax_running = 2\n')
    profile = load_profile("site", [str(tmp_path / "hpcdist.toml")])
    assert build(profile, {"script": "train.py", "array": "0-3"}).array == "0-3%2"
    with pytest.raises(ProfileError, match=r"hpcdist.toml: profiles.site.max_running = 2: it limits the subjobs"):
        build(profile, {"script": "train.py"})


@pytest.mark.parametrize("args, words", [
    (["--scheduler", "pbs", "--sweep", "lr=1,2", "--array", "0-1"], "--array '0-1': a sweep is an array already"),
    (["--scheduler", "pbs", "--sweep", "lr="], "--sweep 'lr=': the key lr has no values"),
    (["--scheduler", "pbs", "--max-running", "2"], "--max-running 2: it limits the subjobs of an array or a sweep"),
    (["--scheduler", "pbs", "--sweep", "lr=1,2", "--max-running", "0"], "--max-running"),
    (["--scheduler", "pbs", "--sweep-file", "missing.txt"], "--sweep-file 'missing.txt': cannot be read"),
])
def test_bad_input_is_refused_before_the_queue(tmp_path, args, words):
    (tmp_path / "train.py").write_text("")
    proc = hpcdist("submit", *args, "train.py", cwd=tmp_path)
    assert proc.returncode == 1 and words in proc.stderr, proc.stderr
    assert not (tmp_path / ".hpcdist").exists()


def test_resubmit_needs_a_sweep_and_failed(tmp_path):
    proc = hpcdist("submit", "--resubmit", "123", cwd=tmp_path)
    assert proc.returncode == 1 and "both are needed" in proc.stderr
    proc = hpcdist("submit", "--resubmit", "123", "--failed", cwd=tmp_path)
    assert proc.returncode == 1 and "no job '123'" in proc.stderr
    proc = hpcdist("submit", "--scheduler", "pbs", cwd=tmp_path)
    assert proc.returncode == 2 and "hpcdist submit: error: SCRIPT is missing: the training script" in proc.stderr


# -- the submission under the caps, and the table ------------------------------------------------

class Submitted:
    """A job folder written by hpcdist.jobs (Draft), as a submission leaves it; the scheduler's
    part stood in for: these rows are about the sweep's bookkeeping (the clusters' rows submit)."""

    def __init__(self, root):
        self.root, self.calls, self.ids, self.dependencies = root, [], 100, []

    def __call__(self, spec, *, command_line=None, sweep=None, root=None):
        from hpcdist.jobs import Draft
        from hpcdist.jobs.params import write_sweep

        self.ids += 1
        draft = Draft(self.root, spec.job_name)
        draft.write_spec(spec.as_dict())
        write_sweep(draft, sweep.record(draft.path))
        record = {"job_id": f"{self.ids}[].server", "cluster": None, "scheduler": "pbs", "dialect": None,
                  "job_name": spec.job_name, "workdir": self.root, "log": os.path.join(draft.path, "job.log"),
                  "submitted_at": float(self.ids), "command_line": command_line,
                  "subjob_logs": [os.path.join(draft.path, "job."), ".log"]}
        self.calls.append((spec.array, [n for n, _ in sweep.sets]))
        self.dependencies.append(spec.dependency)
        return draft.commit(record)


def _spec(tmp_path, **values):
    from hpcdist.submission.spec import build_spec

    (tmp_path / "train.py").write_text("")
    os.chdir(tmp_path)
    return build_spec({"scheduler": "pbs", "script": "train.py", **values})


def test_a_sweep_over_the_cap_is_split_and_waits_for_room_under_the_job_cap(tmp_path, monkeypatch):
    spec = _spec(tmp_path, max_running=2, sweep=["lr=0,1,2,3,4", "b=1,2,3,4,5"])
    stub = Submitted(str(tmp_path / "jobs"))
    queue = iter([0, 6, 6, 0, 0])  # the user's queued jobs, at each look
    monkeypatch.setattr(arrays, "POLL_S", 0)
    looks = []
    out = open(tmp_path / "said", "w")
    sets = product(["lr=" + ",".join(map(str, range(5))), "b=1,2,3,4,5"])
    caps = (limits.Limit(10, "qmgr -c 'list server' max_array_size"),
            limits.Limit(12, "qmgr -c 'list server' max_queued"))
    done = arrays.submit_sweep(spec, sets, submit=stub, limits_found=caps, out=out,
                               count_queued=lambda s: looks.append(1) or next(queue))
    out.close()
    assert [a for a, _ in stub.calls] == ["0-8%2", "0-7%2", "0-7%2"]
    # --max-running over several arrays: each after the one before, never more than 2 at once.
    assert [d for d in stub.dependencies] == [None, "afterany:101[].server", "afterany:102[].server"]
    assert sorted(n for _, numbers in stub.calls for n in numbers) == list(range(25))
    assert len(looks) == 5  # the second array waited twice for room (6 queued + 8 > 12)
    said = (tmp_path / "said").read_text()
    assert "25 sets in 3 arrays: the site allows 10 in one (qmgr -c 'list server' max_array_size)" in said
    assert "6 of your jobs are queued and the site allows 12 (qmgr -c 'list server' max_queued)" in said
    # One sweep: every folder names the first; the first holds every set.
    from hpcdist.jobs.params import read_sweep

    records = [read_sweep(job.path) for job in done]
    assert {r["sweep"] for r in records} == {os.path.basename(done[0].path)}
    assert len(records[0]["all"]) == 25 and "all" not in records[1]


def test_the_table_shows_each_sets_state_and_the_failed_are_run_again(tmp_path, monkeypatch):
    from hpcdist.schedulers.base import JobStatus

    spec = _spec(tmp_path)
    stub = Submitted(str(tmp_path / "jobs"))
    sets = product(["lr=1e-3,3e-4", "batch=16,32,64"])
    caps = (limits.Limit(4, "qmgr -c 'list server' max_array_size"), limits.Limit(None, "no limit known"))
    done = arrays.submit_sweep(spec, sets, submit=stub, limits_found=caps, out=open(os.devnull, "w"))
    assert [a for a, _ in stub.calls] == ["0-2", "0-2"]
    # Array 1: sets 0-2 ended (set 1 failed); array 2: set 3 done, set 4 running, set 5 not started.
    for name, code in (("exit_code.0", "0"), ("exit_code.1", "3"), ("exit_code.2", "0")):
        (tmp_path / "jobs" / os.path.basename(done[0].path) / name).write_text(code + "\n")
    second = tmp_path / "jobs" / os.path.basename(done[1].path)
    (second / "exit_code.0").write_text("0\n")
    (second / "job.1.log").write_text("step 1\n")
    states = [JobStatus("COMPLETED", 3, "F"), JobStatus("RUNNING", None, "B")]
    sweep = table.sweep_of(done[1])
    rows = table.rows(sweep, states)
    assert [(r["set"], r["state"], r["exit_code"]) for r in rows] == [
        (0, "COMPLETED", 0), (1, "FAILED", 3), (2, "COMPLETED", 0), (3, "COMPLETED", 0), (4, "RUNNING", None),
        (5, "PENDING", None)]
    text = table.text(sweep, rows)
    lines = text.splitlines()
    assert lines[0].startswith(f"sweep {sweep['id']}: 6 sets in 2 array(s); ")
    assert lines[1].split() == ["SET", "STATE", "EXIT", "JOB", "PARAMETERS"]
    assert lines[3].split() == ["1", "failed", "3", "101[].server", "[1]", "lr=1e-3", "batch=32"]
    assert table.to_run_again(rows) == [1]
    # The resubmission of set 1 alone is part of the same sweep: its row now follows it.
    again = arrays.submit_sweep(spec, sets, submit=stub, limits_found=caps, sweep_id=sweep["id"], numbers=[1],
                                attempt=1, out=open(os.devnull, "w"))
    assert stub.calls[-1] == (None, [1])  # one set: no array (PBS refuses -J 0-0)
    (tmp_path / "jobs" / os.path.basename(again[0].path) / "exit_code").write_text("0\n")
    sweep = table.sweep_of(done[0])
    rows = table.rows(sweep, states + [JobStatus("COMPLETED", 0, "F")])
    assert rows[1]["state"] == "COMPLETED" and rows[1]["job_id"] == again[0].job_id and rows[1]["index"] is None
    listed = json.loads(json.dumps(table.as_json(sweep, rows)))
    first, second = done[0].job_id, done[1].job_id
    assert [r["job_id"] for r in listed] == [first, again[0].job_id, first, second, second, second]
    assert listed[1]["params"] == {"lr": "1e-3", "batch": "32"} and listed[1]["sweep"] == sweep["id"]


def test_torque_reads_its_own_attribute_and_has_no_cap_unless_set(tmp_path, monkeypatch):
    qmgr = tmp_path / "qmgr"
    qmgr.write_text("#!/bin/sh\necho 'Server torque'\necho '    max_job_array_size = 64'\n")
    qmgr.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert limits.array_cap("pbs", dialect="torque") == limits.Limit(64, "qmgr -c 'list server' max_job_array_size")
    qmgr.write_text("#!/bin/sh\necho 'Server torque'\n")
    assert limits.array_cap("torque", {"max_array_size": 9}) == limits.Limit(
        9, "--max-array-size or profile key max_array_size")


def test_status_of_a_plain_job_is_its_row(tmp_path):
    (tmp_path / "train.py").write_text("")
    proc = hpcdist("submit", "--scheduler", "local", "--launcher", "none", "--json", "--wait", "train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job_id = json.loads(proc.stdout.splitlines()[0])["job_id"]
    (row,) = json.loads(hpcdist("status", "--json", job_id, cwd=tmp_path).stdout)
    assert row["state"] == "COMPLETED" and "sets" not in row


def test_a_refusal_for_the_array_size_or_a_job_limit_that_never_fits_names_the_cap(tmp_path, monkeypatch):
    """The scheduler's refusals as qsub words them on OpenPBS 23.06 ("Array job exceeds server or
    queue size limit" with max_array_size lowered; "would exceed complex's per-user limit" with
    max_queued), raised by a stand-in submission."""
    from hpcdist.schedulers.batch import SubmitError

    spec = _spec(tmp_path)
    monkeypatch.setattr(arrays, "POLL_S", 0)
    sets = product(["lr=1,2,3"])
    caps = (limits.Limit(10000, "qmgr -c 'list server' max_array_size"), limits.Limit(None, "no limit known"))

    def refuse(words):
        def submit(spec, **kwargs):
            raise SubmitError(f"qsub: {words}")
        return submit

    with pytest.raises(SubmitError) as e:
        arrays.submit_sweep(spec, sets, limits_found=caps,
                            submit=refuse("Array job exceeds server or queue size limit"))
    assert "the array cap hpcdist read is 10000 (qmgr -c 'list server' max_array_size)" in str(e.value)
    assert "--max-array-size N" in str(e.value)
    with pytest.raises(SubmitError) as e:
        arrays.submit_sweep(spec, sets, submit=refuse("would exceed complex's per-user limit"), limits_found=caps,
                            count_queued=lambda s: 0)
    assert "none of your jobs queued: the limit is below 3; hpcdist read no limit known" in str(e.value)
    # With jobs of the user's queued, it waits and tries again.
    answers = iter([SubmitError("qsub: would exceed complex's per-user limit"), None])
    stub = Submitted(str(tmp_path / "jobs"))

    def once_refused(spec, **kwargs):
        error = next(answers)
        if error:
            raise error
        return stub(spec, **kwargs)

    done = arrays.submit_sweep(spec, sets, submit=once_refused, limits_found=caps, count_queued=lambda s: 4,
                               out=open(os.devnull, "w"))
    assert len(done) == 1 and stub.calls == [("0-2", [0, 1, 2])]


def test_render_shows_the_first_array_and_the_api_refuses_a_sweep_it_cannot_submit(tmp_path):
    (tmp_path / "train.py").write_text("")
    proc = hpcdist("render", "--scheduler", "slurm", "--sweep", "lr=1,2", "train.py", cwd=tmp_path)
    assert proc.returncode == 0 and "#SBATCH --array=0-1" in proc.stdout and 'train.py --lr "$sweep_lr"' in proc.stdout
    code = ("import hpcdist\ntry:\n    hpcdist.submit('train.py', scheduler='slurm', sweep=['lr=1,2'])\n"
            "except Exception as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert "SubmitError --sweep: this submits one job, and a sweep is several" in out.stdout, out.stdout + out.stderr
    assert not (tmp_path / ".hpcdist").exists() or not os.listdir(tmp_path / ".hpcdist" / "jobs")


def test_hostile_values_reach_the_subjob_as_typed_and_run_nothing(tmp_path):
    """Every one-line payload of the hostile corpus (tests/hostile.py) as a swept value: the rendered
    case block, run by bash for each index, gives the subjob exactly the value typed, and nothing
    in it runs (no sentinel file). A value a sweep cannot carry (a comma separates values) is left
    out; one the check refuses is refused before the script, naming --sweep."""
    import hostile

    sentinel = tmp_path / "PWNED"
    (tmp_path / "train.py").write_text("")
    values = [p.value for p in hostile.corpus(str(sentinel))
              if p.argv_safe and p.one_line and p.value and "," not in p.value]
    carried = 0
    for value in values:
        proc = hpcdist("render", "--scheduler", "slurm", "--sweep", f"v=plain,{value}", "train.py", cwd=tmp_path)
        if proc.returncode != 0:
            assert "--sweep" in proc.stderr, proc.stderr
            continue
        carried += 1
        text = proc.stdout
        case = text[text.index('case "${SLURM_ARRAY_TASK_ID'):text.index("\nexport HPCDIST_SWEEP_SET") + 1]
        seen = subprocess.run(["bash", "-c", case + 'printf "%s" "$sweep_v"'], env={"SLURM_ARRAY_TASK_ID": "1",
                              "PATH": os.environ["PATH"]}, capture_output=True, text=True, cwd=tmp_path, timeout=30)
        assert (seen.returncode, seen.stdout) == (0, value), (value, case, seen.stderr)
    assert not sentinel.exists()
    assert carried >= 30, f"only {carried} of {len(values)} payloads rendered"


#: Prints its set and its own start and end; fails (exit 3) for lr=2.
LOCAL_TRAIN = """import argparse, os, sys, time
p = argparse.ArgumentParser(); p.add_argument("--lr"); p.add_argument("--batch"); a = p.parse_args()
start = time.time(); time.sleep(0.3)
print(f"set={os.environ['HPCDIST_SWEEP_SET']} lr={a.lr} batch={a.batch} start={start:.3f} end={time.time():.3f}")
sys.exit(3 if a.lr == "2" else 0)
"""


def test_a_local_sweep_runs_its_sets_one_after_another_here(tmp_path):
    """The local backend (no queue, no array) runs each set as a job of its own, each after the one
    before has ended; `status` shows the sweep, `--resubmit --failed` runs the failed set again, and
    a dry run shows the first set's script. Once refused ("submit with slurm or pbs"), even dry."""
    (tmp_path / "train.py").write_text(LOCAL_TRAIN)
    sweep = ["--scheduler", "local", "--launcher", "none", "--sweep", "lr=1,2", "--sweep", "batch=8,16"]
    dry = hpcdist("submit", *sweep, "--dry-run", "train.py", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert 'train.py --lr "$sweep_lr" --batch "$sweep_batch"' in dry.stdout and "sweep_lr=1 sweep_batch=8" in dry.stdout
    assert "4 set(s), run one after another on this machine" in dry.stderr, dry.stderr
    assert not (tmp_path / ".hpcdist").exists()
    proc = hpcdist("submit", *sweep, "--json", "train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "runs the sweep's 4 set(s) one after another, here" in proc.stderr, proc.stderr
    assert "set 2 ended: failed 3" in proc.stderr and "set=1 lr=1 batch=16" in proc.stderr, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["sets"] == 4 and len(answer["job_ids"]) == 4
    rows = json.loads(hpcdist("status", "--json", answer["job_id"], cwd=tmp_path).stdout)
    assert [(r["set"], r["state"], r["exit_code"]) for r in rows] == [
        (0, "COMPLETED", 0), (1, "COMPLETED", 0), (2, "FAILED", 3), (3, "FAILED", 3)], rows
    spans = []
    for row in rows:
        words = dict(w.split("=", 1) for w in open(row["log"]).read().split() if "=" in w)
        assert (words["lr"], words["batch"]) == (row["params"]["lr"], row["params"]["batch"]), row
        spans.append((float(words["start"]), float(words["end"])))
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:])), spans
    (tmp_path / "train.py").write_text(LOCAL_TRAIN.replace('a.lr == "2"', "False"))
    again = hpcdist("submit", "--resubmit", answer["job_id"], "--failed", "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["sets"] == [2, 3]
    rows = json.loads(hpcdist("status", "--json", answer["job_id"], cwd=tmp_path).stdout)
    assert [r["state"] for r in rows] == ["COMPLETED"] * 4, rows
