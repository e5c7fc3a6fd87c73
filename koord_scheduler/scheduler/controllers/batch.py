"""Batch resources of one node: Koordinator's ``BatchResource`` calculation as pure functions.

Koordinator ``pkg/slo-controller/noderesource/plugins/batchresource`` (node level). All amounts are
integers: CPU in millicores, memory in bytes. Every subtraction is clamped at zero.

- ``Margin   = Capacity * (100 - reclaimPercent) / 100``            (truncated, as Go's ``int64(float64)``)
- ``SysEff   = max(SystemUsage + HP host applications, Reserved)``    per resource
- ``usage           = Capacity - Margin - SysEff   - HPUsed``
- ``request         = Capacity - Margin - Reserved - HPRequest``        (memory only; CPU treats it as usage)
- ``maxUsageRequest = Capacity - Margin - SysEff   - Σ max(request, usage)``
- caps: ``min(result, Capacity * batch{CPU,Memory}ThresholdPercent / 100)`` when set.

``Reserved`` is the larger of the kubelet's reservation (capacity - allocatable) and the node annotation
``node.koordinator.sh/reservation``. High-priority (HP) pods are the Running/Pending pods whose priority
class is neither koord-batch nor koord-free: each adds its reported usage (its request when it has no
metric yet; its CPU request if it is LSE) to ``HPUsed``. Metrics of pods the informer no longer knows,
reported with a priority other than batch/free, count as HP usage too.

One deliberate difference: an HP pod with no metric yet counts at its request in ``maxUsageRequest`` as
well (Koordinator's node-level code leaves it out, its NUMA-level code counts it), so a burst of new
pods cannot open room for batch pods that ``maxUsageRequest`` is meant to protect.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from apis.configuration.colocation import ColocationStrategy
from apis.core import boundedjson
from apis.core.quantity import milli_value, value
from apis.core.types import CPU, MEMORY, Node, Pod
from apis.extension import PriorityClass
from apis.extension.constants import ANNOTATION_NODE_RESERVATION
from apis.extension.priority import priority_class_with_default
from apis.extension.qos import QoSClass, qos_class_with_default
from apis.slo.nodemetric_record import HostAppUsage, NodeMetricRecord, PodUsage

_LOW_PRIORITY = (PriorityClass.BATCH, PriorityClass.FREE)
_HOST_APP_HP = (PriorityClass.PROD.value, PriorityClass.MID.value)
"""Host applications count as system usage when their priority value is above koord-batch's default."""


@dataclass(frozen=True, slots=True)
class Pair:
    """CPU in millicores and memory in bytes."""

    cpu: int = 0
    memory: int = 0

    def __add__(self, other: Pair) -> Pair:
        return Pair(self.cpu + other.cpu, self.memory + other.memory)

    def max(self, other: Pair) -> Pair:
        return Pair(max(self.cpu, other.cpu), max(self.memory, other.memory))


def pair_of(resources: Mapping[str, int]) -> Pair:
    return Pair(resources.get(CPU, 0), resources.get(MEMORY, 0))


@dataclass(frozen=True, slots=True)
class HighPriorityLoad:
    """What the node's HP pods use and request (the sums of the module docstring)."""

    used: Pair = Pair()
    request: Pair = Pair()
    max_used_request: Pair = Pair()


@dataclass(frozen=True, slots=True)
class BatchInputs:
    capacity: Pair
    reserved: Pair
    system_used: Pair
    hp: HighPriorityLoad


@dataclass(frozen=True, slots=True)
class BatchAllocatable:
    """The result: ``cpu`` millicores and ``memory`` bytes, and a line saying how each was reached."""

    cpu: int
    memory: int
    explanation: str = ""


def scaled(amount: int, percent: int) -> int:
    """``int64(float64(amount) * (percent / 100))``, the way Koordinator scales a capacity."""
    return int(amount * (percent / 100))


