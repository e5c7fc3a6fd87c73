"""Cgroup values for batch (BE) pods and memory QoS, as pure functions.

BE pods request reclaimed resources (``kubernetes.io/batch-cpu`` in millicores, ``batch-memory`` in bytes),
which the kubelet does not turn into cgroup limits. Per pod and per container (Koordinator's
``BatchResource`` hook; v2 files through the usual conversions):

- ``cpu.shares = max(2, batch-cpu request * 1024 / 1000)`` (v2 ``cpu.weight``);
- ``cpu.cfs_quota_us = batch-cpu limit * period / 1000``, or -1 without a limit, or -1 when CPU suppress
  runs with policy ``cfsQuota`` (the besteffort QoS quota is then the only limit);
- ``memory.limit_in_bytes = batch-memory limit`` (v2 ``memory.max``), or -1 without one.

A pod-level limit is the sum of its containers' only when every container has one (else -1).

Memory QoS, for a class whose ``memoryQOS.enable`` is true (``plugins/cgreconcile``): pod and container
``memory.min = request * minLimitPercent/100``, ``memory.low = request * lowLimitPercent/100`` (low >= min),
container ``memory.high = floor((request + (limit - request) * throttlingPercent/100) / page) * page``
(``max`` when throttlingPercent is 0; high >= min). BE pods use their batch-memory request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apis.extension import RESOURCE_BATCH_CPU, RESOURCE_BATCH_MEMORY
from apis.slo.nodeslo import MemoryQOSCfg
from koordlet.qosmanager.executor import ResourceUpdate
from koordlet.system.resources import milli_cpu_to_shares

NAME = "CgroupReconcile"
PAGE_SIZE = 4096


@dataclass(frozen=True, slots=True)
class BatchResources:
    """One container's batch resources; 0 means "not set"."""

    cpu_request_milli: int = 0
    cpu_limit_milli: int = 0
    memory_limit_bytes: int = 0


def batch_resources(requests: Mapping[str, int], limits: Mapping[str, int]) -> BatchResources:
    return BatchResources(
        cpu_request_milli=int(requests.get(RESOURCE_BATCH_CPU, 0)),
        cpu_limit_milli=int(limits.get(RESOURCE_BATCH_CPU, 0)),
        memory_limit_bytes=int(limits.get(RESOURCE_BATCH_MEMORY, 0)),
    )


def cfs_quota_us(limit_milli: int, period_us: int) -> int:
    return limit_milli * period_us // 1000 if limit_milli > 0 else -1


def _values(res: BatchResources, *, period_us: int, quota_unlimited: bool) -> dict[str, str]:
    return {
        "cpu.shares": str(milli_cpu_to_shares(res.cpu_request_milli)),
        "cpu.cfs_quota_us": "-1" if quota_unlimited else str(cfs_quota_us(res.cpu_limit_milli, period_us)),
        "memory.limit_in_bytes": str(res.memory_limit_bytes if res.memory_limit_bytes > 0 else -1),
    }


def pod_total(containers: list[BatchResources]) -> BatchResources:
    """Requests add up; a limit adds up only when every container has one (else 0 = unlimited)."""
    cpu_limits = [c.cpu_limit_milli for c in containers]
    memory_limits = [c.memory_limit_bytes for c in containers]
    return BatchResources(
        cpu_request_milli=sum(c.cpu_request_milli for c in containers),
        cpu_limit_milli=sum(cpu_limits) if cpu_limits and all(v > 0 for v in cpu_limits) else 0,
        memory_limit_bytes=sum(memory_limits) if memory_limits and all(v > 0 for v in memory_limits) else 0,
    )


def batch_cgroup_levels(
    pod_dir: str,
    containers: list[tuple[str | None, BatchResources]],
    *,
    period_us: int,
    quota_unlimited: bool = False,
) -> list[list[ResourceUpdate]]:
    """[[pod updates], [container updates]] for one BE pod (containers without a cgroup dir are skipped
    but still count toward the pod's totals)."""
    total = pod_total([res for _, res in containers])
    pod_level = [
        ResourceUpdate(name, pod_dir, value, NAME)
        for name, value in _values(total, period_us=period_us, quota_unlimited=quota_unlimited).items()
    ]
    container_level = [
        ResourceUpdate(name, d, value, NAME)
        for d, res in containers
        if d is not None
        for name, value in _values(res, period_us=period_us, quota_unlimited=quota_unlimited).items()
    ]
    return [pod_level, container_level]


@dataclass(frozen=True, slots=True)
class MemoryQOSValues:
    min: int
    low: int
    high: int
    """-1 = ``max``."""


def memory_qos_values(request: int, limit: int, cfg: MemoryQOSCfg, *, page_size: int = PAGE_SIZE) -> MemoryQOSValues:
    """``limit`` <= 0 means unlimited: pass node allocatable memory instead, as Koordinator does."""
    min_value = request * (cfg.min_limit_percent or 0) // 100
    low = max(request * (cfg.low_limit_percent or 0) // 100, min_value)
    throttling = cfg.throttling_percent or 0
    if throttling <= 0 or limit <= 0:
        high = -1
    else:
        raw = request + (limit - request) * throttling // 100
        high = max(raw // page_size * page_size, min_value)
    return MemoryQOSValues(min_value, low, high)


def memory_qos_updates(
    rel_dir: str, values: MemoryQOSValues, *, container: bool, supported: frozenset[str]
) -> list[ResourceUpdate]:
    """The writes for one cgroup, restricted to the files this kernel has (``supported``)."""
    wanted = {"memory.min": values.min, "memory.low": values.low}
    if container and values.high >= 0:
        # an unlimited memory.high is left alone: the kernel default is already "max"
        wanted["memory.high"] = values.high
    return [ResourceUpdate(name, rel_dir, str(value), NAME) for name, value in wanted.items() if name in supported]
