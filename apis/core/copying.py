"""``dataclasses.replace`` for the frozen, slotted core types, without running ``__init__``.

``replace`` builds the copy through ``__init__`` (every field passed as a keyword, defaults and
``__post_init__`` run again): about 10 us for a :class:`~apis.core.types.Pod`. Hot paths that copy a pod
with a field or two changed (the bind echo on the watch, the assume step) copy the fields as they are.
"""

from __future__ import annotations

from dataclasses import fields
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")


@cache
def _field_names(cls: type) -> tuple[tuple[str, ...], frozenset[str]]:
    names = tuple(f.name for f in fields(cls))
    return names, frozenset(names)


def replace_fields(obj: T, /, **changes: Any) -> T:
    """A copy of the dataclass instance ``obj`` with ``changes`` applied, every other field (derived
    ones too: ``init=False`` fields set by ``__post_init__``) copied as it is. Equal to
    ``dataclasses.replace(obj, **changes)`` when no derived field depends on a changed one (a Pod's
    ``key`` depends on ``meta``'s namespace and name, so those must not change). An unknown field name
    raises ``TypeError`` as ``replace`` does."""
    cls: type = type(obj)
    names, known = _field_names(cls)
    if not changes.keys() <= known:
        raise TypeError(f"{cls.__name__} has no field(s) {sorted(changes.keys() - known)}")
    new: T = object.__new__(cls)
    setattr_ = object.__setattr__
    for name in names:
        setattr_(new, name, getattr(obj, name))
    for name, value in changes.items():
        setattr_(new, name, value)
    return new
