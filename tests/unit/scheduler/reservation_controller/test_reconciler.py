import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from koord_scheduler.controllers.reservation import (
    ClusterView,
    ControllerOptions,
    Decision,
    OwnerPod,
    Reconciler,
)
from kubeapi.http import ApiError

CREATED = 1_800_000_000.0
CREATED_TEXT = "2027-01-15T08:00:00Z"
P1 = OwnerPod("default", "p1", "u1", {"cpu": 500})


def res(name: str, *, phase: str = "Available", node: str = "n1", owners: list[str] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "nodeName": node, "allocatable": {"cpu": "2"}}
    if owners:
        status["currentOwners"] = [{"namespace": "default", "name": o, "uid": "u1"} for o in owners]
        status["allocated"] = {"cpu": "500m"}
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": CREATED_TEXT},
        "spec": {"template": {}, "owners": [{"object": {"name": "p1"}}], "ttl": "1h", "allocateOnce": False},
        "status": status,
    }


class RecordingWriter:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.wrote = asyncio.Event()

    async def patch_status(self, name: str, patch: Mapping[str, Any]) -> None:
        self.calls.append(("patch", name, dict(patch)))
        self.wrote.set()

    async def delete(self, name: str) -> None:
        self.calls.append(("delete", name, None))
        self.wrote.set()


def make(*, leader: bool = True, now: float = CREATED + 1) -> tuple[Reconciler, RecordingWriter]:
    writer = RecordingWriter()
    return Reconciler(ControllerOptions(), writer, is_leader=lambda: leader, clock=lambda: now), writer


def names(decisions: list[Any]) -> list[str]:
    return [name for name, _ in decisions]


def test_nothing_before_the_first_reservation_event() -> None:
    # Nothing is decided before the first Reservation event hands over the (complete) view.
    reconciler, _ = make()
    reconciler.mark_all_dirty()
    assert reconciler.decide_due(full=True) == []


def test_owner_event_decides_only_its_reservation() -> None:
    reconciler, _ = make()
    owners: dict[str, list[OwnerPod]] = {"uid-a": [P1], "uid-b": [P1]}
    view = ClusterView(owners=owners, nodes={"n1": True})
    reconciler.observe_reservation("ADDED", res("a", owners=["p1"]), view)
    reconciler.observe_reservation("ADDED", res("b", owners=["p1"]), view)
    assert reconciler.decide_due(full=False) == []  # both statuses are true
    owners["uid-a"].clear()
    owners["uid-b"].clear()
    reconciler.mark_dirty("uid-a")  # only a's owner pod sent an event
    want_cleared = {"status": {"currentOwners": None, "allocated": None}}
    assert [(n, d.status_patch) for n, d in reconciler.decide_due(full=False)] == [("a", want_cleared)]
    assert names(reconciler.decide_due(full=True)) == ["a", "b"]  # the periodic sweep catches b


def test_full_sweep_sees_every_reservation_and_node_loss() -> None:
    reconciler, _ = make()
    view = ClusterView(owners={}, nodes={"n1": True})
    reconciler.observe_reservation("ADDED", res("a"), view)
    reconciler.observe_reservation("ADDED", res("b", node="n2"), view)
    decisions = dict(reconciler.decide_due(full=True))
    assert list(decisions) == ["b"]
    assert decisions["b"].status_patch["status"]["phase"] == "Failed"  # type: ignore[index]


def test_deleted_reservation_is_forgotten() -> None:
    reconciler, _ = make()
    view = ClusterView(owners={}, nodes={})
    reconciler.observe_reservation("ADDED", res("a"), view)
    reconciler.observe_reservation("DELETED", res("a"), view)
    assert reconciler.decide_due(full=True) == []


def test_follower_decides_nothing() -> None:
    reconciler, _ = make(leader=False)
    reconciler.observe_reservation("ADDED", res("a", node="gone"), ClusterView(owners={}, nodes={}))
    assert reconciler.decide_due(full=True) == []


@pytest.mark.parametrize(
    ("phase", "want_call"),
    [
        pytest.param("Available", ("patch", "a"), id="expired-patched"),
        pytest.param("Failed", ("delete", "a"), id="collected-deleted"),
    ],
)
async def test_run_applies_and_stops_on_stop(phase: str, want_call: tuple[str, str]) -> None:
    reconciler, writer = make(now=CREATED + 10**6)
    stop = asyncio.Event()
    task = asyncio.create_task(reconciler.run(stop))
    reconciler.observe_reservation("ADDED", res("a", phase=phase), ClusterView(owners={}, nodes={"n1": True}))
    await asyncio.wait_for(writer.wrote.wait(), 5)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert [(kind, name) for kind, name, _ in writer.calls] == [want_call]


class BlockingWriter:
    """Holds every write until released, counting how many are in progress at once."""

    def __init__(self, fail: str = "") -> None:
        self.in_flight = 0
        self.most = 0
        self.written: list[str] = []
        self.release = asyncio.Event()
        self.fail = fail

    async def patch_status(self, name: str, patch: Mapping[str, Any]) -> None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.wait_for(self.release.wait(), 5)
        finally:
            self.in_flight -= 1
        self.written.append(name)
        if name == self.fail:
            raise RuntimeError("conflict")

    async def delete(self, name: str) -> None:
        await self.patch_status(name, {})


@pytest.mark.parametrize(("workers", "most"), [(1, 1), (3, 3), (10, 6)], ids=["one", "three", "more-than-work"])
async def test_controller_workers_bound_the_writes_in_progress(workers: int, most: int) -> None:
    writer = BlockingWriter(fail="r2")
    reconciler = Reconciler(ControllerOptions(workers=workers), writer, clock=lambda: CREATED + 1)
    decisions = [(f"r{i}", Decision(status_patch={"status": {}})) for i in range(6)]
    applying = asyncio.create_task(reconciler.apply(decisions))
    for _ in range(100):  # every task runs until it waits for the release: no more writes start
        await asyncio.sleep(0)
    assert writer.in_flight == most
    writer.release.set()
    await asyncio.wait_for(applying, 5)
    assert writer.most == most
    assert sorted(writer.written) == [f"r{i}" for i in range(6)]  # the failing write did not stop the others


class ConflictingWriter(RecordingWriter):
    async def patch_status(self, name: str, patch: Mapping[str, Any]) -> None:
        await super().patch_status(name, patch)
        raise ApiError(409, "Conflict", "the object has been modified")


async def test_conflict_is_decided_again_on_the_newer_copy_not_reported() -> None:
    writer = ConflictingWriter()
    reconciler = Reconciler(ControllerOptions(), writer, clock=lambda: CREATED + 10**6)
    view = ClusterView(owners={}, nodes={"n1": True})
    stale = res("a")
    stale["metadata"]["resourceVersion"] = "1"
    reconciler.observe_reservation("ADDED", stale, view)
    await reconciler.reconcile(full=False)
    assert reconciler.object_errors.count("Reservation", "ReconcileError") == 0
    newer = res("a")
    newer["metadata"]["resourceVersion"] = "2"
    reconciler.observe_reservation("MODIFIED", newer, view)  # the watch event of the other write
    await reconciler.reconcile(full=False)
    assert [patch["metadata"]["resourceVersion"] for _, _, patch in writer.calls] == ["1", "2"]
