"""``FrozenDict``: the immutable, hashable mapping used for every mapping field of the core types.

The core types are frozen dataclasses, and the scheduler keys caches and sets by them (equivalence
classes, selector signatures), so their mapping fields (labels, annotations, node selectors, resource
lists, conditions) must hash. ``FrozenDict`` is a ``dict`` subclass, so reads cost exactly what a
``dict`` read costs and ``json.dumps`` / ``==`` / ``isinstance(x, dict)`` keep working; every mutator
raises ``TypeError``. Copying operations that return a new object (``copy()``, ``|``) return a plain,
mutable ``dict``.
"""

from __future__ import annotations

from typing import Any, NoReturn, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class FrozenDict(dict[K, V]):
    """An immutable ``dict``. Hash is that of its item set, computed once on first use."""

    __slots__ = ("_hash",)

    _hash: int

    def __hash__(self) -> int:  # type: ignore[override]
        try:
            return self._hash
        except AttributeError:
            self._hash = hash(frozenset(self.items()))
            return self._hash

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"

    def __reduce__(self) -> tuple[Any, ...]:
        # dict's default protocol rebuilds the object through __setitem__, which raises here.
        return (type(self), (dict(self),))

    def __copy__(self) -> FrozenDict[K, V]:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict[K, V]:
        from copy import deepcopy

        return type(self)({deepcopy(k, memo): deepcopy(v, memo) for k, v in self.items()})

    def _immutable(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("FrozenDict is immutable")

    __setitem__ = _immutable
    __delitem__ = _immutable
    __ior__ = _immutable
    clear = _immutable
    pop = _immutable
    popitem = _immutable
    setdefault = _immutable
    update = _immutable


EMPTY: FrozenDict[Any, Any] = FrozenDict()
"""A shared empty ``FrozenDict`` (safe to share: it cannot change)."""
