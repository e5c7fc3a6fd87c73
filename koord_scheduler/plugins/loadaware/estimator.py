"""How much a pod will use before the koordlet has measured it (Koordinator's ``defaultEstimator``).

``estimator/default_estimator.go``. For each resource ``r`` with a scaling factor ``f`` (percent):

1. ``r'`` is ``r`` translated by the pod's Koordinator priority class (koord-batch → ``kubernetes.io/batch-*``,
   koord-mid → ``kubernetes.io/mid-*``; prod and none keep ``r``);
2. ``q = max(request(r'), limit(r'))`` (pod-level totals, as ``PodRequests`` / ``PodLimits``);
3. ``q == 0`` → 250m for cpu / batch-cpu, 200 MiB for memory / batch-memory, else 0;
4. else ``round(q x f / 100)`` (Go ``math.Round``: half away from zero), capped at the limit when one is set.

The estimate is stored under ``r``, not ``r'``: a batch pod's batch-cpu estimate counts against node cpu
usage, which is what the koordlet reports it as. Units are the scheduler's: millicores for cpu, base
units for everything else (batch-cpu is already an integer of millicores).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from apis.core import boundedjson
from apis.core.types import CPU, MEMORY, Pod
from apis.extension import (
    RESOURCE_BATCH_CPU,
    RESOURCE_BATCH_MEMORY,
    PriorityClass,
    priority_class_with_default,
    qos_class_with_default,
    resource_name_for,
)

DEFAULT_MILLI_CPU = 250
"""Estimate of a pod that requests no cpu (Koordinator's ``DefaultMilliCPURequest``, not the 100m of
kube-scheduler's scoring)."""
DEFAULT_MEMORY = 200 * 1024 * 1024
"""Estimate of a pod that requests no memory, in bytes."""

ANNOTATION_ESTIMATED_SCALING_FACTORS = "scheduling.koordinator.sh/load-estimated-scaling-factors"
"""Pod annotation (JSON ``{resource: percent}``) read only with ``allowCustomizeEstimation``."""
ANNOTATION_RESERVE_POD = "scheduling.koordinator.sh/reserve-pod"
"""Marks a reservation's reserve pod, which load estimation never counts (it holds, it does not run)."""

_DEFAULTS = {
    CPU: DEFAULT_MILLI_CPU,
    RESOURCE_BATCH_CPU: DEFAULT_MILLI_CPU,
    MEMORY: DEFAULT_MEMORY,
    RESOURCE_BATCH_MEMORY: DEFAULT_MEMORY,
}


def go_round(x: float) -> int:
    """Go's ``math.Round`` for a finite float: halves round away from zero (Python's ``round`` does not)."""
    whole = math.floor(abs(x))
    if abs(x) - whole >= 0.5:
        whole += 1
    return int(whole) if x >= 0 else -int(whole)


def pod_priority_class(pod: Pod) -> PriorityClass:
    """``GetPodPriorityClassWithDefault``: label, then the range of ``spec.priority``, then from QoS."""
    return priority_class_with_default(pod.labels, pod.priority, qos_class_with_default(pod.labels, pod.qos_class))


def is_daemonset_pod(pod: Pod) -> bool:
    refs = pod.meta.owner_references
    return bool(refs) and any(ref.kind == "DaemonSet" for ref in refs)


def is_reserve_pod(pod: Pod) -> bool:
    return pod.annotations.get(ANNOTATION_RESERVE_POD) == "true"


def estimate_resource(requests: Mapping[str, int], limits: Mapping[str, int], name: str, factor: int) -> int:
    """One resource's estimate (``estimatedUsedByResource``); ``name`` is the translated resource."""
    limit = limits.get(name, 0)
    quantity = max(limit, requests.get(name, 0))
    if quantity == 0:
        return _DEFAULTS.get(name, 0)
    estimate = go_round(float(quantity) * float(factor) / 100)
    if limit > 0 and estimate > limit:
        return limit
    return estimate


def estimate_pod(
    pod: Pod,
    resources: Sequence[str],
    factors: Mapping[str, int],
    *,
    allow_customize: bool = False,
) -> tuple[int, ...]:
    """The pod's estimated usage for each of ``resources`` (aligned). Resources without a scaling
    factor estimate 0, as in Koordinator (it loops over the factors)."""
    if allow_customize:
        factors = {**factors, **custom_scaling_factors(pod)}
    priority_class = pod_priority_class(pod)
    out: list[int] = []
    for name in resources:
        factor = factors.get(name)
        if factor is None:
            out.append(0)
            continue
        out.append(estimate_resource(pod.requests, pod.limits, resource_name_for(priority_class, name), factor))
    return tuple(out)


def custom_scaling_factors(pod: Pod) -> dict[str, int]:
    """The pod's ``load-estimated-scaling-factors`` annotation; malformed or absent → ``{}`` (as Koordinator
    ignores a bad annotation and keeps the configured factors)."""
    raw = pod.annotations.get(ANNOTATION_ESTIMATED_SCALING_FACTORS)
    if not raw:
        return {}
    try:
        parsed = boundedjson.loads(raw)
    except ValueError:
        return {}
    if not isinstance(parsed, dict):
        return {}
    return {
        str(k): int(v) for k, v in parsed.items() if isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 100
    }
