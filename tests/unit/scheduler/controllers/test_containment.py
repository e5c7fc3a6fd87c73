"""Controllers contain every exception per object, and a controller loop that raises is started again and
counted (:mod:`~koord_scheduler.scheduler.controllers.containment`, :mod:`~koord_scheduler.scheduler.task_restarts`)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from test_runner import setup

from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.controllers import runner
from koord_scheduler.scheduler.controllers.podgroup import PodGroupController
from koord_scheduler.scheduler.task_restarts import TaskRestarts, supervise
from kubeapi.http import ApiError
from tests.builders import make_node


async def test_a_controller_loop_that_raises_is_restarted_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    restarts = TaskRestarts()
    runs: list[int] = []
    delays: list[float] = []

    async def run() -> None:
        runs.append(len(runs))
        if len(runs) < 3:
            raise OverflowError("int too large to convert to float")

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    with caplog.at_level(logging.WARNING):
        await supervise("controller-x", run, restarts=restarts, sleep=sleep)

    assert len(runs) == 3  # ran again until it returned
    assert restarts.count("controller-x") == 2
    assert len(delays) == 2 and 0.5 <= delays[0] <= 1.0 and 1.0 <= delays[1] <= 2.0  # backing off
    assert [r.getMessage() for r in caplog.records] == [
        "controller-x failed and is restarted: OverflowError: int too large to convert to float"
    ] * 2


async def test_cancelling_a_supervised_task_cancels_it() -> None:
    started = asyncio.Event()

    async def run() -> None:
        started.set()
        await asyncio.sleep(3600)

    task = asyncio.ensure_future(supervise("controller-y", run, restarts=TaskRestarts()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_one_nodes_failing_decision_costs_that_node_only(monkeypatch: pytest.MonkeyPatch) -> None:
    controllers, api, _ = setup()
    controllers.on_node(EventType.ADDED, None, make_node("n2").capacity(cpu="10", memory="40Gi").build())
    real = runner.decide_node_slo

    def decide(node: Any, name: str, *args: Any) -> Any:
        if name == "n1":
            raise RecursionError("maximum recursion depth exceeded")
        return real(node, name, *args)

    monkeypatch.setattr(runner, "decide_node_slo", decide)
    await controllers.reconcile_pending()
    slo_writes = sorted(w.node for w in api.writes if w.controller == "nodeslo")
    assert slo_writes == ["n2"]
    assert controllers.contained.object_errors.count("Node", "ReconcileError") == 1


async def test_a_write_refused_for_good_is_not_retried_in_a_loop() -> None:
    controllers, api, _ = setup()
    refusal = ApiError(422, "Invalid", 'NodeSLO "n1" is invalid: spec.x: Invalid value', method="POST", path="/x")
    api.fail["/apis/slo.koordinator.sh/v1alpha1/nodeslos"] = refusal
    await controllers.reconcile_pending()
    assert ("nodeslo", "n1") not in controllers._recheck  # no retry timer: the same POST would fail again
    assert controllers.contained.object_errors.count("Node", "ReconcileError") == 1


class FailingPodGroupApi:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc
        self.calls = 0

    async def patch_pod_group(self, namespace: str, name: str, body: Any) -> None:
        self.calls += 1
        raise self.exc


async def test_a_pod_group_write_refused_for_good_is_reported_and_not_retried() -> None:
    from apis.scheduling.podgroup import parse_pod_group

    api = FailingPodGroupApi(ApiError(422, "Invalid", "PodGroup is invalid: status.scheduled: must be >= 0"))
    retries: list[float] = []
    controller = PodGroupController(api, retry_seconds=0.01, call_later=lambda seconds, fn: retries.append(seconds))
    controller.on_object(
        "PodGroup",
        EventType.ADDED,
        None,
        parse_pod_group({"metadata": {"name": "g", "namespace": "ns"}, "spec": {"minMember": 1}}),
    )
    assert await controller.reconcile() == 0
    assert (controller.dirty, retries) == (set(), [])  # no retry timer
    assert api.calls == 1
    assert controller.contained.object_errors.count("PodGroup", "ReconcileError") == 1
