"""A property of ``hpcdist status``, ``logs`` and ``cancel``: for any bytes a scheduler command
prints and any content of a job folder's files (``record.json``, ``exit_code``, the local
runner's pid file ``runner``, ``runs``), each ends with an answer or one clear line (exit 1),
never a traceback, and never signals a process that is not the job's.

The CLI runs in this process (``hpcdist.cli.main``, as the ``hpcdist`` command calls it), so
that a few hundred examples take seconds. ``squeue``, ``sacct``, ``qstat``, ``scancel`` and
``qdel`` are STAND-INS (shell scripts made here) printing the example's bytes with its exit
status: no scheduler runs where these tests run, and a real one cannot be made to print any
bytes. The process that must survive is real: a ``sleep`` leading its own process group, as
a local job's runner does, whose pid is planted in the records and the runner files.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcdist import cli, jobs

TOOLS = ("squeue", "sacct", "qstat", "scancel", "qdel")


@pytest.fixture(scope="module")
def standins(tmp_path_factory):
    """A folder of stand-in scheduler commands: each prints the bytes in $HPCDIST_OUT/<tool>.out
    and .err and exits with the status in <tool>.rc (``sh``, not Python: a few ms a call)."""
    folder = tmp_path_factory.mktemp("standins")
    for tool in TOOLS:
        path = folder / tool
        path.write_text(f'#!/bin/sh\ncat "$HPCDIST_OUT/{tool}.out"; cat "$HPCDIST_OUT/{tool}.err" >&2\n'
                        f'exit "$(cat "$HPCDIST_OUT/{tool}.rc")"\n')
        path.chmod(0o755)
    return str(folder)


@pytest.fixture(scope="module")
def victim():
    """A live process that is no job's, leading its own process group as a local runner does."""
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    with open(f"/proc/{proc.pid}/stat") as f:
        started = f.read().rsplit(")", 1)[1].split()[19]
    yield proc, started
    proc.kill()
    proc.wait()


_TEXT = st.text(st.characters(codec="utf-8"), max_size=30)
_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | _TEXT,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
                     max_leaves=6)
_RECORD_KEYS = ["job_id", "scheduler", "job_name", "log", "cluster", "dialect", "workdir", "cancelled"]
_SCHEDULER_BYTES = st.one_of(
    st.binary(max_size=200),
    st.sampled_from([b"RUNNING|None\n", b"PENDING|Resources\n", b"COMPLETED|0:0\n", b"FAILED|1:0\n",
                     b'{"Jobs": {"4242.server": {"job_state": "F", "Exit_status": 0}}}', b"\xe9t\xe9\n4242\n",
                     b"slurm_load_jobs error: Unable to contact slurm controller\n", b"Invalid job id specified\n"]),
)


def _records(pid: int):
    """record.json: what hpcdist writes (naming the victim's pid), the same with keys changed to
    any JSON, any JSON at all, a record cut short, any bytes."""
    good = {"job_id": str(pid), "scheduler": "local", "job_name": "s", "log": "job.log", "workdir": "."}
    values = _JSON | st.sampled_from([".", "/", "", "4242", "--help", "pbs", "torque"])  # a folder as the log, ...
    changed = st.dictionaries(st.sampled_from(_RECORD_KEYS), values, max_size=4).map(lambda d: {**good, **d})
    logs = st.sampled_from([".", "/", "", "job.log", "/nonexistent/job.log"]).map(lambda log: {**good, "log": log})
    as_json = st.one_of(st.just(good), logs, changed, _JSON).map(lambda v: json.dumps(v).encode())
    cut = st.integers(0, 80).map(lambda n: json.dumps(good).encode()[:n])
    return st.one_of(as_json, cut, st.binary(max_size=60))


def _runners(pid: int, started: str):
    """The runner file: the victim's pid with any start time but its own, or any bytes."""
    times = st.one_of(st.just("None"), st.integers(-1, 10**12).map(str), _TEXT).filter(lambda t: t != started)
    return st.one_of(times.map(lambda t: f"{pid} {t}\n".encode()), st.binary(max_size=30),
                     st.just(f"{pid}\n".encode()), st.just(b"99999999999999999999 1\n"))


_FILE = st.one_of(st.none(), st.binary(max_size=40),
                  st.sampled_from([b"0\n", b"abc\n", b"256\n", b"-1\n", b"\xff\n", b"1" * 5000]))
_RUNS = st.one_of(st.none(), st.binary(max_size=60),
                  st.sampled_from([b"start 1 4242 h\n", b"resubmitted 1 --help x\n", b"resubmitted 1 4243.server\n"]))


@st.composite
def _examples(draw, pid, started):
    outputs = {tool: (draw(_SCHEDULER_BYTES), draw(st.sampled_from([b""] + [b"error \xff\n"])),
                      draw(st.sampled_from([0, 1, 2, 255]))) for tool in TOOLS}
    local = {jobs.RECORD: draw(_records(pid)), jobs.RUNNER: draw(st.none() | _runners(pid, started)),
             jobs.EXIT_CODE: draw(_FILE), jobs.RUNS: draw(_RUNS)}
    queued = {jobs.EXIT_CODE: draw(_FILE), jobs.RUNS: draw(_RUNS)}
    return outputs, local, queued


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(list(argv))  # an exception here is the traceback the user would see
    return rc, out.getvalue(), err.getvalue()


def _write(folder: str, files: dict) -> None:
    os.makedirs(folder, mode=0o700)
    for name, content in files.items():
        if content is not None:
            with open(os.path.join(folder, name), "wb") as f:
                f.write(content)


def test_status_logs_and_cancel_answer_or_say_one_line_and_signal_no_other_process(standins, victim):
    proc, started = victim

    @settings(max_examples=120, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(_examples(proc.pid, started))
    def check(example):
        outputs, local, queued = example
        with tempfile.TemporaryDirectory() as cwd, _environment(standins, cwd):
            for tool, (out, err, rc) in outputs.items():
                for ext, content in (("out", out), ("err", err), ("rc", str(rc).encode())):
                    with open(os.path.join(cwd, f"{tool}.{ext}"), "wb") as f:
                        f.write(content)
            root = os.path.join(cwd, jobs.JOBS_DIR)
            _write(os.path.join(root, "local-1"), local)
            for name, record in (("slurm-1", {"job_id": "4242", "scheduler": "slurm", "job_name": "s"}),
                                 ("pbs-1", {"job_id": "4242.server", "scheduler": "pbs", "dialect": "pro",
                                            "job_name": "s"})):
                _write(os.path.join(root, name), {**queued, jobs.RECORD: json.dumps(record).encode()})

            rc, out, err = _cli("status")
            assert rc == 0 and err == "", err
            assert len(out.splitlines()) == 4, out  # the header, one row per folder: broken or not
            assert _cli("status", "--json")[0] == 0
            for ref in ("local-1", "slurm-1", "pbs-1", str(proc.pid)):
                for command in ("logs", "cancel"):
                    rc, out, err = _cli(command, ref)
                    assert rc in (0, 1), (command, ref, rc, err)
                    if rc == 1:
                        assert err.startswith(f"hpcdist {command}: error: ") and err.count(": error: ") == 1, err
                        assert command != "logs" or err.count("\n") == 1, err
            assert proc.poll() is None, "a process that is not the job's was signalled"

    check()


@contextlib.contextmanager
def _environment(standins: str, cwd: str):
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.update(PATH=standins + os.pathsep + os.environ["PATH"], HPCDIST_OUT=cwd,
                      HPCDIST_SCHEDULER_RETRIES="0", HPCDIST_RETRY_DELAY="0.01")
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
