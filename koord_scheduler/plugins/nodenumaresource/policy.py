"""Who gets bound CPUs, with which policy, and what a node's labels change about it (pure functions;
Koordinator ``pkg/scheduler/plugins/nodenumaresource/plugin.go`` PreFilter/Filter and ``util.go``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apis.core.quantity import to_amount
from apis.core.types import CPU, Pod
from apis.extension.constants import LABEL_POD_QOS
from apis.extension.numa import (
    LABEL_NODE_CPU_BIND_POLICY,
    LABEL_NODE_NUMA_ALLOCATE_STRATEGY,
    LABEL_NODE_NUMA_TOPOLOGY_POLICY,
    CPUBindPolicy,
    CPUExclusivePolicy,
    NodeCPUBindPolicy,
    NUMAAllocateStrategy,
    NUMATopologyPolicy,
    ResourceSpec,
    numa_exclusive_of,
    numa_topology_policy_of,
    parse_cpuset,
    resource_spec_of,
    resource_status_of,
)
from apis.extension.priority import PriorityClass, priority_class_with_default
from apis.extension.qos import QoSClass, qos_class_by_name
from koord_scheduler.plugins.nodenumaresource.cache import Holding

ERR_NOT_INTEGER = "the requested CPUs must be integer"
ERR_NUMA_POLICY_NOT_MATCH = "node(s) NUMA Topology policy not match"
ERR_TOPOLOGY_NOT_FOUND = "node(s) CPU Topology not found"
ERR_INVALID_TOPOLOGY = "node(s) invalid CPU Topology"
ERR_BIND_POLICY_CONFLICT = "node(s) cpu bind policy conflicts with pod's required cpu bind policy"
ERR_NOT_MULTIPLE_OF_CORE = "node(s) requested cpus not multiple cpus per core"

_BINDING = (CPUBindPolicy.FULL_PCPUS, CPUBindPolicy.SPREAD_BY_PCPUS)


def allow_use_cpuset(pod: Pod) -> bool:
    """``AllowUseCPUSet``: raw QoS label LSE or LSR, and priority class koord-prod."""
    qos = qos_class_by_name(pod.meta.labels.get(LABEL_POD_QOS, ""))
    if qos not in (QoSClass.LSE, QoSClass.LSR):
        return False
    return priority_class_with_default(pod.meta.labels, pod.priority, qos) is PriorityClass.PROD


def _policy(value: str) -> CPUBindPolicy | None:
    try:
        return CPUBindPolicy(value)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class PodCPURequest:
    """The PreFilter decision for one pod."""

    milli_cpu: int
    bind_policy: CPUBindPolicy
    """The effective policy when the pod itself asks for bound CPUs, else ``NONE``."""
    required: bool
    exclusive: CPUExclusivePolicy
    numa_policy: NUMATopologyPolicy
    request_bind: bool
    """LSE/LSR prod pod with a binding policy and a whole CPU request of at least one."""
    spec: ResourceSpec
    numa_exclusive: str = ""
    """``singleNUMANodeExclusive`` of the pod's numa-topology-spec (``""``, Preferred, Required)."""

    @property
    def num_cpus(self) -> int:
        return self.milli_cpu // 1000


def pod_cpu_request(pod: Pod, default_policy: CPUBindPolicy) -> PodCPURequest:
    """Resolve the pod's resource-spec against ``default_policy``. Raises ``AnnotationError``."""
    owner = f"pod {pod.key}"
    spec = resource_spec_of(pod.meta.annotations, owner)
    numa_policy = numa_topology_policy_of(pod.meta.annotations, owner)
    numa_exclusive = numa_exclusive_of(pod.meta.annotations, owner)
    milli = pod.requests.get(CPU, 0)
    exclusive = exclusive_policy(spec.preferred_cpu_exclusive_policy)
    if not allow_use_cpuset(pod):
        return PodCPURequest(milli, CPUBindPolicy.NONE, False, exclusive, numa_policy, False, spec, numa_exclusive)
    preferred = _policy(spec.preferred_cpu_bind_policy)
    if preferred in (None, CPUBindPolicy.NONE, CPUBindPolicy.DEFAULT):
        # Anything unknown (the manual's "None" included) counts as no binding, but "" and Default
        # fall back to the configured default.
        preferred = default_policy if preferred is not None else CPUBindPolicy.NONE
    required_raw = _policy(spec.required_cpu_bind_policy)
    if required_raw is CPUBindPolicy.DEFAULT:
        required_raw = default_policy
    required = required_raw not in (None, CPUBindPolicy.NONE)
    policy = required_raw if required and required_raw is not None else preferred
    if policy not in _BINDING:
        return PodCPURequest(milli, CPUBindPolicy.NONE, False, exclusive, numa_policy, False, spec, numa_exclusive)
    return PodCPURequest(milli, policy, required, exclusive, numa_policy, milli >= 1000, spec, numa_exclusive)


