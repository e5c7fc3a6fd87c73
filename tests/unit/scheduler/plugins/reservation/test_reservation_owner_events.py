"""Owner pod events keep a reservation's allocated amount and held remainder true at once, before the
lifecycle controller rewrites the status."""

from dataclasses import replace

import pytest
from prometheus_client import generate_latest

from apis.core.types import Pod
from apis.scheduling import ANNOTATION_RESERVATION_ALLOCATED
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.kinds import RESERVATION_KIND
from koord_scheduler.plugins.reservation.cache import ReservationCache
from koord_scheduler.plugins.reservation.reserve_pod import new_reserve_pod
from tests.builders import make_node, make_pod
from tests.unit.scheduler.plugins.reservation.harness import Run, make_reservation, run

RECORDED = {
    "status": {
        "currentOwners": [{"namespace": "default", "name": "w", "uid": "uid-default-w"}],
        "allocated": {"cpu": "1"},
    }
}


def nodes(cpu: str = "4"):
    return [make_node("n1").capacity(cpu=cpu, memory="16Gi", pods=110).build()]


async def one_owner(*, recorded: bool) -> Run:
    """A 2-CPU reservation (allocateOnce false) on a 4-CPU node, and a 1-CPU owner bound into it."""
    r = await run(
        nodes(),
        [make_reservation("r").req(cpu="2").owner_labels(app="web").spec(allocateOnce=False)],
        [make_pod("w").req(cpu="1").label("app", "web").build()],
    )
    assert r.node_of("w") == "n1"
    if recorded:
        await r.cluster.patch_object_status(RESERVATION_KIND, "r", RECORDED)
    entry = r.plugin.cache.get("uid-r")
    assert entry is not None and entry.allocated() == {"cpu": 1000} and entry.assumed == {}
    assert r.requested_cpu("n1") == 2000  # 1 CPU held for the reservation + the owner's 1
    return r


async def delete(r: Run, pod: Pod) -> None:
    await r.cluster.delete_pod(pod, reason="test")


async def finish(r: Run, pod: Pod) -> None:
    r.cluster.pods[pod.key] = done = replace(pod, phase="Succeeded")
    r.scheduler.on_pod(EventType.MODIFIED, pod, done)


async def unannotate(r: Run, pod: Pod) -> None:
    await r.cluster.patch_pod_metadata(pod, annotations={ANNOTATION_RESERVATION_ALLOCATED: None})


@pytest.mark.parametrize("recorded", [pytest.param(True, id="recorded"), pytest.param(False, id="not-recorded")])
@pytest.mark.parametrize(
    "leave",
    [
        pytest.param(delete, id="deleted"),
        pytest.param(finish, id="finished"),
        pytest.param(unannotate, id="unannotated"),
    ],
)
async def test_owner_leaving_frees_its_share_at_once(leave, recorded: bool) -> None:
    r = await one_owner(recorded=recorded)
    await leave(r, r.cluster.pods["default/w"])
    entry = r.plugin.cache.get("uid-r")
    assert entry is not None and entry.allocated() == {} and entry.owners() == []
    # The reservation holds all 2 CPUs on the node again (what the pod itself still counts is the cache's).
    assert entry.holding is not None and entry.holding.requests == {"cpu": 2000}
    if leave is delete:
        assert r.requested_cpu("n1") == 2000
    text = generate_latest(r.scheduler.metrics.registry).decode()
    assert 'scheduler_reservation_resource{name="r",resource="cpu",type="allocated"} 0.0' in text


async def test_freed_share_is_usable_by_the_next_owner_at_once() -> None:
    r = await one_owner(recorded=True)
    # Fill the node outside the reservation: 2 CPUs free of 4, minus the owner's 1.
    r.cluster.pods["default/filler"] = filler = make_pod("filler").req(cpu="1").node("n1").build()
    r.scheduler.on_pod(EventType.ADDED, None, filler)
    await delete(r, r.cluster.pods["default/w"])
    r.cluster.pods["default/w2"] = w2 = make_pod("w2").req(cpu="2").label("app", "web").build()
    r.scheduler.on_pod(EventType.ADDED, None, w2)
    await r.scheduler.run_until_idle()
    assert r.node_of("w2") == "n1"
    assert ANNOTATION_RESERVATION_ALLOCATED in r.cluster.pods["default/w2"].annotations


async def test_controller_catching_up_changes_nothing() -> None:
    r = await one_owner(recorded=True)
    await delete(r, r.cluster.pods["default/w"])
    await r.cluster.patch_object_status(RESERVATION_KIND, "r", {"status": {"currentOwners": None, "allocated": None}})
    entry = r.plugin.cache.get("uid-r")
    assert entry is not None and entry.left == {} and entry.allocated() == {}
    assert r.requested_cpu("n1") == 2000


def test_owner_seen_before_its_reservation() -> None:
    """A pod event may arrive before the reservation's: the owner counts once the reservation is known."""
    snapshot = ClusterSnapshot()
    snapshot.upsert_node(nodes()[0])
    cache = ReservationCache(snapshot)
    owner = make_pod("w").req(cpu="500m").node("n1").build()
    assert cache.owner_bound("uid-r", owner) is None
    record = make_reservation("r").req(cpu="2").owner_labels(app="web").spec(allocateOnce=False).available("n1")
    entry = cache.upsert(record.build(), new_reserve_pod(record.build()))
    assert entry.allocated() == {"cpu": 500} and entry.remainder() == {"cpu": 1500}
    assert entry.owners() == ["default/w"]


def test_owner_on_another_node_does_not_count() -> None:
    snapshot = ClusterSnapshot()
    snapshot.upsert_node(nodes()[0])
    cache = ReservationCache(snapshot)
    record = make_reservation("r").req(cpu="2").owner_labels(app="web").spec(allocateOnce=False).available("n1")
    entry = cache.upsert(record.build(), new_reserve_pod(record.build()))
    cache.owner_bound("uid-r", make_pod("w").req(cpu="500m").node("n2").build())
    cache.refresh(entry)
    assert entry.allocated() == {} and entry.owner_count() == 0


def test_remainder_clamps_at_zero_when_owners_take_more_than_reserved() -> None:
    """What a reservation still holds is ``max(0, allocatable - allocated)`` per resource."""
    snapshot = ClusterSnapshot()
    snapshot.upsert_node(nodes()[0])
    cache = ReservationCache(snapshot)
    record = make_reservation("r").req(cpu="2", memory="1Gi").owner_labels(app="web").spec(allocateOnce=False)
    record = record.available("n1")
    entry = cache.upsert(record.build(), new_reserve_pod(record.build()))
    cache.owner_bound("uid-r", make_pod("w").req(cpu="3", memory="256Mi").node("n1").build())
    cache.refresh(entry)
    assert entry.remainder() == {"cpu": 0, "memory": 768 * 1024**2}
