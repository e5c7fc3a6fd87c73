"""BalancedAllocation maths, as a pure function over numpy arrays."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from koord_scheduler.framework.snapshot import IntArray

MAX_NODE_SCORE = 100
FloatArray = npt.NDArray[np.float64]


def balanced_allocation(requested: IntArray, allocatable: IntArray, *, all_positive: bool | None = None) -> IntArray:
    """``int64((1 - std) * 100)`` per node, over (nodes, resources) int64 arrays. ``all_positive``:
    whether every cell of ``allocatable`` is > 0, when the caller knows (None: looked up here).

    ``requested`` already includes the incoming pod. Cells with ``allocatable == 0`` are skipped. Each
    fraction ``float64(req) / float64(alloc)`` is clamped to 1. With exactly two fractions
    ``std = |f0 - f1| / 2``; with more, the population standard deviation; with fewer, 0. Sums run over
    resources in configured order, as Go's loop does, so the floats (and the truncation) match.
    """
    n, k = requested.shape
    if k < 2 or n == 0:
        return np.full(n, MAX_NODE_SCORE, dtype=np.int64)
    if all_positive is None:
        all_positive = bool(allocatable.min() > 0)
    if all_positive:
        fractions = np.true_divide(requested, allocatable)
        np.minimum(fractions, 1.0, out=fractions)
        if k == 2:
            # |f0 - f1| / 2, in place (the same float operations, one array)
            std = np.subtract(fractions[:, 0], fractions[:, 1])
            std /= 2
            np.abs(std, out=std)
        else:
            std = _std_all_counted([fractions[:, i] for i in range(k)])
    else:
        std = _std_masked(requested, allocatable)
    np.subtract(1, std, out=std)  # std is this call's own array
    std *= MAX_NODE_SCORE
    scores: IntArray = std.astype(np.int64)
    return scores


def _std_all_counted(fractions: list[FloatArray]) -> FloatArray:
    if len(fractions) == 2:
        std: FloatArray = np.abs((fractions[0] - fractions[1]) / 2)
        return std
    total = fractions[0].copy()
    for f in fractions[1:]:
        total += f
    mean = total / len(fractions)
    squares = np.zeros_like(mean)
    for f in fractions:
        d = f - mean
        squares += d * d
    out: FloatArray = np.sqrt(squares / len(fractions))
    return out


def _std_masked(requested: IntArray, allocatable: IntArray) -> FloatArray:
    """The general case: some cells have ``allocatable == 0`` and are left out of that node's set."""
    n, k = requested.shape
    counted = allocatable > 0
    fractions = np.where(counted, np.minimum(requested / np.where(counted, allocatable, 1), 1.0), 0.0)
    count = counted.sum(axis=1)
    total = np.zeros(n)
    for i in range(k):
        total += fractions[:, i]
    mean = total / np.maximum(count, 1)
    squares = np.zeros(n)
    for i in range(k):
        squares += np.where(counted[:, i], (fractions[:, i] - mean) ** 2, 0.0)
    std_many = np.sqrt(squares / np.maximum(count, 1))
    first = np.argmax(counted, axis=1)
    last = k - 1 - np.argmax(counted[:, ::-1], axis=1)
    rows = np.arange(n)
    std_two = np.abs((fractions[rows, first] - fractions[rows, last]) / 2)
    std: FloatArray = np.where(count == 2, std_two, np.where(count > 2, std_many, 0.0))
    return std


def balanced_allocation_row(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """:func:`balanced_allocation` for one node, on plain ints and floats (the same float operations
    in the same order, so the same truncated score)."""
    if len(requested) < 2:
        return MAX_NODE_SCORE
    fractions = [min(float(req) / float(cap), 1.0) for req, cap in zip(requested, allocatable, strict=True) if cap > 0]
    count = len(fractions)
    if count == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif count > 2:
        total = 0.0
        for f in fractions:
            total += f
        mean = total / count
        squares = 0.0
        for f in fractions:
            d = f - mean
            squares += d * d
        std = math.sqrt(squares / count)
    else:
        std = 0.0
    return int((1 - std) * MAX_NODE_SCORE)
