"""Reading launcher variables: strict integers, and a record of what was read.

Every lookup goes through :class:`EnvReader`, so ``hpcdist env --explain``
can list each variable that was consulted, set or not.
"""

from __future__ import annotations

from hpcdist.env.model import DistEnvError


class EnvReader:
    def __init__(self, environ: Mapping[str, str]):
        self.environ = environ
        #: name -> value (None when unset), in the order first consulted.
        self.consulted: dict[str, str | None] = {}

    def get(self, name: str) -> str | None:
        value = self.environ.get(name)
        self.consulted.setdefault(name, value)
        return value

    def has(self, name: str) -> bool:
        """Set at all, even to an empty string (torchrun's own test does so)."""
        return self.get(name) is not None

    def has_all(self, *names: str) -> bool:
        return all([self.has(n) for n in names])  # a list: record every name

    def has_any(self, *names: str) -> bool:
        return any([self.has(n) for n in names])

    def text(self, name: str) -> str | None:
        """A string value; set-but-empty is an error, not "unset"."""
        value = self.get(name)
        if value is None:
            return None
        if not value.strip():
            raise DistEnvError(
                f"{name} is set but empty. Unset it, or set it to a value "
                f"(look for a stray `export {name}=` in the job script)."
            )
        return value.strip()

    def integer(self, name: str, meaning: str) -> int | None:
        """A non-negative integer, or None when unset.

        ``meaning`` says what the variable is read as, for the error message.
        """
        value = self.get(name)
        if value is None:
            return None
        text = value.strip()
        # ASCII digits only: int() would also take "+1", "1_0" and other scripts' digits.
        if not (text.isascii() and text.isdigit()):
            raise DistEnvError(
                f"{name}={value!r} is not a non-negative integer; hpcdist reads it as the "
                f"{meaning}. It is normally set by the launcher: unset it or fix the "
                f"job script that sets it."
            )
        number = int(text)
        return number

    def first(self, names: tuple[str, ...], meaning: str) -> tuple[int, str] | None:
        """The first of ``names`` that is set, as ``(value, "NAME=value")``."""
        for name in names:
            number = self.integer(name, meaning)
            if number is not None:
                return number, f"{name}={number}"
        return None
