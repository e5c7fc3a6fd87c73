"""The NodeResourceTopology kind the plugin watches, parsed into what the allocator needs
(Koordinator ``topology_options.go``).

``reserved`` gathers the CPUs the scheduler must never hand out: kubelet-managed pod allocations
(``pod-cpu-allocs`` entries with ``managedByKubelet``), the kubelet's ``reservedCPUs``, the node
reservation annotation's ``reservedCPUs`` and an exclusive system-QoS cpuset.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis.core import boundedjson
from apis.core.quantity import to_amount
from apis.core.types import CPU
from apis.extension.constants import ANNOTATION_NODE_RESERVATION
from apis.extension.numa import (
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_NODE_POD_CPU_ALLOCS,
    ANNOTATION_NODE_SYSTEM_QOS_RESOURCE,
    AnnotationError,
    NUMATopologyPolicy,
    cpu_topology_of,
    parse_cpuset,
)
from koord_scheduler.framework.types import ObjectKind
from koord_scheduler.plugins.nodenumaresource.topology import CPUTopology

NRT_GROUP = "topology.node.k8s.io"
ANNOTATION_CPU_BASIC_INFO = "node.koordinator.sh/cpu-basic-info"
NRT_VERSION = "v1alpha1"

_KUBELET_POLICIES = {
    "SingleNUMANodePodLevel": NUMATopologyPolicy.SINGLE_NUMA_NODE,
    "BestEffort": NUMATopologyPolicy.BEST_EFFORT,
    "Restricted": NUMATopologyPolicy.RESTRICTED,
}
"""``convertToNUMATopologyPolicy``: only these NRT policy strings mean anything to the scheduler."""


@dataclass(frozen=True, slots=True)
class NodeTopologyRecord:
    name: str
    topology: CPUTopology
    reserved: frozenset[int]
    kubelet_static: bool
    full_pcpus_only: bool
    """kubelet ``static`` with ``full-pcpus-only=true``: the node behaves as ``FullPCPUsOnly``."""
    numa_policy: NUMATopologyPolicy
    numa_resources: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    """Allocatable per NUMA node from the ``Node`` zones (``node-<id>``), cpu reduced by the reserved CPUs
    inside the zone (``extractNUMANodeResources``)."""
    cpu_basic_info: str = ""
    """The ``node.koordinator.sh/cpu-basic-info`` annotation as written. It, the zones as written and the
    resourceVersion are for the noderesource controller (CPU normalization, NUMA-level batch resources),
    which reads the same watch."""
    zones_json: str = "[]"
    resource_version: str = ""

    @property
    def numa_nodes(self) -> list[int]:
        return sorted(self.numa_resources)


def _json_annotation(annotations: Mapping[str, str], key: str, owner: str) -> Any:
    raw = annotations.get(key)
    if raw is None or not raw.strip():
        return None
    try:
        return boundedjson.loads(raw)
    except json.JSONDecodeError as exc:
        raise AnnotationError(f"{owner}: annotation {key} is not valid JSON: {exc.msg}") from None


def _cpus(value: Any, key: str, owner: str) -> frozenset[int]:
    if not value:
        return frozenset()
    try:
        return parse_cpuset(str(value))
    except ValueError as exc:
        raise AnnotationError(f"{owner}: annotation {key}: {exc}") from None


def parse_node_resource_topology(obj: Mapping[str, Any]) -> NodeTopologyRecord:
    """Raises ``ValueError`` (:class:`AnnotationError`) naming the object and annotation when malformed."""
    meta = obj.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise AnnotationError("NodeResourceTopology: metadata must be an object")
    name = str(meta.get("name", ""))
    if not name:
        raise AnnotationError("NodeResourceTopology without metadata.name")
    owner = f"NodeResourceTopology {name}"
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    if not isinstance(annotations, Mapping) or not all(isinstance(v, str) for v in annotations.values()):
        raise AnnotationError(f"{owner}: metadata.annotations must map names to strings")
    topology = CPUTopology.from_cpus(cpu_topology_of(annotations, owner))
    reserved: set[int] = set()
    allocs = _json_annotation(annotations, ANNOTATION_NODE_POD_CPU_ALLOCS, owner) or []
    if not isinstance(allocs, list):
        raise AnnotationError(f"{owner}: annotation {ANNOTATION_NODE_POD_CPU_ALLOCS} must be a JSON list")
    for item in allocs:
        if isinstance(item, Mapping) and item.get("managedByKubelet") and item.get("uid"):
            reserved |= _cpus(item.get("cpuset"), ANNOTATION_NODE_POD_CPU_ALLOCS, owner)
    kubelet = _json_annotation(annotations, ANNOTATION_KUBELET_CPU_MANAGER_POLICY, owner) or {}
    if not isinstance(kubelet, Mapping):
        raise AnnotationError(f"{owner}: annotation {ANNOTATION_KUBELET_CPU_MANAGER_POLICY} must be a JSON object")
    reserved |= _cpus(kubelet.get("reservedCPUs"), ANNOTATION_KUBELET_CPU_MANAGER_POLICY, owner)
    node_reservation = _json_annotation(annotations, ANNOTATION_NODE_RESERVATION, owner) or {}
    if isinstance(node_reservation, Mapping):
        reserved |= _cpus(node_reservation.get("reservedCPUs"), ANNOTATION_NODE_RESERVATION, owner)
    system_qos = _json_annotation(annotations, ANNOTATION_NODE_SYSTEM_QOS_RESOURCE, owner) or {}
    if isinstance(system_qos, Mapping) and system_qos.get("cpusetExclusive", True):
        reserved |= _cpus(system_qos.get("cpuset"), ANNOTATION_NODE_SYSTEM_QOS_RESOURCE, owner)
    static = kubelet.get("policy") == "static"
    options = kubelet.get("options") or {}
    full_only = static and isinstance(options, Mapping) and options.get("full-pcpus-only") == "true"
    policies = obj.get("topologyPolicies") or []
    numa_policy = NUMATopologyPolicy.NONE
    if isinstance(policies, list) and policies:
        numa_policy = _KUBELET_POLICIES.get(str(policies[0]), NUMATopologyPolicy.NONE)
    zones = _numa_zones(obj.get("zones"), owner)
    for node, amounts in zones.items():
        if amounts.get(CPU):
            inside = sum(1 for cpu in reserved if cpu in topology.cpus and topology.cpus[cpu].node == node)
            amounts[CPU] = max(0, amounts[CPU] - inside * 1000)
    basic_info = annotations.get(ANNOTATION_CPU_BASIC_INFO, "")
    raw_zones = obj.get("zones")
    zones_json = json.dumps(raw_zones if isinstance(raw_zones, list) else [], sort_keys=True, separators=(",", ":"))
    version = meta.get("resourceVersion", "")
    return NodeTopologyRecord(
        name,
        topology,
        frozenset(reserved),
        static,
        full_only,
        numa_policy,
        zones,
        basic_info if isinstance(basic_info, str) else "",
        zones_json,
        version if isinstance(version, str) else "",
    )


def _numa_zones(zones: Any, owner: str) -> dict[int, dict[str, int]]:
    """Zones of type ``Node`` named ``node-<id>``; others are skipped as Koordinator skips them."""
    result: dict[int, dict[str, int]] = {}
    if not isinstance(zones, list):
        return result
    for i, zone in enumerate(zones):
        if not isinstance(zone, Mapping) or zone.get("type") != "Node":
            continue
        parts = str(zone.get("name", "")).split("node-")
        if len(parts) != 2 or not parts[1].isdigit():
            continue
        amounts: dict[str, int] = {}
        for resource in zone.get("resources") or []:
            if not isinstance(resource, Mapping) or "name" not in resource:
                continue
            resource_name = str(resource["name"])
            try:
                amounts[resource_name] = to_amount(resource_name, resource.get("allocatable", 0))
            except (ValueError, TypeError) as exc:
                raise AnnotationError(
                    f"{owner}: zones[{i}].resources {resource_name} allocatable is not a quantity: {exc}"
                ) from None
        result[int(parts[1])] = amounts
    return result


NODE_RESOURCE_TOPOLOGY_KIND = ObjectKind(
    kind="NodeResourceTopology",
    group=NRT_GROUP,
    version=NRT_VERSION,
    plural="noderesourcetopologies",
    namespaced=False,
    parse=parse_node_resource_topology,
)
