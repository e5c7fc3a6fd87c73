"""``CPUAllocatableEvict`` and ``MemoryAllocatableEvict`` decisions (Koordinator ``plugins/cpuevict`` and
``plugins/memoryevict``, "by allocatable"), as pure functions.

The node's batch and mid allocatable (``kubernetes.io/batch-cpu`` in millicores, ``batch-memory`` in bytes,
``mid-*`` alike, from node status, written by the noderesource controller) shrinks when high-priority usage
grows; pods admitted against the old value may now over-request it. For each extended resource ``r``:

    requested(r) = sum of the requests of pods with priority <= allocatableEvictPriorityThreshold
                   (koord-batch pods request batch-*, koord-mid pods mid-*; priority defaulted by class)
    if allocatable(r) is missing or 0:          release requested(r)
    elif requested(r) / allocatable(r) > threshold%: release requested(r) - lower% x allocatable(r)

Victims: pods opted in with ``koordinator.sh/eviction-enabled: "true"``, priority <= the threshold, allowed
by ``koordinator.sh/eviction-policy``, with a recent usage sample; sorted by eviction-priority, priority,
``koordinator.sh/priority``, then the largest request; each releases its request of its class's resource.

Two deliberate differences from Koordinator, both about pods that cannot help: native ``cpu``/``memory``
requests (koord-free and unclassified pods) are not compared against the node's native allocatable, and a
pod whose class resource is not over its threshold is not evicted for another class's shortfall.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from apis.extension import PriorityClass, resource_name_for
from apis.slo.nodeslo import ResourceThresholdStrategy
from koordlet.qosmanager.plugins.eviction import (
    Candidate,
    candidate,
    gate_allows,
    opted_in,
    priority_value_with_default,
)
from koordlet.statesinformer import PodMeta

PRIORITY_MID_MAX = 7999
"""``allocatableEvictPriorityThreshold`` may not reach koord-prod: prod pods are never evicted this way."""
_CLASSES = (PriorityClass.BATCH, PriorityClass.MID)


@dataclass(frozen=True, slots=True)
class AllocatableEvictConfig:
    threshold_percent: int
    lower_percent: int
    priority_threshold: int


def allocatable_evict_config(slo: ResourceThresholdStrategy | None, resource: str) -> AllocatableEvictConfig | None:
    """``resource`` is ``cpu`` or ``memory``. ``None`` unless enabled with threshold >= 0, lower < threshold
    and ``allocatableEvictPriorityThreshold`` <= 7999 (Koordinator's validation; no defaults apply)."""
    if slo is None or not slo.enable:
        return None
    if resource == "cpu":
        threshold, lower = slo.cpu_allocatable_evict_threshold_percent, slo.cpu_allocatable_evict_lower_percent
    else:
        threshold, lower = slo.memory_allocatable_evict_threshold_percent, slo.memory_allocatable_evict_lower_percent
    priority = slo.allocatable_evict_priority_threshold
    if threshold is None or lower is None or priority is None:
        return None
    if threshold < 0 or lower >= threshold or priority > PRIORITY_MID_MAX:
        return None
    return AllocatableEvictConfig(threshold, lower, priority)


def class_request(pod: PodMeta, resource: str) -> tuple[str, int] | None:
    """(extended resource name, positive request sum) for koord-batch / koord-mid pods; else ``None``."""
    if pod.priority_class not in _CLASSES:
        return None
    name = resource_name_for(pod.priority_class, resource)
    return name, sum(v for c in pod.containers if (v := c.requests.get(name, 0)) > 0)


def allocatable_release(
    requested: Mapping[str, float], allocatable: Mapping[str, int], cfg: AllocatableEvictConfig
) -> dict[str, float]:
    """What to release per extended resource (integer amounts, as Koordinator truncates)."""
    out: dict[str, float] = {}
    for name, amount in requested.items():
        total = allocatable.get(name, 0)
        if total <= 0:
            if amount > 0:
                out[name] = float(amount)
        elif amount / total > cfg.threshold_percent / 100:
            out[name] = float(int(amount - cfg.lower_percent / 100 * total))
    return {k: v for k, v in out.items() if v > 0}


def allocatable_order(c: Candidate) -> tuple[object, ...]:
    """Eviction-priority, priority, ``koordinator.sh/priority`` ascending; then the largest request."""
    return (
        (c.eviction_priority is None, c.eviction_priority or 0),
        (c.priority is None, c.priority or 0),
        (c.sub_priority is None, c.sub_priority or 0),
        -c.release,
        c.name,
    )


@dataclass(frozen=True, slots=True)
class AllocatablePlan:
    gate: str
    need: Mapping[str, float]
    ordered: tuple[Candidate, ...]
    message: str


def allocatable_evict_plan(
    pods: Sequence[tuple[PodMeta, float | None]],
    allocatable: Mapping[str, int],
    cfg: AllocatableEvictConfig,
    *,
    resource: str,
    gate: str,
) -> AllocatablePlan | None:
    """``pods``: the active pods with their usage (``None`` = no recent sample). ``None`` when nothing is
    over its threshold."""
    requested: dict[str, float] = {}
    for pod, _used in pods:
        got = class_request(pod, resource)
        if got is not None and priority_value_with_default(pod) <= cfg.priority_threshold:
            requested[got[0]] = requested.get(got[0], 0.0) + got[1]
    need = allocatable_release(requested, allocatable, cfg)
    if not need:
        return None
    ordered: list[Candidate] = []
    for pod, used in pods:
        got = class_request(pod, resource)
        if got is None or got[0] not in need or used is None:
            continue
        if not opted_in(pod, cfg.priority_threshold) or not gate_allows(pod.annotations, gate):
            continue
        ordered.append(
            candidate(pod, used=used, release=got[1], resource=got[0], priority=priority_value_with_default(pod))
        )
    ordered.sort(key=allocatable_order)
    summary = ", ".join(
        f"{name} requested {requested[name]:.0f} of allocatable {allocatable.get(name, 0)}" for name in sorted(need)
    )
    message = f"{summary}: over {cfg.threshold_percent}%, release to {cfg.lower_percent}%"
    return AllocatablePlan(gate, need, tuple(ordered), message)
