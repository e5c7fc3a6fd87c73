"""The podgroup status controller: Koordinator's phase rules (coscheduling/controller/podgroup.go) as a
table, and the event → decision → write flow."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from apis.core.types import Pod
from apis.scheduling.podgroup import PodGroupRecord, PodGroupStatusRecord, parse_pod_group
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.controllers.podgroup import PodGroupController, decide_status
from tests.builders import make_pod

NOW = 1_800_000_000.0
START = "2027-01-15T08:00:00Z"


def group(phase: str = "", min_member: int = 2, **status: Any) -> PodGroupRecord:
    return PodGroupRecord("ns", "pg", min_member=min_member, status=PodGroupStatusRecord(phase=phase, **status))


def member(name: str, *, node: str = "", phase: str = "Pending") -> Pod:
    builder = make_pod(name).label("pod-group.scheduling.sigs.k8s.io", "pg").phase(phase)
    pod = builder.build()
    pod = dataclasses.replace(pod, meta=dataclasses.replace(pod.meta, namespace="ns"))
    return dataclasses.replace(pod, node_name=node) if node else pod


S = PodGroupStatusRecord


@pytest.mark.parametrize(
    ("current", "pods", "want"),
    [
        pytest.param(group(), [], S(phase="Pending"), id="new-is-pending"),
        pytest.param(group("Pending"), [member("a")], S(phase="Pending"), id="pending-until-min-pods"),
        pytest.param(
            group("Pending"), [member("a"), member("b")], S(phase="PreScheduling"), id="pending-to-prescheduling"
        ),
        pytest.param(
            group("PreScheduling"),
            [member("a"), member("b", node="n1")],
            S(phase="Scheduling", scheduled=1, schedule_start_time=START),
            id="scheduling-sets-start",
        ),
        pytest.param(
            group("Scheduling", schedule_start_time="2020-01-01T00:00:00Z"),
            [member("a", node="n1"), member("b", node="n2")],
            S(phase="Scheduled", scheduled=2, schedule_start_time="2020-01-01T00:00:00Z"),
            id="scheduled-keeps-start",
        ),
        pytest.param(
            group("Scheduled"),
            [member("a", node="n1", phase="Running"), member("b", node="n2", phase="Succeeded")],
            S(phase="Running", scheduled=2, running=1, succeeded=1, schedule_start_time=""),
            id="running",
        ),
        pytest.param(
            group("Running"),
            [member("a", node="n1", phase="Failed"), member("b", node="n2", phase="Succeeded")],
            S(phase="Failed", scheduled=2, succeeded=1, failed=1),
            id="failed",
        ),
        pytest.param(
            group("Running"),
            [member("a", node="n1", phase="Succeeded"), member("b", node="n2", phase="Succeeded")],
            S(phase="Finished", scheduled=2, succeeded=2),
            id="finished",
        ),
        pytest.param(group("Scheduling"), [], S(phase="Pending"), id="no-pods-back-to-pending"),
        pytest.param(group("Finished", succeeded=2), [], S(phase="Finished", succeeded=2), id="finished-is-final"),
    ],
)
def test_decide_status(current: PodGroupRecord, pods: list[Pod], want: PodGroupStatusRecord) -> None:
    assert decide_status(current, pods, now=NOW) == want


class Api:
    def __init__(self) -> None:
        self.patches: list[tuple[str, str, Mapping[str, Any]]] = []
        self.fail = False

    async def patch_pod_group(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        if self.fail:
            raise ClusterError("conflict")
        self.patches.append((namespace, name, body))


async def test_events_to_writes_and_no_repeat() -> None:
    api = Api()
    controller = PodGroupController(api, clock=lambda: NOW)
    record = parse_pod_group(
        {"metadata": {"name": "pg", "namespace": "ns"}, "spec": {"minMember": 2}, "status": {"phase": "PreScheduling"}}
    )
    controller.on_object("PodGroup", EventType.ADDED, None, record)
    a, b = member("a", node="n1"), member("b", node="n2")
    controller.on_pod(EventType.ADDED, None, a)
    controller.on_pod(EventType.ADDED, None, b)
    assert await controller.reconcile() == 1
    assert api.patches == [
        ("ns", "pg", {"status": {"phase": "Scheduled", "scheduled": 2, "running": 0, "succeeded": 0, "failed": 0}})
    ]
    controller.on_pod(EventType.MODIFIED, b, b)
    assert await controller.reconcile() == 0, "nothing changed: no second write"
    controller.on_pod(EventType.DELETED, b, None)
    assert await controller.reconcile() == 1
    assert api.patches[-1][2]["status"]["phase"] == "Scheduling"


async def test_failed_write_is_kept_for_a_retry() -> None:
    api = Api()
    api.fail = True
    retries: list[tuple[float, Callable[[], None]]] = []
    controller = PodGroupController(
        api, clock=lambda: NOW, retry_seconds=5, call_later=lambda seconds, fn: retries.append((seconds, fn))
    )
    controller.on_object("PodGroup", EventType.ADDED, None, group())
    assert await controller.reconcile() == 0
    assert controller.groups["ns/pg"].status.phase == "", "not applied locally"
    assert (controller.dirty, [seconds for seconds, _ in retries]) == (set(), [5])
    retries[0][1]()  # the retry is due
    assert controller.dirty == {"ns/pg"}


class SlowApi:
    """Holds each PATCH until released, counting the writes in progress at once."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0
        self.release = asyncio.Event()
        self.written: list[str] = []

    async def patch_pod_group(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        await self.release.wait()
        self.in_flight -= 1
        self.written.append(name)


@pytest.mark.parametrize(("workers", "most"), [(1, 1), (3, 3), (8, 5)], ids=["one", "three", "more-than-work"])
async def test_controller_workers_bound_the_writes_in_progress(workers: int, most: int) -> None:
    api = SlowApi()
    controller = PodGroupController(api, clock=lambda: NOW, workers=workers)
    for i in range(5):
        controller.on_object(
            "PodGroup",
            EventType.ADDED,
            None,
            parse_pod_group({"metadata": {"name": f"pg{i}", "namespace": "ns"}, "spec": {"minMember": 2}}),
        )
    reconciling = asyncio.create_task(controller.reconcile())
    for _ in range(100):
        await asyncio.sleep(0)
    assert api.in_flight == most
    api.release.set()
    assert await asyncio.wait_for(reconciling, 5) == 5
    assert api.most == most and sorted(api.written) == [f"pg{i}" for i in range(5)]
