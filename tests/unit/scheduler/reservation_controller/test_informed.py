"""The Reservation controller fed by the scheduler's informers: its owner and node indexes, what each event
marks, and a whole run against a recording writer."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import pytest

from apis.scheduling import ANNOTATION_RESERVATION_ALLOCATED
from apis.scheduling.record import parse_reservation
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.reservation_controller import KubeStatusWriter, OwnerPod, ReservationController
from kubeapi.http import ApiError
from tests.builders import make_node, make_pod

CREATED = 1_800_000_000.0
CREATED_TEXT = "2027-01-15T08:00:00Z"


def reservation(name: str, *, node: str = "n1", phase: str = "Available", ttl: str = "1h") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": CREATED_TEXT},
        "spec": {
            "template": {"spec": {"containers": [{"name": "c"}]}},
            "owners": [{"object": {"name": "p"}}],
            "ttl": ttl,
            "allocateOnce": False,
        },
        "status": {"phase": phase, "nodeName": node, "allocatable": {"cpu": "2"}},
    }


def owner(name: str, reservation_name: str, *, cpu: str = "500m") -> Any:
    ref = json.dumps({"name": reservation_name, "uid": f"uid-{reservation_name}"})
    return make_pod(name).uid(f"pod-{name}").req(cpu=cpu).annotation(ANNOTATION_RESERVATION_ALLOCATED, ref).build()


class Writer:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.wrote = asyncio.Event()

    async def patch_status(self, name: str, patch: Mapping[str, Any]) -> None:
        self.calls.append(("patch", name, dict(patch)))
        self.wrote.set()

    async def delete(self, name: str) -> None:
        self.calls.append(("delete", name, None))
        self.wrote.set()


def controller(*, now: float = CREATED + 1, ready: bool = True) -> tuple[ReservationController, Writer]:
    writer = Writer()
    return ReservationController(writer, ready=lambda: ready, clock=lambda: now), writer


def dirty(c: ReservationController) -> set[str]:
    return set(c.reconciler._dirty)


def test_owner_pods_are_indexed_by_their_reservation_uid() -> None:
    c, _ = controller()
    c.on_object("Reservation", EventType.ADDED, None, parse_reservation(reservation("r")))
    c.reconciler._dirty.clear()
    pod = owner("p", "r")
    c.on_pod(EventType.ADDED, None, pod)
    assert c.view.owners["uid-r"] == [OwnerPod("default", "p", "pod-p", {"cpu": 500})]
    assert dirty(c) == {"uid-r"}


@pytest.mark.parametrize(
    "change",
    [
        pytest.param("deleted", id="pod-deleted"),
        pytest.param("terminal", id="pod-succeeded"),
        pytest.param("annotation-gone", id="annotation-removed"),
        pytest.param("deleting", id="deletion-timestamp"),
    ],
)
def test_a_pod_that_no_longer_holds_its_reservation_leaves_the_index(change: str) -> None:
    c, _ = controller()
    c.on_object("Reservation", EventType.ADDED, None, parse_reservation(reservation("r")))
    pod = owner("p", "r")
    c.on_pod(EventType.ADDED, None, pod)
    c.reconciler._dirty.clear()
    if change == "deleted":
        c.on_pod(EventType.DELETED, pod, None)
    elif change == "terminal":
        c.on_pod(EventType.MODIFIED, pod, dataclasses.replace(pod, phase="Succeeded"))
    elif change == "annotation-gone":
        c.on_pod(EventType.MODIFIED, pod, make_pod("p").uid("pod-p").req(cpu="500m").build())
    else:
        c.on_pod(
            EventType.MODIFIED,
            pod,
            dataclasses.replace(pod, meta=dataclasses.replace(pod.meta, deletion_timestamp=1.0)),
        )
    assert c.view.owners.get("uid-r", []) == []
    assert dirty(c) == {"uid-r"}


def test_a_pod_moving_to_another_reservation_marks_both() -> None:
    c, _ = controller()
    for name in ("a", "b"):
        c.on_object("Reservation", EventType.ADDED, None, parse_reservation(reservation(name)))
    pod = owner("p", "a")
    c.on_pod(EventType.ADDED, None, pod)
    c.reconciler._dirty.clear()
    c.on_pod(EventType.MODIFIED, pod, owner("p", "b"))
    assert (c.view.owners.get("uid-a", []), [o.name for o in c.view.owners["uid-b"]]) == ([], ["p"])
    assert dirty(c) == {"uid-a", "uid-b"}


def test_pods_without_the_annotation_cost_no_decision() -> None:
    c, _ = controller()
    c.on_object("Reservation", EventType.ADDED, None, parse_reservation(reservation("r")))
    c.reconciler._dirty.clear()
    plain = make_pod("plain").req(cpu="1").build()
    c.on_pod(EventType.ADDED, None, plain)
    c.on_pod(EventType.MODIFIED, plain, dataclasses.replace(plain, node_name="n1"))
    assert (dirty(c), dict(c.view.owners)) == (set(), {})


def test_a_node_that_goes_marks_every_reservation() -> None:
    c, _ = controller()
    node = make_node("n1").build()
    c.on_node(EventType.ADDED, None, node)
    for name in ("a", "b"):
        c.on_object("Reservation", EventType.ADDED, None, parse_reservation(reservation(name)))
    c.reconciler._dirty.clear()
    c.on_node(EventType.MODIFIED, node, node)
    assert dirty(c) == set()
    c.on_node(EventType.DELETED, node, None)
    assert ("n1" in c.view.nodes, dirty(c)) == (False, {"uid-a", "uid-b"})


async def test_run_waits_for_the_lists_then_writes_what_decide_says() -> None:
    c, writer = controller(now=CREATED + 7200)  # the 1h ttl has passed
    c.on_node(EventType.ADDED, None, make_node("n1").build())
    c.on_object("Reservation", EventType.ADDED, None, parse_reservation(reservation("old")))
    listed = False
    c.ready = lambda: listed
    stop = asyncio.Event()
    written_while_waiting: list[int] = []

    async def pause(wake: asyncio.Event, stopped: asyncio.Event, seconds: float) -> None:
        nonlocal listed
        written_while_waiting.append(len(writer.calls))
        listed = True  # listed during the first wait for the lists
        if writer.calls:
            stop.set()
        await asyncio.sleep(0)

    c.reconciler.loop.pause = pause
    await asyncio.wait_for(c.run(stop), 5)
    assert written_while_waiting[0] == 0  # not everything listed yet: nothing decided
    ((verb, name, patch),) = writer.calls
    assert (verb, name, patch["status"]["phase"]) == ("patch", "old", "Failed")


async def test_a_loop_that_raises_is_raised_and_a_second_run_resumes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hosted controllers' supervisor restarts a ``run`` that raises: the failure must reach it (not
    end the controller silently), and the restarted ``run`` must reconcile again."""
    c, writer = controller(now=CREATED + 7200)
    c.on_node(EventType.ADDED, None, make_node("n1").build())
    c.on_object("Reservation", EventType.ADDED, None, parse_reservation(reservation("old")))
    real_run = c.reconciler.loop.run

    async def broken(*args: Any, **kwargs: Any) -> None:
        raise ValueError("boom")

    monkeypatch.setattr(c.reconciler.loop, "run", broken)
    stop = asyncio.Event()
    with pytest.raises(ValueError, match="boom"):
        await asyncio.wait_for(c.run(stop), 5)
    assert writer.calls == []
    monkeypatch.setattr(c.reconciler.loop, "run", real_run)
    task = asyncio.create_task(c.run(stop))
    await asyncio.wait_for(writer.wrote.wait(), 5)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert [(verb, name) for verb, name, _ in writer.calls] == [("patch", "old")]


