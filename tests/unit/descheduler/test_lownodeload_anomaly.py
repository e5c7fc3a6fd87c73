"""The anomaly detector, with the cases of Koordinator's ``Test_filterRealAbnormalNodes``."""

from __future__ import annotations

import pytest

from koord_scheduler.descheduler.lownodeload.anomaly import Detectors


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def _detectors(abnormalities: int, clock: Clock, normalities: int = 1) -> Detectors:
    return Detectors(
        abnormalities=abnormalities, normalities=normalities, timeout=60.0, cache_timeout=300.0, clock=clock
    )


@pytest.mark.parametrize(
    ("abnormalities", "already", "detect_counts", "want"),
    [
        pytest.param(1, [], 0, ["n1", "n2"], id="one-time-detected-at-once"),
        pytest.param(2, [], 0, [], id="two-times-not-yet"),
        pytest.param(2, [], 2, ["n1", "n2"], id="two-times-after-two-more"),
        pytest.param(2, ["n2"], 0, ["n2"], id="mix-abnormal-and-normal"),
    ],
)
def test_koordinator_filter_real_abnormal_nodes(
    abnormalities: int, already: list[str], detect_counts: int, want: list[str]
) -> None:
    d = _detectors(abnormalities, Clock())
    for _ in range(abnormalities):
        d.abnormal(already)
    for _ in range(detect_counts):
        d.abnormal(["n1", "n2"])
    assert d.abnormal(["n1", "n2"]) == want


def test_anomaly_ends_after_timeout_and_after_normal_marks() -> None:
    clock = Clock()
    d = _detectors(2, clock, normalities=1)
    for _ in range(2):
        d.abnormal(["n1"])
    assert d.abnormal(["n1"]) == ["n1"]
    clock.now = 61.0  # past the timeout: back to OK, counting again from zero
    assert d.abnormal(["n1"]) == []
    for _ in range(2):
        d.abnormal(["n1"])
    d.mark_normal(["n1"])
    d.mark_normal(["n1"])  # more than consecutiveNormalities normal marks
    assert d.abnormal(["n1"]) == []


def test_reset_starts_over_and_cache_forgets() -> None:
    clock = Clock()
    d = _detectors(2, clock)
    d.abnormal(["n1"])
    d.abnormal(["n1"])
    assert d.abnormal(["n1"]) == ["n1"]
    d.reset(["n1"])  # as Koordinator's Reset: leaving the anomaly state clears the counts
    assert d.abnormal(["n1"]) == []
    clock.now = 1000.0  # beyond detectorCacheTimeout: a fresh detector
    assert d.abnormal(["n1"]) == []
