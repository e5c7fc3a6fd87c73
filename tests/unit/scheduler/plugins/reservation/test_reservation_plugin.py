"""The Reservation plugin through the whole scheduler on the in-memory cluster."""

import json

import pytest
from prometheus_client import generate_latest

from apis.scheduling import ANNOTATION_RESERVATION_ALLOCATED
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.kinds import RESERVATION_KIND
from tests.builders import make_node, make_pod
from tests.unit.scheduler.plugins.reservation.harness import make_reservation, run

ALLOCATED = ANNOTATION_RESERVATION_ALLOCATED


def nodes(*names: str, cpu: str = "4"):
    return [make_node(n).capacity(cpu=cpu, memory="16Gi", pods=110).build() for n in names]


def allocated_to(r, pod: str) -> str | None:
    text = r.cluster.pods[f"default/{pod}"].annotations.get(ALLOCATED)
    return json.loads(text)["name"] if text else None


async def test_reservation_becomes_available_with_status() -> None:
    r = await run(nodes("n1"), [make_reservation("r1").req(cpu="2", memory="1Gi").owner_labels(app="web")])
    rec = r.reservation("r1")
    assert (rec.phase, rec.node_name) == ("Available", "n1")
    assert rec.allocatable == {"cpu": 2000, "memory": 1024**3}
    assert [(c[0], c[1], c[2]) for c in rec.conditions] == [
        ("Scheduled", "True", "Scheduled"),
        ("Ready", "True", "Available"),
    ]
    assert r.requested_cpu("n1") == 2000
    assert any(e.reason == "Scheduled" and "r1" in e.object_key for e in r.cluster.events)


async def test_owner_lands_in_reservation_non_owner_kept_off() -> None:
    r = await run(
        nodes("n1"),
        [make_reservation("r1").req(cpu="3").owner_labels(app="web").node("n1")],
        [
            make_pod("other-0").req(cpu="1").build(),
            make_pod("other-1").req(cpu="1").build(),
            make_pod("web-0").req(cpu="3").label("app", "web").build(),
        ],
    )
    assert r.node_of("web-0") == "n1"
    assert json.loads(r.cluster.pods["default/web-0"].annotations[ALLOCATED]) == {"name": "r1", "uid": "uid-r1"}
    assert (r.node_of("other-0"), r.node_of("other-1")) == ("n1", "")
    assert "Insufficient cpu" in r.scheduler.outcomes["default/other-1"].message
    assert allocated_to(r, "other-0") is None
    assert r.requested_cpu("n1") == 4000


async def test_issue_2731_several_aligned_reservations_never_oversell() -> None:
    """Two 2-CPU Aligned reservations fill a 4-CPU node; neither has affinity. A 3-CPU owner must not
    combine them (Koordinator issue #2731); 2-CPU owners use one each; nothing else fits."""
    r = await run(
        nodes("n1"),
        [
            make_reservation("a").req(cpu="2").owner_labels(app="web").spec(allocateOnce=False),
            make_reservation("b").req(cpu="2").owner_labels(app="web").spec(allocateOnce=False),
        ],
        [
            make_pod("big").req(cpu="3").label("app", "web").build(),
            make_pod("w1").req(cpu="2").label("app", "web").build(),
            make_pod("w2").req(cpu="2").label("app", "web").build(),
            make_pod("w3").req(cpu="1").label("app", "web").build(),
        ],
    )
    assert r.node_of("big") == ""
    assert (r.node_of("w1"), r.node_of("w2"), r.node_of("w3")) == ("n1", "n1", "")
    assert {allocated_to(r, "w1"), allocated_to(r, "w2")} == {"a", "b"}
    assert r.requested_cpu("n1") == 4000


