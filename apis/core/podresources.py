"""Pod resource totals and QoS class, as Kubernetes computes them. Pure functions over nano-unit maps.

- :func:`aggregate_pod_resources`: ``PodRequests`` / ``PodLimits``
  (``staging/src/k8s.io/component-helpers/resource/helpers.go``) plus the scheduler's scoring requests
  (``NonMissingContainerRequests`` with ``DefaultMilliCPURequest`` / ``DefaultMemoryRequest``).
- :func:`pod_qos_class`: ``ComputePodQOS`` (``pkg/apis/core/v1/helper/qos/qos.go``).

Amounts are integer nano-units (see :mod:`apis.core.quantity`), so sums are exact and rounding to
millicores / units happens once, on the totals, as Kubernetes does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from apis.core.types import CPU, MEMORY

DEFAULT_MILLI_CPU_REQUEST = 100
"""``schedutil.DefaultMilliCPURequest``: the scoring request of a container without a cpu request."""
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
"""``schedutil.DefaultMemoryRequest`` (bytes): the scoring request of a container without a memory request."""

_DEFAULT_CPU_NANOS = DEFAULT_MILLI_CPU_REQUEST * 1_000_000
_DEFAULT_MEMORY_NANOS = DEFAULT_MEMORY_REQUEST * 1_000_000_000
_HUGEPAGES_PREFIX = "hugepages-"
_POD_LEVEL_NAMES = frozenset({CPU, MEMORY})

NanoResources = Mapping[str, int]


class ContainerResources(Protocol):
    """One container's resources, in nano-units, with requests already defaulted from limits."""

    @property
    def requests(self) -> NanoResources: ...

    @property
    def limits(self) -> NanoResources: ...

    @property
    def restartable(self) -> bool:
        """``restartPolicy: Always`` on an init container: a sidecar."""
        ...


class PodResourceTotals:
    """The result of :func:`aggregate_pod_resources` (all amounts in nano-units)."""

    __slots__ = ("limits", "non_zero_cpu", "non_zero_memory", "pod_limits", "pod_requests", "requests")

    def __init__(
        self,
        requests: dict[str, int],
        limits: dict[str, int],
        *,
        non_zero: tuple[int, int],
        pod_level: tuple[dict[str, int], dict[str, int]],
    ) -> None:
        self.requests = requests
        """``PodRequests``: what Filter compares against allocatable."""
        self.limits = limits
        """``PodLimits``."""
        self.non_zero_cpu, self.non_zero_memory = non_zero
        """Scoring requests: containers missing a cpu/memory request count as 100m / 200Mi."""
        self.pod_requests, self.pod_limits = pod_level
        """Pod-level ``spec.resources`` after ``defaultPodRequests`` (empty when the pod sets none)."""


def is_pod_level_resource(name: str) -> bool:
    """``IsSupportedPodLevelResource``: cpu, memory and ``hugepages-*``."""
    return name in _POD_LEVEL_NAMES or name.startswith(_HUGEPAGES_PREFIX)


def _add(into: dict[str, int], other: NanoResources) -> None:
    for name, n in other.items():
        into[name] = into.get(name, 0) + n


def _max(into: dict[str, int], other: NanoResources) -> None:
    for name, n in other.items():
        if name not in into or n > into[name]:
            into[name] = n


