"""Frozen records written out by hand: what ``@dataclass(frozen=True)`` gives, without its cost.

Making a dataclass imports :mod:`dataclasses` (inspect, re, enum) and generates
code: about 6% of ``hpcdist render``, and three times the cost of ``import
hpcdist.env; get_rank()``. :class:`Frozen` gives equality, hash and
immutability over the fields in ``_compared``; :class:`DataclassFields` makes
the dataclass metadata the first time something asks for it, so that
``dataclasses.fields``, ``asdict``, ``replace`` and ``is_dataclass`` work as on
a frozen dataclass. Used by :class:`hpcdist.submission.spec.JobSpec`,
:class:`hpcdist.env.DistEnv` and the schedulers' :class:`~hpcdist.schedulers.base.Record`.
"""


class DataclassFields:
    """``__dataclass_fields__`` and ``__dataclass_params__`` of a class, made on first use:
    the class's ``_dataclass_twin(dataclasses)`` returns a frozen dataclass with the same
    fields, whose metadata then replaces this descriptor on the class."""

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, instance, cls):
        import dataclasses

        twin = cls._dataclass_twin(dataclasses)
        for attribute in ("__dataclass_fields__", "__dataclass_params__"):
            setattr(cls, attribute, getattr(twin, attribute))
        return getattr(cls, self.name)


class Frozen:
    """Immutable, with equality and hash over the fields named in ``_compared`` (a subclass sets
    them in ``__init__`` with ``object.__setattr__``)."""

    __slots__ = ()
    #: The fields equality and hash look at.
    _compared: tuple = ()

    def _key(self) -> tuple:
        return tuple(getattr(self, name) for name in self._compared)

    def __setattr__(self, name, value):
        import dataclasses

        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name):
        import dataclasses

        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self):
        return hash(self._key())
