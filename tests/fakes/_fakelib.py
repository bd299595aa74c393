# FAKE scheduler support code, for hpcdist's tests only.
#
# The executables beside this file (sbatch, qsub, squeue, sacct, qstat, qdel,
# scancel) are fakes: no real Slurm or PBS exists on the machines that run
# hpcdist's tests.  Tests against real schedulers arrive with the
# test-cluster issue.  This module holds what the fakes share: reading the
# mode from the environment, logging each call, finding the job script.
"""Shared helpers for the fake scheduler commands (tests only)."""

import json
import os
import sys
import time

DEFAULT_JOBID = "12345"


def env(name, default):
    value = os.environ.get(name, "")
    return value if value else default


def jobid():
    """The numeric job id the fakes hand out (HPCDIST_FAKE_JOBID)."""
    return env("HPCDIST_FAKE_JOBID", DEFAULT_JOBID)


def _previous_calls(tool):
    log = os.environ.get("HPCDIST_FAKE_LOG")
    if not log:
        return 0
    count = 0
    try:
        with open(log, encoding="utf-8") as f:
            for line in f:
                try:
                    if json.loads(line).get("tool") == tool:
                        count += 1
                except ValueError:
                    pass
    except OSError:
        return 0
    return count


def mode(tool, default, known):
    """This call's mode from HPCDIST_FAKE_<TOOL>.

    A comma-separated list is a sequence: the n-th call of this tool (counted
    in HPCDIST_FAKE_LOG) uses the n-th item, and the last item repeats, so
    HPCDIST_FAKE_SQUEUE=pending,running,gone follows a job's life.
    """
    var = "HPCDIST_FAKE_" + tool.upper()
    items = [item.strip() for item in env(var, default).split(",") if item.strip()]
    if not items:
        items = [default]
    chosen = items[min(_previous_calls(tool), len(items) - 1)]
    if chosen not in known:
        die(
            "fake %s: unknown %s mode %r (known: %s)" % (tool, var, chosen, ", ".join(sorted(known))),
            2,
        )
    return chosen


def find_script(argv):
    """(script path or None, script text or None, stdin text or None).

    The script is the first argument that is an existing file and does not
    start with "-"; after "--" the rest is a command (PBS Pro "qsub -- cmd"),
    not a script.  With no script, like the real commands, read stdin.
    """
    script = None
    for arg in argv:
        if arg == "--":
            return None, None, None
        if not arg.startswith("-") and os.path.isfile(arg):
            script = arg
            break
    if script is not None:
        try:
            with open(script, encoding="utf-8", errors="replace") as f:
                return script, f.read(1 << 20), None
        except OSError:
            return script, None, None
    if sys.stdin is None or sys.stdin.isatty():
        return None, None, None
    try:
        return None, None, sys.stdin.read(1 << 20)
    except (OSError, ValueError):
        return None, None, None


def record(tool, argv, mode_name, **extra):
    """Append one JSON line for this call to $HPCDIST_FAKE_LOG (if set)."""
    log = os.environ.get("HPCDIST_FAKE_LOG")
    if not log:
        return
    entry = {"tool": tool, "argv": list(argv), "mode": mode_name, "cwd": os.getcwd()}
    entry.update(extra)
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def out(text):
    sys.stdout.write(text)
    sys.stdout.flush()


def die(message, code=1):
    sys.stderr.write(message.rstrip("\n") + "\n")
    sys.stderr.flush()
    sys.exit(code)


def hang():
    """Like a scheduler command stuck on an unreachable controller."""
    time.sleep(3600)
    sys.exit(1)


def hang_in_child():
    """Like a site's wrapper script whose sbatch hangs: the child keeps our stdout and
    stderr open, so whoever runs us must kill the whole process group, not just us."""
    import subprocess

    child = subprocess.Popen(["sleep", "3600"])
    log = os.environ.get("HPCDIST_FAKE_LOG")
    if log:  # the test checks that the child is gone too
        with open(log + ".child", "w") as f:
            f.write("%d\n" % child.pid)
    child.wait()
    sys.exit(1)


def option_value(argv, short, long):
    """The value of -X VALUE, -XVALUE, --long=VALUE or --long VALUE (last wins)."""
    value = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            break
        if short and arg == short and i + 1 < len(argv):
            value = argv[i + 1]
            i += 2
            continue
        if short and arg.startswith(short) and len(arg) > len(short) and not arg.startswith("--"):
            value = arg[len(short):]
        elif long and arg.startswith(long + "="):
            value = arg[len(long) + 1:]
        elif long and arg == long and i + 1 < len(argv):
            value = argv[i + 1]
            i += 2
            continue
        i += 1
    return value


def has_flag(argv, *flags):
    """Whether any of the flags is given, alone or (short ones) bundled: -fx."""
    for arg in argv:
        if arg == "--":
            return False
        if arg in flags:
            return True
        if arg.startswith("-") and not arg.startswith("--") and len(arg) > 2:
            letters = arg[1:]
            if all(c.isalpha() for c in letters) and any(
                len(f) == 2 and f[1] in letters for f in flags if not f.startswith("--")
            ):
                return True
    return False


def positional(argv, takes_value):
    """Arguments that are neither options nor option values."""
    result = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            result.extend(argv[i + 1:])
            break
        if arg.startswith("-"):
            if arg in takes_value:
                i += 2
                continue
            i += 1
            continue
        result.append(arg)
        i += 1
    return result
