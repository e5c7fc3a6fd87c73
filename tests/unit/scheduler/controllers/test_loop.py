"""The hosted controllers' one loop: ready first, a full first pass, passes on wake and on resync,
failures contained. Time is the loop's injected clock and pause: nothing here sleeps."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from koord_scheduler.controllers.loop import ReconcileLoop


class Pauses:
    """A pause that returns at once (after letting other tasks run), recording its timeout; ``then(n)``
    runs at the ``n``-th pause (the test's time passing)."""

    def __init__(self, then: Callable[[int], None]) -> None:
        self.timeouts: list[float] = []
        self.then = then

    async def __call__(self, wake: asyncio.Event, stop: asyncio.Event, seconds: float) -> None:
        self.timeouts.append(seconds)
        self.then(len(self.timeouts))
        await asyncio.sleep(0)


async def test_nothing_before_ready_then_one_full_pass() -> None:
    listed = False
    stop = asyncio.Event()
    passes: list[bool] = []

    def then(n: int) -> None:
        nonlocal listed
        listed = n >= 3  # listed while the loop waits the third time
        if n == 4:
            stop.set()

    pauses = Pauses(then)
    loop = ReconcileLoop("demo", waiting_for="Demos", idle_seconds=60, pause=pauses)

    async def reconcile(full: bool) -> None:
        passes.append(full)

    await asyncio.wait_for(loop.run(stop, ready=lambda: listed, reconcile=reconcile, pending=lambda: False), 5)
    assert (passes, pauses.timeouts) == ([True], [1.0, 1.0, 1.0, 60])


async def test_a_wake_runs_a_pass_at_once() -> None:
    loop = ReconcileLoop("demo", waiting_for="Demos", idle_seconds=3600)  # the real pause: only a wake ends it
    ran = asyncio.Event()
    passes: list[bool] = []
    stop = asyncio.Event()

    async def reconcile(full: bool) -> None:
        passes.append(full)
        ran.set()

    task = asyncio.create_task(loop.run(stop, ready=lambda: True, reconcile=reconcile, pending=lambda: False))
    await asyncio.wait_for(ran.wait(), 5)
    ran.clear()
    loop.wake()
    await asyncio.wait_for(ran.wait(), 5)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert passes == [True, False]


async def test_a_pass_that_raises_is_logged_counted_and_the_loop_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    stop = asyncio.Event()
    loop = ReconcileLoop("demo", waiting_for="Demos", pause=Pauses(lambda n: stop.set() if n == 2 else None))
    calls: list[bool] = []

    async def reconcile(full: bool) -> None:
        calls.append(full)
        if len(calls) == 1:
            raise ValueError("cpu out of range")

    with caplog.at_level(logging.ERROR):
        await asyncio.wait_for(loop.run(stop, ready=lambda: True, reconcile=reconcile, pending=lambda: False), 5)
    assert (loop.passes, loop.failures, len(calls)) == (2, 1, 2)
    assert "demo controller pass failed: ValueError: cpu out of range" in caplog.text


async def test_pending_work_runs_without_a_pause_and_resync_passes_are_full() -> None:
    now = [0.0]
    stop = asyncio.Event()

    def then(n: int) -> None:
        now[0] = {1: 10.0, 2: 15.0}.get(n, now[0])  # the first pause lasts until the resync is due
        if n == 3:
            stop.set()

    pauses = Pauses(then)
    loop = ReconcileLoop(
        "demo", waiting_for="Demos", resync_seconds=10, idle_seconds=60, clock=lambda: now[0], pause=pauses
    )
    passes: list[bool] = []

    async def reconcile(full: bool) -> None:
        passes.append(full)

    # pending after the first pass only: the second runs without a pause
    await asyncio.wait_for(loop.run(stop, ready=lambda: True, reconcile=reconcile, pending=lambda: len(passes) == 1), 5)
    assert passes == [True, False, True, False]
    assert pauses.timeouts == [10.0, 10.0, 5.0]  # never past the next resync


async def test_stop_while_waiting_for_ready_returns_without_a_pass() -> None:
    stop = asyncio.Event()
    loop = ReconcileLoop("demo", waiting_for="Demos", pause=Pauses(lambda n: stop.set()))
    passes: list[bool] = []

    async def reconcile(full: bool) -> None:
        passes.append(full)

    await asyncio.wait_for(loop.run(stop, ready=lambda: False, reconcile=reconcile, pending=lambda: False), 5)
    assert passes == []


async def test_the_wait_after_a_pass_ends_when_the_next_timer_is_due() -> None:
    now = [100.0]
    stop = asyncio.Event()
    timers = [103.5, None, 50.0]  # a timer in 3.5 s, none, one already due

    def then(n: int) -> None:
        timers.pop(0)
        if not timers:
            stop.set()

    pauses = Pauses(then)
    loop = ReconcileLoop("demo", waiting_for="Demos", idle_seconds=60, clock=lambda: now[0], pause=pauses)

    async def reconcile(full: bool) -> None:
        return None

    def due() -> float | None:
        return timers[0]

    await asyncio.wait_for(loop.run(stop, ready=lambda: True, reconcile=reconcile, pending=lambda: False, due=due), 5)
    assert pauses.timeouts == [3.5, 60, 0.0]
