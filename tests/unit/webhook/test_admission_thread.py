"""The admission server runs on a thread and event loop of its own: a slow review never holds the caller's
loop (the scheduling loop in koord-scheduler), a failed start is raised to the caller, stop joins it."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, cast

import pytest

from koord_scheduler.webhook.options import WebhookRuntime
from koord_scheduler.webhook.thread import AdmissionThread


class BusyRuntime:
    """Stands for WebhookRuntime: records where it runs, and burns CPU on its loop like a big review."""

    def __init__(self, *, fail: BaseException | None = None) -> None:
        self.fail = fail
        self.thread: int | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stopped = False
        self.busy_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.thread = threading.get_ident()
        self.loop = asyncio.get_running_loop()
        if self.fail is not None:
            raise self.fail
        self.busy_task = asyncio.get_running_loop().create_task(self._busy())

    async def _busy(self) -> None:
        while True:
            time.sleep(0.2)  # a synchronous stretch, as decoding and answering a large review is
            await asyncio.sleep(0)

    async def stop(self) -> None:
        self.stopped = True
        if self.busy_task is not None:
            self.busy_task.cancel()
            await asyncio.gather(self.busy_task, return_exceptions=True)


def thread_of(runtime: BusyRuntime) -> AdmissionThread:
    return AdmissionThread(lambda: cast(WebhookRuntime, runtime))


async def test_runs_on_its_own_thread_and_loop_and_never_holds_the_callers_loop() -> None:
    runtime = BusyRuntime()
    admission = thread_of(runtime)
    await admission.start()
    try:
        assert runtime.thread != threading.get_ident()
        assert runtime.loop is not asyncio.get_running_loop()
        lateness = []
        for _ in range(20):
            due = time.monotonic() + 0.01
            await asyncio.sleep(0.01)
            lateness.append(time.monotonic() - due)
        assert max(lateness) < 0.15, f"the caller's loop was held: {max(lateness):.3f}s late"
    finally:
        await admission.stop()
    assert runtime.stopped


@pytest.mark.parametrize("error", [OSError(98, "Address already in use"), RuntimeError("no certificate")])
async def test_a_failed_start_is_raised_to_the_caller(error: BaseException) -> None:
    runtime = BusyRuntime(fail=error)
    admission = thread_of(runtime)
    with pytest.raises(type(error), match=str(error.args[-1])):
        await admission.start()
    await admission.stop()
    assert runtime.stopped


async def test_stop_before_anything_ran_is_harmless() -> None:
    admission = AdmissionThread(lambda: cast(Any, BusyRuntime()))
    await admission.stop()
