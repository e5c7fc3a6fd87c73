"""TokenBucket: client-go's qps/burst limiter."""

from __future__ import annotations

import pytest

from kubeapi import TokenBucket
from kubeapi.ratelimit import YieldingBucket


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


@pytest.mark.parametrize(
    ("busy", "want_slept"),
    [
        pytest.param(False, [], id="idle-scheduler-full-speed"),
        pytest.param(True, [0.5, 1.0], id="binding-scheduler-shared-budget"),
    ],
)
async def test_yielding_bucket_takes_the_shared_budget_only_while_busy(busy: bool, want_slept: list[float]) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    clock = FakeClock()
    shared = TokenBucket(2, 1, clock=clock, sleep=sleep)
    # Two controllers' pools, unlimited on their own, share the 2/s budget while the scheduler binds.
    first = YieldingBucket(0, 1, busy=lambda: busy, while_busy=shared, clock=clock, sleep=sleep)
    second = YieldingBucket(0, 1, busy=lambda: busy, while_busy=shared, clock=clock, sleep=sleep)
    for bucket in (first, second, first):
        await bucket.acquire()
    assert slept == want_slept
