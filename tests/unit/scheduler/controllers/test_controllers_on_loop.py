"""The colocation, ElasticQuota status and quotaprofile controllers run on the hosted controllers'
:class:`~koord_scheduler.controllers.loop.ReconcileLoop`: a per-node timer ends the wait, a pass that
raises is counted and the loop goes on, the status controller passes once per ``interval``. Time is the
loop's injected clock and pause: nothing here sleeps."""

from __future__ import annotations

import asyncio
import logging

import pytest

from apis.core.parse import parse_node
from koord_scheduler.controllers.api import MemoryControllerApi
from koord_scheduler.controllers.decide import NODESLOS
from koord_scheduler.controllers.quota_status import QuotaStatusController
from koord_scheduler.controllers.quotaprofile import RESYNC_SECONDS
from koord_scheduler.framework.types import EventType
from kubeapi.http import ApiError
from tests.unit.scheduler.controllers import test_runner as colocation_cases
from tests.unit.scheduler.controllers.test_loop import Pauses
from tests.unit.scheduler.controllers.test_quotaprofile import controller_with_pool


async def test_colocation_a_failed_write_ends_the_wait_when_its_retry_is_due() -> None:
    controllers, api, clock = colocation_cases.setup()
    api.fail[NODESLOS] = ApiError(503, "ServiceUnavailable", "try later", method="POST", path=NODESLOS)
    stop = asyncio.Event()

    def then(n: int) -> None:
        if n == 1:  # the retry (5 s) is the first thing due: the wait lasts that long
            clock.now += 5
            del api.fail[NODESLOS]
        else:
            stop.set()

    pauses = Pauses(then)
    controllers.loop.pause = pauses
    controllers.loop.idle_seconds = 60
    await asyncio.wait_for(controllers.run(stop), 5)
    assert pauses.timeouts[0] == 5.0  # not the idle 60 s, nor the 600 s resync
    assert [w.verb for w in api.writes if w.controller == "nodeslo"] == ["POST"]
    assert controllers.loop.passes == 2


async def test_colocation_a_pass_that_raises_is_counted_and_the_next_pass_writes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    controllers, api, _clock = colocation_cases.setup()
    stop = asyncio.Event()
    controllers.loop.pause = Pauses(lambda n: stop.set())
    reconcile = controllers.reconcile_pending
    calls = 0

    async def flaky() -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("index out of step")
        return await reconcile()

    controllers.reconcile_pending = flaky  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR):
        await asyncio.wait_for(controllers.run(stop), 5)
    assert (controllers.loop.passes, controllers.loop.failures) == (2, 1)
    assert "colocation controller pass failed: RuntimeError: index out of step" in caplog.text
    assert {w.controller for w in api.writes} == {"nodeslo", "noderesource"}  # the dirty nodes were kept


async def test_quota_status_passes_once_per_interval_and_survives_a_failing_pass() -> None:
    api = MemoryControllerApi()
    controller = QuotaStatusController(api, interval=2.5)
    stop = asyncio.Event()
    pauses = Pauses(lambda n: stop.set() if n == 3 else None)
    controller.loop.pause = pauses
    sync = controller.sync
    calls = 0

    async def flaky() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise OverflowError("int too large")
        await sync()

    controller.sync = flaky  # type: ignore[method-assign]
    await asyncio.wait_for(controller.run(stop), 5)
    assert pauses.timeouts == [2.5, 2.5, 2.5]
    assert (controller.loop.passes, controller.loop.failures) == (3, 1)
    assert [w.note for w in api.writes] == ["built-in"] * 3  # created by the first pass that ran


async def test_quota_status_events_do_not_start_a_pass() -> None:
    """A pass is a whole-cluster one: pod events (one per bind) must not each start one."""
    controller = QuotaStatusController(MemoryControllerApi(), interval=3600)
    synced = asyncio.Event()
    sync = controller.sync

    async def counted() -> None:
        await sync()
        synced.set()

    controller.sync = counted  # type: ignore[method-assign]
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    await asyncio.wait_for(synced.wait(), 5)
    node = parse_node({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8"}}})
    controller.on_node(EventType.ADDED, None, node)
    await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert controller.loop.passes == 1


async def test_quotaprofile_every_profile_again_at_each_resync() -> None:
    controller, api = controller_with_pool()
    api.fail = True  # the first pass's write fails; its retry (in 2 s) does not come before the test ends
    now = [0.0]
    stop = asyncio.Event()

    def then(n: int) -> None:
        if n == 1:
            api.fail = False
            now[0] = RESYNC_SECONDS  # no event: only the resync looks at the profile again
        else:
            stop.set()

    pauses = Pauses(then)
    controller.loop.pause = pauses
    controller.loop.clock = lambda: now[0]
    await asyncio.wait_for(controller.run(stop), 5)
    assert [w.verb for w in api.writes] == ["POST"]
    assert pauses.timeouts == [1.0, 1.0]
    assert controller.loop.passes == 2
