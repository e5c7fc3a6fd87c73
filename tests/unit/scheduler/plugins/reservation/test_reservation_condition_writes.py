"""The Reservation plugin's condition writes merge by type and are guarded by the resourceVersion of the
copy they were merged into: the Reservation controller's ``Ready`` condition is never lost."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import pytest

from apis.core.types import Node
from apis.scheduling import parse_reservation
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.types import ObjectKind
from koord_scheduler.plugins.reservation.writes import ReservationWriter
from kubeapi.http import ApiError
from tests.builders import make_node
from tests.unit.scheduler.plugins.reservation.harness import make_reservation, run

READY_INVALID = {
    "type": "Ready",
    "status": "False",
    "reason": "Invalid",
    "message": 'invalid Reservation: spec.ttl: invalid duration "forever"',
    "lastTransitionTime": "2027-01-15T08:00:00Z",
}


def nodes() -> list[Node]:
    return [make_node("n1").capacity(cpu="8", memory="16Gi", pods=110).build()]


def kinds(conditions: Any) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c["reason"]) for c in conditions]


async def test_invalid_reservation_keeps_the_controllers_ready_condition() -> None:
    failed = make_reservation("bad").req(cpu="1").owner_labels(app="x").spec(ttl="forever")
    failed.status(phase="Failed", conditions=[dict(READY_INVALID)])
    r = await run(nodes(), [failed])
    assert any(e.reason == "InvalidReservation" for e in r.cluster.events)
    status = r.cluster.objects["Reservation"]["bad"]["status"]
    assert (status["phase"], kinds(status["conditions"])) == (
        "Failed",
        [("Ready", "False", "Invalid"), ("Scheduled", "False", "Unschedulable")],
    )


async def test_bind_keeps_other_conditions_and_sets_available() -> None:
    other = {"type": "Custom", "status": "True", "reason": "Mine", "message": ""}
    r = await run(nodes(), [make_reservation("r").req(cpu="1").owner_labels(app="x").status(conditions=[other])])
    status = r.cluster.objects["Reservation"]["r"]["status"]
    assert (status["phase"], kinds(status["conditions"])) == (
        "Available",
        [("Custom", "True", "Mine"), ("Scheduled", "True", "Scheduled"), ("Ready", "True", "Available")],
    )


class _Server:
    """One Reservation as the API server keeps it: resourceVersion preconditions, merge patches of status,
    and a watch that delivers the current copy to ``writer`` after a conflict."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw
        self.patches: list[dict[str, Any]] = []
        self.writer: ReservationWriter | None = None

    async def patch_object_status(
        self, kind: ObjectKind[Any], name: str, patch: Mapping[str, Any], *, namespace: str = ""
    ) -> Any:
        self.patches.append(dict(patch))
        want = (patch.get("metadata") or {}).get("resourceVersion")
        have = self.raw["metadata"]["resourceVersion"]
        if want is not None and want != have:
            assert self.writer is not None
            self.writer.observe(name, parse_reservation(self.raw))  # the watch catches up meanwhile
            raise ApiError(409, "Conflict", "the object has been modified")
        self.raw["status"] = {**self.raw.get("status", {}), **patch["status"]}
        self.raw["metadata"]["resourceVersion"] = str(int(have) + 1)
        return parse_reservation(self.raw)

    async def record_event(self, kind: Any, name: str, **_: Any) -> None:
        return None


class _Handle:
    def __init__(self, cluster: _Server) -> None:
        self.cluster = cluster


async def test_conflict_merges_again_into_the_newer_copy() -> None:
    # The plugin saw version 1 (no conditions); the controller has since written Failed + Ready (version 2).
    stale = make_reservation("r").req(cpu="1").owner_labels(app="x").obj()
    stale["metadata"]["resourceVersion"] = "1"
    newer = make_reservation("r").req(cpu="1").owner_labels(app="x").obj()
    newer["metadata"]["resourceVersion"] = "2"
    newer["status"] = {"phase": "Failed", "conditions": [dict(READY_INVALID)]}
    server = _Server(newer)
    writer = ReservationWriter(cast(Handle, _Handle(server)))
    server.writer = writer
    writer.observe("r", parse_reservation(stale))
    writer.report_unschedulable(None, "r", "0/1 nodes are available")
    await writer.drain()
    assert [p["metadata"]["resourceVersion"] for p in server.patches] == ["1", "2"]
    assert (server.raw["status"]["phase"], kinds(server.raw["status"]["conditions"])) == (
        "Failed",
        [("Ready", "False", "Invalid"), ("Scheduled", "False", "Unschedulable")],
    )


async def test_bind_refused_once_the_reservation_failed() -> None:
    raw = make_reservation("r").req(cpu="1").owner_labels(app="x").obj()
    raw["metadata"]["resourceVersion"] = "3"
    raw["status"] = {"phase": "Failed", "conditions": [dict(READY_INVALID)]}
    server = _Server(raw)
    writer = ReservationWriter(cast(Handle, _Handle(server)))
    writer.observe("r", parse_reservation(raw))
    with pytest.raises(ClusterError, match="reservation r is not active"):
        await writer.write_available("r", "n1", {"cpu": 1000})
    assert server.patches == []
