"""NUMA-bound BE pods and the zone batch resources the noderesource controller writes into the
NodeResourceTopology: NodeNUMAResource admits a batch-cpu request only where one NUMA node has it
(SingleNUMANode) and splits it across zones under Restricted."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.plugins.nodenumaresource.nrt import parse_node_resource_topology
from tests.builders import make_node, make_pod
from tests.fwtest import make_snapshot
from tests.unit.scheduler.plugins.nodenumaresource.numa_helpers import make_plugin, nrt_object, numa_zones

BATCH_CPU, BATCH_MEMORY = "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"
STATUS = "scheduling.koordinator.sh/resource-status"


def zones(batch_cpu: tuple[str, str]) -> list[dict[str, Any]]:
    out = numa_zones()
    for zone, cpu in zip(out, batch_cpu, strict=True):
        for name, amount in ((BATCH_CPU, cpu), (BATCH_MEMORY, "8Gi")):
            zone["resources"].append({"name": name, "capacity": amount, "allocatable": amount, "available": amount})
    return out


def be_pod(name: str, batch_cpu: str) -> Pod:
    return (
        make_pod(name)
        .label("koordinator.sh/qosClass", "BE")
        .priority(5000, "koord-batch")
        .req({BATCH_CPU: batch_cpu, BATCH_MEMORY: "1Gi"})
        .build()
    )


def place(policy: str, batch_cpu: tuple[str, str], pod: Pod) -> Any:
    node = (
        make_node("n1")
        .allocatable({"cpu": "16", "memory": "64Gi", "pods": "110", BATCH_CPU: "9000", BATCH_MEMORY: "16Gi"})
        .label("node.koordinator.sh/numa-topology-policy", policy)
        .build()
    )
    snap = make_snapshot([node])
    plugin, cluster = make_plugin(snap, nrt_object("n1", zones=zones(batch_cpu)))
    state = CycleState()
    _, status = plugin.pre_filter(state, pod, snap)
    assert status.is_success, status.message
    info = snap.node_info("n1")
    assert info is not None
    filtered = plugin.filter(state, pod, info)
    if not filtered.is_success:
        return f"filter: {filtered.message}"
    assert plugin.reserve(state, pod, "n1").is_success
    asyncio.run(plugin.pre_bind(state, pod, "n1"))
    return json.loads(cluster.patches[-1][1][STATUS] or "{}")


def test_single_numa_node_needs_the_batch_cpu_on_one_zone() -> None:
    got = place("SingleNUMANode", ("4000", "5000"), be_pod("fits", "4500"))
    assert got == {"numaNodeResources": [{"node": 1, "resources": {BATCH_CPU: "4500", BATCH_MEMORY: str(1 << 30)}}]}
    refused = place("SingleNUMANode", ("4000", "5000"), be_pod("too-big", "6000"))
    assert refused.startswith("filter: ") and BATCH_CPU in refused


def test_restricted_splits_batch_cpu_over_zones() -> None:
    got = place("Restricted", ("4000", "5000"), be_pod("split", "8000"))
    shares = {entry["node"]: entry["resources"][BATCH_CPU] for entry in got["numaNodeResources"]}
    assert shares == {0: "4000", 1: "4000"}


def test_zone_batch_resources_are_read_from_the_nrt() -> None:
    record = parse_node_resource_topology(nrt_object("n1", zones=zones(("4000", "5000"))))
    assert record.numa_resources[0][BATCH_CPU] == 4000 and record.numa_resources[1][BATCH_MEMORY] == 8 << 30
    assert json.loads(record.zones_json)[0]["name"] == "node-0"
