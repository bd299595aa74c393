"""The commands' names, which module of :mod:`hpcdist.cli` runs each, what the dispatcher reads
of them before it imports one, and the error they raise for the user (where the user types
``hpcdist``, and in jobs).

A command's module is imported when that command runs: loading one costs Python ~1M
instructions, more than ``hpcdist status``'s own work (bench/RESULTS.md, issue 48).
"""

#: Each module's commands, in the order of the commands' reference (docs/reference/commands.md).
BY_MODULE = {
    "jobs": ("render", "submit", "status", "logs", "cancel", "doctor", "profiles"),
    "watch": ("watch", "stacks", "monitor"),
    "report": ("report",),
    "remote": ("connect", "disconnect"),
    "in_job": ("env", "hostfile", "supervise", "requeue", "job-setup", "agents", "restart"),
}
COMMANDS = tuple(name for names in BY_MODULE.values() for name in names)
MODULE = {name: module for module, names in BY_MODULE.items() for name in names}
#: The commands whose arguments are read by hand (their module's ``run_by_hand``): every job
#: script runs them, and argparse alone costs more than their work.
BY_HAND = ("job-setup", "agents", "restart", "monitor")
#: The commands a laptop may send to a cluster instead of running them (:mod:`hpcdist.cli.remote`).
SENT = ("submit", "render", "status", "logs", "cancel", "watch", "stacks", "report")
#: The commands whose flags are the job options (:mod:`hpcdist.submission.options`), each with the
#: flags it adds of its own (:mod:`hpcdist.cli.dash_values` reads them).
OWN_FLAGS = {"render": (), "submit": ("--dry-run", "--wait", "--json", "--resubmit", "--failed"),
             "doctor": ("--probe",)}


class CommandError(Exception):
    """A user-facing failure: printed as one message, exit status 1."""
