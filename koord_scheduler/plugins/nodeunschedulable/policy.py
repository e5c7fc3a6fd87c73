"""NodeUnschedulable's mask, as pure functions of plain values."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from apis.core.tolerations import tolerations_tolerate
from apis.core.types import Taint, TaintEffect, Toleration
from koord_scheduler.framework.snapshot import BoolArray, Positions

UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect=TaintEffect.NO_SCHEDULE)
"""A cordoned node behaves as if it had this taint (``v1.TaintNodeUnschedulable``)."""


def tolerates_unschedulable(tolerations: Sequence[Toleration]) -> bool:
    return tolerations_tolerate(tolerations, UNSCHEDULABLE_TAINT)


def unschedulable_flags(nodes: Iterable[tuple[int, bool]], capacity: int) -> BoolArray:
    """``flags[pos]`` is True for every ``(pos, unschedulable)`` with ``unschedulable`` set."""
    flags = np.zeros(capacity, dtype=np.bool_)
    cordoned = [pos for pos, unschedulable in nodes if unschedulable]
    flags[cordoned] = True
    return flags


def unschedulable_mask(schedulable: BoolArray, positions: Positions, *, tolerated: bool) -> BoolArray:
    """Which of ``positions`` a pod may use: all of them when it tolerates the taint, else the
    schedulable ones (``schedulable`` is ``~unschedulable_flags(...)``, indexed by position)."""
    if tolerated:
        return np.ones(len(positions), dtype=np.bool_)
    return schedulable.take(positions)
