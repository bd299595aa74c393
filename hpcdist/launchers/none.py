"""No launcher: the program runs once, in the batch shell, and starts its own processes."""

from __future__ import annotations

from hpcdist.launchers import SHELL_SCRIPTS, Launcher, program


class Once(Launcher):
    name = "none"

    def words(self, spec):
        # A shell script of the user's (it starts its own processes: torchrun, mpirun): in bash.
        return ["bash" if spec.script.endswith(SHELL_SCRIPTS) else spec.python] + program(spec)

    def describe(self, spec, spread: str = ""):
        return "Run the training once, in this shell: it starts its own processes."


LAUNCHER = Once()
