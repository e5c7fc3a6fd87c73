"""Memory QoS values (Koordinator ``plugins/cgreconcile``), as pure functions.

For a class whose ``memoryQOS.enable`` is true: pod and container ``memory.min = request *
minLimitPercent/100``, ``memory.low = request * lowLimitPercent/100`` (low >= min), container ``memory.high =
floor((request + (limit - request) * throttlingPercent/100) / page) * page`` (``max`` when throttlingPercent is
0; high >= min). BE pods use their batch-memory request.

The other fields are copied as set (Koordinator ``makeCgroupResources``), each only where the kernel has the
file (Anolis kernels have the wmark and priority files on cgroup v1; ``memory.oom.group`` is mainline cgroup
v2): pods and containers get ``memory.wmark_ratio`` (``wmarkRatio``), ``memory.wmark_scale_factor``
(``wmarkScalePermill``), ``memory.wmark_min_adj`` (``wmarkMinAdj``), ``memory.priority`` (``priority``),
``memory.use_priority_oom`` (``priorityEnable``) and ``memory.oom.group`` (``oomKillGroup``); the kube-QoS
cgroups get the last three from their class (Guaranteed: LSR, Burstable: LS, BestEffort: BE).
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


def memory_qos_fields(cfg: MemoryQOSCfg, *, qos_level: bool = False) -> dict[str, int]:
    """The copied fields of a class config, by file (unset fields are left out). ``qos_level``: only those
    Koordinator sets on the kube-QoS cgroups (priority, priority OOM, OOM group)."""
    fields = {
        "memory.priority": cfg.priority,
        "memory.use_priority_oom": cfg.priority_enable,
        "memory.oom.group": cfg.oom_kill_group,
    }
    if not qos_level:
        fields = {
            "memory.wmark_ratio": cfg.wmark_ratio,
            "memory.wmark_scale_factor": cfg.wmark_scale_permill,
            "memory.wmark_min_adj": cfg.wmark_min_adj,
            **fields,
        }
    return {name: value for name, value in fields.items() if value is not None}


def memory_qos_updates(
    rel_dir: str,
    values: MemoryQOSValues,
    *,
    container: bool,
    supported: frozenset[str],
    fields: dict[str, int] | None = None,
) -> list[ResourceUpdate]:
    """The writes for one cgroup, restricted to the files this kernel has (``supported``); ``fields`` are the
    copied ones (:func:`memory_qos_fields`)."""
    wanted = {"memory.min": values.min, "memory.low": values.low}
    if container and values.high >= 0:
        # an unlimited memory.high is left alone: the kernel default is already "max"
        wanted["memory.high"] = values.high
    wanted.update(fields or {})
    return [ResourceUpdate(name, rel_dir, str(value), NAME) for name, value in wanted.items() if name in supported]