def batch_allocatable(inputs: BatchInputs, strategy: ColocationStrategy) -> BatchAllocatable:
    """Batch CPU and memory for one node (see the module docstring)."""
    cap = inputs.capacity
    margin = Pair(
        scaled(cap.cpu, 100 - strategy.cpu_reclaim_threshold_percent),
        scaled(cap.memory, 100 - strategy.memory_reclaim_threshold_percent),
    )
    sys_eff = inputs.system_used.max(inputs.reserved)
    hp = inputs.hp
    if strategy.cpu_calculate_policy == "maxUsageRequest":
        cpu_hp, cpu_term = hp.max_used_request.cpu, "podHPMaxUsedRequest"
    else:  # "request" is not supported for CPU and means usage, as in Koordinator
        cpu_hp, cpu_term = hp.used.cpu, "podHPUsed"
    cpu = max(cap.cpu - margin.cpu - sys_eff.cpu - cpu_hp, 0)
    cpu_text = (
        f"batch-cpu {{}} = capacity {cap.cpu} - margin {margin.cpu} - systemUsageOrReserved {sys_eff.cpu}"
        f" - {cpu_term} {cpu_hp}"
    )
    if strategy.memory_calculate_policy == "request":
        mem_sys, mem_sys_term, mem_hp, mem_term = inputs.reserved.memory, "reserved", hp.request.memory, "podHPRequest"
    elif strategy.memory_calculate_policy == "maxUsageRequest":
        mem_sys, mem_sys_term = sys_eff.memory, "systemUsageOrReserved"
        mem_hp, mem_term = hp.max_used_request.memory, "podHPMaxUsedRequest"
    else:
        mem_sys, mem_sys_term, mem_hp, mem_term = sys_eff.memory, "systemUsageOrReserved", hp.used.memory, "podHPUsed"
    memory = max(cap.memory - margin.memory - mem_sys - mem_hp, 0)
    mem_text = (
        f"batch-memory {{}} = capacity {cap.memory} - margin {margin.memory} - {mem_sys_term} {mem_sys}"
        f" - {mem_term} {mem_hp}"
    )
    if strategy.batch_cpu_threshold_percent is not None:
        limit = scaled(cap.cpu, strategy.batch_cpu_threshold_percent)
        if limit < cpu:
            cpu, cpu_text = limit, cpu_text + f", capped at {strategy.batch_cpu_threshold_percent}% = {limit}"
    if strategy.batch_memory_threshold_percent is not None:
        limit = scaled(cap.memory, strategy.batch_memory_threshold_percent)
        if limit < memory:
            memory = limit
            mem_text += f", capped at {strategy.batch_memory_threshold_percent}% = {limit}"
    return BatchAllocatable(cpu, memory, f"{cpu_text.format(cpu)}; {mem_text.format(memory)}")


# ----- inputs from the informers' objects -----


def is_high_priority(pod: Pod) -> bool:
    """Not koord-batch and not koord-free (``GetPodPriorityClassWithDefault``)."""
    qos = qos_class_with_default(pod.labels, pod.qos_class)
    return priority_class_with_default(pod.labels, pod.priority, qos) not in _LOW_PRIORITY


def high_priority_load(pods: Iterable[Pod], metrics: Mapping[str, PodUsage]) -> HighPriorityLoad:
    """HP usage and requests of ``pods`` (the node's pods) with their reported ``metrics`` (by
    ``namespace/name``), plus dangling HP metrics of pods not in ``pods``."""
    used = request = max_used_request = Pair()
    seen: set[str] = set()
    for pod in pods:
        seen.add(pod.key)
        if pod.phase not in ("Running", "Pending") or not is_high_priority(pod):
            continue
        req = pair_of(pod.requests)
        request += req
        metric = metrics.get(pod.key)
        if metric is None:
            used += req
            max_used_request += req
            continue
        usage = pair_of(metric.usage)
        if qos_class_with_default(pod.labels, pod.qos_class) is QoSClass.LSE:
            used += Pair(req.cpu, usage.memory)
        else:
            used += usage
        max_used_request += req.max(usage)
    for key, metric in metrics.items():
        if key in seen or metric.priority in (PriorityClass.BATCH.value, PriorityClass.FREE.value):
            continue
        usage = pair_of(metric.usage)
        used += usage
        max_used_request += usage
    return HighPriorityLoad(used, request, max_used_request)


