"""No launcher: the program runs once, in the batch shell, and starts its own processes."""

from __future__ import annotations

from hpcdist.launchers import Launcher, program


class Once(Launcher):
    name = "none"

    def words(self, spec):
        return [spec.python] + program(spec)

    def describe(self, spec, spread: str = ""):
        return "Run the training once, in this shell: it starts its own processes."


LAUNCHER = Once()
