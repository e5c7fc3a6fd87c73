"""The NodeResourceTopology koordlet publishes, and the CPU share pools, as pure functions
(Koordinator ``pkg/koordlet/statesinformer/impl/states_noderesourcetopology.go``: ``calcNodeTopo``,
``calCPUSharePools``).

Pools, with ALL = every online CPU:

- kubelet-static CPUs K: the ``cpu_manager_state`` entries of pods koordinator does not manage (raw
  QoS LS or BE, or a resource-status cpuset, are koordinator's), read only under the ``static`` policy;
- LS pool = ALL - K - every resource-status cpuset (LSE and LSR alike) - reserved;
- BE pool = ALL - K - the cpusets of LSE pods - reserved (LSR CPUs stay shared with BE);
- reserved = the node reservation annotation's ``reservedCPUs`` and an exclusive system-QoS cpuset.
  The kubelet's own ``reservedCPUs`` stay in both pools, as upstream keeps them (burstable pods need
  somewhere to run); the scheduler never hands them out.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from apis.configuration.normalization import ANNOTATION_CPU_BASIC_INFO
from apis.core import boundedjson
from apis.extension.constants import ANNOTATION_NODE_RESERVATION, LABEL_POD_QOS
from apis.extension.numa import (
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_NODE_BE_CPU_SHARED_POOLS,
    ANNOTATION_NODE_CPU_SHARED_POOLS,
    ANNOTATION_NODE_CPU_TOPOLOGY,
    ANNOTATION_NODE_POD_CPU_ALLOCS,
    ANNOTATION_NODE_SYSTEM_QOS_RESOURCE,
    AnnotationError,
    CPUInfo,
    CPUSharedPool,
    cpu_topology_to_json,
    format_cpuset,
    parse_cpuset,
    resource_status_of,
    shared_pools_to_json,
)
from koordlet.statesinformer.pods import PodMeta
from koordlet.system.cputopology import CPUTopology

NRT_API_VERSION = "topology.node.k8s.io/v1alpha1"
MANAGED_ANNOTATIONS = (
    ANNOTATION_CPU_BASIC_INFO,
    ANNOTATION_NODE_CPU_TOPOLOGY,
    ANNOTATION_NODE_CPU_SHARED_POOLS,
    ANNOTATION_NODE_BE_CPU_SHARED_POOLS,
    ANNOTATION_NODE_POD_CPU_ALLOCS,
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
)


@dataclass(frozen=True, slots=True)
class KubeletCPUManager:
    """What koordlet knows of the kubelet CPU manager (``/configz`` and ``cpu_manager_state``)."""

    policy: str = "none"
    options: Mapping[str, str] = field(default_factory=dict)
    reserved_cpus: frozenset[int] = frozenset()
    pod_cpus: Mapping[str, frozenset[int]] = field(default_factory=dict)
    """Pod uid → the union of its containers' checkpoint cpusets."""

    def annotation(self) -> str:
        body: dict[str, Any] = {"policy": self.policy}
        if self.options:
            body["options"] = dict(self.options)
        if self.reserved_cpus:
            body["reservedCPUs"] = format_cpuset(self.reserved_cpus)
        return json.dumps(body, separators=(",", ":"))


def parse_cpu_manager_state(text: str) -> tuple[str, dict[str, frozenset[int]]]:
    """kubelet's ``cpu_manager_state`` checkpoint → (policyName, pod uid → cpus). Raises ``ValueError``."""
    data = boundedjson.loads(text)
    if not isinstance(data, Mapping):
        raise ValueError("cpu_manager_state is not a JSON object")
    pods: dict[str, frozenset[int]] = {}
    for uid, containers in (data.get("entries") or {}).items():
        cpus: set[int] = set()
        for cpuset in (containers or {}).values():
            cpus |= parse_cpuset(str(cpuset))
        pods[str(uid)] = frozenset(cpus)
    return str(data.get("policyName", "")), pods


@dataclass(frozen=True, slots=True)
class PodCPUs:
    pod: PodMeta
    cpus: frozenset[int]
    raw_qos: str


def pod_cpusets(pods: Iterable[PodMeta]) -> list[PodCPUs]:
    """Pods whose resource-status holds a cpuset; a malformed annotation counts as none."""
    out: list[PodCPUs] = []
    for pod in pods:
        try:
            status = resource_status_of(pod.annotations, f"pod {pod.namespace}/{pod.name}")
        except AnnotationError:
            continue
        if status.cpuset:
            out.append(PodCPUs(pod, parse_cpuset(status.cpuset), pod.labels.get(LABEL_POD_QOS, "")))
    return out


