"""Mid-tier resources of one node: Koordinator's ``MidResource`` calculation as pure functions.

Koordinator ``pkg/slo-controller/noderesource/plugins/midresource`` and ``plugins/util``
(``CalculateMidResourceByPolicy``, ``CalculateMidResourceByStaticMode``). All amounts are integers: CPU in
millicores, memory in bytes. ``koord-mid`` pods request ``kubernetes.io/mid-cpu`` (millicores) and
``kubernetes.io/mid-memory`` (bytes), which this writes on the node's status.

``midReclaimMode: static``::

    mid = min(Capacity * midStatic{CPU,Memory}ReservedPercent, Capacity * mid{CPU,Memory}ThresholdPercent)

any other mode (the default)::

    Reclaimable = max(min(prodReclaimable, NodeUnused), 0)
    Unallocated = max(Capacity - max(SystemUsed, Reserved) - ProdRequests, 0)
    mid         = min(Reclaimable + Unallocated * midUnallocatedPercent, Capacity * mid*ThresholdPercent)

``prodReclaimable`` is the koordlet's ``status.prodReclaimableMetric`` (0 when it reports none);
``NodeUnused = Capacity - nodeUsage`` (0 when the NodeMetric lacks a CPU or memory usage, so that a
broken report gives no mid resources); ``SystemUsed`` is ``systemUsage`` plus the usage of koord-prod host
applications (priorities above koord-mid's); ``Reserved`` is the larger of the kubelet reservation and
the ``node.koordinator.sh/reservation`` annotation; ``ProdRequests`` sums the requests of the
Running/Pending pods whose priority class is neither koord-mid, koord-batch nor koord-free. Every
product truncates as Go's ``int64(float64(x) * ratio)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from apis.configuration import ColocationStrategy
from apis.configuration.colocation import MID_RECLAIM_MODE_STATIC
from apis.core.types import CPU, MEMORY, Node, Pod
from apis.extension import PriorityClass
from apis.extension.priority import priority_class_with_default
from apis.extension.qos import qos_class_with_default
from apis.slo.nodemetric_record import NodeMetricRecord
from koord_scheduler.scheduler.controllers.batch import Pair, node_reserved, pair_of, scaled

_NOT_PROD = (PriorityClass.MID, PriorityClass.BATCH, PriorityClass.FREE)
_HOST_APP_ABOVE_MID = (PriorityClass.PROD.value,)
"""Host applications whose class's default priority is above koord-mid's count as system usage."""


@dataclass(frozen=True, slots=True)
class MidInputs:
    """What the mid calculation reads for one node (see the module docstring)."""

    capacity: Pair
    reserved: Pair
    system_used: Pair
    prod_requests: Pair
    node_unused: Pair
    prod_reclaimable: Pair


@dataclass(frozen=True, slots=True)
class MidAllocatable:
    """``cpu`` millicores and ``memory`` bytes, and a line saying how each was reached."""

    cpu: int
    memory: int
    explanation: str = ""


def mid_allocatable(inputs: MidInputs, strategy: ColocationStrategy) -> MidAllocatable:
    """Mid CPU and memory for one node (see the module docstring)."""
    cap = inputs.capacity
    cpu_limit = scaled(cap.cpu, strategy.mid_cpu_threshold_percent)
    memory_limit = scaled(cap.memory, strategy.mid_memory_threshold_percent)
    if strategy.mid_reclaim_mode == MID_RECLAIM_MODE_STATIC:
        cpu = min(scaled(cap.cpu, strategy.mid_static_cpu_reserved_percent), cpu_limit)
        memory = min(scaled(cap.memory, strategy.mid_static_memory_reserved_percent), memory_limit)
        return MidAllocatable(
            cpu,
            memory,
            (
                f"mid-cpu {cpu} = min(capacity {cap.cpu} * staticReserved {strategy.mid_static_cpu_reserved_percent}%,"
                f" capacity * threshold {strategy.mid_cpu_threshold_percent}%); mid-memory {memory} = min(capacity"
                f" {cap.memory} * staticReserved {strategy.mid_static_memory_reserved_percent}%, capacity * threshold"
                f" {strategy.mid_memory_threshold_percent}%)"
            ),
        )
    reserved = inputs.system_used.max(inputs.reserved)
    unallocated = Pair(
        max(cap.cpu - reserved.cpu - inputs.prod_requests.cpu, 0),
        max(cap.memory - reserved.memory - inputs.prod_requests.memory, 0),
    )
    reclaimable = Pair(
        max(min(inputs.prod_reclaimable.cpu, inputs.node_unused.cpu), 0),
        max(min(inputs.prod_reclaimable.memory, inputs.node_unused.memory), 0),
    )
    percent = strategy.mid_unallocated_percent
    cpu = min(reclaimable.cpu + scaled(unallocated.cpu, percent), cpu_limit)
    memory = min(reclaimable.memory + scaled(unallocated.memory, percent), memory_limit)
    return MidAllocatable(
        cpu,
        memory,
        (
            f"mid-cpu {cpu} = min(min(prodReclaimable {inputs.prod_reclaimable.cpu},"
            f" nodeUnused {inputs.node_unused.cpu})"
            f" + unallocated {unallocated.cpu} * {percent}%, capacity {cap.cpu} * threshold"
            f" {strategy.mid_cpu_threshold_percent}%); mid-memory {memory} = min(min(prodReclaimable"
            f" {inputs.prod_reclaimable.memory}, nodeUnused {inputs.node_unused.memory}) + unallocated"
            f" {unallocated.memory} * {percent}%, capacity {cap.memory} * threshold"
            f" {strategy.mid_memory_threshold_percent}%)"
        ),
    )


# ----- inputs from the informers' objects -----


def is_prod(pod: Pod) -> bool:
    """Neither koord-mid, koord-batch nor koord-free (``GetPodPriorityClassWithDefault``)."""
    qos = qos_class_with_default(pod.labels, pod.qos_class)
    return priority_class_with_default(pod.labels, pod.priority, qos) not in _NOT_PROD


def prod_requests(pods: Iterable[Pod]) -> Pair:
    """CPU and memory requests of the Running/Pending prod (and unclassified) pods."""
    total = Pair()
    for pod in pods:
        if pod.phase in ("Running", "Pending") and is_prod(pod):
            total += pair_of(pod.requests)
    return total


def node_unused(capacity: Pair, metric: NodeMetricRecord) -> Pair:
    """``capacity - nodeUsage`` (may be negative); zero when the usage lacks CPU or memory."""
    usage = metric.node_usage
    if CPU not in usage or MEMORY not in usage:
        return Pair()
    return Pair(capacity.cpu - usage[CPU], capacity.memory - usage[MEMORY])


def mid_system_used(metric: NodeMetricRecord) -> Pair:
    """``systemUsage`` plus the usage of koord-prod host applications."""
    total = pair_of(metric.system_usage)
    for app in metric.host_apps:
        if app.priority in _HOST_APP_ABOVE_MID:
            total += pair_of(app.usage)
    return total


def mid_inputs(node: Node, pods: Iterable[Pod], metric: NodeMetricRecord) -> MidInputs:
    capacity = pair_of(node.capacity)
    return MidInputs(
        capacity=capacity,
        reserved=node_reserved(node),
        system_used=mid_system_used(metric),
        prod_requests=prod_requests(pods),
        node_unused=node_unused(capacity, metric),
        prod_reclaimable=pair_of(metric.prod_reclaimable),
    )
