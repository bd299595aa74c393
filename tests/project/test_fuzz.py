"""Fuzzing every parser of outside text: it parses, or raises its documented error with a message.

Opt-in long run: ``HPCDIST_FUZZ=long bash scripts/test.sh tests/project/test_fuzz.py``
(or ``HPCDIST_FUZZ=long .venv/bin/python -m pytest tests/project/test_fuzz.py``):
the "long" Hypothesis profile of tests/conftest.py, 100 times the examples
(100,000 per test) and no deadline: hours. By default the "ci" profile runs
1,000 examples per test here, with the fuzzers of the other files a few
thousand per parser, in well under a minute.

What is fuzzed, and the only error each may raise (anything else is a bug):

- node lists, host names, count lists (``hpcdist.hostlist``): ``HostlistError``;
- PBS node files, Slurm allocations, the environment of a job
  (``hpcdist.allocation``): ``AllocationError``;
- walltimes, memory, names, directives (``hpcdist.validate``): ``ValidationError``;
- what sbatch, qsub, squeue, sacct and qstat print (``hpcdist.schedulers``):
  ``SchedulerOutputError``;
- profile files (``hpcdist.submission.profiles``): ``ProfileError``, then the job spec:
  ``ValidationError``;
- the rank environment (``hpcdist.env.resolve``): ``DistEnvError``; the port
  derived from any job id lies in 20000-29999.

tests/hostlist/test_hostlist.py, test_validate.py, test_scheduler_io.py and
test_env_resolve.py hold the grammar-exact properties (round trips, models);
the tests here feed each parser text nearer to what breaks parsers: mixed
grammar fragments, Unicode digits and spaces, huge numbers, cut and spliced
real outputs, real files.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import warnings

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hpcdist import validate as v
from hpcdist.allocation import HOSTFILE_FORMATS, Allocation, AllocationError
from hpcdist.env import DistEnv, DistEnvError, UndistributedWarning, resolve
from hpcdist.ports import PORT_BASE, PORT_SPAN, port_for_job
from hpcdist.hostlist import HostlistError, compress, expand, expand_counts
from hpcdist.submission.profiles import ProfileError, load_profile, merge
from hpcdist.schedulers.registry import check_directive, check_gpu_directives, check_job_name
from hpcdist.schedulers.base import STATES, JobId, JobStatus, SchedulerOutputError
from hpcdist.schedulers.pbs.submit import format_pbs_mem, format_pbs_walltime, parse_qsub
from hpcdist.schedulers.pbs.qstat import parse_qstat_full_text, parse_qstat_pro_json
from hpcdist.schedulers.slurm.submit import format_slurm_mem, format_slurm_time, parse_sacct, parse_sbatch, parse_squeue
from hpcdist.submission.spec import JobSpec, build_spec

#: The profile of tests/conftest.py (no max_examples here, so that HPCDIST_FUZZ=long scales them).
FUZZ = settings()

# Characters that break naive parsers: Unicode digits and spaces, line separators, NUL, signs.
_TRICKY = "\u0663\uff11\u00b2\u2028\u2029\x85\x0b\x0c\x1c\x00\u00a0\u3000\ufeff+-_.e"


def _mixed(pieces, max_size=20):
    """Grammar fragments and arbitrary text, joined."""
    return st.one_of(
        st.lists(st.one_of(st.sampled_from(pieces), st.text(alphabet=_TRICKY, max_size=2)),
                 max_size=max_size).map("".join),
        st.text(max_size=60),
    )


def _spliced(samples):
    """A real sample cut, with pieces deleted and inserted at random places."""
    @st.composite
    def build(draw):
        text = draw(st.sampled_from(samples))
        for _ in range(draw(st.integers(0, 4))):
            at = draw(st.integers(0, len(text)))
            cut = draw(st.integers(0, 12))
            text = text[:at] + draw(st.text(max_size=6)) + text[at + cut:]
        return text[:draw(st.integers(0, len(text)))] if draw(st.booleans()) else text
    return build()


# --------------------------------------------------------------------------
# hostlist
# --------------------------------------------------------------------------

_NODELIST_PIECES = ["n", "node", "gpu-", "[", "]", "-", ",", " ", "\t", "\n", "0", "1", "9", "00", "007",
                    "99999999999999999999", "[1-3]", "[01-10]", "[1-65537]", "[0-99999999]", "[1,3-5]",
                    "[3-1]", "[1-2][3-4]", "]-[", "[[", "{", "}", "(", ")", ".ib", "x"]


@FUZZ
@given(_mixed(_NODELIST_PIECES))
def test_expand_answers_or_raises_hostlist_error(text):
    try:
        names = expand(text, max_hosts=10_000)
    except HostlistError as e:
        assert e.text == text and e.problem and str(e)
        assert e.position is None or 0 <= e.position <= len(text)
        return
    assert names and all(isinstance(n, str) and n for n in names)
    assert len(names) <= 10_000


@FUZZ
@given(st.lists(st.one_of(st.text(max_size=10), st.sampled_from(["n1", "n01", "n\u0663", "n\uff11", "1", "01",
                                                                 "n-1", "n1.ib", "a0b0", "n99999999999999999999"])),
                max_size=20))
def test_compress_round_trips_or_raises_hostlist_error(hosts):
    try:
        text = compress(hosts)
    except HostlistError as e:
        assert str(e) and e.text in hosts
        return
    if not hosts:
        assert text == ""
        return
    assert expand(text, max_hosts=10_000) == hosts


_COUNT_PIECES = ["1", "2", "16", "0", "(x", "(x3)", "(x0)", ")", ",", " ", "-", "+", "99999999999999999999999",
                 "(x99999999999)", "\u0663", "1.5", "x", "(", "(x1)(x2)"]


@FUZZ
@given(_mixed(_COUNT_PIECES))
def test_expand_counts_answers_or_raises_hostlist_error(text):
    try:
        counts = expand_counts(text, max_hosts=10_000)
    except HostlistError as e:
        assert e.text == text and str(e)
        return
    assert counts and all(type(c) is int and c >= 0 for c in counts) and len(counts) <= 10_000


# --------------------------------------------------------------------------
# allocations: PBS node files, Slurm pairs, a job's environment
# --------------------------------------------------------------------------

_NODEFILE_PIECES = ["n1", "n2", "node01.cluster", "\n", "\r\n", "\n\n", " ", "\t", "n1 slots=2", "n1:2", "#c",
                    "\x00", "\u2028", "\x1c", "\x85", "é"]


@FUZZ
@given(_mixed(_NODEFILE_PIECES, max_size=30))
def test_pbs_nodefile_answers_or_raises_allocation_error(text):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "nodefile")
        with open(path, "wb") as f:
            f.write(text.encode("utf-8", "surrogatepass"))
        try:
            alloc = Allocation.from_env({"PBS_NODEFILE": path})
        except AllocationError as e:
            assert "PBS_NODEFILE" in str(e)
            return
    _check_allocation(alloc)


def _check_allocation(alloc):
    assert alloc.hosts and all(h and not any(c.isspace() for c in h) and n >= 1 for h, n in alloc.hosts)
    assert len({h for h, _ in alloc.hosts}) == len(alloc.hosts)
    for fmt in HOSTFILE_FORMATS:
        text = alloc.to_hostfile(fmt)
        assert text.endswith("\n")
    # A DeepSpeed/Open MPI hostfile reads back as the allocation.
    lines = alloc.to_hostfile("deepspeed").splitlines()
    assert [tuple(re.fullmatch(r"(.+) slots=(\d+)", line).groups()) for line in lines] == \
        [(h, str(n)) for h, n in alloc.hosts]


@FUZZ
@given(_mixed(_NODELIST_PIECES, max_size=8), _mixed(_COUNT_PIECES, max_size=8))
def test_slurm_pair_answers_or_raises_allocation_error(nodelist, counts):
    try:
        alloc = Allocation.from_slurm(nodelist, counts)
    except AllocationError as e:
        assert "SLURM_JOB_NODELIST" in str(e) or "SLURM_TASKS_PER_NODE" in str(e)
        return
    _check_allocation(alloc)


_ALLOC_VARS = ["PBS_NODEFILE", "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_TASKS_PER_NODE", "SLURM_STEP_ID",
               "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE"]


@FUZZ
@given(st.dictionaries(st.sampled_from(_ALLOC_VARS),
                       st.one_of(_mixed(_NODELIST_PIECES, 6), _mixed(_COUNT_PIECES, 6),
                                 st.sampled_from(["0", "1", "batch", "extern", "4294967294", ""])), max_size=5),
       _mixed(_NODEFILE_PIECES, 12), st.sampled_from(["file", "missing", "folder", "as-given"]),
       st.one_of(st.none(), st.integers(0, 4)))
def test_allocation_from_env_answers_or_raises_allocation_error(environ, nodefile, where, slots):
    with tempfile.TemporaryDirectory() as tmp:
        if "PBS_NODEFILE" in environ and where != "as-given":
            path = {"file": os.path.join(tmp, "nodes"), "missing": os.path.join(tmp, "none"), "folder": tmp}[where]
            if where == "file":
                with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
                    f.write(nodefile)
            environ["PBS_NODEFILE"] = path
        try:
            alloc = Allocation.from_env(environ, slots_per_node=slots)
        except AllocationError as e:
            assert str(e)
            return
    _check_allocation(alloc)
    if slots:
        assert {n for _, n in alloc.hosts} == {slots}


# --------------------------------------------------------------------------
# walltimes, memory, names, directives
# --------------------------------------------------------------------------

_WALLTIME_PIECES = ["1", "90", "0", "00", "59", "60", "24", "25", "99999999999999", "1.5", ".5", "5.", "d", "h",
                    "m", "s", "min", "hours", "sec", "days", ":", "-", " ", "H", "x", "e3", "_"]


@FUZZ
@given(_mixed(_WALLTIME_PIECES))
def test_walltime_answers_or_raises_validation_error(text):
    try:
        seconds = v.parse_walltime(text)
    except v.ValidationError as e:
        assert e.field == "--walltime" and e.value == text and str(e).startswith(f"--walltime {text!r}: ")
        return
    assert type(seconds) is int and 0 < seconds <= v.MAX_WALLTIME
    # What hpcdist writes for each scheduler reads back as the same time.
    assert v.parse_walltime(format_slurm_time(seconds)) == seconds
    assert v.parse_walltime(format_pbs_walltime(seconds)) == seconds


_MEM_PIECES = ["1", "16", "0", "1.5", ".5", "1024", "99999999999999999", "K", "M", "G", "T", "B", "iB", "g", "gb",
               " ", "-", "x"]


@FUZZ
@given(_mixed(_MEM_PIECES))
def test_memory_answers_or_raises_validation_error(text):
    try:
        mb = v.parse_memory(text)
    except v.ValidationError as e:
        assert e.field == "--mem" and e.value == text
        return
    assert type(mb) is int and 0 < mb <= v.MAX_MEMORY_MB
    assert v.parse_memory(format_slurm_mem(mb)) == mb and v.parse_memory(format_pbs_mem(mb)) == mb


_DIRECTIVE_PIECES = ["#SBATCH", "#PBS", "#sbatch", "#", " ", "--", "-", "-l", "--gres=gpu:4", "--gpus-per-node=2",
                     "select=2", "nodes=1", "place=scatter", "=", ",", "gpu", "\n", "\x00"]


@FUZZ
@given(st.lists(_mixed(_DIRECTIVE_PIECES, 8), max_size=4), st.sampled_from(["slurm", "pbs"]),
       st.sampled_from([None, "pro", "torque"]), st.integers(0, 8))
def test_directives_answer_or_raise_validation_error(lines, scheduler, dialect, gpus):
    if scheduler == "slurm":
        dialect = None
    try:
        checked = [check_directive(line, scheduler) for line in lines]
        check_gpu_directives(scheduler, dialect, gpus, checked)
    except v.ValidationError as e:
        assert e.field == "--directive" and str(e)
        return
    prefix = {"slurm": "#SBATCH ", "pbs": "#PBS "}[scheduler]
    assert all(line.startswith(prefix) and "\n" not in line for line in checked)


_TEXT_CHECKS = [
    lambda t: check_job_name(t, "pbs"), lambda t: check_job_name(t, "slurm"),
    lambda t: v.check_name(t, "--queue"), lambda t: v.check_env_settable(t),
    lambda t: v.parse_env_assignment(t), lambda t: v.check_word(t, "--module"),
    lambda t: v.check_program(t, "--mpiexec"), v.check_array, v.check_dependency, v.check_mail,
    lambda t: v.check_positive(t, "--nodes"), lambda t: v.check_choice(t, "--launcher", ("torchrun", "srun")),
]


@FUZZ
@given(st.text(max_size=40), st.sampled_from(range(len(_TEXT_CHECKS))))
def test_value_checks_answer_or_raise_validation_error(text, which):
    try:
        _TEXT_CHECKS[which](text)
    except v.ValidationError as e:
        assert e.value == text and str(e).startswith(f"{e.field} {text!r}: ")


# --------------------------------------------------------------------------
# what the schedulers print
# --------------------------------------------------------------------------

def _answers_or_raises(call, *args, **kwargs):
    try:
        result = call(*args, **kwargs)
    except SchedulerOutputError as e:
        assert str(e).strip()
        return None
    assert result is None or isinstance(result, (JobId, JobStatus))
    if isinstance(result, JobStatus):
        assert result.state in STATES and (result.exit_code is None or type(result.exit_code) is int)
    return result


_SUBMIT_PIECES = ["Submitted batch job ", "123", "0", "-1", "12345678901234567890", ";", "cluster", "clu ster",
                  " on cluster ", "\n", "\r\n", "sbatch: error: ", "Batch job submission failed", ".server",
                  ".pbs01.example.org", "[]", "[7]", "0:", "qsub: ", "job rejected", " ", "\u0663", "\x00"]


@FUZZ
@given(_mixed(_SUBMIT_PIECES), _mixed(_SUBMIT_PIECES, 6), st.sampled_from([0, 0, 1, None, -9, 255]))
def test_submission_outputs_answer_or_raise(stdout, stderr, rc):
    jid = _answers_or_raises(parse_sbatch, stdout, stderr, rc)
    if jid is not None:
        assert jid.scheduler == "slurm" and jid.id in stdout and jid.matches(jid.id)
    jid = _answers_or_raises(parse_qsub, stdout, stderr, rc)
    if jid is not None:
        assert jid.scheduler == "pbs" and jid.id in stdout and jid.matches(jid.id)


_STATE_WORDS = ["RUNNING", "PENDING", "COMPLETED", "FAILED", "CANCELLED", "CANCELLED by 1000", "TIMEOUT",
                "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "REQUEUED", "BOOT_FAIL", "DEADLINE", "SUSPENDED",
                "COMPLETING", "CONFIGURING", "RESIZING", "SPECIAL_EXIT", "STAGE_OUT", "REVOKED", "R", "running"]
_QUEUE_PIECES = _STATE_WORDS + ["|", "||", "None", "(null)", "Resources", "Priority", "0:0", "1:0", "0:15",
                                "255:0", "9999999999:0", "0:9999999999", "-1:0", "\n", " ", "State|ExitCode",
                                "CLUSTER: foo", "+", ":"]


@FUZZ
@given(_mixed(_QUEUE_PIECES, 16))
def test_squeue_and_sacct_outputs_answer_or_raise(stdout):
    _answers_or_raises(parse_squeue, stdout)
    _answers_or_raises(parse_sacct, stdout)


def _qstat_samples():
    from test_scheduler_io import PRO_TEXT, pro_job, pro_json, torque_text

    samples = [PRO_TEXT.replace("{exit}", code) for code in ("0", "-29", "271", "3")]
    samples += [torque_text(state, code) for state, code in (("C", 0), ("C", 265), ("R", None), ("Q", None))]
    samples += [pro_json({"5487654.polaris-pbs-01": pro_job(state, code, used="00:10:00")})
                for state, code in (("F", 0), ("F", 271), ("R", None), ("Q", None), ("F", -29))]
    return samples


_QSTAT_SAMPLES = _qstat_samples()
_QSTAT_IDS = [JobId("5487654.polaris-pbs-01"), JobId("1098.torque-head"), JobId("5487654[].polaris"),
              JobId("5487654", scheduler="pbs"), JobId("1", scheduler="pbs")]


@FUZZ
@given(_spliced(_QSTAT_SAMPLES), st.sampled_from(_QSTAT_IDS))
def test_qstat_outputs_answer_or_raise(stdout, job):
    _answers_or_raises(parse_qstat_full_text, stdout, job)
    _answers_or_raises(parse_qstat_pro_json, stdout, job)


# --------------------------------------------------------------------------
# profile files
# --------------------------------------------------------------------------

_PROFILE_KEYS = ["scheduler", "dialect", "nodes", "gpus_per_node", "procs-per-node", "mem", "walltime", "queue",
                 "account", "qos", "job_name", "modules", "sources", "env", "directives", "conda", "venv",
                 "launcher", "template", "template_dir", "exclusive", "mpi", "python", "mpiexec", "queu",
                 "profile", "default", "ssh_port"]
_scalars = st.one_of(st.text(max_size=8), st.sampled_from(["slurm", "pbs", "local", "90m", "16G", "gpu", "pro",
                                                           "torchrun", "-x", "a=b", "#SBATCH --x", "time"]),
                     st.integers(-2, 10**20), st.booleans(), st.floats(allow_nan=False, allow_infinity=False))
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                       max_leaves=6)


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key, ensure_ascii=False)


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string, or invalid TOML: both are fine here
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(x) for x in value) + "]"
    return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in value.items()) + "}"


@st.composite
def _profile_files(draw):
    kind = draw(st.sampled_from(["tables", "tables", "bytes", "text"]))
    if kind == "bytes":
        return draw(st.binary(max_size=80))
    if kind == "text":
        return draw(st.text(max_size=80)).encode("utf-8", "surrogatepass")
    lines = []
    if draw(st.booleans()):
        lines.append(f"default = {_toml_value(draw(st.one_of(st.just('a'), _scalars)))}")
    for name in draw(st.lists(st.sampled_from(["a", "b", "c d"]), max_size=2, unique=True)):
        lines.append(f"[profiles.{_toml_key(name)}]")
        for key in draw(st.lists(st.sampled_from(_PROFILE_KEYS), max_size=5, unique=True)):
            lines.append(f"{_toml_key(key)} = {_toml_value(draw(_values))}")
    return "\n".join(lines).encode("utf-8", "surrogatepass")


@FUZZ
@given(_profile_files(), st.sampled_from([None, "a", "b"]))
def test_profile_files_answer_or_raise_profile_error(content, name):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "hpcdist.toml")
        with open(path, "wb") as f:
            f.write(content)
        try:
            profile = load_profile(name, [path])
        except ProfileError as e:
            assert path in str(e), str(e)
            return
    assert isinstance(profile, dict)
    # What a profile gives, the job spec takes or refuses by name: nothing else.
    try:
        spec = build_spec(merge(profile, {"script": "train.py"}), check_files=False)
    except v.ValidationError as e:
        assert str(e).startswith(e.field)
        return
    assert isinstance(spec, JobSpec)


# --------------------------------------------------------------------------
# the rank environment
# --------------------------------------------------------------------------

_ENV_NAMES = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK", "MASTER_ADDR",
              "MASTER_PORT", "TORCHELASTIC_RUN_ID", "LOCAL_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
              "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "PMI_LOCAL_RANK",
              "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMIX_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
              "SLURM_NODEID", "SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
              "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_GTIDS", "SLURM_JOB_ID", "SLURM_NNODES",
              "PBS_JOBID", "PBS_NODEFILE", "PBS_VNODENUM", "PBS_TASKNUM", "LSB_JOBID", "LSB_DJOB_RANKFILE",
              "JSM_NAMESPACE_RANK", "JSM_NAMESPACE_SIZE", "FLUX_TASK_RANK", "FLUX_JOB_SIZE", "PALS_RANKID",
              "PALS_NODEID", "HOROVOD_RANK", "HOROVOD_SIZE", "SUBMITIT_EXECUTOR", "HPCDIST_LAUNCHER",
              "HPCDIST_JOB_ID", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"]
_ENV_VALUES = st.one_of(st.integers(-3, 8).map(str), st.integers(0, 10**30).map(str), st.text(max_size=6),
                        st.sampled_from(["", " 1", "1 ", "+1", "1_0", "0x1", "\u0663", "\uff11", "1e3", "n[1-2]",
                                         "n1,n2", "2(x2)", "0,1", "torchrun", "openmpi", "slurm", "localhost",
                                         "::1", "65536", "-1", "batch", "extern", "nodefile", "rankfile"]))


@FUZZ
@given(st.dictionaries(st.sampled_from(_ENV_NAMES), _ENV_VALUES, max_size=12), _mixed(_NODEFILE_PIECES, 10))
def test_rank_environment_resolves_or_raises_distenverror(environ, file_text):
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("PBS_NODEFILE", "LSB_DJOB_RANKFILE"):  # a real file with fuzzed lines
            if environ.get(name) in ("nodefile", "rankfile"):
                environ[name] = os.path.join(tmp, name)
                with open(environ[name], "w", encoding="utf-8", errors="surrogatepass") as f:
                    f.write(file_text)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndistributedWarning)
            try:
                env = resolve(environ)
            except DistEnvError as e:
                assert str(e).strip()
                return
    assert isinstance(env, DistEnv)
    for field, reason in env.unknown.items():  # a field not said is None, with its reason
        assert reason.strip() and getattr(env, field) is None
    if None not in (env.rank, env.world_size):
        assert 0 <= env.rank < env.world_size
    if None not in (env.local_rank, env.local_world_size, env.world_size):
        assert 0 <= env.local_rank < env.local_world_size <= env.world_size
    assert env.master_addr is None or env.master_addr
    assert 0 <= env.master_port <= 65535


@FUZZ
@given(st.one_of(st.text(max_size=30), st.integers(0, 10**30).map(str),
                 st.from_regex(r"[0-9]{1,12}(\[[0-9]*\])?(\.[a-z0-9.-]{0,20})?", fullmatch=True)))
def test_port_for_any_job_id_lies_in_the_range(job_id):
    assume(job_id.strip())
    port = port_for_job(job_id)
    assert type(port) is int and PORT_BASE <= port < PORT_BASE + PORT_SPAN


# --------------------------------------------------------------------------
# Bugs the fuzzing found, kept as plain tests
# --------------------------------------------------------------------------

def test_a_garbled_slot_count_is_an_error_not_a_full_memory(tmp_path):
    """SLURM_TASKS_PER_NODE=99999999999 parsed, and `--format hosts` then filled the memory (OOM kill)."""
    import subprocess
    import sys

    from launch import clean_env

    from hpcdist.allocation import MAX_HOSTFILE_LINES, MAX_SLOTS_PER_HOST

    for nodelist, counts in (("n1", "99999999999"), ("n1", str(MAX_SLOTS_PER_HOST + 1))):
        try:
            Allocation.from_slurm(nodelist, counts)
        except AllocationError as e:
            assert "SLURM_TASKS_PER_NODE" in str(e) and "garbled" in str(e)
        else:
            raise AssertionError(f"{counts} slots on one host were taken")
    assert Allocation.from_slurm("n1", str(MAX_SLOTS_PER_HOST)).total_slots == MAX_SLOTS_PER_HOST
    big = Allocation.from_slurm("n[1-17]", f"{MAX_SLOTS_PER_HOST}(x17)")
    assert big.total_slots > MAX_HOSTFILE_LINES and big.to_hostfile("deepspeed").count("\n") == 17
    try:
        big.to_hostfile("hosts")
    except AllocationError as e:
        assert "one line per slot" in str(e)
    else:
        raise AssertionError("a hosts hostfile of more than a million lines was written")
    # The command, under a 1 GB address-space limit (a regression must not take the machine's memory).
    env = clean_env(SLURM_JOB_NODELIST="n1", SLURM_TASKS_PER_NODE="99999999999")
    proc = subprocess.run(
        ["bash", "-c", 'ulimit -v 1048576; exec "$0" -m hpcdist hostfile --format hosts', sys.executable],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "garbled" in proc.stderr and "MemoryError" not in proc.stderr, proc.stderr
    proc = subprocess.run(
        ["bash", "-c", 'ulimit -v 1048576; exec "$0" -m hpcdist hostfile --format hosts --slots-per-node 999999999',
         sys.executable], cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "garbled" in proc.stderr, proc.stderr


def test_a_profile_file_that_is_not_utf8_is_a_profile_error(tmp_path):
    """Found by test_profile_files_answer_or_raise_profile_error: b'\\x80' gave a UnicodeDecodeError."""
    path = tmp_path / "hpcdist.toml"
    path.write_bytes(b"\x80")
    try:
        load_profile(None, [str(path)])
    except ProfileError as e:
        assert str(path) in str(e) and "not UTF-8" in str(e)
    else:
        raise AssertionError("a file that is not UTF-8 was read as a profile file")
