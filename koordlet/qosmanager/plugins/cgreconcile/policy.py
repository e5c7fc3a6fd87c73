"""Memory QoS values (Koordinator ``plugins/cgreconcile``), as pure functions.

For a class whose ``memoryQOS.enable`` is true: pod and container ``memory.min = request *
minLimitPercent/100``, ``memory.low = request * lowLimitPercent/100`` (low >= min), container ``memory.high =
floor((request + (limit - request) * throttlingPercent/100) / page) * page`` (``max`` when throttlingPercent is
0; high >= min). BE pods use their batch-memory request.
"""

from __future__ import annotations

from dataclasses import dataclass

from apis.slo.nodeslo import MemoryQOSCfg
from koordlet.qosmanager.executor import ResourceUpdate

NAME = "CgroupReconcile"
PAGE_SIZE = 4096


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
