"""VolumeBinding's Score with the StorageCapacityScoring feature (kube-scheduler ``volumebinding/scorer.go``).

Per storage class the node scores ``shape(requested * 100 / capacity)`` (100 % when the capacity is 0
or too small), and the node's score is the classes' mean rounded half away from zero (``math.Round``).
The shape's scores are configured 0-10 and scaled by 10; the default shape, ``[{0, 10}, {100, 0}]``,
prefers the node where the volumes fill the least of the storage.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

MAX_UTILIZATION = 100
SHAPE_SCALE = 10
"""``MaxNodeScore / MaxCustomPriorityScore``."""

DEFAULT_SHAPE: tuple[tuple[int, int], ...] = ((0, 10), (100, 0))


def _go_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as Go's ``/``."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def broken_linear(shape: Sequence[tuple[int, int]], utilization: int) -> int:
    """``BuildBrokenLinearFunction``: ``shape`` is (utilization, scaled score) points, sorted."""
    for i, (point, score) in enumerate(shape):
        if utilization <= point:
            if i == 0:
                return score
            prev_point, prev_score = shape[i - 1]
            return prev_score + _go_div((score - prev_score) * (utilization - prev_point), point - prev_point)
    return shape[-1][1]


def class_score(shape: Sequence[tuple[int, int]], requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return broken_linear(shape, MAX_UTILIZATION)
    return broken_linear(shape, requested * MAX_UTILIZATION // capacity)


def node_score(shape: Sequence[tuple[int, int]], classes: Mapping[str, tuple[int, int]]) -> int:
    """Mean over storage classes of :func:`class_score`; ``classes`` maps a class to (requested, capacity)
    bytes. No classes score 0."""
    if not classes:
        return 0
    total = sum(class_score(shape, requested, capacity) for requested, capacity in classes.values())
    mean = total / len(classes)
    return math.floor(mean + 0.5) if mean >= 0 else -math.floor(-mean + 0.5)


def scaled_shape(points: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Configured (utilization, score 0-10) points -> (utilization, score 0-100)."""
    return tuple((u, s * SHAPE_SCALE) for u, s in points)
