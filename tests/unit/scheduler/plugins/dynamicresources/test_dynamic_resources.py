"""DynamicResources per extension point: PreEnqueue waiting for kube-controller-manager's claim, in-flight
allocations between Reserve and PreBind, PreBind's writes (with a conflict retried on the newest claim),
Unreserve, PostFilter, queueing hints, and the allocator's search on its own."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from apis.config.dynamicresources_args import DynamicResourcesArgs
from apis.core.types import Pod
from apis.resource import (
    DeviceId,
    ResourceClaim,
    parse_device_class,
    parse_resource_claim,
    parse_resource_slice,
)
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.status import Code
from koord_scheduler.framework.types import ActionType, ClusterEvent, EventResource, EventType, QueueingHint
from koord_scheduler.plugins.dynamicresources import kinds
from koord_scheduler.plugins.dynamicresources.allocator import Allocator, Features
from koord_scheduler.plugins.dynamicresources.plugin import DynamicResources, new
from koord_scheduler.plugins.dynamicresources.pools import NodePoolCache, SliceIndex
from koord_scheduler.plugins.dynamicresources.selector_cache import SelectorCache
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.queue.pod_events import pod_scheduling_property_events
from tests import dra_builders as dra
from tests.builders import make_node, make_pod
from tests.fwtest import FakeHandle, make_snapshot

NODES = [make_node(n).allocatable(cpu="8", memory="16Gi", pods="110").build() for n in ("n1", "n2")]


def setup(*objects: dict[str, Any]) -> tuple[DynamicResources, MemoryCluster]:
    cluster = MemoryCluster()
    claims = [
        (f"{o['metadata']['namespace']}/{o['metadata']['name']}", o) for o in objects if o["kind"] == "ResourceClaim"
    ]
    cluster.load([], [], {"ResourceClaim": claims})
    handle = FakeHandle(make_snapshot(NODES), cluster=cluster)
    plugin = new(DynamicResourcesArgs(), handle)  # type: ignore[arg-type]
    for obj in objects:
        kind = {k.kind: k for k in (kinds.DEVICE_CLASS, kinds.RESOURCE_SLICE, kinds.RESOURCE_CLAIM)}[obj["kind"]]
        for handler in handle.watch_handlers[kind.kind]:
            handler(EventType.ADDED, None, kind.parse(obj))
    return plugin, cluster


def deliver(plugin: DynamicResources, cluster: MemoryCluster, key: str) -> ResourceClaim:
    """The watch event for the claim as the in-memory cluster now holds it."""
    claim = parse_resource_claim(cluster.objects["ResourceClaim"][key])
    plugin._on_claim(EventType.MODIFIED, plugin.claims.watched.get(key), claim)
    return claim


def cycle(plugin: DynamicResources, pod: Pod) -> tuple[CycleState, dict[str, Code]]:
    """PreFilter and Filter on both nodes."""
    state = CycleState()
    _, status = plugin.pre_filter(state, pod, None)  # type: ignore[arg-type]
    assert status.is_success, status
    snapshot = make_snapshot(NODES)
    return state, {n.name: plugin.filter(state, pod, snapshot.node_info(n.name)).code for n in NODES}  # type: ignore[arg-type]


CLASS = dra.device_class()
ONE_GPU_N1 = dra.gpus("n1", 1)


def test_pre_enqueue_waits_for_the_generated_claim_and_its_owner() -> None:
    plugin, _ = setup(CLASS)
    pending = make_pod("p").resource_claim("gpu", template="t").build()
    assert plugin.pre_enqueue(pending).message == 'pod "default/p": ResourceClaim not created yet'

    named = make_pod("p").resource_claim("gpu", template="t").claim_status("gpu", "p-gpu-x").build()
    assert plugin.pre_enqueue(named).message == 'resourceclaim.resource.k8s.io "p-gpu-x" not found'

    foreign = dra.claim("p-gpu-x", dra.request())
    plugin._on_claim(EventType.ADDED, None, parse_resource_claim(foreign))
    assert plugin.pre_enqueue(named).message == (
        "ResourceClaim default/p-gpu-x was not created for pod default/p (pod is not owner)"
    )
    owned = dra.claim("p-gpu-x", dra.request())
    owned["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": named.uid, "controller": True}
    ]
    plugin._on_claim(EventType.MODIFIED, None, parse_resource_claim(owned))
    assert plugin.pre_enqueue(named).is_success

    skipped = make_pod("q").resource_claim("gpu", template="t").claim_status("gpu", "").build()
    assert plugin.pre_enqueue(skipped).is_success  # the controller decided no claim was needed


def test_in_flight_allocation_keeps_the_device_from_the_next_pod_and_prebind_writes_it() -> None:
    plugin, cluster = setup(CLASS, ONE_GPU_N1, dra.claim("a", dra.request()), dra.claim("b", dra.request()))
    pod_a = make_pod("pa").resource_claim("gpu", claim="a").build()
    pod_b = make_pod("pb").resource_claim("gpu", claim="b").build()

    state_a, codes = cycle(plugin, pod_a)
    assert codes == {"n1": Code.SUCCESS, "n2": Code.UNSCHEDULABLE_AND_UNRESOLVABLE}
    assert plugin.reserve(state_a, pod_a, "n1").is_success
    assert plugin.claims.is_allocated(DeviceId(dra.DRIVER, "n1", "gpu-0"))

    # pb's cycle runs while pa's binding is still in flight: the device is taken.
    _, codes = cycle(plugin, pod_b)
    assert codes == {"n1": Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "n2": Code.UNSCHEDULABLE_AND_UNRESOLVABLE}
    # A pod sharing claim "a" waits for the allocation in flight.
    _, status = plugin.pre_filter(CycleState(), make_pod("pc").resource_claim("gpu", claim="a").build(), None)  # type: ignore[arg-type]
    assert status.message == "resource claim default/a is in the process of being allocated"

    assert asyncio.run(plugin.pre_bind(state_a, pod_a, "n1")).is_success
    written = parse_resource_claim(cluster.objects["ResourceClaim"]["default/a"])
    assert written.finalizers == ("resource.kubernetes.io/delete-protection",)
    assert written.allocation is not None and [r.device for r in written.allocation.results] == ["gpu-0"]
    assert [(r.resource, r.name, r.uid) for r in written.reserved_for] == [("pods", "pa", pod_a.uid)]
    assert not plugin.claims.has_pending_allocation(written.uid)
    assert plugin.claims.is_allocated(DeviceId(dra.DRIVER, "n1", "gpu-0"))  # assumed until the watch catches up


def test_unreserve_releases_the_in_flight_allocation() -> None:
    plugin, _ = setup(CLASS, ONE_GPU_N1, dra.claim("a", dra.request()))
    pod = make_pod("pa").resource_claim("gpu", claim="a").build()
    state, _ = cycle(plugin, pod)
    assert plugin.reserve(state, pod, "n1").is_success
    plugin.unreserve(state, pod, "n1")
    assert not plugin.claims.is_allocated(DeviceId(dra.DRIVER, "n1", "gpu-0"))
    _, codes = cycle(plugin, pod)
    assert codes["n1"] == Code.SUCCESS


def test_prebind_retries_a_conflict_on_the_newest_claim() -> None:
    shared = dra.claim("shared", dra.request())
    plugin, cluster = setup(CLASS, ONE_GPU_N1, shared)
    first = make_pod("p1").resource_claim("gpu", claim="shared").build()
    second = make_pod("p2").resource_claim("gpu", claim="shared").build()
    state, _ = cycle(plugin, first)
    assert plugin.reserve(state, first, "n1").is_success
    assert asyncio.run(plugin.pre_bind(state, first, "n1")).is_success
    deliver(plugin, cluster, "default/shared")

    state2, codes = cycle(plugin, second)
    assert codes == {"n1": Code.SUCCESS, "n2": Code.UNSCHEDULABLE_AND_UNRESOLVABLE}
    # Someone else writes the claim meanwhile: PreBind's resourceVersion is stale.
    asyncio.run(
        cluster.patch_object(
            kinds.RESOURCE_CLAIM, "shared", {"metadata": {"labels": {"touched": "yes"}}}, namespace="default"
        )
    )
    deliver(plugin, cluster, "default/shared")
    assert asyncio.run(plugin.pre_bind(state2, second, "n1")).is_success

    written = parse_resource_claim(cluster.objects["ResourceClaim"]["default/shared"])
    assert [ref.name for ref in written.reserved_for] == ["p1", "p2"]
    assert written.meta.labels == {"touched": "yes"}


def test_post_filter_deallocates_a_claim_unusable_everywhere() -> None:
    allocated = dra.claim("stuck", dra.request())
    allocated["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": dra.DRIVER, "pool": "gone", "device": "gpu-0"}]},
            "nodeSelector": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gone"]}]}]
            },
        }
    }
    plugin, cluster = setup(CLASS, allocated)
    pod = make_pod("p").resource_claim("gpu", claim="stuck").build()
    state, codes = cycle(plugin, pod)
    assert set(codes.values()) == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}

    async def run() -> str:
        _, status = plugin.post_filter(state, pod, None)
        await plugin.drain()
        return status.message

    assert asyncio.run(run()) == "deallocation of ResourceClaim completed"
    assert "allocation" not in cluster.objects["ResourceClaim"]["default/stuck"].get("status", {})
    _, status = plugin.post_filter(CycleState(), make_pod("plain").build(), None)
    assert (status.code, status.message) == (Code.UNSCHEDULABLE, "no new claims to deallocate")


def test_hints_queue_only_what_may_help() -> None:
    plugin, _ = setup(CLASS, dra.claim("a", dra.request()))
    events = {e.event.resource: e for e in plugin.events_to_register()}
    pod = make_pod("p").resource_claim("gpu", claim="a").build()
    claim_hint = events[EventResource.RESOURCE_CLAIM].hint
    assert claim_hint is not None
    mine = plugin.claims.get("default/a")
    other = parse_resource_claim(dra.claim("other", dra.request()))
    assert claim_hint(pod, None, mine) == QueueingHint.QUEUE
    assert claim_hint(pod, None, other) == QueueingHint.SKIP

    waiting = make_pod("w").resource_claim("gpu", template="t").build()
    named = make_pod("w").resource_claim("gpu", template="t").claim_status("gpu", "a").build()
    assert [e.action for e in pod_scheduling_property_events(waiting, named)] == [
        ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM
    ]
    pod_event = events[EventResource.POD]
    assert pod_event.event.matches(
        ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM)
    )


def allocator(*slices: dict[str, Any], allocated: frozenset[DeviceId] = frozenset()) -> Allocator:
    index = SliceIndex()
    for s in slices:
        index.upsert(parse_resource_slice(s))
    classes = {c.name: c for c in (parse_device_class(CLASS),)}
    pools = NodePoolCache(index, partitionable_devices=False)
    return Allocator(pools, classes, allocated, features=Features(), selectors=SelectorCache())


@pytest.mark.parametrize(
    ("requests", "want"),
    [
        pytest.param([dra.request(count=2)], [["gpu-0", "gpu-1"]], id="exact-count-first-fit"),
        pytest.param([dra.request(count=5)], None, id="not-enough"),
        pytest.param([dra.request(all_devices=True)], [["gpu-0", "gpu-1", "gpu-2"]], id="all"),
        pytest.param([dra.request("a"), dra.request("b")], [["gpu-0", "gpu-1"]], id="two-requests-distinct-devices"),
        pytest.param(
            [dra.request("g", dra.DRIVER, f'device.attributes["{dra.DRIVER}"].index == 2')], [["gpu-2"]], id="selector"
        ),
    ],
)
def test_allocator_search(requests: list[dict[str, Any]], want: list[list[str]] | None) -> None:
    claim = parse_resource_claim(dra.claim("c", *requests))
    results = allocator(dra.gpus("n1", 3)).allocate(NODES[0], [claim])
    got = None if results is None else [[r.device for r in a.results] for a in results]
    assert got == want


def test_allocator_skips_allocated_devices_and_gives_distinct_devices_to_two_claims() -> None:
    taken = frozenset({DeviceId(dra.DRIVER, "n1", "gpu-0")})
    claims = [parse_resource_claim(dra.claim(n, dra.request())) for n in ("c1", "c2")]
    results = allocator(dra.gpus("n1", 3), allocated=taken).allocate(NODES[0], claims)
    assert results is not None
    assert [[r.device for r in a.results] for a in results] == [["gpu-1"], ["gpu-2"]]
    assert allocator(dra.gpus("n1", 3)).allocate(NODES[1], claims) is None  # no slice for n2


def test_allocator_backtracks_for_match_attribute() -> None:
    slice_ = dra.resource_slice(
        "s", "n1", [dra.device("gpu-0", numa=0), dra.device("gpu-1", numa=1), dra.device("gpu-2", numa=1)]
    )
    claim = parse_resource_claim(
        dra.claim("c", dra.request(count=2), constraints=[{"matchAttribute": f"{dra.DRIVER}/numa"}])
    )
    results = allocator(slice_).allocate(NODES[0], [claim])
    assert results is not None and [r.device for r in results[0].results] == ["gpu-1", "gpu-2"]
    node_selector = results[0].node_selector
    assert node_selector is not None and node_selector[0].match_fields[0].values == ("n1",)


def test_allocator_waits_for_an_incomplete_pool_and_node_independent_slices_count() -> None:
    partial = dra.resource_slice("p1", "n1", [dra.device("gpu-0")], pool="pool", count=2)
    claim = parse_resource_claim(dra.claim("c", dra.request()))
    assert allocator(partial).allocate(NODES[0], [claim]) is None
    everywhere = dra.resource_slice("net", devices=[dra.device("nic-0")], all_nodes=True, pool="net")
    results = allocator(everywhere).allocate(NODES[1], [claim])
    assert results is not None and results[0].node_selector is None


def test_device_taints_are_honoured_only_with_their_gate() -> None:
    tainted = dra.resource_slice(
        "s", "n1", [dict(dra.device("gpu-0"), taints=[{"key": "broken", "effect": "NoSchedule"}])]
    )
    index = SliceIndex()
    index.upsert(parse_resource_slice(tainted))
    classes = {c.name: c for c in (parse_device_class(CLASS),)}
    plain = parse_resource_claim(dra.claim("c", dra.request()))
    tolerant_request = dra.request()
    tolerant_request["exactly"]["tolerations"] = [{"key": "broken", "operator": "Exists", "effect": "NoSchedule"}]
    tolerant = parse_resource_claim(dra.claim("t", tolerant_request))

    def allocate(claim: ResourceClaim, *, taints: bool) -> bool:
        pools = NodePoolCache(index, partitionable_devices=False)
        allocator = Allocator(
            pools, classes, frozenset(), features=Features(device_taints=taints), selectors=SelectorCache()
        )
        return allocator.allocate(NODES[0], [claim]) is not None

    assert allocate(plain, taints=False)  # DRADeviceTaints off (the default): taints are ignored
    assert not allocate(plain, taints=True)
    assert allocate(tolerant, taints=True)
