"""Builders for NodeNUMAResource tests: NodeResourceTopology objects and a plugin over a snapshot."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis.config.numa_args import NodeNUMAResourceArgs
from apis.core.types import Pod
from apis.extension.numa import CPUInfo, cpu_topology_to_json
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.nodenumaresource.nrt import parse_node_resource_topology
from koord_scheduler.plugins.nodenumaresource.plugin import NodeNUMAResource
from koord_scheduler.plugins.nodenumaresource.topology import CPUTopology, symmetric_topology


def topology_infos(topo: CPUTopology) -> list[CPUInfo]:
    return [CPUInfo(c.id, c.core & 0xFFFF, c.socket, c.node) for c in topo.cpus.values()]


T16 = symmetric_topology(sockets=2, nodes_per_socket=1, cores_per_node=4, threads=2)
"""2 sockets, 2 NUMA nodes, 8 cores, 16 threads; CPU k and k+8 are siblings."""


def nrt_object(
    name: str,
    topo: CPUTopology = T16,
    *,
    kubelet: Mapping[str, Any] | None = None,
    pod_allocs: list[Mapping[str, Any]] | None = None,
    policies: tuple[str, ...] = ("None",),
    zones: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    annotations = {"node.koordinator.sh/cpu-topology": cpu_topology_to_json(topology_infos(topo))}
    if kubelet is not None:
        annotations["kubelet.koordinator.sh/cpu-manager-policy"] = json.dumps(kubelet)
    if pod_allocs is not None:
        annotations["node.koordinator.sh/pod-cpu-allocs"] = json.dumps(pod_allocs)
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name, "annotations": annotations},
        "topologyPolicies": list(policies),
        "zones": zones or [],
    }


def numa_zones(topo: CPUTopology = T16, memory: str = "32Gi") -> list[dict[str, Any]]:
    """One ``Node`` zone per NUMA node, as koordlet reports them: every logical CPU and ``memory``."""
    zones = []
    for numa in topo.numa_node_ids():
        cpus = str(len(topo.cpus_by_node[numa]))
        resources = [
            {"name": "cpu", "capacity": cpus, "allocatable": cpus, "available": cpus},
            {"name": "memory", "capacity": memory, "allocatable": memory, "available": memory},
        ]
        zones.append({"name": f"node-{numa}", "type": "Node", "resources": resources})
    return zones


@dataclass
class RecordingCluster:
    patches: list[tuple[str, dict[str, str | None]]] = field(default_factory=list)

    async def patch_pod_metadata(
        self,
        pod: Pod,
        *,
        annotations: Mapping[str, str | None] | None = None,
        labels: Mapping[str, str | None] | None = None,
    ) -> None:
        self.patches.append((pod.key, dict(annotations or {})))


def make_plugin(
    snap: ClusterSnapshot, *nrts: dict[str, Any], args: NodeNUMAResourceArgs | None = None
) -> tuple[NodeNUMAResource, RecordingCluster]:
    cluster = RecordingCluster()
    plugin = NodeNUMAResource(args or NodeNUMAResourceArgs(), snap, cluster)  # type: ignore[arg-type]
    for obj in nrts:
        plugin.on_topology(EventType.ADDED, None, parse_node_resource_topology(obj))
    return plugin, cluster
