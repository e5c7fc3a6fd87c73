"""TaintToleration's maths as pure functions of plain values.

Nodes are grouped by their distinct taint sets: clusters have few tainted nodes and fewer distinct taint
sets, so tolerations are matched once per set, not once per node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from apis.core.tolerations import SCHEDULING_EFFECTS, find_untolerated_taint, tolerations_tolerate
from apis.core.types import Taint, TaintEffect, Toleration
from koord_scheduler.framework.snapshot import BoolArray, IntArray, Positions

TaintSet = tuple[Taint, ...]
HARD_EFFECTS = SCHEDULING_EFFECTS
"""The effects Filter looks at (NoSchedule, NoExecute); PreferNoSchedule only scores."""
PREFER_EFFECTS = frozenset({TaintEffect.PREFER_NO_SCHEDULE})


def first_untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """``FindMatchingUntoleratedTaint`` over the NoSchedule/NoExecute taints: the first one not tolerated."""
    return find_untolerated_taint(taints, tolerations, HARD_EFFECTS)


def prefer_no_schedule_tolerations(tolerations: Sequence[Toleration]) -> tuple[Toleration, ...]:
    """PreScore's ``getAllTolerationPreferNoSchedule``: tolerations with effect PreferNoSchedule or empty."""
    return tuple(t for t in tolerations if t.effect is None or t.effect == TaintEffect.PREFER_NO_SCHEDULE)


def count_untolerated_prefer_no_schedule(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    """Score: how many PreferNoSchedule taints ``tolerations`` leave untolerated."""
    return sum(
        1
        for taint in taints
        if taint.effect == TaintEffect.PREFER_NO_SCHEDULE and not tolerations_tolerate(tolerations, taint)
    )


def group_by_taints(
    nodes: Iterable[tuple[int, Sequence[Taint]]], effects: frozenset[TaintEffect]
) -> dict[TaintSet, Positions]:
    """Positions grouped by the node's taints with one of ``effects`` (nodes without any are left out)."""
    groups: dict[TaintSet, list[int]] = {}
    for pos, taints in nodes:
        kept = tuple(t for t in taints if t.effect in effects)
        if kept:
            groups.setdefault(kept, []).append(pos)
    return {taints: np.asarray(p, dtype=np.intp) for taints, p in groups.items()}


def tolerated_flags(
    groups: Mapping[TaintSet, Positions], tolerations: Sequence[Toleration], capacity: int
) -> BoolArray:
    """``flags[pos]``: the node at ``pos`` has no NoSchedule/NoExecute taint that ``tolerations`` leave
    untolerated (so it passes Filter)."""
    flags = np.ones(capacity, dtype=np.bool_)
    for taints, positions in groups.items():
        if first_untolerated(taints, tolerations) is not None:
            flags[positions] = False
    return flags


def untolerated_counts(
    groups: Mapping[TaintSet, Positions], tolerations: Sequence[Toleration], capacity: int
) -> IntArray:
    """``counts[pos]``: PreferNoSchedule taints of the node at ``pos`` left untolerated (the raw score)."""
    counts = np.zeros(capacity, dtype=np.int64)
    for taints, positions in groups.items():
        counts[positions] = count_untolerated_prefer_no_schedule(taints, tolerations)
    return counts
