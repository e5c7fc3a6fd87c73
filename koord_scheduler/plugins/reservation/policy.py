"""Reservation fit, scoring and nomination maths (Koordinator ``pkg/scheduler/plugins/reservation``), over arrays.

Rows are candidate reservations; columns are the resources the pod requests (the Filter's checked
columns). Everything is integer arithmetic, as in Koordinator.

Accounting model: an Available reservation holds its *unallocated remainder* on its node (owners hold
their own requests), so ``node_free`` already excludes every reservation's remainder, and giving one
reservation's remainder back to the pod is ``node_free + remainder``. Aligned and Restricted may take
from one reservation only; that is what keeps several reservations on one node from overselling it
(Koordinator issue #2731).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from koord_scheduler.framework.snapshot import BoolArray, IntArray

MAX_RESERVATION_SCORE = 100
MOST_PREFERRED_SCORE = 1000
"""Koordinator's ``mostPreferredScore``: the raw score of the node with the most preferred reservation."""
NO_ORDER = np.iinfo(np.int64).max


def fits_node(request: IntArray, node_free: IntArray, remainder: IntArray) -> BoolArray:
    """``fitsNode``: per row, the pod fits the node's free capacity plus this reservation's remainder.

    ``request`` (c,), ``node_free`` and ``remainder`` (k, c).
    """
    result: BoolArray = np.all(request <= node_free + remainder, axis=1)
    return result


def fits_reservation(request: IntArray, remainder: IntArray, allocatable: IntArray) -> BoolArray:
    """``fitsReservation`` (Restricted): every resource the reservation reserves and the pod requests
    comes from the reservation alone. Resources the reservation does not reserve may come from the node."""
    reserved = allocatable > 0
    result: BoolArray = np.all(~reserved | (request <= remainder), axis=1)
    return result


def usable(
    request: IntArray, node_free: IntArray, remainder: IntArray, allocatable: IntArray, restricted: BoolArray
) -> BoolArray:
    """Which reservations the pod may use: Aligned rows need :func:`fits_node`; Restricted rows need
    :func:`fits_node` and :func:`fits_reservation`."""
    ok = fits_node(request, node_free, remainder)
    if restricted.any():
        ok &= ~restricted | fits_reservation(request, remainder, allocatable)
    return ok


def is_ignored(resource: str, resources: frozenset[str], groups: frozenset[str]) -> bool:
    """``ReservationArgs.ignoredResources`` / ``ignoredResourceGroups`` (Koordinator
    ``isResourceIgnored``): the resource is listed, or its vendor prefix (before ``/``) is a listed group."""
    if resource in resources:
        return True
    prefix, slash, _ = resource.partition("/")
    return bool(slash) and bool(prefix) and prefix in groups


def most_allocated_scores(request: IntArray, remainder: IntArray, allocatable: IntArray) -> IntArray:
    """``ScoreReservation``: MostAllocated over the reservation, so the tightest fit scores highest.

    Mean over the reservation's non-zero resources of ``100 * (request + allocated) / allocatable``
    (0 where that exceeds the allocatable). Resources the pod does not request still count, with the
    amount already allocated.
    """
    allocated = allocatable - remainder
    used = allocated + request
    nonzero = allocatable > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(nonzero & (used <= allocatable), used * MAX_RESERVATION_SCORE // np.maximum(allocatable, 1), 0)
    count = nonzero.sum(axis=1)
    total = per.sum(axis=1)
    out: IntArray = np.where(count > 0, total // np.maximum(count, 1), 0).astype(np.int64)
    return out


def nominate_per_node(positions: npt.NDArray[np.intp], orders: IntArray, scores: IntArray) -> npt.NDArray[np.intp]:
    """Index of the winning row for each distinct position (rows already filtered to usable ones).

    The lowest non-zero ``reservation-order`` wins; otherwise the highest score; ties go to the first
    row. Returned indices are sorted by position.
    """
    if len(positions) == 0:
        return np.empty(0, dtype=np.intp)
    order_key = np.where(orders > 0, orders, NO_ORDER)
    idx = np.arange(len(positions))
    ranked = np.lexsort((idx, -scores, order_key, positions))
    sorted_pos = positions[ranked]
    first = np.ones(len(ranked), dtype=np.bool_)
    first[1:] = sorted_pos[1:] != sorted_pos[:-1]
    result: npt.NDArray[np.intp] = ranked[first].astype(np.intp)
    return result


def node_scores(
    positions: npt.NDArray[np.intp],
    chosen_positions: npt.NDArray[np.intp],
    *,
    chosen_orders: IntArray,
    chosen_scores: IntArray,
) -> IntArray:
    """Koordinator's Score of an owner pod over the feasible ``positions`` (``scoring.go``
    ``preScoreForNormalPod``, ``scoreForNormalPod`` and ``NormalizeScore``), 0..100.

    ``chosen_positions`` (sorted) are the nodes where the pod would use a reservation, with that
    reservation's ``reservation-order`` (0: none) and :func:`most_allocated_scores` score. The node whose
    reservation has the lowest non-zero order (the first such node of ``positions`` on a tie) scores
    :data:`MOST_PREFERRED_SCORE`, the other reservation nodes their reservation's score, the rest 0; then
    each is scaled to ``100 * score // max`` (all 0 when the max is 0). So the oldest migration's
    Reservation wins the replacement pod, and without orders the tightest fit does.
    """
    n = len(positions)
    raw: IntArray = np.zeros(n, dtype=np.int64)
    if n == 0 or len(chosen_positions) == 0:
        return raw
    at = np.minimum(np.searchsorted(chosen_positions, positions), len(chosen_positions) - 1)
    chosen = chosen_positions[at] == positions
    raw[chosen] = chosen_scores[at[chosen]]
    orders = np.where(chosen, chosen_orders[at], 0)
    keyed = np.where(orders > 0, orders, NO_ORDER)
    best = int(np.argmin(keyed))
    if keyed[best] != NO_ORDER:
        raw[best] = MOST_PREFERRED_SCORE
    top = int(raw.max())
    if top == 0:
        return raw
    out: IntArray = raw * MAX_RESERVATION_SCORE // top
    return out


def reservations_summary(total: int, reasons: Mapping[str, int]) -> str:
    """Koordinator's reservation-level failure message: ``"0/N reservations are available: "`` then
    ``"<count> Reservation(s) <reason>"`` sorted by reason (as kube-scheduler sorts node reasons)."""
    parts = ", ".join(f"{count} Reservation(s) {reason}" for reason, count in sorted(reasons.items()) if count)
    return f"0/{total} reservations are available: {parts}." if parts else f"0/{total} reservations are available."
