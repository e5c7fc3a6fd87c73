"""Memory eviction decisions (Koordinator ``plugins/memoryevict``), as pure functions of a snapshot.

Trigger (both gates): ``usage% = floor(node memory used * 100 / capacity)``; at or above
``memoryEvictThresholdPercent`` (70) release ``capacity * (usage% - lower%) / 100`` bytes, where lower is
``memoryEvictLowerPercent`` or threshold - 2.

- BEMemoryEvict victims: pods labelled ``koordinator.sh/qosClass: BE`` (the label itself, as Koordinator),
  lowest ``spec.priority`` first, then largest memory.
- MemoryEvict victims: pods labelled ``koordinator.sh/eviction-enabled: "true"`` with
  ``priority <= evictEnabledPriorityThreshold``, sorted by eviction-priority, priority, sub-priority, then
  largest memory. A pod releases its memory in **bytes**: Koordinator multiplies it by 1000 here
  (Koordinator ``plugins/memoryevict``), which makes one victim look like enough; we do not.
"""

from __future__ import annotations

from dataclasses import dataclass

from apis.slo.nodeslo import ResourceThresholdStrategy
from koordlet.qosmanager.plugins.eviction import (
    Candidate,
    be_memory_order,
    candidate,
    gate_allows,
    opted_in,
    priority_order,
    release_from_threshold,
)
from koordlet.statesinformer import PodMeta

BE_GATE, PRIORITY_GATE, ALLOCATABLE_GATE = "BEMemoryEvict", "MemoryEvict", "MemoryAllocatableEvict"
DEFAULT_THRESHOLD_PERCENT = 70


@dataclass(frozen=True, slots=True)
class MemoryEvictConfig:
    threshold_percent: int
    lower_percent: int
    priority_threshold: int | None = None


def memory_evict_config(slo: ResourceThresholdStrategy | None) -> MemoryEvictConfig | None:
    """The config from NodeSLO, or ``None`` when it is switched off or invalid (lower >= threshold)."""
    if slo is None or not slo.enable:
        return None
    threshold = slo.memory_evict_threshold_percent
    threshold = DEFAULT_THRESHOLD_PERCENT if threshold is None else threshold
    lower = slo.memory_evict_lower_percent
    lower = threshold - 2 if lower is None else lower
    if not 0 < threshold <= 100 or lower >= threshold:
        return None
    return MemoryEvictConfig(threshold, lower, slo.evict_enabled_priority_threshold)


@dataclass(frozen=True, slots=True)
class MemorySnapshot:
    capacity_bytes: float
    used_bytes: float
    pods: tuple[tuple[PodMeta, float | None], ...]
    """Active pods and their memory used (bytes, without page cache; ``None`` = no recent sample)."""


@dataclass(frozen=True, slots=True)
class EvictPlan:
    gate: str
    need: float
    ordered: tuple[Candidate, ...]
    """Every allowed victim in eviction order; the executor walks it until ``need`` is covered."""
    message: str


def _message(snap: MemorySnapshot, cfg: MemoryEvictConfig) -> str:
    percent = snap.used_bytes * 100 / snap.capacity_bytes
    return f"node memory usage {percent:.1f}% >= threshold {cfg.threshold_percent}%, release to {cfg.lower_percent}%"


def be_memory_evict_plan(snap: MemorySnapshot, cfg: MemoryEvictConfig) -> EvictPlan | None:
    need = release_from_threshold(snap.used_bytes, snap.capacity_bytes, cfg.threshold_percent, cfg.lower_percent)
    if need <= 0:
        return None
    ordered = sorted(
        (
            candidate(pod, used=used, release=used or 0.0)
            for pod, used in snap.pods
            if pod.labelled_be and gate_allows(pod.annotations, BE_GATE)
        ),
        key=be_memory_order,
    )
    return EvictPlan(BE_GATE, need, tuple(ordered), _message(snap, cfg))


def memory_evict_plan(snap: MemorySnapshot, cfg: MemoryEvictConfig) -> EvictPlan | None:
    """``None`` also when ``evictEnabledPriorityThreshold`` is unset (MemoryEvict requires it)."""
    if cfg.priority_threshold is None:
        return None
    need = release_from_threshold(snap.used_bytes, snap.capacity_bytes, cfg.threshold_percent, cfg.lower_percent)
    if need <= 0:
        return None
    threshold = cfg.priority_threshold
    ordered = sorted(
        (
            candidate(pod, used=used, release=used or 0.0)
            for pod, used in snap.pods
            if opted_in(pod, threshold) and gate_allows(pod.annotations, PRIORITY_GATE)
        ),
        key=priority_order,
    )
    return EvictPlan(PRIORITY_GATE, need, tuple(ordered), _message(snap, cfg))
