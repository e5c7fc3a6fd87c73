"""Go's ``encoding/json`` key matching, for JSON that Koordinator decodes into Go structs.

Go matches an object key to a struct field by the field's JSON name, preferring an exact match but
accepting one that differs only in case (``CPUEvictTimeWindowSeconds`` fills ``cpuEvictTimeWindowSeconds``).
Keys are taken in document order, so when two keys reach the same field **the later one wins**, whether
it is the exact spelling or not; an object decoded into a field that already holds one is merged into it
(fields and map entries the later object leaves out keep their earlier values), while arrays, scalars
and ``null`` replace. Keys that match no field are left for the caller (Go drops them).

Koordinator's users write ConfigMap JSON and NodeSLOs by hand, and its manuals sometimes spell a key with
different capitals than the struct tag; these functions give such documents the meaning Go gives them.
Only ASCII case is folded (field names are ASCII; Go's simple Unicode folding differs only beyond it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class GoFields:
    """The JSON names of one struct's fields: ``exact`` as written, ``folded`` lower-cased → name."""

    exact: frozenset[str]
    folded: Mapping[str, str]

    @classmethod
    def of(cls, names: Iterable[str]) -> GoFields:
        """Fields named ``names`` in declaration order; where two fold alike, the first keeps the folded
        spelling, as Go's field index does."""
        ordered = tuple(names)
        folded: dict[str, str] = {}
        for name in ordered:
            folded.setdefault(name.lower(), name)
        return cls(frozenset(ordered), folded)

    def fold(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """``obj`` with every key that matches a field renamed to that field, duplicates combined as Go
        combines them (see the module docstring). Unmatched keys are kept as they are."""
        if not (obj.keys() - self.exact):
            return dict(obj)
        out: dict[str, Any] = {}
        for key, value in obj.items():
            name = key if key in self.exact else self.folded.get(key.lower(), key)
            out[name] = merge_decoded(out.pop(name), value) if name in out else value
        return out


_MISSING = object()


def merge_decoded(earlier: Any, later: Any) -> Any:
    """What a field holds after ``earlier`` and then ``later`` were decoded into it: two objects merge
    (``later``'s keys last, in its order), anything else is replaced by ``later``."""
    if not (isinstance(earlier, Mapping) and isinstance(later, Mapping)):
        return later
    merged = dict(earlier)
    for key, value in later.items():
        previous = merged.pop(key, _MISSING)
        merged[key] = value if previous is _MISSING else merge_decoded(previous, value)
    return merged