class FakeHttp:
    def __init__(self, error: ClusterError | None = None) -> None:
        self.error = error
        self.requests: list[tuple[str, str, Any, str]] = []

    async def request(
        self, method: str, path: str, *, body: Any = None, content_type: str = "", params: Any = None
    ) -> bytes:
        self.requests.append((method, path, body, content_type))
        if self.error is not None:
            raise self.error
        return b"{}"


async def test_status_writer_merge_patches_the_status_and_tolerates_a_gone_reservation() -> None:
    http = FakeHttp()
    writer = KubeStatusWriter(http)  # type: ignore[arg-type]
    await writer.patch_status("r", {"status": {"phase": "Failed"}})
    await writer.delete("r")
    path = "/apis/scheduling.koordinator.sh/v1alpha1/reservations/r"
    assert http.requests == [
        ("PATCH", f"{path}/status", {"status": {"phase": "Failed"}}, "application/merge-patch+json"),
        ("DELETE", path, None, ""),
    ]
    gone = KubeStatusWriter(FakeHttp(ApiError(404, "NotFound", "gone")))  # type: ignore[arg-type]
    await gone.patch_status("r", {})
    await gone.delete("r")
    refused = KubeStatusWriter(FakeHttp(ApiError(409, "Conflict", "no")))  # type: ignore[arg-type]
    with pytest.raises(ApiError):
        await refused.patch_status("r", {})
