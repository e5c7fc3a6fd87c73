"""TokenBucket: client-go's qps/burst limiter."""

from __future__ import annotations

import pytest

from kubeapi import TokenBucket


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("qps", "burst", "advance", "want_delays"),
    [
        pytest.param(10, 3, 0.0, [0, 0, 0, 0.1, 0.2], id="burst-then-spaced"),
        pytest.param(10, 3, 0.05, [0, 0, 0, 0.05, 0.15], id="refill-while-waiting"),
        pytest.param(0, 1, 0.0, [0, 0, 0, 0, 0], id="zero-qps-unlimited"),
        pytest.param(-1, 1, 0.0, [0, 0, 0, 0, 0], id="negative-qps-unlimited"),
        pytest.param(1e6, 1, 0.0, [0, 0, 0, 0, 0], id="huge-qps-unlimited"),
    ],
)
def test_reserve(qps: float, burst: int, advance: float, want_delays: list[float]) -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps, burst, clock=clock)
    delays = []
    for i in range(5):
        if i == 3:
            clock.now += advance
        delays.append(round(bucket.reserve(), 6))
    assert delays == [round(d, 6) for d in want_delays]


def test_tokens_never_exceed_burst_after_idling() -> None:
    clock = FakeClock()
    bucket = TokenBucket(100, 2, clock=clock)
    clock.now = 3600.0
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, pytest.approx(0.01)]


async def test_acquire_sleeps_for_the_reserved_delay() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    clock = FakeClock()
    bucket = TokenBucket(4, 1, clock=clock, sleep=sleep)
    await bucket.acquire()
    await bucket.acquire()
    assert slept == [0.25]
