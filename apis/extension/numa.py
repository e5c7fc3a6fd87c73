"""Fine-grained CPU orchestration on the wire (Koordinator ``apis/extension/numa_aware.go``).

Pod annotations ``scheduling.koordinator.sh/resource-spec`` (what the pod asks for) and ``resource-status``
(the cpuset the scheduler bound), node labels that override the bind policy and the NUMA policy, and the
NodeResourceTopology annotations koordlet publishes (``cpu-topology``, ``cpu-shared-pools``...). Both
binaries read these; parsing errors name the object and the key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from apis.core import boundedjson

ANNOTATION_RESOURCE_SPEC: Final = "scheduling.koordinator.sh/resource-spec"
ANNOTATION_RESOURCE_STATUS: Final = "scheduling.koordinator.sh/resource-status"
ANNOTATION_NUMA_TOPOLOGY_SPEC: Final = "scheduling.koordinator.sh/numa-topology-spec"

LABEL_NODE_CPU_BIND_POLICY: Final = "node.koordinator.sh/cpu-bind-policy"
LABEL_NODE_NUMA_ALLOCATE_STRATEGY: Final = "node.koordinator.sh/numa-allocate-strategy"
LABEL_NODE_NUMA_TOPOLOGY_POLICY: Final = "node.koordinator.sh/numa-topology-policy"

ANNOTATION_NODE_CPU_TOPOLOGY: Final = "node.koordinator.sh/cpu-topology"
ANNOTATION_NODE_CPU_SHARED_POOLS: Final = "node.koordinator.sh/cpu-shared-pools"
ANNOTATION_NODE_BE_CPU_SHARED_POOLS: Final = "node.koordinator.sh/be-cpu-shared-pools"
ANNOTATION_NODE_POD_CPU_ALLOCS: Final = "node.koordinator.sh/pod-cpu-allocs"
ANNOTATION_KUBELET_CPU_MANAGER_POLICY: Final = "kubelet.koordinator.sh/cpu-manager-policy"
ANNOTATION_NODE_SYSTEM_QOS_RESOURCE: Final = "node.koordinator.sh/system-qos-resource"


class CPUBindPolicy(StrEnum):
    DEFAULT = "Default"
    FULL_PCPUS = "FullPCPUs"
    SPREAD_BY_PCPUS = "SpreadByPCPUs"
    CONSTRAINED_BURST = "ConstrainedBurst"
    NONE = ""


class CPUExclusivePolicy(StrEnum):
    NONE = "None"
    PCPU_LEVEL = "PCPULevel"
    NUMA_NODE_LEVEL = "NUMANodeLevel"


class NodeCPUBindPolicy(StrEnum):
    """The node label ``cpu-bind-policy``: every pod with a CPU request on such a node gets a cpuset."""

    NONE = "None"
    FULL_PCPUS_ONLY = "FullPCPUsOnly"
    SPREAD_BY_PCPUS = "SpreadByPCPUs"


class NUMAAllocateStrategy(StrEnum):
    MOST_ALLOCATED = "MostAllocated"
    LEAST_ALLOCATED = "LeastAllocated"
    DISTRIBUTE_EVENLY = "DistributeEvenly"


class NUMATopologyPolicy(StrEnum):
    NONE = ""
    BEST_EFFORT = "BestEffort"
    RESTRICTED = "Restricted"
    SINGLE_NUMA_NODE = "SingleNUMANode"


class AnnotationError(ValueError):
    """A malformed annotation; the message names the object and the key."""


# ----- the Linux list format ("0-3,8,10-11") -----


MAX_CPUS: Final = 8192
"""CPU ids in a cpuset must be below this: Linux's largest ``NR_CPUS`` (x86-64 ``MAXSMP``). A cpuset
is expanded to a set of ids, so ``0-4000000000`` must be refused before expansion, not after."""


def parse_cpuset(text: str, *, limit: int = MAX_CPUS) -> frozenset[int]:
    """``"0-2,8"`` → {0, 1, 2, 8}. Blank → empty. Raises ``ValueError`` naming the bad element, and for
    an id of ``limit`` or more (:data:`MAX_CPUS` unless the caller knows better). The work is bounded by
    the number of elements plus ``limit``, however the ranges overlap."""
    ranges: list[tuple[int, int]] = []
    for raw_part in text.strip().split(","):
        part = raw_part.strip()
        if not part:
            continue
        low, sep, high = part.partition("-")
        try:
            first = int(low)
            last = int(high) if sep else first
        except ValueError:
            raise ValueError(f"invalid cpuset element {_shown(part)!r} in {_shown(text)!r}") from None
        if first < 0 or last < first:
            raise ValueError(f"invalid cpuset range {_shown(part)!r} in {_shown(text)!r}")
        if last >= limit:
            raise ValueError(f"cpuset element {_shown(part)!r} goes beyond the largest CPU id {limit - 1}")
        ranges.append((first, last))
    cpus: set[int] = set()
    covered = -1
    for first, last in sorted(ranges):
        if last > covered:
            cpus.update(range(max(first, covered + 1), last + 1))
            covered = last
    return frozenset(cpus)


def _shown(text: str, limit: int = 64) -> str:
    """``text`` cut to ``limit`` characters for an error message (a cpuset may be very long)."""
    return text if len(text) <= limit else text[:limit] + "…"


def format_cpuset(cpus: Iterable[int]) -> str:
    """{0, 1, 2, 8} → ``"0-2,8"`` (ascending, ranges of two or more joined with a dash)."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


