"""Network-topology-aware gangs on the in-memory cluster (the simulator): a ClusterNetworkTopology with
spine > block > node layers, one 4-cpu pod per 4-cpu node."""

from __future__ import annotations

import json

import pytest
from gang_harness import ANN, CONFIG, gang_pod, pod, pod_group, simulate

from koord_scheduler.plugins.coscheduling.network_topology import sort_pods_by_index
from tests.builders import make_pod

SPEC = ANN + "network-topology-spec"
SELECTOR = "scheduling.koordinator.sh/network-topology-selector"
INDEX = ANN + "network-topology-index"
AWARE_CONFIG = (
    CONFIG
    + """  pluginConfig:
  - name: Coscheduling
    args: {awareNetworkTopology: true}
"""
)
MUST_GATHER_BLOCK = '{"gatherStrategy":[{"layer":"BlockLayer","strategy":"MustGather"}]}'
MUST_GATHER_SPINE = '{"gatherStrategy":[{"layer":"SpineLayer","strategy":"MustGather"}]}'


def topology(name: str = "default") -> str:
    return json.dumps(
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "ClusterNetworkTopology",
            "metadata": {"name": name},
            "spec": {
                "networkTopologySpec": [
                    {
                        "topologyLayer": "SpineLayer",
                        "parentTopologyLayer": "ClusterTopologyLayer",
                        "labelKey": ["network.topology.example.com/spine"],
                    },
                    {
                        "topologyLayer": "BlockLayer",
                        "parentTopologyLayer": "SpineLayer",
                        "labelKey": ["network.topology.example.com/block"],
                    },
                    {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "BlockLayer"},
                ]
            },
        }
    )


def node(name: str, spine: str, block: str, cpu: str = "4") -> str:
    labels = {"network.topology.example.com/spine": spine, "network.topology.example.com/block": block}
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}},
        }
    )


def block(prefix: str, spine: str, block_name: str, count: int) -> list[str]:
    return [node(f"{prefix}{i}", spine, block_name) for i in range(count)]


def gang(n: int, spec: str, *, name: str = "g") -> list[str]:
    return [gang_pod(f"{name}{i}", name, n, network_topology_spec=spec) for i in range(n)]


async def test_gang_lands_in_the_one_block_with_room_for_all() -> None:
    # Block b1 (nodes a0..a2, first by name) has room for 3 of the 4 members, block b2 for all 4.
    nodes = block("a", "s1", "b1", 3) + block("b", "s1", "b2", 4)
    run = await simulate(topology(), *nodes, *gang(4, MUST_GATHER_BLOCK), config=AWARE_CONFIG)
    assert run.bound() == {"g0", "g1", "g2", "g3"}
    assert {node for node, _ in run.placements.values()} == {"b0", "b1", "b2", "b3"}


async def test_the_smallest_block_that_fits_is_preferred() -> None:
    # Gather in the spine: both blocks fit 4; the tighter one (4 free nodes) wins over 6.
    nodes = block("a", "s1", "b1", 6) + block("b", "s1", "b2", 4)
    run = await simulate(topology(), *nodes, *gang(4, MUST_GATHER_SPINE), config=AWARE_CONFIG)
    assert {node for node, _ in run.placements.values()} == {"b0", "b1", "b2", "b3"}


async def test_no_block_fits_the_gang_binds_none_with_koordinators_message() -> None:
    nodes = block("a", "s1", "b1", 3) + block("b", "s1", "b2", 3)
    run = await simulate(topology(), *nodes, *gang(4, MUST_GATHER_BLOCK), config=AWARE_CONFIG)
    assert run.bound() == set()
    want = (
        "no candidate topology nodes can accommodate job, desiredOfferSlot: 4, "
        "topology topologyNode BlockLayer/b1: 3;topology topologyNode BlockLayer/b2: 3, 0/6 nodes are available:"
    )
    messages = [m for _, m in run.placements.values()]
    assert any(want in m for m in messages), messages
    assert all(m for m in messages), "every member says why"


