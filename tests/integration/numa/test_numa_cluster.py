"""NodeNUMAResource against the real API server: a NodeResourceTopology as koordlet publishes it, and the
LSR pod of Koordinator's fine-grained CPU orchestration manual, bound by the koord-scheduler binary with
a ``scheduling.koordinator.sh/resource-status`` cpuset."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
CRD = REPO / "deploy" / "crds" / "topology.node.k8s.io_noderesourcetopologies.yaml"
NRTS = "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies"
STATUS = "scheduling.koordinator.sh/resource-status"


def install_crd(plane: Any) -> None:
    docs = [d for d in yaml.safe_load_all(CRD.read_text()) if d]
    result = plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", docs[0])
    assert result.status in (201, 409), result.body[:300]
    wait_until(lambda: plane.request("GET", NRTS).status == 200, timeout=30, what="NRT CRD served")


def cpu_topology() -> str:
    """2 sockets, 2 NUMA nodes, 8 cores, 16 threads; CPU k and k+8 are siblings."""
    detail = [{"id": t * 8 + c, "core": c, "socket": c // 4, "node": c // 4} for t in range(2) for c in range(8)]
    return json.dumps({"detail": sorted(detail, key=lambda d: d["id"])})


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    install_crd(control_plane)
    s = Scope.create(control_plane, "numa")
    yield s
    for node in s.nodes:
        control_plane.request("DELETE", f"{NRTS}/{node}")
    s.cleanup()


def lsr_pod(scope: Scope, name: str) -> dict[str, Any]:
    """The manual's example: an LSR pod asking for whole CPUs (requests equal limits)."""
    body = scope.pod_body(name, cpu="2", memory="1Gi")
    body["metadata"]["labels"] = {"koordinator.sh/qosClass": "LSR"}
    container = body["spec"]["containers"][0]
    container["resources"]["limits"] = dict(container["resources"]["requests"])
    return body


def test_lsr_pod_gets_a_resource_status_cpuset(scope: Scope, tmp_path: Path) -> None:
    node = scope.add_node("n", cpu="16", memory="64Gi")
    scope.ok(
        "POST",
        NRTS,
        {
            "apiVersion": "topology.node.k8s.io/v1alpha1",
            "kind": "NodeResourceTopology",
            "metadata": {"name": node, "annotations": {"node.koordinator.sh/cpu-topology": cpu_topology()}},
            "topologyPolicies": ["None"],
            "zones": [],
        },
    )
    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = {"multiPoint": {"enabled": [{"name": "NodeNUMAResource"}]}}
    proc = SchedulerProcess.start(scope.plane, config, tmp_path)
    try:
        scope.add_pods([lsr_pod(scope, "lsr-1"), lsr_pod(scope, "lsr-2"), scope.pod_body("ls-1", cpu="1")])
        scope.wait_all_bound(3, timeout=60)
        got = {n: scope.pod(n)["metadata"].get("annotations", {}) for n in ("lsr-1", "lsr-2", "ls-1")}
        cpusets = {n: json.loads(a[STATUS])["cpuset"] for n, a in got.items() if STATUS in a}
        # The pods arrive in either order: one whole core on each NUMA node (LeastAllocated), none for LS.
        assert sorted(cpusets) == ["lsr-1", "lsr-2"] and sorted(cpusets.values()) == ["0,8", "4,12"], got
        spec = json.loads(got["lsr-1"]["scheduling.koordinator.sh/resource-spec"])
        assert spec == {"preferredCPUBindPolicy": "FullPCPUs"}
    except AssertionError:
        print(proc.log_tail())
        raise
    finally:
        if proc.alive:
            proc.kill()


def numa_zones() -> list[dict[str, Any]]:
    """The zones koordlet reports for the topology above: 8 logical CPUs and 32Gi per NUMA node."""
    resources = [
        {"name": "cpu", "capacity": "8", "allocatable": "8", "available": "8"},
        {"name": "memory", "capacity": "32Gi", "allocatable": "32Gi", "available": "32Gi"},
    ]
    return [{"name": f"node-{i}", "type": "Node", "resources": resources} for i in range(2)]


def test_single_numa_node_policy_aligns_pods_and_refuses_what_spans_numa_nodes(scope: Scope, tmp_path: Path) -> None:
    body = scope.node_body(scope.name + "-numa", cpu="16", memory="64Gi")
    body["metadata"]["labels"]["node.koordinator.sh/numa-topology-policy"] = "SingleNUMANode"
    node = scope.add_node_body(body)
    scope.ok(
        "POST",
        NRTS,
        {
            "apiVersion": "topology.node.k8s.io/v1alpha1",
            "kind": "NodeResourceTopology",
            "metadata": {"name": node, "annotations": {"node.koordinator.sh/cpu-topology": cpu_topology()}},
            "topologyPolicies": ["None"],
            "zones": numa_zones(),
        },
    )
    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = {"multiPoint": {"enabled": [{"name": "NodeNUMAResource"}]}}
    proc = SchedulerProcess.start(scope.plane, config, tmp_path)
    try:
        small = lsr_pod(scope, "lsr-4")
        small["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "4", "memory": "1Gi"}}
        big = lsr_pod(scope, "lsr-12")
        big["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "12", "memory": "1Gi"}}
        scope.add_pods([small])
        scope.wait_all_bound(1, timeout=60)
        status = json.loads(scope.pod("lsr-4")["metadata"]["annotations"][STATUS])
        assert status == {
            "cpuset": "0-1,8-9",
            "numaNodeResources": [{"node": 0, "resources": {"cpu": "4", "memory": "1Gi"}}],
        }, status
        scope.add_pods([big])
        wait_until(
            lambda: any("Unaligned NUMA Hint" in e.get("note", "") for e in scope.events(reason="FailedScheduling")),
            timeout=60,
            what="FailedScheduling event naming the NUMA alignment",
        )
        assert not scope.pod("lsr-12")["spec"].get("nodeName")
    except AssertionError:
        print(proc.log_tail())
        raise
    finally:
        if proc.alive:
            proc.kill()
