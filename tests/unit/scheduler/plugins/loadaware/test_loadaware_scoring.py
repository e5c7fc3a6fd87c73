"""LoadAwareScheduling maths (Koordinator pkg/scheduler/plugins/loadaware): hand-computed tables."""

from __future__ import annotations

import numpy as np
import pytest

from koord_scheduler.plugins.loadaware import scoring


def arr(*rows: tuple[int, ...]) -> np.ndarray:
    return np.array(rows, dtype=np.int64)


@pytest.mark.parametrize(
    ("used", "allocatable", "threshold", "want_fail"),
    [
        pytest.param(5200, 8000, 65, False, id="exactly-threshold-passes"),
        pytest.param(5239, 8000, 65, False, id="65.49-rounds-down-passes"),
        pytest.param(5240, 8000, 65, True, id="65.5-rounds-half-up-go-math-round-rejects"),
        pytest.param(8000, 8000, 0, False, id="zero-threshold-disables-resource"),
        pytest.param(5, 0, 65, False, id="zero-allocatable-skipped"),
        pytest.param(9000, 8000, 100, True, id="over-allocatable-rejects-at-100"),
    ],
)
def test_threshold_failures(used: int, allocatable: int, threshold: int, want_fail: bool) -> None:
    got = scoring.threshold_failures(arr((used,)), arr((allocatable,)), arr((threshold,)))
    assert bool(got[0, 0]) is want_fail


def test_first_failed_resource_is_first_in_vectorizer_order() -> None:
    failed, first = scoring.first_failed_resource(np.array([[False, True, True], [False, False, False]]))
    assert failed.tolist() == [True, False]
    assert int(first[0]) == 1


@pytest.mark.parametrize(
    ("used", "allocatable", "want"),
    [
        pytest.param(2000, 8000, 75, id="quarter-used"),
        pytest.param(3333, 10000, 66, id="integer-division-truncates"),
        pytest.param(8000, 8000, 0, id="full"),
        pytest.param(8001, 8000, 0, id="over-capacity-scores-zero"),
        pytest.param(0, 0, 0, id="zero-allocatable-scores-zero"),
        pytest.param(0, 8000, 100, id="idle"),
    ],
)
def test_least_used(used: int, allocatable: int, want: int) -> None:
    assert scoring.least_used_scores(arr((used,)), arr((allocatable,))).tolist() == [[want]]


@pytest.mark.parametrize(
    ("scores", "weights", "dominant", "want"),
    [
        pytest.param((75, 50), (1, 1), 0, 62, id="mean-truncates"),
        pytest.param((75, 50), (2, 1), 0, 66, id="weighted"),
        pytest.param((75, 50), (1, 1), 1, 58, id="dominant-adds-min"),
        pytest.param((75, 0), (1, 0), 1, 37, id="dominant-min-includes-weight-0-resource"),
        pytest.param((75, 50), (0, 0), 0, 0, id="scoring-disabled"),
    ],
)
def test_combine(scores: tuple[int, int], weights: tuple[int, int], dominant: int, want: int) -> None:
    got = scoring.combine(arr(scores), np.array(weights, dtype=np.int64), dominant)
    assert got.tolist() == [want]


@pytest.mark.parametrize(
    ("used", "want"),
    [
        pytest.param(0, 40, id="idle-scores-target"),
        pytest.param(2000, 70, id="below-target-rises"),
        pytest.param(4000, 100, id="at-target-peaks"),
        pytest.param(7000, 20, id="above-target-falls"),
        pytest.param(10000, 0, id="full-scores-zero"),
        pytest.param(11000, 0, id="over-capacity-scores-zero"),
        pytest.param(2250, 74, id="fraction-rounds-half-away"),  # (60 * 22.5 / 40) + 40 = 73.75
    ],
)
def test_target_utilization(used: int, want: int) -> None:
    got = scoring.target_utilization_scores(arr((used,)), arr((10000,)), np.array([40], dtype=np.int64))
    assert got.tolist() == [[want]]


def test_target_utilization_zero_allocatable() -> None:
    got = scoring.target_utilization_scores(arr((5,)), arr((0,)), np.array([40], dtype=np.int64))
    assert got.tolist() == [[0]]