def _json(annotations: Mapping[str, str], key: str) -> Any:
    try:
        return boundedjson.loads(annotations.get(key) or "null")
    except json.JSONDecodeError:
        return None


def node_reserved_cpus(node_annotations: Mapping[str, str]) -> frozenset[int]:
    """CPUs no pool offers: the reservation annotation's ``reservedCPUs`` and an exclusive system-QoS cpuset."""
    reserved: set[int] = set()
    reservation = _json(node_annotations, ANNOTATION_NODE_RESERVATION)
    if isinstance(reservation, Mapping):
        with contextlib.suppress(ValueError):
            reserved |= parse_cpuset(str(reservation.get("reservedCPUs") or ""))
    system_qos = _json(node_annotations, ANNOTATION_NODE_SYSTEM_QOS_RESOURCE)
    if isinstance(system_qos, Mapping) and system_qos.get("cpusetExclusive", True):
        with contextlib.suppress(ValueError):
            reserved |= parse_cpuset(str(system_qos.get("cpuset") or ""))
    return frozenset(reserved)


@dataclass(frozen=True, slots=True)
class SharedPools:
    ls: frozenset[int]
    be: frozenset[int]
    kubelet_pods: tuple[tuple[PodMeta | None, str, frozenset[int]], ...]
    """(pod if known, uid, cpus) of kubelet-static pods koordinator does not manage."""


def shared_pools(
    topo: CPUTopology, pods: Iterable[PodMeta], kubelet: KubeletCPUManager, reserved: frozenset[int]
) -> SharedPools:
    all_cpus = topo.all_cpus()
    pods = list(pods)
    by_uid = {p.uid: p for p in pods}
    bound = pod_cpusets(pods)
    bound_uids = {b.pod.uid for b in bound}
    kubelet_pods: list[tuple[PodMeta | None, str, frozenset[int]]] = []
    if kubelet.policy == "static":
        for uid, cpus in sorted(kubelet.pod_cpus.items()):
            pod = by_uid.get(uid)
            raw = pod.labels.get(LABEL_POD_QOS, "") if pod else ""
            if raw in ("LS", "BE") or uid in bound_uids or not cpus:
                continue
            kubelet_pods.append((pod, uid, cpus))
    kubelet_cpus = frozenset().union(*(c for _, _, c in kubelet_pods))
    every_bound = frozenset().union(*(b.cpus for b in bound))
    lse_bound = frozenset().union(*(b.cpus for b in bound if b.raw_qos == "LSE"))
    ls = all_cpus - kubelet_cpus - every_bound - reserved
    be = all_cpus - kubelet_cpus - lse_bound - reserved
    return SharedPools(ls, be, tuple(kubelet_pods))


def pools_by_numa(topo: CPUTopology, cpus: frozenset[int]) -> list[CPUSharedPool]:
    """One entry per NUMA node with CPUs in ``cpus``, sorted by (socket, node)."""
    groups: dict[tuple[int, int], set[int]] = {}
    for c in topo.cpus:
        if c.cpu in cpus:
            groups.setdefault((c.socket, c.node), set()).add(c.cpu)
    return [CPUSharedPool(s, n, format_cpuset(v)) for (s, n), v in sorted(groups.items())]


def topology_annotations(
    topo: CPUTopology,
    pods: Iterable[PodMeta],
    kubelet: KubeletCPUManager,
    node_annotations: Mapping[str, str],
    *,
    cpu_basic_info: str = "{}",
) -> dict[str, str]:
    """The managed annotations of the node's NodeResourceTopology; ``cpu_basic_info`` is the JSON of
    :class:`koordlet.system.cpuinfo.CPUBasicInfo` (the noderesource controller's CPU normalization)."""
    pools = shared_pools(topo, pods, kubelet, node_reserved_cpus(node_annotations))
    allocs = [
        {
            "namespace": pod.namespace if pod else "",
            "name": pod.name if pod else "",
            "uid": uid,
            "cpuset": format_cpuset(cpus),
            "managedByKubelet": True,
        }
        for pod, uid, cpus in pools.kubelet_pods
    ]
    return {
        ANNOTATION_CPU_BASIC_INFO: cpu_basic_info,
        ANNOTATION_NODE_CPU_TOPOLOGY: cpu_topology_to_json(CPUInfo(c.cpu, c.core, c.socket, c.node) for c in topo.cpus),
        ANNOTATION_NODE_CPU_SHARED_POOLS: shared_pools_to_json(pools_by_numa(topo, pools.ls)),
        ANNOTATION_NODE_BE_CPU_SHARED_POOLS: shared_pools_to_json(pools_by_numa(topo, pools.be)),
        ANNOTATION_NODE_POD_CPU_ALLOCS: json.dumps(allocs or None, separators=(",", ":")),
        ANNOTATION_KUBELET_CPU_MANAGER_POLICY: kubelet.annotation(),
    }


