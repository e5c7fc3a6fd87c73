"""Events go out as they come: as many in flight as the scheduler keeps bindings in flight, none held back
behind the binds."""

from __future__ import annotations

import asyncio
from typing import Any

from koord_scheduler.scheduler.scheduler import SchedulerOptions
from kubeapi.events import EventOptions, EventRecorder, Regarding


class HeldApi:
    """An API server that holds every request until released, counting how many are in flight."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0
        self.paths: list[str] = []
        self.release = asyncio.Event()

    async def request(self, method: str, path: str, **_: Any) -> bytes:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await self.release.wait()
        finally:
            self.in_flight -= 1
        self.paths.append(path)
        return b"{}"


def _record(recorder: EventRecorder, name: str) -> None:
    recorder.record_for(
        Regarding("Pod", "v1", "default", name, f"uid-{name}", "1"),
        event_type="Normal",
        reason="Scheduled",
        action="Binding",
        note="bound",
        controller="default-scheduler",
    )


def test_events_keep_as_many_in_flight_as_the_bindings() -> None:
    assert EventOptions().senders >= SchedulerOptions().max_concurrent_bindings


async def test_a_burst_of_events_goes_out_at_once_and_every_one_is_written() -> None:
    api = HeldApi()
    recorder = EventRecorder(api, options=EventOptions(hostname="h"))  # type: ignore[arg-type]
    recorder.start()
    try:
        for i in range(200):
            _record(recorder, f"p{i}")
        for _ in range(100):
            await asyncio.sleep(0)
            if api.in_flight == EventOptions().senders:
                break
        assert api.in_flight == EventOptions().senders  # no budget, no busy wait: all senders at once
        api.release.set()
        await asyncio.wait_for(recorder.flush(), 5)
    finally:
        await recorder.stop()
    assert (recorder.written, recorder.dropped, len(api.paths)) == (200, 0, 200)