async def test_issue_2731_with_and_without_affinity_on_one_node() -> None:
    affinity = json.dumps({"name": "a"})
    r = await run(
        nodes("n1"),
        [
            make_reservation("a").req(cpu="2").owner_labels(app="web").spec(allocateOnce=False),
            make_reservation("b").req(cpu="1").owner_labels(app="web").spec(allocateOnce=False),
        ],
        [
            make_pod("aff")
            .req(cpu="2")
            .label("app", "web")
            .annotation("scheduling.koordinator.sh/reservation-affinity", affinity)
            .build(),
            make_pod("plain").req(cpu="2").label("app", "web").build(),
            make_pod("small").req(cpu="1").label("app", "web").build(),
            make_pod("tail").req(cpu="1").build(),
        ],
    )
    assert (r.node_of("aff"), allocated_to(r, "aff")) == ("n1", "a")
    # b holds 1 CPU and 1 CPU is free: "plain" (2 CPUs) may use b + the free CPU (Aligned) but not a.
    assert (r.node_of("plain"), allocated_to(r, "plain")) == ("n1", "b")
    assert r.node_of("small") == "" and r.node_of("tail") == ""
    assert r.requested_cpu("n1") == 4000


async def test_tightest_reservation_wins_and_order_label_overrides() -> None:
    r = await run(
        nodes("n1", cpu="16"),
        [
            make_reservation("big").req(cpu="8").owner_labels(app="web"),
            make_reservation("tight").req(cpu="2").owner_labels(app="web"),
        ],
        [make_pod("w").req(cpu="2").label("app", "web").build()],
    )
    assert allocated_to(r, "w") == "tight"
    r = await run(
        nodes("n1", cpu="16"),
        [
            make_reservation("big")
            .req(cpu="8")
            .owner_labels(app="web")
            .label("scheduling.koordinator.sh/reservation-order", "1"),
            make_reservation("tight").req(cpu="2").owner_labels(app="web"),
        ],
        [make_pod("w").req(cpu="2").label("app", "web").build()],
    )
    assert allocated_to(r, "w") == "big"


async def test_reservation_node_strongly_preferred() -> None:
    r = await run(
        nodes("busy", "empty", cpu="8"),
        [make_reservation("r").req(cpu="1").owner_labels(app="web").node("busy")],
        [make_pod("filler").req(cpu="5").node("busy").build(), make_pod("w").req(cpu="1").label("app", "web").build()],
    )
    assert (r.node_of("w"), allocated_to(r, "w")) == ("busy", "r")


async def test_restricted_reservation_does_not_borrow_from_node() -> None:
    r = await run(
        nodes("n1", cpu="8"),
        [make_reservation("r").req(cpu="2").owner_labels(app="web").spec(allocatePolicy="Restricted")],
        [make_pod("w").req(cpu="3").label("app", "web").build()],
    )
    # Not usable (3 > 2 reserved); the pod still fits the node's free capacity, outside the reservation.
    assert (r.node_of("w"), allocated_to(r, "w")) == ("n1", None)
    assert r.requested_cpu("n1") == 5000


async def test_allocate_once_stops_matching_after_first_owner() -> None:
    r = await run(
        nodes("n1"),
        [make_reservation("r").req(cpu="3").owner_labels(app="web")],
        [
            make_pod("w1").req(cpu="1").label("app", "web").build(),
            make_pod("w2").req(cpu="1").label("app", "web").build(),
        ],
    )
    assert allocated_to(r, "w1") == "r" and allocated_to(r, "w2") is None
    # After the first owner the remainder is released: w2 fits outside.
    assert r.node_of("w2") == "n1" and r.requested_cpu("n1") == 2000
    report = dict(r.plugin.simulation_report()[1][0])
    assert report["phase"] == "Succeeded" and report["owners"] == ["default/w1"]


async def test_affinity_pod_without_matching_reservation_is_unresolvable() -> None:
    r = await run(
        nodes("n1"),
        [make_reservation("r").req(cpu="1").owner_labels(app="web")],
        [
            make_pod("p")
            .req(cpu="1")
            .label("app", "web")
            .annotation("scheduling.koordinator.sh/reservation-affinity", json.dumps({"name": "nope"}))
            .build()
        ],
    )
    assert r.node_of("p") == ""
    assert "no reservations match reservation affinity" in r.scheduler.outcomes["default/p"].message