async def test_without_a_cluster_network_topology_the_gang_gets_koordinators_message() -> None:
    nodes = block("b", "s1", "b2", 4)
    run = await simulate(*nodes, *gang(4, MUST_GATHER_BLOCK), config=AWARE_CONFIG)
    assert run.bound() == set()
    assert all("no cluster network topology" in m for _, m in run.placements.values())


async def test_only_the_topology_named_default_counts() -> None:
    nodes = block("b", "s1", "b2", 4)
    run = await simulate(topology("other"), *nodes, *gang(4, MUST_GATHER_BLOCK), config=AWARE_CONFIG)
    assert all("no cluster network topology" in m for _, m in run.placements.values())


async def test_spec_that_is_not_json_is_refused_with_an_event() -> None:
    nodes = block("b", "s1", "b2", 2)
    run = await simulate(topology(), *nodes, *gang(2, "{not json"), config=AWARE_CONFIG)
    assert run.bound() == set()
    message = run.placements["g0"][1]
    assert "network-topology-spec: not JSON" in message, message
    assert "default/g0" in run.events("InvalidGang")


async def test_without_aware_network_topology_the_spec_is_ignored() -> None:
    nodes = block("a", "s1", "b1", 3) + block("b", "s1", "b2", 1)
    run = await simulate(*nodes, *gang(4, MUST_GATHER_BLOCK))
    assert run.bound() == {"g0", "g1", "g2", "g3"}


async def test_gang_without_a_spec_is_a_plain_gang_when_aware() -> None:
    nodes = block("a", "s1", "b1", 3) + block("b", "s1", "b2", 1)
    pods = [gang_pod(f"p{i}", "plain", 4) for i in range(4)]
    run = await simulate(*nodes, *pods, config=AWARE_CONFIG)
    assert run.bound() == {"p0", "p1", "p2", "p3"}


async def test_selector_pods_are_packed_under_the_block_that_already_has_one() -> None:
    # Without the ranking the pod goes to a0; with it, next to the pod of its selector, in block b2.
    nodes = block("a", "s1", "b1", 3) + block("b", "s1", "b2", 3)
    placed = pod("old", annotations={SELECTOR: "job-x"}, node_name="b0")
    new = pod("new", annotations={SELECTOR: "job-x"})
    run = await simulate(topology(), *nodes, placed, new, config=AWARE_CONFIG)
    assert run.placements["new"][0] == "b1"


async def test_offer_slots_count_members_placed_one_after_another() -> None:
    # 8-cpu nodes take two 4-cpu members each: block b1 (one node) offers 2, block b2 (two nodes) 4.
    nodes = [node("a0", "s1", "b1", cpu="8"), node("b0", "s1", "b2", cpu="8"), node("b1", "s1", "b2", cpu="8")]
    run = await simulate(topology(), *nodes, *gang(4, MUST_GATHER_BLOCK), config=AWARE_CONFIG)
    placed = sorted(node_name or "" for node_name, _ in run.placements.values())
    assert placed == ["b0", "b0", "b1", "b1"]


async def test_spec_on_a_pod_group_places_its_members() -> None:
    group = pod_group("pg", 4, annotations={SPEC: MUST_GATHER_BLOCK})
    members = [pod(f"m{i}", labels={"pod-group.scheduling.sigs.k8s.io": "pg"}) for i in range(4)]
    nodes = block("a", "s1", "b1", 3) + block("b", "s1", "b2", 4)
    run = await simulate(topology(), *nodes, group, *members, config=AWARE_CONFIG)
    assert sorted(n or "" for n, _ in run.placements.values()) == ["b0", "b1", "b2", "b3"]