# ----- pod annotations -----


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """``scheduling.koordinator.sh/resource-spec``; every field optional."""

    required_cpu_bind_policy: str = ""
    preferred_cpu_bind_policy: str = ""
    preferred_cpu_exclusive_policy: str = ""

    def to_json(self) -> str:
        body = {
            "requiredCPUBindPolicy": self.required_cpu_bind_policy,
            "preferredCPUBindPolicy": self.preferred_cpu_bind_policy,
            "preferredCPUExclusivePolicy": self.preferred_cpu_exclusive_policy,
        }
        return json.dumps({k: v for k, v in body.items() if v}, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class NUMANodeResource:
    node: int
    resources: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class ResourceStatus:
    """``scheduling.koordinator.sh/resource-status``: the bound cpuset and the per-NUMA split."""

    cpuset: str = ""
    numa_node_resources: tuple[NUMANodeResource, ...] = ()

    def to_json(self) -> str:
        body: dict[str, Any] = {}
        if self.cpuset:
            body["cpuset"] = self.cpuset
        if self.numa_node_resources:
            body["numaNodeResources"] = [
                {"node": r.node, "resources": dict(r.resources)} for r in self.numa_node_resources
            ]
        return json.dumps(body, separators=(",", ":"))


def _load_object(annotations: Mapping[str, str], key: str, owner: str) -> Mapping[str, Any] | None:
    raw = annotations.get(key)
    if raw is None or not raw.strip():
        return None
    try:
        value = boundedjson.loads(raw)
    except json.JSONDecodeError as exc:
        raise AnnotationError(f"{owner}: annotation {key} is not valid JSON: {exc.msg}") from None
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise AnnotationError(f"{owner}: annotation {key} must be a JSON object")
    return value


def _string_field(body: Mapping[str, Any], name: str, key: str, owner: str) -> str:
    value = body.get(name, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise AnnotationError(f"{owner}: annotation {key} field {name} must be a string")
    return value


def resource_spec_of(annotations: Mapping[str, str], owner: str = "pod") -> ResourceSpec:
    body = _load_object(annotations, ANNOTATION_RESOURCE_SPEC, owner)
    if body is None:
        return ResourceSpec()
    key = ANNOTATION_RESOURCE_SPEC
    return ResourceSpec(
        required_cpu_bind_policy=_string_field(body, "requiredCPUBindPolicy", key, owner),
        preferred_cpu_bind_policy=_string_field(body, "preferredCPUBindPolicy", key, owner),
        preferred_cpu_exclusive_policy=_string_field(body, "preferredCPUExclusivePolicy", key, owner),
    )


def resource_status_of(annotations: Mapping[str, str], owner: str = "pod") -> ResourceStatus:
    key = ANNOTATION_RESOURCE_STATUS
    body = _load_object(annotations, key, owner)
    if body is None:
        return ResourceStatus()
    cpuset = _string_field(body, "cpuset", key, owner)
    try:
        parse_cpuset(cpuset)
    except ValueError as exc:
        raise AnnotationError(f"{owner}: annotation {key} field cpuset: {exc}") from None
    numa: list[NUMANodeResource] = []
    items = body.get("numaNodeResources") or []
    if not isinstance(items, list):
        raise AnnotationError(f"{owner}: annotation {key} field numaNodeResources must be a list")
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("node", 0), int):
            raise AnnotationError(f"{owner}: annotation {key} field numaNodeResources[{i}] is malformed")
        resources = item.get("resources") or {}
        numa.append(NUMANodeResource(int(item.get("node", 0)), {str(k): str(v) for k, v in resources.items()}))
    return ResourceStatus(cpuset, tuple(numa))


NUMA_EXCLUSIVE_VALUES = ("", "Preferred", "Required")


def numa_exclusive_of(annotations: Mapping[str, str], owner: str = "pod") -> str:
    """``singleNUMANodeExclusive`` of the numa-topology-spec: ``""``, ``Preferred`` or ``Required``."""
    key = ANNOTATION_NUMA_TOPOLOGY_SPEC
    body = _load_object(annotations, key, owner)
    if body is None:
        return ""
    value = _string_field(body, "singleNUMANodeExclusive", key, owner)
    if value not in NUMA_EXCLUSIVE_VALUES:
        raise AnnotationError(f"{owner}: annotation {key} field singleNUMANodeExclusive: unsupported value {value!r}")
    return value


def numa_topology_policy_of(annotations: Mapping[str, str], owner: str = "pod") -> NUMATopologyPolicy:
    key = ANNOTATION_NUMA_TOPOLOGY_SPEC
    body = _load_object(annotations, key, owner)
    if body is None:
        return NUMATopologyPolicy.NONE
    value = _string_field(body, "numaTopologyPolicy", key, owner)
    try:
        return NUMATopologyPolicy(value)
    except ValueError:
        raise AnnotationError(
            f"{owner}: annotation {key} field numaTopologyPolicy: unsupported value {value!r}"
        ) from None


# ----- node topology annotations -----


@dataclass(frozen=True, slots=True)
class CPUInfo:
    """One logical CPU: ``core`` is the core id as reported (unique per socket only)."""

    id: int
    core: int
    socket: int
    node: int


@dataclass(frozen=True, slots=True)
class CPUSharedPool:
    socket: int
    node: int
    cpuset: str


def cpu_topology_to_json(cpus: Iterable[CPUInfo]) -> str:
    detail = [
        {"id": c.id, "core": c.core, "socket": c.socket, "node": c.node} for c in sorted(cpus, key=lambda c: c.id)
    ]
    return json.dumps({"detail": detail}, separators=(",", ":"))


def cpu_topology_of(annotations: Mapping[str, str], owner: str = "node") -> tuple[CPUInfo, ...]:
    """``node.koordinator.sh/cpu-topology`` → CPUs sorted by id; empty when absent."""
    key = ANNOTATION_NODE_CPU_TOPOLOGY
    body = _load_object(annotations, key, owner)
    if body is None:
        return ()
    detail = body.get("detail") or []
    if not isinstance(detail, list):
        raise AnnotationError(f"{owner}: annotation {key} field detail must be a list")
    cpus: list[CPUInfo] = []
    for i, item in enumerate(detail):
        try:
            cpus.append(CPUInfo(int(item["id"]), int(item["core"]), int(item["socket"]), int(item["node"])))
        except (KeyError, TypeError, ValueError):
            raise AnnotationError(
                f"{owner}: annotation {key} field detail[{i}] needs integer id, core, socket and node"
            ) from None
    return tuple(sorted(cpus, key=lambda c: c.id))


def shared_pools_to_json(pools: Iterable[CPUSharedPool]) -> str:
    items = [{"socket": p.socket, "node": p.node, "cpuset": p.cpuset} for p in pools]
    return json.dumps(items, separators=(",", ":"))


def shared_pools_of(annotations: Mapping[str, str], key: str, owner: str = "node") -> tuple[CPUSharedPool, ...]:
    raw = annotations.get(key)
    if raw is None or not raw.strip():
        return ()
    try:
        items = boundedjson.loads(raw)
    except json.JSONDecodeError as exc:
        raise AnnotationError(f"{owner}: annotation {key} is not valid JSON: {exc.msg}") from None
    if items is None:
        return ()
    if not isinstance(items, list):
        raise AnnotationError(f"{owner}: annotation {key} must be a JSON list")
    pools: list[CPUSharedPool] = []
    for i, item in enumerate(items):
        try:
            pool = CPUSharedPool(int(item.get("socket", 0)), int(item.get("node", 0)), str(item.get("cpuset", "")))
            parse_cpuset(pool.cpuset)
        except (AttributeError, TypeError, ValueError) as exc:
            raise AnnotationError(f"{owner}: annotation {key}[{i}] is malformed: {exc}") from None
        pools.append(pool)
    return tuple(pools)
