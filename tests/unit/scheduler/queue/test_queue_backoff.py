"""Backoff maths (kube's backoff_queue.go)."""

from __future__ import annotations

import math

import pytest

from koord_scheduler.scheduler.queue.backoff import (
    backoff_duration,
    backoff_expiry,
    is_backing_off,
    release_time,
)


@pytest.mark.parametrize(
    ("attempts", "want_seconds"),
    [
        pytest.param(0, 0.0, id="never-tried-no-backoff"),
        pytest.param(1, 1.0, id="first-failure-initial"),
        pytest.param(2, 2.0, id="doubles"),
        pytest.param(3, 4.0, id="doubles-again"),
        pytest.param(4, 8.0, id="eight"),
        pytest.param(5, 10.0, id="capped-at-max"),
        pytest.param(6, 10.0, id="stays-capped"),
        pytest.param(1000, 10.0, id="huge-attempts-no-overflow"),
    ],
)
def test_backoff_duration_defaults(attempts: int, want_seconds: float) -> None:
    assert backoff_duration(attempts, initial=1.0, maximum=10.0) == want_seconds


def test_backoff_duration_sequence_with_defaults() -> None:
    got = [backoff_duration(a, initial=1.0, maximum=10.0) for a in range(1, 7)]
    assert got == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


@pytest.mark.parametrize(
    ("timestamp", "attempts", "align", "want_expiry"),
    [
        pytest.param(100.25, 1, True, 101.0, id="aligned-truncates-to-second"),
        pytest.param(100.25, 1, False, 101.25, id="unaligned-exact"),
        pytest.param(100.25, 3, True, 104.0, id="aligned-third-attempt"),
        pytest.param(100.25, 0, True, -math.inf, id="never-tried"),
    ],
)
def test_backoff_expiry(timestamp: float, attempts: int, align: bool, want_expiry: float) -> None:
    assert backoff_expiry(timestamp, attempts, initial=1.0, maximum=10.0, align=align) == want_expiry


@pytest.mark.parametrize(
    ("expiry", "now", "align", "want_backing_off"),
    [
        pytest.param(101.0, 100.9, True, True, id="aligned-before"),
        pytest.param(101.0, 101.5, True, True, id="aligned-same-window-still-backing-off"),
        pytest.param(101.0, 102.0, True, False, id="aligned-next-window-released"),
        pytest.param(101.25, 101.25, False, True, id="unaligned-equal-still-backing-off"),
        pytest.param(101.25, 101.26, False, False, id="unaligned-after"),
        pytest.param(-math.inf, 0.0, True, False, id="never-tried-never-backing-off"),
    ],
)
def test_is_backing_off(expiry: float, now: float, align: bool, want_backing_off: bool) -> None:
    assert is_backing_off(expiry, now, align=align) is want_backing_off


@pytest.mark.parametrize(
    ("expiry", "align"),
    [pytest.param(101.0, True, id="aligned"), pytest.param(101.25, False, id="unaligned")],
)
def test_release_time_is_first_instant_not_backing_off(expiry: float, align: bool) -> None:
    released = release_time(expiry, align=align)
    assert not is_backing_off(expiry, released, align=align)
    assert is_backing_off(expiry, math.nextafter(released, -math.inf), align=align)