@pytest.mark.parametrize(
    ("pods", "want"),
    [
        pytest.param({"b": None, "a": None}, ["a", "b"], id="no-index-by-name"),
        pytest.param({"a": "2", "b": "1", "c": None}, ["b", "a", "c"], id="index-first-then-unindexed"),
        pytest.param({"a": "x", "b": "0"}, ["b", "a"], id="bad-index-counts-as-none"),
    ],
)
def test_sort_pods_by_index(pods: dict[str, str | None], want: list[str]) -> None:
    built = []
    for name, index in pods.items():
        builder = make_pod(name)
        if index is not None:
            builder = builder.annotation(INDEX, index)
        built.append(builder.build())
    assert [p.name for p in sort_pods_by_index(built)] == want


PREEMPT_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
    postFilter:
      disabled:
      - name: '*'
      enabled:
      - name: Coscheduling
  pluginConfig:
  - name: Coscheduling
    args: {enablePreemption: true, awareNetworkTopology: true}
"""


def prio_pod(name: str, prio: int, *, node_name: str = "", annotations: dict[str, str] | None = None) -> str:
    spec: dict[str, object] = {"priority": prio, "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    meta = {"name": name, "namespace": "default", "annotations": annotations or {}}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


def high_gang(n: int) -> list[str]:
    notes = {ANN + "name": "hi", ANN + "min-available": str(n), SPEC: MUST_GATHER_BLOCK}
    return [prio_pod(f"hi{i}", 100, annotations=notes) for i in range(n)]


async def test_job_preemption_plans_by_topology_and_takes_the_fewest_victims() -> None:
    # Block b1: a0, a1 free, a2 busy; block b2: b0..b3 all busy (priority 0). A gang of 3 that must
    # gather in a block fits b1 once a2's pod goes: that block is the tightest fit, one victim.
    nodes = block("a", "s1", "b1", 3) + block("b", "s1", "b2", 4)
    low = [prio_pod("low-a2", 0, node_name="a2")] + [prio_pod(f"low-b{i}", 0, node_name=f"b{i}") for i in range(4)]
    run = await simulate(topology(), *nodes, *low, *high_gang(3), config=PREEMPT_CONFIG)
    assert sorted(run.placements[f"hi{i}"][0] or "" for i in range(3)) == ["a0", "a1", "a2"]
    assert "default/low-a2" not in run.cluster.pods
    assert all(f"default/low-b{i}" in run.cluster.pods for i in range(4)), "no victim outside the plan"
    records = run.result.extra_sections["JobPreemptions"]
    assert [sorted(r["victims"]) for r in records] == [["default/low-a2"]]


async def test_job_preemption_that_cannot_fit_the_layer_preempts_nobody() -> None:
    nodes = block("a", "s1", "b1", 2) + block("b", "s1", "b2", 2)
    low = [prio_pod(f"low-{n}", 0, node_name=n) for n in ("a0", "b0")]
    run = await simulate(topology(), *nodes, *low, *high_gang(3), config=PREEMPT_CONFIG)
    assert run.bound() == set()
    assert {"default/low-a0", "default/low-b0"} <= set(run.cluster.pods), "nobody preempted"
    assert run.result.extra_sections["JobPreemptions"] == []
    message = run.placements["hi0"][1] + run.placements["hi1"][1] + run.placements["hi2"][1]
    assert "preemption: no candidate topology nodes can accommodate job, desiredOfferSlot: 3" in message, message


async def test_room_nominated_to_a_more_important_pod_is_not_offered() -> None:
    # vip (priority 1000, held by a scheduling gate) is nominated to b0: block b2 offers 3, not 4.
    nodes = block("a", "s1", "b1", 3) + block("b", "s1", "b2", 4)
    vip = json.loads(prio_pod("vip", 1000))
    vip["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
    vip["status"] = {"nominatedNodeName": "b0"}
    run = await simulate(topology(), *nodes, json.dumps(vip), *gang(4, MUST_GATHER_BLOCK), config=AWARE_CONFIG)
    assert run.bound() == set()
    assert "topology topologyNode BlockLayer/b1: 3;topology topologyNode BlockLayer/b2: 3" in run.placements["g0"][1]
