"""NodeResourcesFit scoring maths, as pure functions over numpy arrays.

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

import numpy as np

from koord_scheduler.framework.snapshot import IntArray

MAX_NODE_SCORE = 100
MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10
"""Shape scores in args are 0..10; they are scaled by ``MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE``."""


def weighted_average(resource_scores: IntArray, counted: np.ndarray, weights: IntArray) -> IntArray:
    """``Σ score_i·w_i // Σ w_i`` over the counted cells of each row; 0 where no cell counts."""
    w = np.where(counted, weights, 0)
    weight_sum = w.sum(axis=1)
    node_score = (resource_scores * w).sum(axis=1)
    return np.where(weight_sum > 0, node_score // np.maximum(weight_sum, 1), 0).astype(np.int64)


def least_allocated(requested: IntArray, allocatable: IntArray, weights: IntArray) -> IntArray:
    """LeastAllocated: per resource ``(cap - req) * 100 // cap`` (0 when ``req > cap``)."""
    counted = allocatable > 0
    cap = np.where(counted, allocatable, 1)
    per_resource = np.where(requested > cap, 0, (cap - requested) * MAX_NODE_SCORE // cap)
    return weighted_average(per_resource, counted, weights)


def most_allocated(requested: IntArray, allocatable: IntArray, weights: IntArray) -> IntArray:
    """MostAllocated: per resource ``min(req, cap) * 100 // cap``."""
    counted = allocatable > 0
    cap = np.where(counted, allocatable, 1)
    per_resource = np.minimum(requested, cap) * MAX_NODE_SCORE // cap
    return weighted_average(per_resource, counted, weights)


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
) -> IntArray:
    """RequestedToCapacityRatio with a scaled shape (see :func:`scale_shape`).

    Per resource ``util = req * 100 // cap`` (100 when ``req > cap``), mapped through the shape. Only
    resources scoring > 0 enter the average, which is rounded half away from zero (``math.Round``).
    """
    counted = allocatable > 0
    cap = np.where(counted, allocatable, 1)
    util = np.where(requested > cap, MAX_UTILIZATION, requested * MAX_UTILIZATION // cap)
    per_resource = broken_linear(util, utilization, score)
    counted &= per_resource > 0
    w = np.where(counted, weights, 0)
    weight_sum = w.sum(axis=1)
    node_score = (per_resource * w).sum(axis=1)
    mean = node_score / np.maximum(weight_sum, 1)
    return np.where(weight_sum > 0, np.floor(mean + 0.5), 0).astype(np.int64)