def system_used(metric: NodeMetricRecord) -> Pair:
    """``systemUsage`` plus the usage of koord-prod / koord-mid host applications."""
    total = pair_of(metric.system_usage)
    for app in metric.host_apps:
        total += _host_app_usage(app)
    return total


def _host_app_usage(app: HostAppUsage) -> Pair:
    return pair_of(app.usage) if app.priority in _HOST_APP_HP else Pair()


def node_reserved(node: Node) -> Pair:
    """max(kubelet reservation, ``node.koordinator.sh/reservation``) per resource."""
    kubelet = Pair(
        max(node.capacity.get(CPU, 0) - node.allocatable.get(CPU, 0), 0),
        max(node.capacity.get(MEMORY, 0) - node.allocatable.get(MEMORY, 0), 0),
    )
    return kubelet.max(annotation_reserved(node.annotations.get(ANNOTATION_NODE_RESERVATION, "")))


def annotation_reserved(text: str) -> Pair:
    """``{"resources": {"cpu": ..., "memory": ...}, "reservedCPUs": "0-3"}``; a cpuset replaces
    ``resources.cpu`` by its CPU count. A malformed annotation reserves nothing."""
    if not text:
        return Pair()
    try:
        raw = boundedjson.loads(text)
        resources = raw.get("resources") or {}
        cpu = milli_value(resources[CPU]) if CPU in resources else 0
        memory = value(resources[MEMORY]) if MEMORY in resources else 0
        cpus = raw.get("reservedCPUs") or ""
        if cpus:
            cpu = cpuset_size(cpus) * 1000
    except (ValueError, TypeError, AttributeError):
        return Pair()
    return Pair(max(cpu, 0), max(memory, 0))


def cpuset_size(text: str) -> int:
    """Number of CPUs in a Linux cpuset list (``"0-3,8"`` → 5). Raises ``ValueError``."""
    count = 0
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = (int(x) for x in part.split("-", 1))
            if hi < lo:
                raise ValueError(f"bad cpuset range {part!r}")
            count += hi - lo + 1
        else:
            int(part)
            count += 1
    return count


def batch_inputs(node: Node, pods: Iterable[Pod], metric: NodeMetricRecord) -> BatchInputs:
    return BatchInputs(
        capacity=pair_of(node.capacity),
        reserved=node_reserved(node),
        system_used=system_used(metric),
        hp=high_priority_load(pods, metric.pods),
    )


# ----- when to write, when to withdraw -----


def is_degraded(metric: NodeMetricRecord | None, now: float, degrade_minutes: int) -> bool:
    """No NodeMetric, never reported, no ``status.nodeMetric``, or older than ``degradeTimeMinutes``."""
    if metric is None or metric.update_time is None or not metric.has_node_metric:
        return True
    return now > metric.update_time + degrade_minutes * 60


def needs_sync(
    current: tuple[int | None, ...],
    want: tuple[int | None, ...],
    *,
    diff_threshold: float,
) -> bool:
    """Koordinator's resource gate: presence differs, or ``|new - old| > old * resourceDiffThreshold``
    for any of the resources, paired by position (strict; old 0 and new > 0 is a difference). The time
    gate is the caller's."""
    for have, new in zip(current, want, strict=True):
        if (have is None) != (new is None):
            return True
        if have is not None and new is not None and abs(new - have) > have * diff_threshold:
            return True
    return False
