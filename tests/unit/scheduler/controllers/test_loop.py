"""The hosted controllers' one loop: ready first, a full first pass, passes on wake, failures contained."""

from __future__ import annotations

import asyncio
import logging

import pytest

from koord_scheduler.scheduler.controllers.loop import ReconcileLoop


class Recorder:
    def __init__(self, *, fail_first: bool = False) -> None:
        self.passes: list[bool] = []
        self.fail_first = fail_first
        self.ran = asyncio.Event()

    async def reconcile(self, full: bool) -> None:
        self.passes.append(full)
        self.ran.set()
        if self.fail_first and len(self.passes) == 1:
            raise ValueError("cpu out of range")


async def test_nothing_before_ready_then_a_full_pass_then_a_pass_per_wake() -> None:
    loop = ReconcileLoop("demo", waiting_for="Demos", idle_seconds=60)
    recorder = Recorder()
    listed = False
    stop = asyncio.Event()
    task = asyncio.create_task(
        loop.run(stop, ready=lambda: listed, reconcile=recorder.reconcile, pending=lambda: False)
    )
    await asyncio.sleep(0)
    assert recorder.passes == []
    listed = True
    await asyncio.wait_for(recorder.ran.wait(), 5)  # the ready check runs once a second
    recorder.ran.clear()
    loop.wake()
    await asyncio.wait_for(recorder.ran.wait(), 5)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert recorder.passes == [True, False]


async def test_a_pass_that_raises_is_logged_counted_and_the_loop_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    loop = ReconcileLoop("demo", waiting_for="Demos", idle_seconds=60)
    recorder = Recorder(fail_first=True)
    stop = asyncio.Event()
    caplog.set_level(logging.ERROR)
    task = asyncio.create_task(loop.run(stop, ready=lambda: True, reconcile=recorder.reconcile, pending=lambda: False))
    await asyncio.wait_for(recorder.ran.wait(), 5)
    recorder.ran.clear()
    loop.wake()
    await asyncio.wait_for(recorder.ran.wait(), 5)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert (loop.passes, loop.failures, len(recorder.passes)) == (2, 1, 2)
    assert "demo controller pass failed: ValueError: cpu out of range" in caplog.text


async def test_pending_work_runs_again_without_an_event_and_resync_is_full() -> None:
    now = [0.0]
    loop = ReconcileLoop("demo", waiting_for="Demos", resync_seconds=10, idle_seconds=60, clock=lambda: now[0])
    passes: list[bool] = []
    stop = asyncio.Event()

    async def reconcile(full: bool) -> None:
        passes.append(full)
        if len(passes) == 2:
            now[0] = 10.0  # the resync is due: the loop's wait is 0 s, its next pass full
        elif len(passes) == 3:
            stop.set()

    # pending after the first pass only: the second runs without an event, the third at the resync
    await asyncio.wait_for(loop.run(stop, ready=lambda: True, reconcile=reconcile, pending=lambda: len(passes) == 1), 5)
    assert passes == [True, False, True]


async def test_stop_while_waiting_for_ready_returns_without_a_pass() -> None:
    loop = ReconcileLoop("demo", waiting_for="Demos")
    recorder = Recorder()
    stop = asyncio.Event()
    stop.set()
    await asyncio.wait_for(loop.run(stop, ready=lambda: False, reconcile=recorder.reconcile, pending=lambda: False), 5)
    assert recorder.passes == []
