"""The quota over-use revoke decision (Koordinator pkg/scheduler/plugins/elasticquota/quota_overuse_revoke.go).

With ``monitorAllQuotas`` (and ``enableRuntimeQuota``), every quota but the root and system quotas is
watched: once its used has stayed above its runtime for longer than ``delayEvictTime``, some of its
assigned pods are evicted, and the clock starts again. Which pods (:func:`pods_to_revoke`):

1. Assigned pods from least to most important (lower priority first; at equal priority the one started
   last first). Non-preemptible pods are skipped. Take pods until used fits the runtime.
2. If used still does not fit, all the pods taken are revoked.
3. Else give back the pods taken, most important first, as long as used still fits: the rest are revoked.

Comparisons are Koordinator's ``LessThanOrEqual(used, runtime)``: every resource of the runtime that used
names. Taking a pod keeps only the pod's resources in used (Koordinator masks used to them), so the check
after a take looks at those resources only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Assigned:
    """An assigned pod of the quota."""

    key: str
    priority: int
    start: float
    request: Mapping[str, int]
    non_preemptible: bool = False


def fits(used: Mapping[str, int], runtime: Mapping[str, int]) -> bool:
    """Koordinator's ``LessThanOrEqual(used, runtime)`` (resources of the runtime that used names)."""
    return all(used[k] <= v for k, v in runtime.items() if k in used)


def pods_to_revoke(used: Mapping[str, int], runtime: Mapping[str, int], pods: Sequence[Assigned]) -> list[str]:
    """The keys of the pods to evict so that the quota's used fits its runtime (see the module docstring)."""
    order = sorted(pods, key=lambda p: (p.priority, -p.start, p.key))
    current: dict[str, int] = dict(used)
    taken: list[Assigned] = []
    for pod in order:
        if fits(current, runtime):
            break
        if pod.non_preemptible:
            continue
        current = {k: current.get(k, 0) - v for k, v in pod.request.items()}
        taken.append(pod)
    if not fits(current, runtime):
        return [p.key for p in taken]
    revoked: list[str] = []
    for pod in reversed(taken):
        back = {k: current.get(k, 0) + v for k, v in pod.request.items()}
        if fits(back, runtime):
            current = back
        else:
            current = {k: back[k] - v for k, v in pod.request.items()}
            revoked.append(pod.key)
    return revoked


@dataclass(slots=True)
class OverUseMonitor:
    """One quota's over-use clock (Koordinator's QuotaOverUsedGroupMonitor)."""

    last_under_used: float

    def due(self, used: Mapping[str, int], runtime: Mapping[str, int], now: float, delay: float) -> bool:
        """True when used has been above runtime for longer than ``delay``; the clock then restarts."""
        if fits(used, runtime):
            self.last_under_used = now
            return False
        if now - self.last_under_used > delay:
            self.last_under_used = now
            return True
        return False
