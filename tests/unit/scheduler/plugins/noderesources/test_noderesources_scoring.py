"""NodeResourcesFit scoring maths (kube-scheduler pkg/scheduler/framework/plugins/noderesources), hand-computed rows."""

from __future__ import annotations

import numpy as np
import pytest

from koord_scheduler.plugins.resource_scoring import (
    broken_linear,
    least_allocated,
    most_allocated,
    requested_to_capacity_ratio,
    scale_shape,
)

GI = 1024**3


def arr(rows: list[list[int]]) -> np.ndarray:
    return np.array(rows, dtype=np.int64).reshape(len(rows), -1)


def w(*weights: int) -> np.ndarray:
    return np.array(weights, dtype=np.int64)


@pytest.mark.parametrize(
    ("requested", "allocatable", "weights", "want"),
    [
        pytest.param([[1500, 3 * GI]], [[4000, 8 * GI]], w(1, 1), [62], id="sheet-row-1-truncates-62.5"),
        pytest.param([[600, 1283457024]], [[2000, 4 * GI]], w(1, 1), [70], id="sheet-row-2-best-effort-non-zero"),
        pytest.param([[2000, 1000]], [[4000, 4000]], w(3, 1), [56], id="sheet-row-3-weighted-225/4"),
        pytest.param([[5000, 1000]], [[4000, 4000]], w(1, 1), [37], id="over-capacity-scores-0"),
        pytest.param([[1000, 7]], [[4000, 0]], w(1, 1), [75], id="zero-allocatable-not-in-weight-sum"),
        pytest.param([[1, 1]], [[0, 0]], w(1, 1), [0], id="no-allocatable-at-all-scores-0"),
        pytest.param([[0, 0], [4000, 4000]], [[4000, 4000]] * 2, w(1, 1), [100, 0], id="empty-and-full"),
    ],
)
def test_least_allocated(
    requested: list[list[int]], allocatable: list[list[int]], weights: np.ndarray, want: list[int]
) -> None:
    assert least_allocated(arr(requested), arr(allocatable), weights).tolist() == want


@pytest.mark.parametrize(
    ("requested", "allocatable", "weights", "want"),
    [
        pytest.param([[1500, 3 * GI]], [[4000, 8 * GI]], w(1, 1), [37], id="row-1-node-37.5-truncates"),
        pytest.param([[9000, 2000]], [[4000, 4000]], w(1, 1), [75], id="request-clamped-to-capacity"),
        pytest.param([[2000, 1000]], [[4000, 4000]], w(1, 3), [31], id="weighted-(50+75)/4"),
        pytest.param([[2000, 1]], [[4000, 0]], w(1, 1), [50], id="zero-allocatable-skipped"),
    ],
)
def test_most_allocated(
    requested: list[list[int]], allocatable: list[list[int]], weights: np.ndarray, want: list[int]
) -> None:
    assert most_allocated(arr(requested), arr(allocatable), weights).tolist() == want


@pytest.mark.parametrize(
    ("shape", "points", "want"),
    [
        pytest.param(
            [(0, 10), (70, 0)],
            [0, 50, 70, 80, 100],
            [100, 29, 0, 0, 0],
            id="decreasing-truncates-toward-zero",
        ),
        pytest.param([(0, 0), (100, 10)], [0, 33, 99, 100], [0, 33, 99, 100], id="increasing-identity"),
        pytest.param(
            [(20, 2), (50, 8), (80, 5)],
            [0, 20, 21, 35, 50, 65, 79, 80, 95],
            [20, 20, 22, 50, 80, 65, 51, 50, 50],
            id="three-points-flat-outside",
        ),
        pytest.param([(50, 7)], [0, 50, 100], [70, 70, 70], id="single-point-is-constant"),
    ],
)
def test_broken_linear(shape: list[tuple[int, int]], points: list[int], want: list[int]) -> None:
    utilization, score = scale_shape(shape)

    got = broken_linear(np.array(points, dtype=np.int64), utilization, score)

    assert got.tolist() == want


@pytest.mark.parametrize(
    ("shape", "requested", "allocatable", "weights", "want"),
    [
        pytest.param(
            [(0, 10), (70, 0)],
            [[2000, 8000]],
            [[4000, 10000]],
            w(1, 1),
            [29],
            id="sheet-rtcr-zero-score-resource-excluded",
        ),
        pytest.param([(0, 0), (100, 10)], [[15, 20]], [[100, 100]], w(1, 1), [18], id="math-round-half-away-17.5"),
        pytest.param([(0, 0), (100, 10)], [[15, 20]], [[100, 100]], w(3, 1), [16], id="weighted-65/4-rounds-down"),
        pytest.param([(0, 0), (100, 10)], [[150, 1]], [[100, 0]], w(1, 1), [100], id="over-capacity-is-100"),
        pytest.param([(0, 10), (100, 0)], [[100, 100]], [[100, 100]], w(1, 1), [0], id="all-zero-scores"),
    ],
)
def test_requested_to_capacity_ratio(
    shape: list[tuple[int, int]],
    requested: list[list[int]],
    allocatable: list[list[int]],
    weights: np.ndarray,
    want: list[int],
) -> None:
    utilization, score = scale_shape(shape)

    got = requested_to_capacity_ratio(arr(requested), arr(allocatable), weights, utilization=utilization, score=score)

    assert got.tolist() == want