def aggregate_pod_resources(
    containers: Sequence[ContainerResources],
    init_containers: Sequence[ContainerResources],
    *,
    pod_requests: dict[str, int],
    pod_limits: dict[str, int],
    overhead: NanoResources,
) -> PodResourceTotals:
    """Pod requests, limits and scoring requests.

    Regular containers are summed. Init containers run in order: a sidecar (restartable) adds to the
    sum and to the running sidecar total; a regular init container needs its own resources plus the
    sidecars started before it. The result is ``max(sum, max over init containers)`` per resource.
    Pod-level requests/limits (``pod_requests`` / ``pod_limits``; defaulted in place here) then replace
    cpu, memory and hugepages, and ``overhead`` is added (to limits only where a limit exists).
    """
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    nz_cpu = nz_memory = 0
    for c in containers:
        c_requests = c.requests
        if c_requests:
            _add(requests, c_requests)
        if c.limits:
            _add(limits, c.limits)
        nz_cpu += c_requests.get(CPU, _DEFAULT_CPU_NANOS)
        nz_memory += c_requests.get(MEMORY, _DEFAULT_MEMORY_NANOS)
    if init_containers:
        sidecar_requests: dict[str, int] = {}
        sidecar_limits: dict[str, int] = {}
        sidecar_cpu = sidecar_memory = 0
        init_requests: dict[str, int] = {}
        init_limits: dict[str, int] = {}
        init_cpu = init_memory = 0
        for c in init_containers:
            c_cpu = c.requests.get(CPU, _DEFAULT_CPU_NANOS)
            c_memory = c.requests.get(MEMORY, _DEFAULT_MEMORY_NANOS)
            if c.restartable:
                _add(requests, c.requests)
                _add(limits, c.limits)
                nz_cpu += c_cpu
                nz_memory += c_memory
                _add(sidecar_requests, c.requests)
                _add(sidecar_limits, c.limits)
                sidecar_cpu += c_cpu
                sidecar_memory += c_memory
                _max(init_requests, sidecar_requests)
                _max(init_limits, sidecar_limits)
                init_cpu = max(init_cpu, sidecar_cpu)
                init_memory = max(init_memory, sidecar_memory)
            else:
                use_requests = dict(c.requests)
                _add(use_requests, sidecar_requests)
                use_limits = dict(c.limits)
                _add(use_limits, sidecar_limits)
                _max(init_requests, use_requests)
                _max(init_limits, use_limits)
                init_cpu = max(init_cpu, c_cpu + sidecar_cpu)
                init_memory = max(init_memory, c_memory + sidecar_memory)
        _max(requests, init_requests)
        _max(limits, init_limits)
        nz_cpu = max(nz_cpu, init_cpu)
        nz_memory = max(nz_memory, init_memory)

    if pod_limits:
        default_pod_requests(pod_requests, pod_limits, requests)
    for name, n in pod_requests.items():
        if is_pod_level_resource(name):
            requests[name] = n
            if name == CPU:
                nz_cpu = n
            elif name == MEMORY:
                nz_memory = n
    for name, n in pod_limits.items():
        if is_pod_level_resource(name):
            limits[name] = n

    if overhead:
        _add(requests, overhead)
        nz_cpu += overhead.get(CPU, 0)
        nz_memory += overhead.get(MEMORY, 0)
        for name, n in overhead.items():
            if name in limits:
                limits[name] += n
    return PodResourceTotals(requests, limits, non_zero=(nz_cpu, nz_memory), pod_level=(pod_requests, pod_limits))


def default_pod_requests(
    pod_requests: dict[str, int], pod_limits: NanoResources, container_requests: NanoResources
) -> None:
    """``defaultPodRequests`` (``pkg/apis/core/v1/defaults.go``), applied in place to ``pod_requests``.

    Only when pod-level limits exist: a missing pod-level request takes the containers' aggregate
    request (cpu, memory), else the pod-level limit.
    """
    for name, n in container_requests.items():
        if name not in pod_requests and name in _POD_LEVEL_NAMES:
            pod_requests[name] = n
    for name, n in pod_limits.items():
        if name not in pod_requests and is_pod_level_resource(name):
            pod_requests[name] = n


def resource_qos(requests: NanoResources, limits: NanoResources) -> str:
    """``resourceQOS`` for one set of requirements (a container's, or the pod-level one)."""
    if not requests and not limits:
        return "BestEffort"
    qos = ""
    for name in (CPU, MEMORY):
        request = requests.get(name, 0)
        if request != limits.get(name, 0):
            return "Burstable"
        this = "BestEffort" if request == 0 else "Guaranteed"
        if qos and qos != this:
            return "Burstable"
        qos = this
    return qos


def pod_qos_class(
    containers: Sequence[ContainerResources],
    init_containers: Sequence[ContainerResources],
    *,
    pod_level: tuple[NanoResources, NanoResources] | None,
) -> str:
    """``ComputePodQOS``: Guaranteed, Burstable or BestEffort.

    ``pod_level`` is ``(requests, limits)`` of ``spec.resources`` when the pod has that field (then it
    alone decides, as with the PodLevelResources feature on), else ``None``. Otherwise every container
    (init containers included) is classified and the pod is Burstable unless all agree.
    """
    if pod_level is not None:
        return resource_qos(*pod_level)
    pod_qos = ""
    for group in (init_containers, containers):
        for c in group:
            qos = resource_qos(c.requests, c.limits)
            if qos == "Burstable":
                return qos
            if not pod_qos:
                pod_qos = qos
            elif pod_qos != qos:
                return "Burstable"
    return pod_qos or "BestEffort"
