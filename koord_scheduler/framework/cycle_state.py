"""Typed per-cycle scratch space shared by the plugins of one scheduling cycle."""

from __future__ import annotations

from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")


class StateKey(Generic[T]):
    """A typed key into :class:`CycleState`. Create one per plugin datum at module level::

    PRE_FILTER_KEY: StateKey[PreFilterData] = StateKey("PreFilterNodeResourcesFit")
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"StateKey({self.name!r})"


class CycleState:
    """Data written by one extension point and read by a later one in the same cycle.

    ``skip_filter`` / ``skip_score`` hold the plugins whose PreFilter / PreScore returned Skip.
    ``clone`` is shallow per key: values must be treated as immutable or copied by their owner
    (the preemption dry-run clones the state and then re-runs AddPod/RemovePod on the clone).
    """

    __slots__ = ("_data", "skip_filter", "skip_score")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()

    def write(self, key: StateKey[T], value: T) -> None:
        self._data[key.name] = value

    def read(self, key: StateKey[T]) -> T:
        """Return the value; raise KeyError naming the key when no plugin wrote it this cycle."""
        try:
            return cast(T, self._data[key.name])
        except KeyError:
            raise KeyError(f"cycle state has no {key.name!r}") from None

    def get(self, key: StateKey[T]) -> T | None:
        value: T | None = self._data.get(key.name)  # (no typing.cast: a call on a hot path)
        return value

    def delete(self, key: StateKey[Any]) -> None:
        self._data.pop(key.name, None)

    def clone(self) -> CycleState:
        other = CycleState()
        for name, value in self._data.items():
            copier = getattr(value, "clone", None)
            other._data[name] = copier() if callable(copier) else value
        other.skip_filter = set(self.skip_filter)
        other.skip_score = set(self.skip_score)
        return other
