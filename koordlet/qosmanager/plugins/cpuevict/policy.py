"""CPU eviction decisions (Koordinator ``plugins/cpuevict``), as pure functions of a snapshot.

**BECPUEvict** (BE satisfaction). Over a window ``W = max(collect interval, cpuEvictTimeWindowSeconds)``,
average the BE usage, request and real limit (millicores). The window is valid when
``count * interval >= W/3``. With ``satisfaction = limit / request``, evict when

    (limit < 1 core  or  usage / limit >= cpuEvictBEUsageThresholdPercent (90))
    and satisfaction <= cpuEvictBESatisfactionLowerPercent

and release ``request * (upperPercent/100 - satisfaction)`` millicores; the same with the newest values is
computed too and the smaller release wins (a transient dip releases less). Victims: BE pods, lowest priority
first, then the highest usage/request; each releases its ``batch-cpu`` request.

**CPUEvict** (node usage). ``usage% = avg node CPU over W * 100 / capacity``; at or above
``cpuEvictThresholdPercent`` release ``capacity * (usage% - lower%) / 100`` (lower = threshold - 2 unless
set). Victims: opted-in pods with ``priority <= evictEnabledPriorityThreshold``; each releases its CPU used.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apis.extension import RESOURCE_BATCH_CPU
from apis.slo.nodeslo import ResourceThresholdStrategy
from koordlet.qosmanager.plugins.eviction import (
    Candidate,
    be_cpu_order,
    candidate,
    gate_allows,
    opted_in,
    priority_order,
    release_from_threshold,
)
from koordlet.statesinformer import PodMeta

BE_GATE, PRIORITY_GATE, ALLOCATABLE_GATE = "BECPUEvict", "CPUEvict", "CPUAllocatableEvict"
DEFAULT_BE_USAGE_THRESHOLD_PERCENT = 90
EVICT_BY_ALLOCATABLE = "evictByAllocatable"


@dataclass(frozen=True, slots=True)
class BECPUEvictConfig:
    lower_percent: int
    upper_percent: int
    usage_threshold_percent: int
    window_seconds: float
    by_allocatable: bool = False


def be_cpu_evict_config(slo: ResourceThresholdStrategy | None, collect_interval: float) -> BECPUEvictConfig | None:
    """``None`` when switched off or invalid: both satisfaction percents must be set,
    lower in (0, 60], upper in (0, 100) and upper >= lower (Koordinator's validation)."""
    if slo is None or not slo.enable:
        return None
    lower, upper = slo.cpu_evict_be_satisfaction_lower_percent, slo.cpu_evict_be_satisfaction_upper_percent
    if lower is None or upper is None or not 0 < lower <= 60 or not 0 < upper < 100 or upper < lower:
        return None
    usage = slo.cpu_evict_be_usage_threshold_percent
    window = float(slo.cpu_evict_time_window_seconds or 0)
    return BECPUEvictConfig(
        lower_percent=lower,
        upper_percent=upper,
        usage_threshold_percent=DEFAULT_BE_USAGE_THRESHOLD_PERCENT if usage is None else usage,
        window_seconds=max(collect_interval, window),
        by_allocatable=slo.cpu_evict_policy == EVICT_BY_ALLOCATABLE,
    )


def be_allocatable_milli(allocatable: Mapping[str, int] | None) -> float | None:
    """``evictByAllocatable``'s BE limit: the node's ``kubernetes.io/batch-cpu`` allocatable (millicores);
    0 counts as 1 (still a satisfaction to compute); missing gives ``None`` (no eviction)."""
    if allocatable is None or RESOURCE_BATCH_CPU not in allocatable or allocatable[RESOURCE_BATCH_CPU] < 0:
        return None
    return float(allocatable[RESOURCE_BATCH_CPU]) or 1.0


@dataclass(frozen=True, slots=True)
class BEUsage:
    """BE CPU in millicores (Koordinator's ``node_be`` series), averaged over a window or the newest."""

    usage: float
    request: float
    limit: float
    count: int = 1


def be_satisfaction_release(be: BEUsage, cfg: BECPUEvictConfig) -> float:
    """Millicores to release for one BE reading (0 when the trigger does not hold)."""
    if be.request <= 0:
        return 0.0
    limit = max(be.limit, 1.0)
    satisfaction = limit / be.request
    saturated = limit < 1000 or be.usage / limit >= cfg.usage_threshold_percent / 100
    if not saturated or satisfaction > cfg.lower_percent / 100:
        return 0.0
    return be.request * (cfg.upper_percent / 100 - satisfaction)


def be_cpu_release(
    window: BEUsage | None, newest: BEUsage | None, cfg: BECPUEvictConfig, collect_interval: float
) -> float:
    """The release of a valid window, capped by the release the newest values ask for."""
    if window is None or window.count * collect_interval < cfg.window_seconds / 3:
        return 0.0
    release = be_satisfaction_release(window, cfg)
    if release > 0 and newest is not None:
        release = min(release, be_satisfaction_release(newest, cfg))
    return max(release, 0.0)


@dataclass(frozen=True, slots=True)
class CPUSnapshot:
    pods: tuple[tuple[PodMeta, float | None], ...]
    """Active pods with their CPU used in millicores (``None`` = no recent sample)."""
    capacity_milli: float = 0.0
    node_used_milli: float | None = None
    """Average node CPU over the window (CPUEvict)."""


@dataclass(frozen=True, slots=True)
class CPUEvictPlan:
    gate: str
    need: float
    ordered: tuple[Candidate, ...]
    message: str


def be_cpu_evict_plan(snap: CPUSnapshot, need: float, cfg: BECPUEvictConfig) -> CPUEvictPlan | None:
    if need <= 0:
        return None
    ordered = []
    for pod, used in snap.pods:
        if not pod.labelled_be or not gate_allows(pod.annotations, BE_GATE):
            continue
        request = float(pod.total_request(RESOURCE_BATCH_CPU))
        ratio = None if used is None or request <= 0 else used / request
        ordered.append(candidate(pod, used=used, release=request, sort_ratio=ratio))
    ordered.sort(key=be_cpu_order)
    message = f"BE CPU satisfaction under {cfg.lower_percent}%, release {need:.0f}m to reach {cfg.upper_percent}%"
    return CPUEvictPlan(BE_GATE, need, tuple(ordered), message)


@dataclass(frozen=True, slots=True)
class CPUEvictConfig:
    threshold_percent: int
    lower_percent: int
    priority_threshold: int
    window_seconds: float


def cpu_evict_config(slo: ResourceThresholdStrategy | None, collect_interval: float) -> CPUEvictConfig | None:
    """``None`` unless enabled with ``cpuEvictThresholdPercent`` and ``evictEnabledPriorityThreshold`` set."""
    if slo is None or not slo.enable:
        return None
    threshold, priority = slo.cpu_evict_threshold_percent, slo.evict_enabled_priority_threshold
    if threshold is None or priority is None:
        return None
    lower = threshold - 2 if slo.cpu_evict_lower_percent is None else slo.cpu_evict_lower_percent
    if lower >= threshold:
        return None
    window = max(collect_interval, float(slo.cpu_evict_time_window_seconds or 0))
    return CPUEvictConfig(threshold, lower, priority, window)


def cpu_evict_plan(snap: CPUSnapshot, cfg: CPUEvictConfig) -> CPUEvictPlan | None:
    if snap.node_used_milli is None:
        return None
    need = release_from_threshold(snap.node_used_milli, snap.capacity_milli, cfg.threshold_percent, cfg.lower_percent)
    if need <= 0:
        return None
    ordered = sorted(
        (
            candidate(pod, used=used, release=used or 0.0)
            for pod, used in snap.pods
            if opted_in(pod, cfg.priority_threshold) and gate_allows(pod.annotations, PRIORITY_GATE)
        ),
        key=priority_order,
    )
    percent = snap.node_used_milli * 100 / snap.capacity_milli
    message = f"node CPU usage {percent:.1f}% >= threshold {cfg.threshold_percent}%, release to {cfg.lower_percent}%"
    return CPUEvictPlan(PRIORITY_GATE, need, tuple(ordered), message)
