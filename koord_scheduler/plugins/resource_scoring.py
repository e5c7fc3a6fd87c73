"""Resource scoring maths shared by NodeResourcesFit and NodeNUMAResource, as pure functions over numpy
arrays, and the gathering of the scored columns from the snapshot.

Every function takes ``requested`` and ``allocatable`` as ``(nodes, resources)`` int64 arrays (one column
per configured resource, ``requested`` already including the incoming pod) and ``weights`` as a
``(resources,)`` int64 array, and returns one int64 score per node in ``[0, 100]``.

A cell with ``allocatable == 0`` is skipped: it enters neither the weighted sum nor the weight sum, as in
``resource_allocation.go``. The arithmetic is kube-scheduler's int64 arithmetic. Every numerator is
non-negative except the broken-linear interpolation, where Go truncates toward zero and we do the same
(Python's ``//`` would floor).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from apis.core.types import CPU, EPHEMERAL_STORAGE, MEMORY, Pod
from koord_scheduler.framework.snapshot import (
    CPU_COL,
    MEMORY_COL,
    BoolArray,
    ClusterSnapshot,
    IntArray,
    Positions,
)

MAX_NODE_SCORE = 100
MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10
"""Shape scores in args are 0..10; they are scaled by ``MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE``."""


def _weighted_average(per_resource: list[IntArray], weights: IntArray, counted: list[BoolArray] | None) -> IntArray:
    """``Σ score_i·w_i // Σ w_i`` per node; ``counted`` None means every cell counts. 0 where none does."""
    total = np.zeros(len(per_resource[0]), dtype=np.int64)
    for score, w in zip(per_resource, weights.tolist(), strict=True):
        total += score if w == 1 else score * w
    if counted is None:
        weight_sum = sum(weights.tolist())
        return total // weight_sum if weight_sum > 0 else np.zeros_like(total)
    weight_sums = np.zeros(len(total), dtype=np.int64)
    for mask, w in zip(counted, weights.tolist(), strict=True):
        weight_sums += mask * w
    out: IntArray = np.where(weight_sums > 0, total // np.maximum(weight_sums, 1), 0)
    return out


def _columns(allocatable: IntArray, all_positive: bool | None) -> tuple[bool, int]:
    """(whether every cell counts, number of resources); ``all_positive`` is the answer when known."""
    n, k = allocatable.shape
    if all_positive is not None:
        return all_positive, k
    return (k == 0 or n == 0 or bool(allocatable.min() > 0)), k


def least_allocated(
    requested: IntArray, allocatable: IntArray, weights: IntArray, *, all_positive: bool | None = None
) -> IntArray:
    """LeastAllocated: per resource ``(cap - req) * 100 // cap`` (0 when ``req > cap``).

    Whole-matrix operations (about a dozen numpy calls whatever ``k``): the node cache asks for a few
    dozen nodes at a time, where the number of calls, not the data, is the cost. ``all_positive``: whether
    every cell of ``allocatable`` is > 0, when the caller knows (None: looked up here)."""
    all_counted, k = _columns(allocatable, all_positive)
    if k == 0:
        return np.zeros(len(requested), dtype=np.int64)
    score = np.subtract(allocatable, requested)
    np.maximum(score, 0, out=score)
    score *= MAX_NODE_SCORE
    if all_counted:
        score //= allocatable
        weight_sum = sum(weights.tolist())
        if weight_sum <= 0:
            return np.zeros(len(requested), dtype=np.int64)
        total: IntArray = score @ weights
        total //= weight_sum
        return total
    # A cell with cap == 0 gets numerator 0 and divisor 1, so it adds 0; its weight is left out.
    score //= np.maximum(allocatable, 1)
    counted = allocatable > 0
    weight_sums = counted @ weights
    out: IntArray = np.where(weight_sums > 0, (score @ weights) // np.maximum(weight_sums, 1), 0)
    return out


def most_allocated(
    requested: IntArray, allocatable: IntArray, weights: IntArray, *, all_positive: bool | None = None
) -> IntArray:
    """MostAllocated: per resource ``min(req, cap) * 100 // cap`` (``all_positive`` as in
    :func:`least_allocated`)."""
    all_counted, k = _columns(allocatable, all_positive)
    if k == 0:
        return np.zeros(len(requested), dtype=np.int64)
    per_resource = []
    for i in range(k):
        cap = allocatable[:, i]
        score = np.minimum(requested[:, i], cap)
        score *= MAX_NODE_SCORE
        score //= cap if all_counted else np.maximum(cap, 1)
        per_resource.append(score)
    counted = None if all_counted else [allocatable[:, i] > 0 for i in range(k)]
    return _weighted_average(per_resource, weights, counted)


def least_allocated_row(requested: Sequence[int], allocatable: Sequence[int], weights: Sequence[int]) -> int:
    """:func:`least_allocated` for one node, on plain ints (the few nodes a cached cycle rescores)."""
    total = weight_sum = 0
    for req, cap, w in zip(requested, allocatable, weights, strict=True):
        if cap > 0:
            total += (cap - req if req < cap else 0) * MAX_NODE_SCORE // cap * w
            weight_sum += w
    return total // weight_sum if weight_sum > 0 else 0


def most_allocated_row(requested: Sequence[int], allocatable: Sequence[int], weights: Sequence[int]) -> int:
    """:func:`most_allocated` for one node, on plain ints."""
    total = weight_sum = 0
    for req, cap, w in zip(requested, allocatable, weights, strict=True):
        if cap > 0:
            total += (req if req < cap else cap) * MAX_NODE_SCORE // cap * w
            weight_sum += w
    return total // weight_sum if weight_sum > 0 else 0


def scale_shape(points: Sequence[tuple[int, int]]) -> tuple[IntArray, IntArray]:
    """``[(utilization 0..100, score 0..10), ...]`` → (utilizations, scores scaled to 0..100)."""
    utilization = np.array([u for u, _ in points], dtype=np.int64)
    score = np.array([s for _, s in points], dtype=np.int64) * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)
    return utilization, score


def broken_linear(p: IntArray, utilization: IntArray, score: IntArray) -> IntArray:
    """kube-scheduler's ``BuildBrokenLinearFunction`` applied elementwise.

    ``utilization`` must be strictly increasing (args validation guarantees it). ``p <= u[0]`` gives
    ``s[0]``; ``p > u[-1]`` gives ``s[-1]``; in between, the segment ending at the first ``u[i] >= p`` is
    interpolated with the quotient truncated toward zero.
    """
    last = len(utilization) - 1
    i = np.searchsorted(utilization, p, side="left")
    hi = np.clip(i, 1, max(last, 1)) if last > 0 else np.zeros_like(i)
    lo = np.maximum(hi - 1, 0)
    num = (score[hi] - score[lo]) * (p - utilization[lo])
    den = np.maximum(utilization[hi] - utilization[lo], 1)
    interpolated = score[lo] + np.where(num < 0, -((-num) // den), num // den)
    out: IntArray = np.where(i == 0, score[0], np.where(i > last, score[last], interpolated)).astype(np.int64)
    return out


def requested_to_capacity_ratio(
    requested: IntArray,
    allocatable: IntArray,
    weights: IntArray,
    *,
    utilization: IntArray,
    score: IntArray,
    all_positive: bool | None = None,
) -> IntArray:
    """RequestedToCapacityRatio with a scaled shape (see :func:`scale_shape`); ``all_positive`` is
    accepted for the common scorer signature and not needed (every cell is checked on its own).

    Per resource ``util = req * 100 // cap`` (100 when ``req > cap``), mapped through the shape. Only
    resources scoring > 0 enter the average, which is rounded half away from zero (``math.Round``).
    """
    score_points = score
    n = len(requested)
    total = np.zeros(n, dtype=np.int64)
    weight_sums = np.zeros(n, dtype=np.int64)
    for i, w in enumerate(weights.tolist()):
        cap = allocatable[:, i]
        req = requested[:, i]
        util = np.where(req > cap, MAX_UTILIZATION, req * MAX_UTILIZATION // np.maximum(cap, 1))
        per_resource = broken_linear(util, utilization, score_points)
        counted = (cap > 0) & (per_resource > 0)
        total += np.where(counted, per_resource * w, 0)
        weight_sums += counted * w
    mean = total / np.maximum(weight_sums, 1)
    out: IntArray = np.where(weight_sums > 0, np.floor(mean + 0.5), 0).astype(np.int64)
    return out


@dataclass(frozen=True, slots=True)
class ScoredResource:
    """One configured resource the pod is scored on.

    ``non_zero_col`` is the column of ``ClusterSnapshot.non_zero_requested`` for cpu/memory (scored with
    non-zero requests), or -1 to read ``requested[:, column]``.
    """

    column: int
    non_zero_col: int
    amount: int
    weight: int


def scored_resources(
    pod: Pod, snapshot: ClusterSnapshot, resources: Sequence[tuple[str, int]]
) -> tuple[ScoredResource, ...]:
    """The configured ``(name, weight)`` resources this pod is scored on, resolved to columns.

    cpu and memory use the pod's non-zero requests against ``non_zero_requested``; other resources use
    real requests. A scalar resource the pod does not request, or that no node has, is left out.
    """
    out: list[ScoredResource] = []
    for name, weight in resources:
        if name == CPU:
            out.append(ScoredResource(CPU_COL, 0, pod.non_zero_cpu, weight))
        elif name == MEMORY:
            out.append(ScoredResource(MEMORY_COL, 1, pod.non_zero_memory, weight))
        else:
            amount = pod.requests.get(name, 0)
            column = snapshot.column(name)
            if column is None or (amount == 0 and name != EPHEMERAL_STORAGE):
                continue
            out.append(ScoredResource(column, -1, amount, weight))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ScoredColumns:
    """Where :func:`gather_columns` reads the scored resources from, resolved once per list of
    :class:`ScoredResource` (see :func:`scored_columns`)."""

    resources: tuple[ScoredResource, ...]
    weights: IntArray
    """Read-only, one per resource."""
    amounts: IntArray
    """The pod's request per resource (read-only)."""
    allocatable_columns: slice | list[int]
    requested_source: int
    """``_NON_ZERO``: every resource reads ``non_zero_requested``; ``_REQUESTED``: every one reads
    ``requested``; ``_MIXED``: some each way."""
    requested_columns: slice | list[int]


_NON_ZERO, _REQUESTED, _MIXED = 0, 1, 2


def column_index(columns: Sequence[int]) -> slice | list[int]:
    """What selects ``columns`` of a 2-D array's rows (``rows[:, index]``): a slice when the columns are
    consecutive and ascending (a view, the usual cpu and memory case, a fraction of a fancy index's cost
    on the few rows the node cache rescores), else the list (a fancy index)."""
    if columns and all(c == columns[0] + i for i, c in enumerate(columns)):
        return slice(columns[0], columns[0] + len(columns))
    return list(columns)


def _read_only(values: list[int]) -> IntArray:
    array = np.array(values, dtype=np.int64)
    array.flags.writeable = False
    return array


def scored_columns(resources: Sequence[ScoredResource]) -> ScoredColumns:
    """Resolve ``resources`` for :func:`gather_columns` (callers keep the answer per resource list)."""
    non_zero = [r.non_zero_col for r in resources]
    if all(c >= 0 for c in non_zero):
        source, requested_columns = _NON_ZERO, column_index(non_zero)
    elif all(c < 0 for c in non_zero):
        source, requested_columns = _REQUESTED, column_index([r.column for r in resources])
    else:
        source, requested_columns = _MIXED, []
    return ScoredColumns(
        tuple(resources),
        _read_only([r.weight for r in resources]),
        _read_only([r.amount for r in resources]),
        column_index([r.column for r in resources]),
        source,
        requested_columns,
    )


def gather(
    snapshot: ClusterSnapshot, positions: Positions, resources: Sequence[ScoredResource]
) -> tuple[IntArray, IntArray]:
    """(requested including the pod, allocatable) as (nodes, resources) arrays: one row gather per
    snapshot array and one column selection (a few numpy calls whatever the number of resources). The
    rows are gathered first (``array[positions]``, cheaper per call than ``np.take`` with an axis): a
    gather from a column view would copy the whole column. ``allocatable`` is read-only."""
    return gather_columns(snapshot, positions, scored_columns(resources))


def gather_columns(
    snapshot: ClusterSnapshot, positions: Positions, columns: ScoredColumns
) -> tuple[IntArray, IntArray]:
    """:func:`gather` with the columns resolved beforehand (the node cache rescores a few dozen nodes at
    a time, where the number of calls, not the data, is the cost)."""
    requested, allocatable, _ = gather_scored(snapshot, positions, columns)
    return requested, allocatable


def gather_scored(
    snapshot: ClusterSnapshot, positions: Positions, columns: ScoredColumns
) -> tuple[IntArray, IntArray, bool]:
    """:func:`gather_columns` and whether every allocatable cell is > 0. The allocatable rows are
    :meth:`~koord_scheduler.framework.snapshot.ClusterSnapshot.allocatable_rows` (read-only, shared with
    the other resource Score plugins scoring the same nodes); ``requested`` is a new array."""
    allocatable, all_positive = snapshot.allocatable_rows(positions, columns.allocatable_columns)
    requested: IntArray
    source = columns.requested_source
    if source == _NON_ZERO:
        requested = snapshot.non_zero_requested[positions][:, columns.requested_columns]
    elif source == _REQUESTED:
        requested = snapshot.requested[positions][:, columns.requested_columns]
    else:
        resources = columns.resources
        nz_rows = np.take(snapshot.non_zero_requested, positions, axis=0)
        used_rows = np.take(snapshot.requested, positions, axis=0)
        requested = np.empty((len(positions), len(resources)), dtype=np.int64)
        for i, r in enumerate(resources):
            requested[:, i] = nz_rows[:, r.non_zero_col] if r.non_zero_col >= 0 else used_rows[:, r.column]
    # The row gathers are new arrays (``requested`` at most a view of one): adding in place is safe.
    requested += columns.amounts
    return requested, allocatable, all_positive
