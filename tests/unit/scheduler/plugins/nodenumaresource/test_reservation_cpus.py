"""Reservation-owned CPUs: a reserve pod's cpuset is held under its Reservation and written to it, and
owner pods get the reserved CPUs back (Koordinator ``nodenumaresource/reservation.go``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from apis.config.numa_args import NodeNUMAResourceArgs
from apis.extension.numa import CPUBindPolicy, CPUExclusivePolicy, NUMAAllocateStrategy, format_cpuset, parse_cpuset
from apis.scheduling import parse_reservation
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.restored import RESTORED_CAPACITY, RestoredCapacity, RestoredReservation
from koord_scheduler.framework.types import EventType, ObjectKind
from koord_scheduler.plugins.nodenumaresource import reservation_cpus as resv
from koord_scheduler.plugins.nodenumaresource.allocation import AllocationError, AllocationRequest
from koord_scheduler.plugins.nodenumaresource.cache import Holding, NodeAllocations
from koord_scheduler.plugins.nodenumaresource.nrt import parse_node_resource_topology
from koord_scheduler.plugins.nodenumaresource.plugin import NodeNUMAResource
from tests.builders import make_node, make_pod
from tests.fwtest import make_snapshot
from tests.unit.scheduler.plugins.nodenumaresource.numa_helpers import RecordingCluster, nrt_object

STATUS = "scheduling.koordinator.sh/resource-status"
NONE = CPUExclusivePolicy.NONE
FULL = CPUBindPolicy.FULL_PCPUS
SPREAD = CPUBindPolicy.SPREAD_BY_PCPUS
RECORD = parse_node_resource_topology(nrt_object("n1"))
KEY = resv.reservation_key("r-uid")
RESV_NOT_ENOUGH = "Reservation(s) not enough cpus available to satisfy request"


def allocations(reserved: str, **pods: str) -> NodeAllocations:
    """Node n1 with reservation ``r-uid`` holding ``reserved`` and each pod holding its cpuset."""
    alloc = NodeAllocations()
    if reserved:
        alloc.hold("n1", KEY, Holding(parse_cpuset(reserved), NONE, KEY))
    for name, cpus in pods.items():
        alloc.hold("n1", f"default/{name}", Holding(parse_cpuset(cpus), NONE, f"default/{name}"))
    return alloc


def fmt(cpus: tuple[int, ...]) -> str:
    return format_cpuset(cpus)


def request(n: int, policy: CPUBindPolicy = FULL, required: bool = False) -> AllocationRequest:
    return AllocationRequest(n, policy, required, NONE, NUMAAllocateStrategy.LEAST_ALLOCATED)


def restore(alloc: NodeAllocations, restricted: bool) -> resv.Restore | None:
    state = CycleState()
    owners = {0: RestoredReservation("r-uid", restricted)}
    state.write(RESTORED_CAPACITY, RestoredCapacity(np.array([0]), np.zeros((1, 1), dtype=np.int64), owners=owners))
    return resv.restore_for(state, alloc, "n1", 0)


@pytest.mark.parametrize(
    ("reserved", "others", "pod", "req", "want"),
    [
        pytest.param("0-1,8-9", {}, "aligned-owner", request(2), "0,8", id="owner-takes-reserved-core-first"),
        pytest.param("0-1,8-9", {}, "aligned-owner", request(4), "0-1,8-9", id="owner-takes-whole-reservation"),
        pytest.param(
            "0-1,8-9", {}, "aligned-owner", request(6), "0-1,4,8-9,12",
            id="aligned-owner-spills-onto-free-cpus-chosen-afresh-least-allocated-numa"
        ),
        pytest.param(
            "0-1,8-9", {}, "restricted-owner", request(6), RESV_NOT_ENOUGH,
            id="restricted-owner-only-from-reservation",
        ),
        pytest.param(
            "0-1,8-9", {"o1": "0,8"}, "restricted-owner", request(2), "1,9",
            id="restricted-owner-gets-what-other-owner-left",
        ),
        pytest.param(
            "0-1,8-9", {"o1": "0,8"}, "restricted-owner", request(4),
            RESV_NOT_ENOUGH, id="other-owners-cpus-not-restored",
        ),
        pytest.param("0-1,8-9", {}, "stranger", request(4), "4-5,12-13", id="non-owner-never-gets-reserved"),
        pytest.param(
            "0-1,8-9", {"x": "4-7,12-15"}, "stranger", request(8, required=True),
            "not enough cpus available to satisfy request", id="non-owner-required-sees-only-free-cores",
        ),
        pytest.param(
            "0-1,8-9", {"x": "4-7,12-15"}, "aligned-owner", request(8, required=True), "0-3,8-11",
            id="owner-required-sees-reserved-cores",
        ),
        pytest.param("0-3", {}, "aligned-owner", request(3, SPREAD), "0-2", id="spread-owner-within-reservation"),
        pytest.param("", {}, "restricted-owner", request(2), "0,8", id="reservation-without-cpuset-restores-nothing"),
    ],
)  # fmt: skip
def test_allocation_with_a_reservation(
    reserved: str, others: dict[str, str], pod: str, req: AllocationRequest, want: str
) -> None:
    alloc = allocations(reserved, **others)
    back = restore(alloc, pod == "restricted-owner") if pod != "stranger" else None
    try:
        got = fmt(resv.allocate_on_node(alloc, "n1", RECORD, req, back))
    except AllocationError as exc:
        got = str(exc)
    assert got == want


def test_restored_cpus_drop_the_reservations_exclusive_policy() -> None:
    alloc = NodeAllocations()
    alloc.hold("n1", KEY, Holding(parse_cpuset("0-1"), CPUExclusivePolicy.PCPU_LEVEL, KEY))
    alloc.hold("n1", "default/x", Holding(parse_cpuset("2"), CPUExclusivePolicy.PCPU_LEVEL, "default/x"))
    available, exclusive = resv.available_cpus(alloc, "n1", RECORD, restore(alloc, False))
    assert {0, 1} <= available and 2 not in available
    assert exclusive == {2: CPUExclusivePolicy.PCPU_LEVEL}


def reservation_raw(phase: str = "Available", cpuset: str | None = "0-1,8-9", node: str = "n1") -> dict[str, Any]:
    annotations = {} if cpuset is None else {STATUS: json.dumps({"cpuset": cpuset})}
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": "r", "uid": "r-uid", "annotations": annotations},
        "spec": {
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]}},
            "owners": [{"labelSelector": {"matchLabels": {"app": "a"}}}],
            "ttl": "1h",
        },
        "status": {"phase": phase, "nodeName": node if phase == "Available" else ""},
    }


@pytest.mark.parametrize(
    ("raw", "held"),
    [
        pytest.param(reservation_raw(), "0-1,8-9", id="available-holds-its-cpuset"),
        pytest.param(reservation_raw(cpuset=None), None, id="no-resource-status"),
        pytest.param(reservation_raw(cpuset=""), None, id="empty-cpuset"),
        pytest.param(reservation_raw(cpuset="x"), None, id="malformed-cpuset-skipped"),
        pytest.param(reservation_raw(phase="Succeeded"), None, id="succeeded-gives-back"),
        pytest.param(reservation_raw(phase="Pending"), None, id="pending-holds-nothing-yet"),
    ],
)
def test_what_a_reservation_holds(raw: dict[str, Any], held: str | None) -> None:
    got = resv.reservation_holding(parse_reservation(raw))
    assert (fmt(tuple(sorted(got[1].cpus))) if got else None) == held
    if got:
        assert got[0] == "n1" and got[1].pod_key == KEY


@dataclass
class ObjectCluster(RecordingCluster):
    objects: list[tuple[str, str, Mapping[str, Any]]] = field(default_factory=list)

    async def patch_object(self, kind: ObjectKind, name: str, patch: Mapping[str, Any], *, namespace: str = "") -> Any:
        self.objects.append((kind.kind, name, patch))


def lsr(name: str, cpu: str, **labels: str) -> Any:
    builder = make_pod(name).req(cpu=cpu).label("koordinator.sh/qosClass", "LSR")
    for key, value in labels.items():
        builder = builder.label(key, value)
    return builder


def test_reserve_pod_cpuset_goes_on_the_reservation_and_owner_pods_take_it() -> None:
    snap = make_snapshot([make_node("n1").allocatable(cpu="16", memory="64Gi", pods="110").build()])
    cluster = ObjectCluster()
    plugin = NodeNUMAResource(_args(), snap, cluster)  # type: ignore[arg-type]
    plugin.on_topology(EventType.ADDED, None, RECORD)
    reserve_pod = (
        lsr("r-uid", "4")
        .uid("r-uid")
        .annotation("scheduling.koordinator.sh/reserve-pod", "true")
        .annotation("scheduling.koordinator.sh/reservation-name", "r")
        .build()
    )
    state = CycleState()
    plugin.pre_filter(state, reserve_pod, snap)
    assert plugin.reserve(state, reserve_pod, "n1").is_success
    asyncio.run(plugin.pre_bind(state, reserve_pod, "n1"))
    assert cluster.patches == []  # the reserve pod is no pod in the cluster
    assert asyncio.run(plugin.pre_bind_reservation(state, object(), "n1")).is_success
    (kind, name, body) = cluster.objects[-1]
    assert (kind, name) == ("Reservation", "r")
    assert json.loads(body["metadata"]["annotations"][STATUS]) == {"cpuset": "0-1,8-9"}
    assert json.loads(body["metadata"]["annotations"]["scheduling.koordinator.sh/resource-spec"]) == {
        "preferredCPUBindPolicy": "FullPCPUs"
    }
    # The status write of the Reservation comes back through the informer: still held under the same key.
    record = parse_reservation(reservation_raw())
    plugin.on_reservation(EventType.MODIFIED, None, record)
    assert plugin.allocations.rows() == [("n1", KEY, parse_cpuset("0-1,8-9"))]

    owner_state = CycleState()
    owners = {0: RestoredReservation("r-uid", False)}
    owner_state.write(
        RESTORED_CAPACITY, RestoredCapacity(np.array([0]), np.zeros((1, 1), dtype=np.int64), owners=owners)
    )
    owner = lsr("owner", "2", app="a").build()
    plugin.pre_filter(owner_state, owner, snap)
    assert plugin.reserve(owner_state, owner, "n1").is_success
    asyncio.run(plugin.pre_bind(owner_state, owner, "n1"))
    assert json.loads(cluster.patches[-1][1][STATUS] or "{}")["cpuset"] == "0,8"

    stranger = lsr("stranger", "4").build()
    other_state = CycleState()
    plugin.pre_filter(other_state, stranger, snap)
    assert plugin.reserve(other_state, stranger, "n1").is_success
    asyncio.run(plugin.pre_bind(other_state, stranger, "n1"))
    assert json.loads(cluster.patches[-1][1][STATUS] or "{}")["cpuset"] == "4-5,12-13"

    # Once the reservation is done, its CPUs are free again; its owner keeps its own.
    plugin.on_reservation(EventType.MODIFIED, record, parse_reservation(reservation_raw(phase="Succeeded")))
    assert [key for _, key, _ in plugin.allocations.rows()] == ["default/owner", "default/stranger"]


def test_a_pending_reservation_update_keeps_what_its_reserve_pod_assumed() -> None:
    snap = make_snapshot([make_node("n1").allocatable(cpu="16", memory="64Gi", pods="110").build()])
    plugin = NodeNUMAResource(_args(), snap, ObjectCluster())  # type: ignore[arg-type]
    plugin.allocations.hold("n1", KEY, Holding(parse_cpuset("0-1"), NONE, KEY))
    plugin.on_reservation(EventType.MODIFIED, None, parse_reservation(reservation_raw(phase="Pending")))
    assert plugin.allocations.holds(KEY)
    plugin.on_reservation(EventType.DELETED, parse_reservation(reservation_raw(phase="Pending")), None)
    assert not plugin.allocations.holds(KEY)


def _args() -> NodeNUMAResourceArgs:
    return NodeNUMAResourceArgs()


def test_a_reservation_holds_its_numa_shares_too() -> None:
    raw = reservation_raw()
    raw["metadata"]["annotations"][STATUS] = json.dumps(
        {"cpuset": "0-1,8-9", "numaNodeResources": [{"node": 0, "resources": {"cpu": "4", "memory": "1Gi"}}]}
    )
    got = resv.reservation_holding(parse_reservation(raw))
    assert got is not None
    assert got[1].numa == {0: {"cpu": 4000, "memory": 1024**3}}
