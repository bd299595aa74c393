"""Tests for hpcdist.validate: every accepted form with its result, every
rejected form with what its message must say, and property tests."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcdist import validate as v
from hpcdist.schedulers.registry import (check_dialect, check_directive, check_gpu_directives,
                                         check_job_name, suggest_job_name)
from hpcdist.schedulers.pbs.submit import format_pbs_mem, format_pbs_walltime
from hpcdist.schedulers.slurm.submit import format_slurm_mem, format_slurm_time
from hpcdist.validate import (
    MAX_WALLTIME,
    ValidationError,
    check_choice,
    check_env_name,
    check_name,
    check_positive,
    check_text,
    describe_walltime,
    parse_env_assignment,
    parse_memory,
    parse_walltime,
)

H, D = 3600, 86400


def rejects(func, *args, must=(), **kwargs) -> ValidationError:
    """Call func expecting a ValidationError whose message contains every string in ``must``."""
    with pytest.raises(ValidationError) as info:
        func(*args, **kwargs)
    message = str(info.value)
    for part in must:
        assert part in message, f"{part!r} not in {message!r}"
    return info.value


# --------------------------------------------------------------------------
# ValidationError
# --------------------------------------------------------------------------

def test_error_attributes_and_message():
    e = ValidationError("--walltime", "90", "a bare number is minutes to Slurm but seconds to PBS.",
                        "Write 90m, 90s or 01:30:00.")
    assert isinstance(e, ValueError)
    assert (e.field, e.value, e.rule, e.fix) == ("--walltime", "90", e.rule, "Write 90m, 90s or 01:30:00.")
    assert str(e) == ("--walltime '90': a bare number is minutes to Slurm but seconds to PBS. "
                      "Write 90m, 90s or 01:30:00.")
    assert str(ValidationError("--nodes", 0, "must be a whole number of at least 1.")) == \
        "--nodes 0: must be a whole number of at least 1."


def test_error_pickles():
    e = pickle.loads(pickle.dumps(ValidationError("--mem", "16", "rule.", "fix.")))
    assert (e.field, e.value, e.rule, e.fix, str(e)) == ("--mem", "16", "rule.", "fix.", "--mem '16': rule. fix.")


def test_the_example_message_exactly():
    with pytest.raises(ValidationError) as info:
        parse_walltime("90")
    assert str(info.value) == ("--walltime '90': a bare number is minutes to Slurm but seconds to PBS. "
                               "Write 90m, 90s or 01:30:00.")
    assert info.value.field == "--walltime" and info.value.value == "90"


def test_import_is_cheap():
    code = ("import sys, hpcdist.validate; print(sorted(m for m in "
            "('difflib', 'fractions', 'decimal', 'shlex') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# --------------------------------------------------------------------------
# walltime
# --------------------------------------------------------------------------

WALLTIME_OK = [
    ("90m", 90 * 60), ("90M", 90 * 60), ("1h30m", 5400), ("1H30M", 5400), ("2h", 2 * H), ("45s", 45),
    ("1d", D), ("1d12h", D + 12 * H), ("1d12h30m15s", D + 12 * H + 30 * 60 + 15), ("1h30s", H + 30),
    ("1.5h", 5400), (".5d", 12 * H), ("0.5m", 30), ("1.5s", 2), ("2.4s", 2), ("0.5s", 1),
    ("1h 30m", 5400), (" 2h ", 2 * H), ("2 hours", 2 * H), ("30 min", 1800), ("1hour30mins", 5400),
    ("1 day 2 hrs", D + 2 * H), ("10sec", 10), ("365d", MAX_WALLTIME),
    ("01:30:00", 5400), ("1:30:00", 5400), ("00:00:01", 1), ("48:00:00", 48 * H), ("8760:00:00", MAX_WALLTIME),
    ("1-12:00:00", D + 12 * H), ("0-00:30:00", 1800), ("2-00:00:00", 2 * D), ("1-12:30", D + 12 * H + 1800),
    ("1-12", D + 12 * H), ("3-0", 3 * D), ("1-23:59:59", 2 * D - 1),
]


@pytest.mark.parametrize("text,seconds", WALLTIME_OK)
def test_walltime_accepted(text, seconds):
    assert parse_walltime(text) == seconds


WALLTIME_BAD = [
    ("90", ["--walltime", "'90'", "bare number", "minutes to Slurm", "seconds to PBS", "90m", "90s", "01:30:00"]),
    ("5", ["'5'", "5m", "5s", "00:05:00"]),
    ("1.5", ["bare number", "1.5m", "1.5s", "00:01:30"]),
    ("90:00", ["'90:00'", "minutes:seconds", "hours:minutes", "01:30:00", "90m", "90:00:00", "90h"]),
    ("1:30", ["'1:30'", "minutes:seconds", "00:01:30", "1m30s", "01:30:00", "1h30m"]),
    ("1:75", ["'1:75'", "00 to 59"]),
    ("0", ["more than zero"]), ("0m", ["more than zero"]), ("00:00:00", ["more than zero"]),
    ("0:00", ["more than zero"]), ("0-0", ["more than zero"]), ("0.1s", ["0 seconds"]),
    ("-5", ["negative"]), ("-1h", ["negative"]), ("-01:00:00", ["negative"]),
    ("", ["is empty", "90m"]), ("   ", ["is empty"]),
    ("junk", ["'junk'", "not a walltime", "1h30m", "HH:MM:SS"]), ("1h30", ["no unit", "1h30m"]),
    ("1d12", ["no unit", "1d12h"]), ("1w", ["unknown unit 'w'", "d (days)"]), ("5ms", ["unknown unit"]),
    ("30m1h", ["largest first"]), ("1h1h", ["largest first"]), ("1.5h30m", ["decimal", "1.5h"]),
    ("366d", ["365-day"]), ("8761:00:00", ["365-day"]), ("365d1s", ["365-day"]),
    ("01:60:00", ["60 minutes", "00 to 59"]), ("01:00:60", ["60 seconds", "00 to 59"]),
    ("1-24:00:00", ["24 hours", "0 to 23", "2-00:00:00", "48:00:00"]), ("1-12:60", ["60 minutes"]),
    ("1:2:3:4", ["not a walltime"]), ("1-", ["not a walltime"]), ("h", ["not a walltime"]),
    ("1.h", ["not a walltime"]), ("UNLIMITED", ["not a walltime"]), ("1e3s", ["unknown unit 'e'"]),
    ("１h", ["not a walltime"]),  # full-width digit
    ("1\u212a", ["not a walltime"]),  # Kelvin sign: not a unit even case-insensitively
    ("9" * 65, ["too long"]),
    ("1 h 3 0 m", ["not a walltime"]),
]


@pytest.mark.parametrize("text,must", WALLTIME_BAD)
def test_walltime_rejected(text, must):
    e = rejects(parse_walltime, text, must=must)
    assert e.field == "--walltime" and e.value == text
    assert str(e).startswith(f"--walltime {text!r}: ")


def test_walltime_field_and_non_text():
    rejects(parse_walltime, "90", field="--time", must=["--time '90'"])
    rejects(parse_walltime, 90, must=["--walltime 90:", "bare number", "90m"])
    rejects(parse_walltime, None, must=["must be text"])
    rejects(parse_walltime, True, must=["must be text"])


@pytest.mark.parametrize("seconds,text", [
    (45, "45 s"), (60, "1 min"), (5400, "1 h 30 min"), (3600, "1 h"), (3601, "1 h 0 min 1 s"),
    (2 * D + 300, "2 d 0 h 5 min"), (D, "1 d"), (D + 1, "1 d 0 h 0 min 1 s"), (0, "0 s"), (90, "1 min 30 s"),
])
def test_describe_walltime(seconds, text):
    assert describe_walltime(seconds) == text


@pytest.mark.parametrize("seconds,slurm,pbs", [
    (1, "00:00:01", "00:00:01"), (5400, "01:30:00", "01:30:00"), (D - 1, "23:59:59", "23:59:59"),
    (D, "1-00:00:00", "24:00:00"), (49 * H, "2-01:00:00", "49:00:00"),
    (MAX_WALLTIME, "365-00:00:00", "8760:00:00"), (10 * D + 3723, "10-01:02:03", "241:02:03"),
])
def test_format_walltime(seconds, slurm, pbs):
    assert format_slurm_time(seconds) == slurm
    assert format_pbs_walltime(seconds) == pbs


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "60"])
def test_format_walltime_rejects_non_positive_ints(bad):
    for func in (format_slurm_time, format_pbs_walltime, format_slurm_mem, format_pbs_mem):
        if func is format_slurm_mem and type(bad) is int and bad == 0:
            assert func(bad) == "0"  # --mem 0: all of each node's memory (sbatch --mem=0)
            continue
        with pytest.raises(ValueError):
            func(bad)


@settings(max_examples=1000, deadline=None)
@given(st.integers(min_value=1, max_value=MAX_WALLTIME))
def test_walltime_round_trips(seconds):
    assert parse_walltime(format_slurm_time(seconds)) == seconds
    assert parse_walltime(format_pbs_walltime(seconds)) == seconds


# --------------------------------------------------------------------------
# memory
# --------------------------------------------------------------------------

MEMORY_OK = [
    ("16G", 16384), ("16GB", 16384), ("16gb", 16384), ("16g", 16384), ("16GiB", 16384), ("16 G", 16384),
    ("500M", 500), ("500MB", 500), ("500mb", 500), ("500MiB", 500), ("1T", 1024 ** 2), ("1tb", 1024 ** 2),
    ("1.5G", 1536), ("1.001G", 1026), ("0.5G", 512), (".5G", 512), ("1.5M", 2), ("1024K", 1), ("1025K", 2),
    ("2048KB", 2), ("1500kib", 2), (" 4G ", 4096), ("1024T", 1024 ** 3),
]


@pytest.mark.parametrize("text,mb", MEMORY_OK)
def test_memory_accepted(text, mb):
    assert parse_memory(text) == mb


MEMORY_BAD = [
    ("16", ["--mem '16'", "bare number", "megabytes to Slurm", "bytes to PBS", "16M", "16G"]),
    ("1.5", ["bare number", "1.5G"]),
    ("512K", ["less than 1 MB"]), ("0.5M", ["less than 1 MB"]), ("1023K", ["less than 1 MB"]),
    ("0G", ["more than zero"]), ("0", ["bare number"]), ("-16G", ["negative", "16G"]),
    ("16X", ["unknown unit 'X'", "16G"]), ("16B", ["unknown unit"]), ("16 bytes", ["unknown unit"]),
    ("", ["is empty"]), ("G", ["not an amount"]), ("16G500M", ["not an amount"]), ("1,5G", ["not an amount"]),
    ("1025T", ["more than 1 PB"]), ("9" * 70 + "G", ["too long"]), ("１６G", ["not an amount"]),
    ("1\u212a", ["not an amount"]),  # Kelvin sign is not K
]


@pytest.mark.parametrize("text,must", MEMORY_BAD)
def test_memory_rejected(text, must):
    e = rejects(parse_memory, text, must=must)
    assert e.field == "--mem" and e.value == text


def test_memory_field():
    rejects(parse_memory, "16", field="--mem-per-gpu", must=["--mem-per-gpu '16'"])


@pytest.mark.parametrize("mb,slurm,pbs", [
    (16384, "16G", "16gb"), (500, "500M", "500mb"), (1024, "1G", "1gb"), (1536, "1536M", "1536mb"),
    (1, "1M", "1mb"), (1024 ** 2, "1024G", "1024gb"),
])
def test_format_memory(mb, slurm, pbs):
    assert format_slurm_mem(mb) == slurm
    assert format_pbs_mem(mb) == pbs
    assert parse_memory(slurm) == mb and parse_memory(pbs) == mb


# --------------------------------------------------------------------------
# job names
# --------------------------------------------------------------------------

JOB_NAME_OK = [
    ("train", "pbs"), ("train", "slurm"), ("train", "local"), ("train_v2.1-a+b", "pbs"),
    ("a" * 230, "pbs"), ("a" * 200, "slurm"), ("a,b:c@d=e", "slurm"), ("exp=3", "slurm"),
    ("_x", "pbs"), (".hidden", "slurm"), ("x.py", "pbs"), ("1", "pbs"),
]


@pytest.mark.parametrize("name,scheduler", JOB_NAME_OK)
def test_job_name_accepted(name, scheduler):
    assert check_job_name(name, scheduler) == name


JOB_NAME_BAD = [
    ("my job", "pbs", ["--job-name 'my job'", "' '", "position 3", "Try my_job."]),
    ("my job", "slurm", ["' '", "position 3", "Try my_job."]),
    ("a=b", "pbs", ["'='", "position 2", "Try a_b."]),
    ("run%j", "slurm", ["'%'", "position 4", "Try run_j."]),
    ("run%j", "local", ["'%'", "Try run_j."]),
    ("a,b", "pbs", ["','", "position 2"]),
    (".hidden", "pbs", ["dot", "Try hidden."]),
    ("..x y", "pbs", ["' '", "position 4", "Try x_y."]),
    ("a" * 231, "pbs", ["231 characters", "at most 230", "Try " + "a" * 230 + "."]),
    ("a" * 201, "slurm", ["201 characters", "at most 200"]),
    ("a" * 201, "local", ["at most 200"]),
    ("", "pbs", ["is empty"]), ("é", "slurm", ["'é'", "position 1", "Try job."]),
    ("a/b", "pbs", ["'/'", "Try a_b."]), ("a\nb", "slurm", ["'\\n'", "position 2"]),
]


@pytest.mark.parametrize("name,scheduler,must", JOB_NAME_BAD)
def test_job_name_rejected(name, scheduler, must):
    e = rejects(check_job_name, name, scheduler, must=must)
    assert e.field == "--job-name" and e.value == name


def test_job_name_bad_scheduler():
    rejects(check_job_name, "x", "slrum", must=["--scheduler 'slrum'", "Did you mean slurm?"])
    rejects(check_job_name, 3, "pbs", must=["must be text"])


@pytest.mark.parametrize("text,pbs,slurm", [
    (".train v2.py", "train_v2", "train_v2"), ("train.py", "train", "train"), ("train.PY", "train", "train"),
    ("train", "train", "train"), ("", "job", "job"), (".py", "job", "job"), ("...", "job", "job"),
    ("___", "job", "job"), ("my  job (v2).py", "my_job_v2_", "my_job_v2_"), ("a=b.py", "a_b", "a=b"),
    ("train/run.py", "train_run", "train_run"), ("résumé.py", "r_sum_", "r_sum_"),
    ("exp%j.py", "exp_j", "exp_j"), ("x" * 300, "x" * 230, "x" * 200), ("a.b.c.py", "a.b.c", "a.b.c"),
])
def test_suggest_job_name(text, pbs, slurm):
    assert suggest_job_name(text, "pbs") == pbs
    assert suggest_job_name(text, "slurm") == slurm
    assert suggest_job_name(text, "local") == slurm


# --------------------------------------------------------------------------
# queue / account / QOS names
# --------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["gpu", "normal@pbs-server", "a.b_c+d-e", "x" * 64, "A100", "q-"])
def test_name_accepted(value):
    assert check_name(value, "--queue") == value


@pytest.mark.parametrize("value,must", [
    ("gpu queue", ["--queue 'gpu queue'", "' '", "position 4", "Try gpu_queue."]),
    ("-gpu", ["must not start with '-'", "option", "Try gpu."]),
    ("x" * 65, ["65 characters", "at most 64"]),
    ("", ["is empty", "leave --queue out"]),
    ("gpu;rm", ["';'", "position 4", "Try gpu_rm."]),
    ("gpü", ["'ü'", "position 3"]),
])
def test_name_rejected(value, must):
    e = rejects(check_name, value, "--queue", must=must)
    assert e.field == "--queue"


def test_name_uses_field():
    rejects(check_name, "my account", "--account", must=["--account 'my account'"])
    rejects(check_name, None, "--qos", must=["--qos None", "must be text"])


# --------------------------------------------------------------------------
# positive integers
# --------------------------------------------------------------------------

@pytest.mark.parametrize("value,allow_zero,result", [
    (1, False, 1), (4, False, 4), ("4", False, 4), (" 8 ", False, 8), ("004", False, 4),
    (0, True, 0), ("0", True, 0), (2 ** 31 - 1, False, 2 ** 31 - 1), ("0" * 30 + "7", False, 7),
])
def test_positive_accepted(value, allow_zero, result):
    assert check_positive(value, "--nodes", allow_zero=allow_zero) == result


@pytest.mark.parametrize("value,allow_zero,must", [
    (0, False, ["--nodes 0: must be a whole number of at least 1."]),
    ("0", False, ["--nodes '0': must be a whole number of at least 1."]),
    (-1, True, ["at least 0"]), (True, False, ["True"]), (False, True, ["False"]), (2.0, False, ["2.0"]),
    ("2.5", False, ["whole number"]), ("-1", False, ["whole number"]), ("+1", False, ["whole number"]),
    ("", False, ["whole number"]), ("٣", False, ["whole number"]), ("²", False, ["whole number"]),
    (None, False, ["whole number"]), ("1e3", False, ["whole number"]),
    # More than a scheduler or launcher reads, as an int or as digits (int() refuses 4300 of them).
    ("9" * 19, False, ["is more than 2147483647"]), (10 ** 30, False, ["is more than 2147483647"]),
    (2 ** 31, False, ["is more than 2147483647"]), ("9" * 5000, False, ["extra digits"]),
])
def test_positive_rejected(value, allow_zero, must):
    e = rejects(check_positive, value, "--nodes", allow_zero=allow_zero, must=must)
    assert e.field == "--nodes" and e.value is value and str(e).startswith(f"--nodes {value!r}: ")


def test_positive_message_exactly():
    with pytest.raises(ValidationError) as info:
        check_positive(0, "--nodes")
    assert str(info.value) == "--nodes 0: must be a whole number of at least 1."


# --------------------------------------------------------------------------
# environment
# --------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["FOO", "_x", "OMP_NUM_THREADS", "a1", "_"])
def test_env_name_accepted(name):
    assert check_env_name(name) == name


@pytest.mark.parametrize("name,must", [
    ("1A", ["--env '1A'", "starts with a digit", "Try _1A."]),
    ("MY-VAR", ["'-'", "position 3", "Try MY_VAR."]),
    ("A B", ["' '", "position 2", "Try A_B."]),
    ("", ["is empty"]), ("É", ["'É'"]), ("A\n", ["'\\n'", "position 2"]),
])
def test_env_name_rejected(name, must):
    rejects(check_env_name, name, must=must)


def test_env_name_field():
    rejects(check_env_name, "1A", "--propagate", must=["--propagate '1A'"])


@pytest.mark.parametrize("text,pair", [
    ("A=1", ("A", "1")), ("A=", ("A", "")), ("A=b=c", ("A", "b=c")), ("PATH=/x:$PATH", ("PATH", "/x:$PATH")),
    ("A= spaced out ", ("A", " spaced out ")), ("A=line\nbreak", ("A", "line\nbreak")), ("A='q\"", ("A", "'q\"")),
])
def test_env_assignment_accepted(text, pair):
    assert parse_env_assignment(text) == pair


@pytest.mark.parametrize("text,must", [
    ("A", ["--env 'A'", "no '='", "--env A=value"]),
    ("not a name", ["no '='", "--env NAME=value"]),
    ("", ["no '='", "--env NAME=value"]),
    ("=x", ["no variable name"]),
    ("MY-VAR=1", ["'MY-VAR'", "'-'", "position 3", "Try MY_VAR."]),
    ("1A=1", ["starts with a digit"]),
    ("A=\x00", ["NUL"]),
])
def test_env_assignment_rejected(text, must):
    e = rejects(parse_env_assignment, text, must=must)
    assert e.value == text


# --------------------------------------------------------------------------
# text for quoting
# --------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["", "gcc/12.2", "my env", "$(rm -rf /)", "a'b\"c", "\t", "é"])
def test_text_accepted(value):
    assert check_text(value, "--module") == value


def test_text_rejected_and_newlines():
    rejects(check_text, "a\nb", "--module", must=["--module 'a\\nb'", "line break", "one line"])
    rejects(check_text, "a\rb", "--source", must=["--source", "line break"])
    rejects(check_text, "a\0b", "ARGS", allow_newline=True, must=["NUL"])
    rejects(check_text, 3, "--conda", must=["must be text"])
    assert check_text("a\nb\r", "ARGS", allow_newline=True) == "a\nb\r"


# --------------------------------------------------------------------------
# raw directives
# --------------------------------------------------------------------------

@pytest.mark.parametrize("line,scheduler,result", [
    ("--constraint=a100", "slurm", "#SBATCH --constraint=a100"),
    ("#SBATCH --constraint=a100", "slurm", "#SBATCH --constraint=a100"),
    ("  #SBATCH   --constraint=a100  ", "slurm", "#SBATCH --constraint=a100"),
    ("#sbatch --exclusive", "slurm", "#SBATCH --exclusive"),
    ("-C a100 --exclusive", "slurm", "#SBATCH -C a100 --exclusive"),
    ("-l place=scatter", "pbs", "#PBS -l place=scatter"),
    ("#PBS -l place=scatter", "pbs", "#PBS -l place=scatter"),
    ("#PBS -W group_list=abc", "pbs", "#PBS -W group_list=abc"),
    ("--comment=$HOME", "slurm", "#SBATCH --comment=$HOME"),
])
def test_directive_accepted(line, scheduler, result):
    assert check_directive(line, scheduler) == result


@pytest.mark.parametrize("line,scheduler,must", [
    ("#PBS -l place=scatter", "slurm", ["--directive '#PBS -l place=scatter'", "PBS directive", "--scheduler pbs"]),
    ("#SBATCH --exclusive", "pbs", ["Slurm directive", "--scheduler slurm"]),
    ("#SBATCH", "slurm", ["no option"]), ("#PBS   ", "pbs", ["no option"]), ("", "slurm", ["no option"]),
    ("   ", "pbs", ["no option"]),
    ("--a\n--b", "slurm", ["line break"]), ("--a\r", "slurm", ["line break"]), ("--a\0", "slurm", ["NUL"]),
    ("# a comment", "slurm", ["#SBATCH"]), ("#$ -pe smp 4", "pbs", ["#PBS"]), ("#BSUB -n 4", "slurm", ["#SBATCH"]),
    ("constraint=a100", "slurm", ["start with '-'", "#SBATCH --constraint=a100"]),
    ("place=scatter", "pbs", ["start with '-'", "#PBS -l place=scatter"]),
    ("#PBS l place=scatter", "pbs", ["start with '-'", "#PBS -l place=scatter"]),
    ("--exclusive", "local", ["local backend"]),
    ("--x", "sge", ["--scheduler 'sge'"]),
])
def test_directive_rejected(line, scheduler, must):
    rejects(check_directive, line, scheduler, must=must)


# --------------------------------------------------------------------------
# GPU / node request clashes
# --------------------------------------------------------------------------

@pytest.mark.parametrize("scheduler,dialect,gpus,directives", [
    ("slurm", None, 4, ["--constraint=a100", "#SBATCH --exclusive"]),
    ("slurm", None, 0, ["--gres=gpu:4"]),
    ("slurm", None, 0, ["--gpus-per-node=4"]),
    ("slurm", None, 4, ["--gres=tmpfs:10G"]),
    ("slurm", None, 4, ["--gpus-per-task=1"]),
    ("slurm", None, 4, ["--comment=--gres=gpu:1"]),
    ("pbs", None, 4, ["-l place=scatter:excl", "-l walltime=1:00:00"]),
    ("pbs", "pro", 0, ["#PBS -W depend=afterok:1"]),
    ("pbs", "torque", 4, ["-l pmem=4gb", "-n"]),
    ("local", None, 4, []),
    ("slurm", None, 4, []),
])
def test_gpu_directives_accepted(scheduler, dialect, gpus, directives):
    assert check_gpu_directives(scheduler, dialect, gpus, directives) is None


@pytest.mark.parametrize("scheduler,dialect,gpus,directives,must", [
    ("slurm", None, 4, ["--gres=gpu:4"], ["'--gres=gpu:4'", "--gres=gpu", "--gpus-per-node", "Drop one"]),
    ("slurm", None, 4, ["#SBATCH --gres=gpu:a100:4"], ["--gres=gpu", "--gpus-per-node 4"]),
    ("slurm", None, 2, ["--gres gpu:2"], ["--gres=gpu"]),
    ("slurm", None, 2, ["--gres=tmpfs:1G,gpu:2"], ["--gres=gpu"]),
    ("slurm", None, 0, ["--gres=gpu:4", "--gpus-per-node=4"], ["--gres=gpu", "'--gpus-per-node=4'"]),
    ("slurm", None, 4, ["--gpus-per-node=4"], ["'--gpus-per-node=4'", "already writes", "Drop the directive"]),
    ("slurm", None, 4, ["#SBATCH --gpus-per-node 4"], ["already writes"]),
    ("pbs", "pro", 0, ["-l nodes=2:ppn=4"], ["nodes=", "old", "mix"]),
    ("pbs", "torque", 4, ["-l nodes=2:ppn=4:gpus=4"], ["-l nodes", "--template"]),
    ("pbs", "torque", 4, ["-l select=2"], ["PBS Pro syntax", "Torque"]),
])
def test_gpu_directives_rejected(scheduler, dialect, gpus, directives, must):
    e = rejects(check_gpu_directives, scheduler, dialect, gpus, directives, must=must)
    assert e.field == "--directive"


def test_gpu_directives_check_their_arguments():
    rejects(check_gpu_directives, "slurm", "pro", 0, [], must=["--dialect"])
    rejects(check_gpu_directives, "pbs", "torq", 0, [], must=["Did you mean torque?"])


# --------------------------------------------------------------------------
# dialects and choices
# --------------------------------------------------------------------------

@pytest.mark.parametrize("scheduler,dialect,result", [
    ("pbs", None, "pro"), ("pbs", "", "pro"), ("pbs", "pro", "pro"), ("pbs", "torque", "torque"),
    ("pbs", "Torque", "torque"), ("pbs", "openpbs", "pro"), ("pbs", "PBSPro", "pro"),
    ("slurm", None, None), ("local", None, None), ("slurm", "", None),
])
def test_dialect_accepted(scheduler, dialect, result):
    assert check_dialect(scheduler, dialect) == result


@pytest.mark.parametrize("scheduler,dialect,must", [
    ("slurm", "pro", ["--dialect 'pro'", "only PBS", "Drop --dialect"]),
    ("local", "torque", ["only PBS"]),
    ("pbs", "toque", ["--dialect 'toque'", "pro, torque", "Did you mean torque?"]),
    ("pbs", "moab", ["pro, torque"]),
    ("lsf", None, ["--scheduler 'lsf'", "local, slurm, pbs"]),
])
def test_dialect_rejected(scheduler, dialect, must):
    rejects(check_dialect, scheduler, dialect, must=must)


LAUNCHERS = ("torchrun", "deepspeed", "mpirun", "srun", "accelerate")


@pytest.mark.parametrize("value,result", [("torchrun", "torchrun"), ("TorchRun", "torchrun"), (" srun ", "srun")])
def test_choice_accepted(value, result):
    assert check_choice(value, "--launcher", LAUNCHERS) == result


@pytest.mark.parametrize("value,must", [
    ("torchrn", ["--launcher 'torchrn'", "torchrun, deepspeed, mpirun, srun, accelerate", "Did you mean torchrun?"]),
    ("deepspeeed", ["Did you mean deepspeed?"]),
    ("MPIRUM", ["Did you mean mpirun?"]),
    ("xyz", ["must be one of"]),
    ("", ["must be one of"]),
    (None, ["must be one of"]),
])
def test_choice_rejected(value, must):
    e = rejects(check_choice, value, "--launcher", LAUNCHERS, must=must)
    if value in ("xyz", ""):
        assert "Did you mean" not in str(e)


# --------------------------------------------------------------------------
# properties: arbitrary text either parses or raises ValidationError
# --------------------------------------------------------------------------

# Text near the grammar finds more edge cases than uniform unicode alone.
_near = st.text(alphabet="0123456789.:-+ dhmsDHMSkKgGtTbBiI=_xé\n\0\u212a", max_size=20)
_any_text = st.one_of(st.text(max_size=80), _near)


@settings(max_examples=1500, deadline=None)
@given(_any_text)
def test_parsers_only_raise_validation_error(text):
    for func in (parse_walltime, parse_memory, parse_env_assignment):
        try:
            result = func(text)
        except ValidationError as e:
            assert e.value == text and str(e).startswith(f"{e.field} {text!r}: ")
        else:
            if func is parse_walltime:
                assert isinstance(result, int) and 0 < result <= MAX_WALLTIME
            elif func is parse_memory:
                assert isinstance(result, int) and result > 0
            else:
                name, value = result
                assert f"{name}={value}" == text
    for scheduler in ("pbs", "slurm", "local"):
        try:
            assert check_job_name(text, scheduler) == text
        except ValidationError as e:
            assert e.value == text


@settings(max_examples=1500, deadline=None)
@given(st.one_of(st.text(max_size=300), st.text(alphabet=". _-=%/py", max_size=12)))
def test_suggested_job_names_always_pass(text):
    for scheduler in ("pbs", "slurm", "local"):
        name = suggest_job_name(text, scheduler)
        assert check_job_name(name, scheduler) == name
    # the PBS suggestion is also a valid Slurm name when short enough
    pbs = suggest_job_name(text, "pbs")
    if len(pbs) <= 200:
        assert check_job_name(pbs, "slurm") == pbs


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=1024 ** 3))
def test_memory_round_trips(mb):
    assert parse_memory(format_slurm_mem(mb)) == mb
    assert parse_memory(format_pbs_mem(mb)) == mb


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=MAX_WALLTIME))
def test_describe_walltime_reads_back(seconds):
    # "1 d 0 h 5 min" -> "1d0h5m" parses back to the same number of seconds
    compact = describe_walltime(seconds).replace(" min", "m").replace(" ", "")
    assert parse_walltime(compact) == seconds


def test_module_exports():
    for name in v.__all__:
        assert hasattr(v, name), name


@pytest.mark.parametrize("scheduler,starts", [("slurm", "slurm"), ("local", "local")])
def test_pbs_spread_is_refused_where_pbs_is_not_the_scheduler(scheduler, starts):
    """--pbs-spread chooses PBS's way to start the node agents: elsewhere it is a mistake, named."""
    from hpcdist.submission.spec import build_spec

    with pytest.raises(ValidationError) as caught:
        build_spec({"script": "t.py", "scheduler": scheduler, "nodes": 2, "pbs_spread": "pbsdsh"}, check_files=False)
    e = caught.value
    assert (e.field, e.value) == ("--pbs-spread", "pbsdsh")
    assert "is a PBS setting" in str(e) and f"--scheduler is {scheduler}" in str(e) and "--scheduler pbs" in e.fix
    spec = build_spec({"script": "t.py", "scheduler": "pbs", "nodes": 2, "pbs_spread": "pbsdsh"}, check_files=False)
    assert spec.pbs_spread == "pbsdsh"
    with pytest.raises(ValidationError, match="--pbs-spread.*mpi, pbsdsh"):
        build_spec({"script": "t.py", "scheduler": "pbs", "pbs_spread": "ssh"}, check_files=False)
    for launcher in ("mpirun", "none", "deepspeed"):
        with pytest.raises(ValidationError, match=f"--launcher {launcher} runs once, from the first node"):
            build_spec({"script": "t.py", "scheduler": "pbs", "nodes": 2, "launcher": launcher,
                        "pbs_spread": "pbsdsh"}, check_files=False)