def exclusive_policy(value: str) -> CPUExclusivePolicy:
    try:
        return CPUExclusivePolicy(value)
    except ValueError:
        return CPUExclusivePolicy.NONE


def node_bind_policy(labels: Mapping[str, str], full_pcpus_only_kubelet: bool) -> NodeCPUBindPolicy:
    value = labels.get(LABEL_NODE_CPU_BIND_POLICY, "")
    if value == NodeCPUBindPolicy.FULL_PCPUS_ONLY or full_pcpus_only_kubelet:
        return NodeCPUBindPolicy.FULL_PCPUS_ONLY
    if value == NodeCPUBindPolicy.SPREAD_BY_PCPUS:
        return NodeCPUBindPolicy.SPREAD_BY_PCPUS
    return NodeCPUBindPolicy.NONE


def node_numa_policy(labels: Mapping[str, str], from_nrt: NUMATopologyPolicy) -> NUMATopologyPolicy:
    value = labels.get(LABEL_NODE_NUMA_TOPOLOGY_POLICY)
    if value:
        try:
            return NUMATopologyPolicy(value)
        except ValueError:
            return NUMATopologyPolicy.NONE
    return from_nrt


def numa_allocate_strategy(labels: Mapping[str, str], default: NUMAAllocateStrategy) -> NUMAAllocateStrategy:
    value = labels.get(LABEL_NODE_NUMA_ALLOCATE_STRATEGY, "")
    if value == NUMAAllocateStrategy.MOST_ALLOCATED:
        return NUMAAllocateStrategy.MOST_ALLOCATED
    if value in (NUMAAllocateStrategy.LEAST_ALLOCATED, NUMAAllocateStrategy.DISTRIBUTE_EVENLY):
        return NUMAAllocateStrategy.LEAST_ALLOCATED
    return default


def resource_spec_backfill(spec: ResourceSpec, policy: CPUBindPolicy, required: bool) -> ResourceSpec | None:
    """``appendResourceSpecIfMissed``: the spec to write after binding, or None if unchanged."""
    new_required = spec.required_cpu_bind_policy
    new_preferred = spec.preferred_cpu_bind_policy
    if required and new_required in ("", CPUBindPolicy.DEFAULT):
        new_required = policy.value
    if new_preferred == CPUBindPolicy.DEFAULT:
        new_preferred = policy.value
    if not new_required and not new_preferred:
        new_preferred = policy.value
    if (new_required, new_preferred) == (spec.required_cpu_bind_policy, spec.preferred_cpu_bind_policy):
        return None
    return ResourceSpec(new_required, new_preferred, spec.preferred_cpu_exclusive_policy)


def holding_of(pod: Pod) -> Holding | None:
    """What a bound pod holds according to its resource-status (cpuset and NUMA shares), or None when it
    holds nothing. Raises :class:`AnnotationError` (naming the pod and the annotation) when they are
    malformed."""
    status = resource_status_of(pod.meta.annotations, f"pod {pod.key}")
    spec = resource_spec_of(pod.meta.annotations, f"pod {pod.key}")
    if not status.cpuset and not status.numa_node_resources:
        return None
    try:
        shares = {
            r.node: {name: to_amount(name, value) for name, value in r.resources.items()}
            for r in status.numa_node_resources
        }
    except (ValueError, TypeError):
        shares = {}
    exclusive = exclusive_policy(spec.preferred_cpu_exclusive_policy)
    return Holding(parse_cpuset(status.cpuset), exclusive, pod.key, shares)
