"""The migration controller on the hosted controllers' ReconcileLoop: readiness, the first full pass, the
scavenger's and the arbitration's ``due()`` timers, events waking it, and a failing pass contained."""

from __future__ import annotations

import asyncio
import itertools

from tests.unit.descheduler.test_migration_controller import Harness, _job


async def _until(condition: object, *, seconds: float = 5.0) -> None:
    assert callable(condition)
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)


async def test_the_migration_controller_runs_on_the_shared_loop() -> None:
    h = Harness()
    c = h.controller
    h.api.jobs["job-1"] = _job(ttl="10m")
    h.sync()
    listed = False
    c.ready = lambda: listed
    c.gc_interval = 0.15
    c.arbitration_interval = 0.1
    scavenged: list[float] = []
    arbitrated: list[float] = []
    plain_scavenge, plain_arbitrate = c.scavenge, c.arbitrate

    async def scavenge() -> int:
        scavenged.append(c.loop.clock())
        if len(scavenged) == 2:
            raise RuntimeError("boom")
        return await plain_scavenge()

    def arbitrate() -> int:
        arbitrated.append(c.loop.clock())
        return plain_arbitrate()

    c.scavenge = scavenge  # type: ignore[method-assign]
    c.arbitrate = arbitrate  # type: ignore[method-assign]
    stop = asyncio.Event()
    task = asyncio.create_task(c.run(stop))
    await asyncio.sleep(0.2)
    assert (scavenged, arbitrated, h.job().get("status")) == ([], [], None)  # nothing before ready()

    listed = True
    await _until(lambda: h.job().get("status", {}).get("phase") == "Running")  # the first pass: every job
    assert h.job()["status"]["phase"] == "Running"
    await _until(lambda: len(scavenged) >= 4 and len(arbitrated) >= 4)
    assert len(scavenged) >= 4 and len(arbitrated) >= 4
    assert all(b - a >= 0.149 for a, b in itertools.pairwise(scavenged))
    assert all(b - a >= 0.099 for a, b in itertools.pairwise(arbitrated))
    assert c.loop.failures == 1  # the scavenger's failure: logged and counted, the controller goes on

    c.gc_interval = c.arbitration_interval = 3600.0
    await asyncio.sleep(0.3)
    passes = c.loop.passes
    h.api.jobs["job-2"] = _job("job-2", pod="web-0")
    h.sync()  # the job's event marks it dirty and wakes the loop long before any timer
    await _until(lambda: "status" in h.job("job-2"))
    assert "status" in h.job("job-2")
    assert c.loop.passes > passes
    stop.set()
    await asyncio.wait_for(task, 5)
    assert c._timers == {}
