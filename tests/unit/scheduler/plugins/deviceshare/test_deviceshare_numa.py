"""NUMA-aligned devices: DeviceShare as a hint provider of NodeNUMAResource's topology manager
(Koordinator ``deviceshare/topology_hint.go``). On a node labelled ``numa-topology-policy:
SingleNUMANode`` a pod's CPUs, memory and GPUs come from one NUMA node, or it is refused there."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis.config import parse_scheduler_config
from koord_scheduler.app.simulate import SimulationResult, run_simulation
from koord_scheduler.plugins.registry import in_tree_registry
from tests.unit.scheduler.plugins.deviceshare.gpu_objects import CORE, MEM, RATIO

NOW = 1_800_000_000.0
CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: NodeNUMAResource
      - name: DeviceShare
"""
STATUS = "scheduling.koordinator.sh/resource-status"
ALLOCATED = "scheduling.koordinator.sh/device-allocated"


def node_objects(policy: str = "SingleNUMANode", *, disable_alignment: bool = False) -> list[str]:
    """numa-gpu: 2 NUMA nodes of 8 CPUs (NUMA 0: 0-3,8-11; NUMA 1: 4-7,12-15) and 64Gi; GPUs 0, 1 on NUMA 0
    and 2, 3 on NUMA 1."""
    labels = {"kubernetes.io/hostname": "numa-gpu"}
    if policy:
        labels["node.koordinator.sh/numa-topology-policy"] = policy
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "numa-gpu", "labels": labels},
        "status": {"allocatable": {"cpu": "16", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": "4"}},
    }
    detail = [{"id": t * 8 + c, "core": c, "socket": c // 4, "node": c // 4} for t in range(2) for c in range(8)]
    zones = [
        {
            "name": f"node-{n}",
            "type": "Node",
            "resources": [
                {"name": "cpu", "capacity": "8", "allocatable": "8", "available": "8"},
                {"name": "memory", "capacity": "64Gi", "allocatable": "64Gi", "available": "64Gi"},
            ],
        }
        for n in range(2)
    ]
    nrt = {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {
            "name": "numa-gpu",
            "annotations": {
                "node.koordinator.sh/cpu-topology": json.dumps({"detail": sorted(detail, key=lambda d: d["id"])})
            },
        },
        "topologyPolicies": ["None"],
        "zones": zones,
    }
    gpus = [
        {
            "type": "gpu",
            "minor": m,
            "health": True,
            "id": f"GPU-{m}",
            "resources": {CORE: "100", RATIO: "100", MEM: "80Gi"},
            "topology": {
                "socketID": m // 2,
                "nodeID": m // 2,
                "pcieID": f"pci0000:{m // 2}0",
                "busID": f"0000:{m}0:00.0",
            },
        }
        for m in range(4)
    ]
    device = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": "numa-gpu"},
        "spec": {"devices": gpus},
    }
    return [json.dumps(node), json.dumps(nrt), json.dumps(device)]


def lsr(name: str, cpu: int, gpus: int = 0, *, node: str = "", status: dict[str, Any] | None = None) -> str:
    requests: dict[str, str] = {"cpu": str(cpu), "memory": "4Gi"}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": {"koordinator.sh/qosClass": "LSR"}}
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "app", "resources": {"requests": requests, "limits": requests}}]
    }
    if node:
        spec["nodeName"] = node
        meta["annotations"] = {STATUS: json.dumps(status)}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


async def simulate(objects: list[str], config: str = CONFIG) -> tuple[SimulationResult, dict[str, Any]]:
    result, scheduler = await run_simulation(
        None, parse_scheduler_config(config), in_tree_registry(), now=NOW, cluster_text="\n---\n".join(objects)
    )
    return result, scheduler.source.pods  # type: ignore[attr-defined]


# NUMA 0 nearly full of bound CPUs: 6 of its 8 CPUs (and 6 of its CPU share) held by an LSR pod.
NUMA0_BUSY = lsr(
    "busy",
    6,
    node="numa-gpu",
    status={"cpuset": "0-2,8-10", "numaNodeResources": [{"node": 0, "resources": {"cpu": "6", "memory": "4Gi"}}]},
)


async def test_cpus_and_gpus_come_from_one_numa_node() -> None:
    """The free GPUs of NUMA 0 come first by topology (they are lower), but the pod's 4 CPUs fit only on
    NUMA 1, so under SingleNUMANode its GPUs are 2 and 3."""
    result, pods = await simulate([*node_objects(), NUMA0_BUSY, lsr("train", 4, gpus=2)])
    assert {p.name: (p.node, p.message) for p in result.placements} == {"train": ("numa-gpu", "")}
    status = json.loads(pods["default/train"].annotations[STATUS])
    assert [r["node"] for r in status["numaNodeResources"]] == [1]
    assert sorted(a["minor"] for a in json.loads(pods["default/train"].annotations[ALLOCATED])["gpu"]) == [2, 3]


async def test_without_alignment_the_gpus_come_from_the_other_numa_node() -> None:
    config = (
        CONFIG + "  pluginConfig:\n  - name: DeviceShare\n    args:\n      disableDeviceNumaTopologyAlignment: true\n"
    )
    result, pods = await simulate([*node_objects(), NUMA0_BUSY, lsr("train", 4, gpus=2)], config)
    assert {p.name: p.node for p in result.placements} == {"train": "numa-gpu"}
    assert sorted(a["minor"] for a in json.loads(pods["default/train"].annotations[ALLOCATED])["gpu"]) == [0, 1]


@pytest.mark.parametrize(
    ("gpus", "want_node"),
    [
        pytest.param(2, None, id="the-numa-node-with-cpus-has-no-free-gpus"),
        pytest.param(0, "numa-gpu", id="cpus-alone-fit"),
    ],
)
async def test_single_numa_node_refuses_devices_on_another_numa_node(gpus: int, want_node: str | None) -> None:
    """GPUs 2 and 3 (NUMA 1) held: a pod asking 4 CPUs (NUMA 1 only) and 2 GPUs (NUMA 0 only) is refused."""
    held = json.loads(lsr("gpu-holder", 1, gpus=2, node="numa-gpu", status={"cpuset": "4"}))
    held["metadata"]["annotations"][ALLOCATED] = json.dumps(
        {"gpu": [{"minor": m, "resources": {CORE: "100", RATIO: "100", MEM: "80Gi"}} for m in (2, 3)]}
    )
    result, _ = await simulate([*node_objects(), NUMA0_BUSY, json.dumps(held), lsr("train", 4, gpus=gpus)])
    (placement,) = result.placements
    assert placement.node == want_node
    if want_node is None:
        assert "Unaligned NUMA Hint" in placement.message, placement.message
