"""BalancedAllocation maths, as a pure function over numpy arrays."""

from __future__ import annotations

import numpy as np

from koord_scheduler.framework.snapshot import IntArray

MAX_NODE_SCORE = 100


def balanced_allocation(requested: IntArray, allocatable: IntArray) -> IntArray:
    """``int64((1 - std) * 100)`` per node, over (nodes, resources) int64 arrays.

    ``requested`` already includes the incoming pod. Cells with ``allocatable == 0`` are skipped. Each
    fraction ``float64(req) / float64(alloc)`` is clamped to 1. With exactly two fractions
    ``std = |f0 - f1| / 2``; with more, the population standard deviation; with fewer, 0. Sums run over
    resources in configured order, as Go's loop does, so the floats (and the truncation) match.
    """
    n, k = requested.shape
    counted = allocatable > 0
    fractions = np.minimum(requested / np.where(counted, allocatable, 1), 1.0)
    count = counted.sum(axis=1)
    std: np.ndarray
    if k < 2:
        std = np.zeros(n)
    elif k == 2:
        std = np.where(count == 2, np.abs((fractions[:, 0] - fractions[:, 1]) / 2), 0.0)
    else:
        fractions = np.where(counted, fractions, 0.0)
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
        std = np.where(count == 2, std_two, np.where(count > 2, std_many, 0.0))
    scores: IntArray = ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
    return scores
