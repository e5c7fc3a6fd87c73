"""LoadAwareScheduling maths over all nodes at once: (nodes, resources) int64 arrays in, arrays out.

Amounts are the scheduler's (millicores for cpu, bytes/units otherwise). Percentages and scores are
integers 0..100. Formulas follow ``load_aware.go`` (Koordinator) and, for ``TargetUtilization``,
Trimaran's TargetLoadPacking (Koordinator ``pkg/scheduler/plugins/loadaware``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

MAX_SCORE = 100


def go_round(x: FloatArray) -> IntArray:
    """Go's ``math.Round`` for non-negative floats: halves round up (numpy's ``rint`` rounds to even)."""
    whole = np.floor(x)
    return (whole + (x - whole >= 0.5)).astype(np.int64)


def usage_percent(used: IntArray, allocatable: IntArray) -> IntArray:
    """``round(used / allocatable x 100)`` as Go computes it (``float64(used) / float64(total) * 100``);
    0 where allocatable is 0 (the filter skips those resources)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = used.astype(np.float64) / allocatable
    ratio *= 100.0
    ratio[allocatable <= 0] = 0.0
    return go_round(ratio)


def threshold_failures(used: IntArray, allocatable: IntArray, thresholds: IntArray) -> BoolArray:
    """Which (node, resource) pairs exceed their threshold: ``round(100 x used / allocatable) > threshold``.

    A threshold of 0 turns the resource off, and so does an allocatable of 0 (Koordinator skips both).
    """
    return (thresholds > 0) & (allocatable > 0) & (usage_percent(used, allocatable) > thresholds)


def first_failed_resource(failures: BoolArray) -> tuple[BoolArray, IntArray]:
    """(any failure per node, index of the first failing resource) — reasons name the first resource in
    vectorizer (sorted) order, so a node's reason does not depend on map iteration order."""
    failed: BoolArray = np.asarray(failures.any(axis=1), dtype=np.bool_)
    first: IntArray = np.argmax(failures, axis=1).astype(np.int64)
    return failed, first