async def test_reservation_ignored_pod_may_use_reserved_capacity() -> None:
    r = await run(
        nodes("n1"),
        [make_reservation("r").req(cpu="4").owner_labels(app="web")],
        [
            make_pod("p").req(cpu="2").label("scheduling.koordinator.sh/reservation-ignored", "true").build(),
            make_pod("q").req(cpu="1").build(),
        ],
    )
    assert r.node_of("p") == "n1" and allocated_to(r, "p") is None
    assert r.node_of("q") == ""


async def test_unschedulable_reservation_reports_condition() -> None:
    r = await run(nodes("n1", cpu="2"), [make_reservation("huge").req(cpu="8").owner_labels(app="web")])
    rec = r.reservation("huge")
    assert rec.phase == "Pending"
    cond = rec.condition("Scheduled")
    assert cond is not None and cond[1:3] == ("False", "Unschedulable") and "Insufficient cpu" in cond[3]
    assert any(e.reason == "FailedScheduling" and "huge" in e.object_key for e in r.cluster.events)
    assert r.scheduler.queue.pending_counts()  # still queued for a retry with backoff


async def test_pinned_node_missing_is_unschedulable() -> None:
    r = await run(nodes("n1"), [make_reservation("r").req(cpu="1").owner_labels(app="x").node("gone")])
    assert r.reservation("r").phase == "Pending"


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"owners": []}, id="no-owners"),
        pytest.param({"ttl": None}, id="no-ttl-no-expires"),
        pytest.param({"template": None}, id="no-template"),
    ],
)
async def test_invalid_reservation_reported_never_scheduled(spec: dict) -> None:
    b = make_reservation("bad").req(cpu="1").owner_labels(app="x")
    raw = b.obj()
    raw["spec"].update(spec)
    if "template" in spec:
        del raw["spec"]["template"]
    r = await run(nodes("n1"), [raw], [make_pod("p").req(cpu="4").build()])
    assert r.node_of("p") == "n1"
    assert any(e.reason == "InvalidReservation" for e in r.cluster.events)
    cond = r.reservation("bad").condition("Scheduled")
    assert cond is not None and cond[2] == "Unschedulable"


async def test_host_ports_held_by_available_reservation() -> None:
    r = await run(
        nodes("n1"),
        [make_reservation("r").req(cpu="1").host_port(8080).owner_labels(app="web")],
        [make_pod("p").req(cpu="1").host_port(8080).build()],
    )
    assert r.node_of("p") == ""


async def test_metrics() -> None:
    r = await run(
        nodes("n1"),
        [make_reservation("r1").req(cpu="2").owner_labels(app="web").spec(allocateOnce=False)],
        [make_pod("w").req(cpu="500m").label("app", "web").build()],
    )
    text = generate_latest(r.scheduler.metrics.registry).decode()
    assert 'scheduler_reservation_status_phase{name="r1",phase="Available"} 1.0' in text
    assert 'scheduler_reservation_resource{name="r1",resource="cpu",type="allocatable"} 2.0' in text
    assert 'scheduler_reservation_resource{name="r1",resource="cpu",type="allocated"} 0.5' in text


async def test_status_from_controller_replaces_assumed_owners_and_delete_releases() -> None:
    r = await run(
        nodes("n1"),
        [make_reservation("r").req(cpu="2").owner_labels(app="web").spec(allocateOnce=False)],
        [make_pod("w").req(cpu="1").label("app", "web").build()],
    )
    await r.cluster.patch_object_status(
        RESERVATION_KIND,
        "r",
        {
            "status": {
                "currentOwners": [{"namespace": "default", "name": "w", "uid": "uid-default-w"}],
                "allocated": {"cpu": "1"},
            }
        },
    )
    entry = r.plugin.cache.get("uid-r")
    assert entry is not None and entry.assumed == {} and entry.allocated() == {"cpu": 1000}
    assert r.requested_cpu("n1") == 2000
    # The owner is deleted and the controller clears the status: the reservation holds 2 CPUs again.
    r.scheduler.on_pod(EventType.DELETED, r.cluster.pods["default/w"], None)
    await r.cluster.patch_object_status(RESERVATION_KIND, "r", {"status": {"currentOwners": None, "allocated": None}})
    assert r.requested_cpu("n1") == 2000
    r.cluster.delete_object(RESERVATION_KIND, "r")
    assert r.requested_cpu("n1") == 0
