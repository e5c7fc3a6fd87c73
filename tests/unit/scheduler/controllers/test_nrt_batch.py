"""NUMA-level batch resources: Koordinator's batchresource ``TestPluginCalculate`` NUMA cases and
``TestPreUpdate`` zone updates, transcribed as facts (outputs equal to the millicore and the byte)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from apis.configuration import ColocationStrategy, parse_slo_config
from apis.core.types import Pod
from apis.slo.nodemetric_record import NodeMetricRecord, parse_node_metric
from koord_scheduler.scheduler.controllers.batch import Pair
from koord_scheduler.scheduler.controllers.noderesource import decide_node_resources
from koord_scheduler.scheduler.controllers.nrt_batch import (
    TopologyRecord,
    canonical_zones,
    parse_topology_record,
    updated_zones,
    zone_batch,
    zones_of,
)
from tests.builders import make_node, make_pod

G = 10**9
STATUS = "scheduling.koordinator.sh/resource-status"
NODE = make_node("test-node1").capacity(cpu="100", memory="120G").build()
STRATEGY = dataclasses.replace(
    ColocationStrategy(enable=True), cpu_reclaim_threshold_percent=65, memory_reclaim_threshold_percent=65
)


def zone(name: str, cpu: str, memory: str, **extra: str) -> dict[str, Any]:
    resources = [
        {"name": n, "capacity": v, "allocatable": v, "available": v}
        for n, v in (("cpu", cpu), ("memory", memory), *extra.items())
    ]
    return {"name": name, "type": "Node", "resources": resources}


def pods(*, lse: bool = False, prod_on_zone0: bool = False) -> list[Pod]:
    prod = make_pod("podProd", "test").label("koordinator.sh/qosClass", "LSE" if lse else "LS")
    if lse:
        prod = make_pod("podProdLSE", "test").label("koordinator.sh/qosClass", "LSE")
    if prod_on_zone0 or lse:
        prod = prod.annotation(STATUS, json.dumps({"numaNodeResources": [{"node": 0, "resources": {"cpu": "10"}}]}))
    return [
        prod.req(cpu="10", memory="10G").phase("Running").build(),
        make_pod("podProd1", "test").priority(9999, "koord-prod").req(cpu="10", memory="10G").phase("Running").build(),
        make_pod("podBatch", "test")
        .label("koordinator.sh/qosClass", "BE")
        .req(cpu="10", memory="10G")
        .phase("Running")
        .build(),
        make_pod("podMid", "test")
        .label("koordinator.sh/qosClass", "BE")
        .priority(7000, "koord-mid")
        .container("a", requests={"cpu": "10", "memory": "20G"})
        .container("b", requests={"cpu": "10", "memory": "20G"})
        .phase("Pending")
        .build(),
        make_pod("podProd2", "test").req(cpu="10", memory="10G").phase("Succeeded").build(),
    ]


def metric(prod_name: str = "podProd", *, extra_pods: tuple[tuple[str, str, str, str], ...] = ()) -> NodeMetricRecord:
    usage = [(prod_name, "5", "5G"), ("podProd1", "6", "6G"), ("podBatch", "10", "10G"), ("podMid", "22", "22G")]
    metrics = [
        {"namespace": "test", "name": n, "podUsage": {"resources": {"cpu": c, "memory": m}}} for n, c, m in usage
    ]
    metrics += [
        {"namespace": "test", "name": n, "priority": p, "podUsage": {"resources": {"cpu": c, "memory": m}}}
        for n, c, m, p in extra_pods
    ]
    return parse_node_metric(
        {
            "metadata": {"name": "test-node1"},
            "status": {
                "updateTime": "2026-01-01T00:00:00Z",
                "nodeMetric": {
                    "nodeUsage": {"resources": {"cpu": "50", "memory": "55G"}},
                    "systemUsage": {"resources": {"cpu": "7", "memory": "12G"}},
                },
                "podsMetric": metrics,
            },
        }
    )


def test_one_zone() -> None:
    """``calculate with one NUMA-level resources``: the zone equals the node."""
    zones = zones_of(canonical_zones([zone("node-0", "100", "120G")]))
    assert zones is not None
    assert zone_batch(NODE, pods(), metric(), zones, STRATEGY) == {"node-0": Pair(25_000, 33 * G)}


def test_two_zones_with_a_bound_prod_pod() -> None:
    """``calculate with multiple NUMA-level resources``: podProd on NUMA 0, the others spread evenly."""
    zones = zones_of(canonical_zones([zone("node-0", "50", "62G"), zone("node-1", "50", "58G")]))
    assert zones is not None
    assert zone_batch(NODE, pods(prod_on_zone0=True), metric(), zones, STRATEGY) == {
        "node-0": Pair(10_000, 15_300_000_000),  # 50 - 17.5 - 3.5 - (14 + 5); 62 - 21.7 - 6 - (14 + 5)
        "node-1": Pair(15_000, 17_700_000_000),  # 50 - 17.5 - 3.5 - 14; 58 - 20.3 - 6 - 14
    }


def test_memory_by_request_with_an_lse_pod() -> None:
    """``calculate with memory not over-committed, LSE pods and NUMA-level resources``."""
    zones = zones_of(canonical_zones([zone("node-0", "50", "62G"), zone("node-1", "50", "58G")]))
    assert zones is not None
    strategy = dataclasses.replace(STRATEGY, memory_calculate_policy="request")
    assert zone_batch(NODE, pods(lse=True), metric("podProdLSE"), zones, strategy) == {
        "node-0": Pair(5_000, 5_300_000_000),  # 50 - 17.5 - 3.5 - (14 + 10); 62 - 21.7 - (25 + 10)
        "node-1": Pair(15_000, 12_700_000_000),  # 50 - 17.5 - 3.5 - 14; 58 - 20.3 - 25
    }


def test_dangling_metrics_spread_over_zones() -> None:
    """Usage of a pod the informer no longer has (HP priority) is split evenly; a batch one is ignored."""
    zones = zones_of(canonical_zones([zone("node-0", "50", "62G"), zone("node-1", "50", "58G")]))
    assert zones is not None
    gone = (("gone-prod", "4", "4G", "koord-prod"), ("gone-batch", "8", "8G", "koord-batch"))
    got = zone_batch(NODE, pods(prod_on_zone0=True), metric(extra_pods=gone), zones, STRATEGY)
    assert got == {"node-0": Pair(8_000, 13_300_000_000), "node-1": Pair(13_000, 15_700_000_000)}


@pytest.mark.parametrize(
    "zones",
    [
        pytest.param([], id="no-zones"),
        pytest.param(
            [{"name": "node-0", "type": "Node", "resources": [{"name": "cpu", "allocatable": "4"}]}],
            id="zone-without-memory",
        ),
    ],
)
def test_no_zone_result_without_cpu_and_memory_in_every_zone(zones: list[Any]) -> None:
    assert zones_of(canonical_zones(zones)) is None


def test_zones_added_updated_reset_and_normalized() -> None:
    """``TestPreUpdate``: add to zones that have none, keep resources sorted, scale batch-cpu by the CPU
    normalization ratio, reset a zone the result does not name, skip moves within the threshold."""
    before = canonical_zones(
        [
            zone("node-0", "50", "62G"),
            zone("node-1", "50", "58G"),
            zone("node-2", "4", "8G", **{"kubernetes.io/batch-cpu": "3000", "kubernetes.io/batch-memory": "1G"}),
        ]
    )
    result = {"node-0": Pair(10_000, 15_300_000_000), "node-1": Pair(15_000, 17_700_000_000)}
    after = updated_zones(before, result, diff_threshold=0.1, cpu_normalization=1.2)
    assert after is not None
    names = [[r["name"] for r in z["resources"]] for z in after]
    assert names[0] == ["cpu", "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory", "memory"]
    batch0 = {r["name"]: r for r in after[0]["resources"]}
    assert batch0["kubernetes.io/batch-cpu"] == {
        "name": "kubernetes.io/batch-cpu",
        "capacity": "12000",
        "allocatable": "12000",
        "available": "12000",
    }
    assert batch0["kubernetes.io/batch-memory"]["allocatable"] == "15300000000"
    reset = {r["name"]: r for r in after[2]["resources"]}
    assert (
        reset["kubernetes.io/batch-cpu"]["available"] == "0" and reset["kubernetes.io/batch-memory"]["capacity"] == "0"
    )
    # 5 % later: within resourceDiffThreshold, nothing to write
    nudged = {"node-0": Pair(10_500, 15_300_000_000), "node-1": Pair(15_000, 17_700_000_000)}
    assert updated_zones(canonical_zones(after), nudged, diff_threshold=0.1, cpu_normalization=1.2) is None


def test_the_controller_patches_the_zones_conditionally() -> None:
    config, _ = parse_slo_config(
        {
            "colocation-config": json.dumps(
                {"enable": True, "cpuReclaimThresholdPercent": 65, "memoryReclaimThresholdPercent": 65}
            )
        }
    )
    nrt = parse_topology_record(
        {"metadata": {"name": "test-node1", "resourceVersion": "42"}, "zones": [zone("node-0", "100", "120G")]}
    )
    assert isinstance(nrt, TopologyRecord)
    decision = decide_node_resources(
        NODE, pods(), metric(), config, now=1_767_225_600.0 + 30, last_sync=None, topology=nrt
    )
    write = decision.zone_write
    assert write is not None
    assert write.path == "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies/test-node1"
    assert write.body["metadata"] == {"resourceVersion": "42"}
    batch = {r["name"]: r["allocatable"] for r in write.body["zones"][0]["resources"]}
    assert (batch["kubernetes.io/batch-cpu"], batch["kubernetes.io/batch-memory"]) == ("25000", "33000000000")
    stale = decide_node_resources(
        NODE, pods(), metric(), config, now=1_767_225_600.0 + 3600, last_sync=None, topology=nrt
    )
    assert stale.zone_write is None  # degraded: the zones are left as they are, as Koordinator leaves them