def least_used_scores(used: IntArray, allocatable: IntArray) -> IntArray:
    """``leastUsedScore`` per (node, resource): ``(A - U) x 100 / A`` with integer division; 0 when
    ``U > A`` or ``A == 0``."""
    ok = (allocatable > 0) & (used <= allocatable)
    safe = np.where(ok, allocatable, 1)
    return np.where(ok, (safe - np.where(ok, used, 0)) * MAX_SCORE // safe, 0)


def target_utilization_scores(used: IntArray, allocatable: IntArray, targets: IntArray) -> IntArray:
    """Trimaran TargetLoadPacking per (node, resource), with ``U = 100 x used / allocatable`` (float):

    - ``U ≤ T``: ``(100 - T) x U / T + T`` (rises from T at an idle node to 100 at the target);
    - ``T < U ≤ 100``: ``T x (100 - U) / (100 - T)`` (falls to 0 at a full node);
    - ``U > 100`` or ``A == 0``: 0.

    Rounded half away from zero, as TLP does. ``targets`` (one per resource) are 1..100.
    """
    # allocatable 0 gives inf/NaN here, zeroed below (a warning would only be noise).
    with np.errstate(divide="ignore", invalid="ignore"):
        u = used.astype(np.float64) / allocatable * 100.0
        t = targets.astype(np.float64)
        below = (100.0 - t) * u / t + t
        above = np.where(t < 100.0, t * (100.0 - u) / (100.0 - t), 0.0)
    score = np.where(u <= t, below, above)
    score = np.where((allocatable > 0) & (u <= 100.0) & np.isfinite(score), score, 0.0)
    return go_round(np.clip(score, 0.0, 100.0))


def combine(resource_scores: IntArray, weights: IntArray, dominant_weight: int) -> IntArray:
    """``(Σ_r w_r·s_r + D·min_r s_r) / (Σ_r w_r + D)`` with integer division, one score per node.

    The dominant term's minimum runs over every vectorised resource, weight-0 ones included (as in
    Koordinator: a resource with no allocatable forces it to 0).
    """
    total_weight = int(weights.sum()) + dominant_weight
    n = resource_scores.shape[0]
    if total_weight == 0 or n == 0:
        return np.zeros(n, dtype=np.int64)
    weighted: IntArray = resource_scores @ weights
    if dominant_weight:
        weighted += dominant_weight * resource_scores.min(axis=1)
    return weighted // total_weight


# ----- the same rules for one node, in plain Python -----
# The runtime's per-node result cache asks for a handful of changed nodes per cycle, where numpy's
# per-call overhead would dominate. These give bit-identical results to the array versions above (same
# float operations in the same order).


def row_first_failure(
    base: Sequence[int], extra: Sequence[int], allocatable: Sequence[int], thresholds: Sequence[int]
) -> int:
    """Index of the first resource whose usage ``base + extra`` (the node's, and the incoming pod's
    estimate) is over its threshold, or -1 (see :func:`threshold_failures`).

    ``go_round(p) > t`` for an integer ``t ≥ 0`` is tested as ``p ≥ t + 0.5``, which is the same test:
    when ``floor(p) == t``, ``p - t`` is exact in binary floating point (Sterbenz), so ``p - t ≥ 0.5``
    and ``p ≥ t + 0.5`` agree; otherwise both sides are decided by the integer part.
    """
    for r, threshold in enumerate(thresholds):
        if threshold > 0:
            total = allocatable[r]
            if total > 0 and float(base[r] + extra[r]) / total * 100.0 >= threshold + 0.5:
                return r
    return -1


def row_score(
    base: Sequence[int],
    extra: Sequence[int],
    allocatable: Sequence[int],
    weights: Sequence[int],
    *,
    dominant_weight: int,
    targets: Sequence[int] | None,
) -> int:
    """One node's combined score for usage ``base + extra`` (:func:`least_used_scores` or
    :func:`target_utilization_scores`, then :func:`combine`)."""
    total_weight = sum(weights) + dominant_weight
    if total_weight == 0:
        return 0
    weighted = 0
    lowest: int | None = None
    for r, total in enumerate(allocatable):
        u = base[r] + extra[r]
        if targets is not None:
            score = _target_score(u, total, targets[r])
        elif total > 0 and u <= total:
            score = (total - u) * MAX_SCORE // total
        else:
            score = 0
        weighted += weights[r] * score
        if lowest is None or score < lowest:
            lowest = score
    if dominant_weight and lowest is not None:
        weighted += dominant_weight * lowest
    return weighted // total_weight


def row_failure_and_least_used(
    filter_base: Sequence[int],
    score_base: Sequence[int],
    extra: Sequence[int],
    allocatable: Sequence[int],
    thresholds: Sequence[int],
    *,
    weights: Sequence[int],
    dominant_weight: int,
) -> tuple[int, int]:
    """``(row_first_failure(filter_base, ...), row_score(score_base, ..., targets=None))`` in one pass over
    the resources: the per-node Filter of a node whose metric is fresh asks for both."""
    total_weight = sum(weights) + dominant_weight
    failed = -1
    weighted = 0
    lowest = 1 << 62  # (above any score)
    for r, total in enumerate(allocatable):
        e = extra[r]
        u = score_base[r] + e
        score = (total - u) * MAX_SCORE // total if total > 0 and u <= total else 0
        weighted += weights[r] * score
        lowest = min(lowest, score)
        if failed < 0:
            threshold = thresholds[r]
            if threshold > 0 and total > 0 and float(filter_base[r] + e) / total * 100.0 >= threshold + 0.5:
                failed = r
    if total_weight == 0:
        return failed, 0
    if dominant_weight and allocatable:
        weighted += dominant_weight * lowest
    return failed, weighted // total_weight


def _target_score(used: int, total: int, target: int) -> int:
    if total <= 0:
        return 0
    u = float(used) / total * 100.0
    t = float(target)
    if u <= t:
        if t == 0.0:
            return 0
        score = (100.0 - t) * u / t + t
    else:
        score = t * (100.0 - u) / (100.0 - t) if t < 100.0 else 0.0
    if u > 100.0 or not math.isfinite(score):
        return 0
    score = min(max(score, 0.0), 100.0)
    whole = math.floor(score)
    return int(whole + (score - whole >= 0.5))
