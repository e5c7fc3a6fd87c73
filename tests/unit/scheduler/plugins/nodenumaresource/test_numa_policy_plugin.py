"""NodeNUMAResource under NUMA topology policies (node label, NRT kubelet policy, pod numa-topology-spec):
Filter's admission, Reserve's NUMA shares and cpusets, PreBind's resource-status, restart, Score.
Topology: 2 NUMA nodes of 8 logical CPUs and 32Gi each (NUMA 0: CPUs 0-3,8-11; NUMA 1: 4-7,12-15)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
import pytest

from apis.config.numa_args import NodeNUMAResourceArgs
from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.snapshot import NodeInfo
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.nodenumaresource.plugin import NodeNUMAResource
from tests.builders import make_node, make_pod
from tests.fwtest import filter_statuses, make_snapshot
from tests.unit.scheduler.plugins.nodenumaresource.numa_helpers import (
    RecordingCluster,
    make_plugin,
    nrt_object,
    numa_zones,
)

STATUS = "scheduling.koordinator.sh/resource-status"
NUMA_SPEC = "scheduling.koordinator.sh/numa-topology-spec"
NODE_POLICY = "node.koordinator.sh/numa-topology-policy"


def pod(name: str, cpu: str, qos: str = "LSR", memory: str = "1Gi", **annotations: str) -> Pod:
    builder = make_pod(name).req(cpu=cpu, memory=memory).label("koordinator.sh/qosClass", qos)
    for key, value in annotations.items():
        builder = builder.annotation(key, value)
    return builder.build()


def spec(policy: str, exclusive: str = "") -> str:
    body = {"numaTopologyPolicy": policy}
    if exclusive:
        body["singleNUMANodeExclusive"] = exclusive
    return json.dumps(body)


def setup(
    policy: str = "", *, nrt_policy: str = "None", args: NodeNUMAResourceArgs | None = None
) -> tuple[NodeNUMAResource, RecordingCluster]:
    builder = make_node("n1").allocatable(cpu="16", memory="64Gi", pods="110")
    if policy:
        builder = builder.label(NODE_POLICY, policy)
    snap = make_snapshot([builder.build()])
    return make_plugin(snap, nrt_object("n1", zones=numa_zones(), policies=(nrt_policy,)), args=args)


def n1(plugin: NodeNUMAResource) -> NodeInfo:
    info = plugin._snapshot.node_info("n1")
    assert info is not None
    return info


def run(plugin: NodeNUMAResource, cluster: RecordingCluster, p: Pod) -> Any:
    """Filter, Reserve, PreBind on n1: the resource-status written (decoded), or the failure."""
    state = CycleState()
    _, status = plugin.pre_filter(state, p, plugin._snapshot)
    if not (status.is_success or status.is_skip):
        return f"prefilter: {status.message}"
    if status.is_success:
        filtered = plugin.filter(state, p, n1(plugin))
        if not filtered.is_success:
            return f"filter: {filtered.message}"
    reserved = plugin.reserve(state, p, "n1")
    if not reserved.is_success:
        return f"reserve: {reserved.message}"
    before = len(cluster.patches)
    asyncio.run(plugin.pre_bind(state, p, "n1"))
    if len(cluster.patches) == before:
        return None
    return json.loads(cluster.patches[-1][1][STATUS] or "{}")


def numa_status(cpuset: str, *shares: tuple[int, str, str]) -> dict[str, Any]:
    body: dict[str, Any] = {"cpuset": cpuset} if cpuset else {}
    body["numaNodeResources"] = [{"node": n, "resources": {"cpu": c, "memory": m}} for n, c, m in shares]
    return body


def test_single_numa_node_keeps_an_lsr_pod_on_one_numa_node() -> None:
    plugin, cluster = setup("SingleNUMANode")
    assert run(plugin, cluster, pod("a", "4")) == numa_status("0-1,8-9", (0, "4", "1Gi"))
    # NUMA 0 now has 4 CPUs left: a 6-CPU pod goes to NUMA 1.
    assert run(plugin, cluster, pod("b", "6")) == numa_status("4-6,12-14", (1, "6", "1Gi"))


def test_single_numa_node_refuses_a_pod_larger_than_one_numa_node() -> None:
    plugin, cluster = setup("SingleNUMANode")
    assert run(plugin, cluster, pod("big", "12")) == (
        "filter: Unaligned NUMA Hint cause cpu prefer [11] among [11],memory prefer [11] among [11]"
    )


@pytest.mark.parametrize("policy", ["Restricted", "BestEffort"])
def test_restricted_and_best_effort_split_a_large_pod_evenly(policy: str) -> None:
    plugin, cluster = setup(policy)
    want = numa_status("0-2,4-6,8-10,12-14", (0, "6", "512Mi"), (1, "6", "512Mi"))
    assert run(plugin, cluster, pod("big", "12")) == want


def test_policy_from_the_kubelet_via_nrt() -> None:
    plugin, cluster = setup(nrt_policy="SingleNUMANodePodLevel")
    assert run(plugin, cluster, pod("big", "12")).startswith("filter: Unaligned NUMA Hint")


def test_pods_without_bound_cpus_get_numa_shares_and_fill_numa_nodes() -> None:
    plugin, cluster = setup("SingleNUMANode")
    assert run(plugin, cluster, pod("ls1", "6", "LS")) == numa_status("", (0, "6", "1Gi"))
    assert run(plugin, cluster, pod("ls2", "4", "LS")) == numa_status("", (1, "4", "1Gi"))
    assert run(plugin, cluster, pod("ls3", "5", "LS")).startswith("filter: Unaligned NUMA Hint")


def test_pod_level_policy_on_an_unlabelled_node() -> None:
    plugin, cluster = setup()
    assert run(plugin, cluster, pod("a", "4", **{NUMA_SPEC: spec("SingleNUMANode")})) == numa_status(
        "0-1,8-9", (0, "4", "1Gi")
    )
    assert run(plugin, cluster, pod("b", "4")) == {"cpuset": "4-5,12-13"}


def test_pod_policy_must_match_the_nodes() -> None:
    plugin, cluster = setup("Restricted")
    assert run(plugin, cluster, pod("a", "4", **{NUMA_SPEC: spec("SingleNUMANode")})) == (
        "filter: node(s) NUMA Topology policy not match"
    )


@pytest.mark.parametrize(
    ("exclusive", "admitted"),
    [pytest.param("", False, id="required-by-default"), pytest.param("Preferred", True, id="preferred")],
)
def test_single_numa_exclusive_avoids_numa_nodes_shared_by_a_spanning_cpuset(exclusive: str, admitted: bool) -> None:
    plugin, cluster = setup()
    assert run(plugin, cluster, pod("span", "12", **{NUMA_SPEC: spec("Restricted")}))["cpuset"] == (
        "0-2,4-6,8-10,12-14"
    )
    got = run(plugin, cluster, pod("one", "2", **{NUMA_SPEC: spec("SingleNUMANode", exclusive)}))
    assert (isinstance(got, dict)) is admitted
    if not admitted:
        assert got.startswith("filter: Unaligned NUMA Hint")


def test_bound_pods_hold_their_numa_shares_after_a_restart() -> None:
    plugin, cluster = setup("SingleNUMANode")
    status = json.dumps(numa_status("", (0, "6", "1Gi")))
    bound = make_pod("old").req(cpu="6", memory="1Gi").node("n1").annotation(STATUS, status).build()
    plugin.on_pod(EventType.ADDED, None, bound)
    assert run(plugin, cluster, pod("new", "4", "LS")) == numa_status("", (1, "4", "1Gi"))
    plugin.on_pod(EventType.DELETED, bound, None)
    assert run(plugin, cluster, pod("next", "4", "LS")) == numa_status("", (0, "4", "1Gi"))


def test_unreserve_returns_numa_shares() -> None:
    plugin, cluster = setup("SingleNUMANode")
    p = pod("a", "8", "LS")
    state = CycleState()
    plugin.pre_filter(state, p, plugin._snapshot)
    assert plugin.reserve(state, p, "n1").is_success
    plugin.unreserve(state, p, "n1")
    assert run(plugin, cluster, pod("b", "8", "LS")) == numa_status("", (0, "8", "1Gi"))


def test_score_rates_the_numa_nodes_the_pod_gets() -> None:
    plugin, _ = setup("SingleNUMANode")
    p = pod("a", "4", "LS")
    state = CycleState()
    plugin.pre_filter(state, p, plugin._snapshot)
    info = n1(plugin)
    assert plugin.filter(state, p, info).is_success
    plugin.pre_score(state, p, plugin._snapshot, filter_positions(plugin))
    # NUMA 0 alone: cpu (8-4)/8 = 50, memory (32-1)/32 = 96 -> 73 (node-wide it would be 75 and 98 -> 86).
    assert plugin.score(state, p, info) == 73
    assert plugin.score_nodes(state, p, plugin._snapshot, filter_positions(plugin)).tolist() == [73]


def filter_positions(plugin: NodeNUMAResource) -> Any:
    return np.array([n1(plugin).position], dtype=np.int64)


def test_filter_statuses_over_nodes_with_and_without_zones() -> None:
    labelled = make_node("zones").allocatable(cpu="16", memory="64Gi").label(NODE_POLICY, "SingleNUMANode").build()
    bare = make_node("bare").allocatable(cpu="16", memory="64Gi").label(NODE_POLICY, "SingleNUMANode").build()
    snap = make_snapshot([labelled, bare])
    plugin, _ = make_plugin(snap, nrt_object("zones", zones=numa_zones()), nrt_object("bare"))
    statuses = filter_statuses(plugin, pod("a", "4", "LS"), snap)
    assert statuses["zones"].is_success
    assert statuses["bare"].message == "node(s) missing NUMA resources"


@pytest.mark.parametrize(
    ("strategy", "second"),
    [pytest.param("LeastAllocated", 1, id="least-spreads"), pytest.param("MostAllocated", 0, id="most-packs")],
)
def test_numa_scoring_strategy_picks_among_single_numa_hints(strategy: str, second: int) -> None:
    args = NodeNUMAResourceArgs.model_validate({"numaScoringStrategy": {"type": strategy}})
    plugin, cluster = setup("SingleNUMANode", args=args)
    assert run(plugin, cluster, pod("a", "2", "LS")) == numa_status("", (0, "2", "1Gi"))
    assert run(plugin, cluster, pod("b", "2", "LS")) == numa_status("", (second, "2", "1Gi"))