def topology_zones(
    topo: CPUTopology, *, hugepages: Mapping[int, Mapping[int, int]] | None = None
) -> list[dict[str, Any]]:
    """One zone per NUMA node with cpu and memory. With ``hugepages`` ({node: {size KiB: pages}}, the
    ``HugePageReport`` gate) each zone also has ``hugepages-2Mi`` and ``hugepages-1Gi`` (bytes, 0 when none),
    and its memory is MemTotal less those hugepages, as Koordinator reports them."""
    zones = []
    for node in topo.numa_nodes:
        resources = [
            {
                "name": "cpu",
                "capacity": str(len(node.cpus)),
                "allocatable": str(len(node.cpus)),
                "available": str(len(node.cpus)),
            }
        ]
        pages = (hugepages or {}).get(node.id, {})
        huge = {name: pages.get(size_kb, 0) * size_kb * 1024 for name, size_kb in _HUGEPAGE_RESOURCES}
        if node.memory_bytes:
            amount = str(node.memory_bytes - sum(huge.values()) if hugepages is not None else node.memory_bytes)
            resources.append({"name": "memory", "capacity": amount, "allocatable": amount, "available": amount})
        if hugepages is not None:
            for name, amount_bytes in huge.items():
                value = str(amount_bytes)
                resources.append({"name": name, "capacity": value, "allocatable": value, "available": value})
        zones.append({"name": f"node-{node.id}", "type": "Node", "resources": resources})
    return zones


_HUGEPAGE_RESOURCES = (("hugepages-2Mi", 2048), ("hugepages-1Gi", 1048576))


def kubelet_topology_policy(policy: str, scope: str) -> str:
    """The NRT ``topologyPolicies`` entry for the kubelet topology manager's policy and scope."""
    names = {"single-numa-node": "SingleNUMANode", "restricted": "Restricted", "best-effort": "BestEffort"}
    name = names.get(policy)
    if name is None:
        return "None"
    return f"{name}{'PodLevel' if scope == 'pod' else 'ContainerLevel'}"


def build_node_resource_topology(
    node_name: str,
    node_uid: str,
    *,
    annotations: Mapping[str, str],
    zones: list[dict[str, Any]],
    topology_policy: str = "None",
) -> dict[str, Any]:
    """A new NodeResourceTopology owned by the Node (a controller ownerReference, as koordlet sets)."""
    meta: dict[str, Any] = {
        "name": node_name,
        "labels": {"app.kubernetes.io/managed-by": "Koordinator"},
        "annotations": dict(annotations),
    }
    if node_uid:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid, "controller": True}
        ]
    return {
        "apiVersion": NRT_API_VERSION,
        "kind": "NodeResourceTopology",
        "metadata": meta,
        "topologyPolicies": [topology_policy],
        "zones": zones,
    }


def merge_zones(current: Any, desired: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The koordlet's zones, each keeping the resources of the current zone of the same name that the koordlet
    does not report (the noderesource controller's ``kubernetes.io/batch-*``), as Koordinator's
    ``MergeZoneList`` keeps them; zones the koordlet no longer reports go."""
    by_name = {z.get("name"): z for z in current or [] if isinstance(z, Mapping)}
    merged: list[dict[str, Any]] = []
    for zone in desired:
        ours = zone.get("resources") or []
        names = {r.get("name") for r in ours}
        theirs = [
            r
            for r in (by_name.get(zone.get("name")) or {}).get("resources") or []
            if isinstance(r, Mapping) and r.get("name") not in names
        ]
        if theirs:
            resources = sorted([*ours, *theirs], key=lambda r: str(r.get("name", "")))
            merged.append({**zone, "resources": resources})
        else:
            merged.append(zone)
    return merged


def needs_update(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Whether the managed fields differ: annotations compared as decoded JSON, then zones (the koordlet's
    resources only, see :func:`merge_zones`) and policies."""
    have = (current.get("metadata") or {}).get("annotations") or {}
    want = (desired.get("metadata") or {}).get("annotations") or {}
    for key in MANAGED_ANNOTATIONS:
        if _json(have, key) != _json(want, key):
            return True
    zones = merge_zones(current.get("zones"), desired.get("zones") or [])
    return current.get("zones") != zones or current.get("topologyPolicies") != desired.get("topologyPolicies")
