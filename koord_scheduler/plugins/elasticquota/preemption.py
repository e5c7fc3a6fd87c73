"""Quota-scoped victim selection (Koordinator pkg/scheduler/plugins/elasticquota/preempt.go), pure.

A pod that its quota rejects, or that fits no node, may evict pods **of its own quota** with strictly lower
priority (priorities are compared only inside a quota), never non-preemptible pods, and not pods of the
default quota unless configured. Per node, as in kube-scheduler's ``SelectVictimsOnNode``: take every
eligible pod on the node off; if the pod then fits neither the node's free resources nor the quota
(``used + request <= limit``), the node is no candidate. Otherwise put the victims back, most important
first, keeping each one with which the pod still fits both. The node to nominate has the lowest highest
victim priority, then the smallest priority sum, then the fewest victims, then the smallest name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Victim:
    key: str
    priority: int
    request: Mapping[str, int]
    """The part of the pod's request that frees room on its node (all its requests)."""
    quota_request: Mapping[str, int]
    """The part charged to the quota (masked to the quota's max)."""
    start_time: float = 0.0


def eligible_victim(*, preemptor_priority: int, victim_priority: int, same_quota: bool, preemptible: bool) -> bool:
    return same_quota and preemptible and victim_priority < preemptor_priority


def _fits(
    request: Mapping[str, int],
    free: Mapping[str, int],
    used: Mapping[str, int],
    limit: Mapping[str, int],
    quota_request: Mapping[str, int],
) -> bool:
    if any(v > free.get(k, 0) for k, v in request.items() if v):
        return False
    return all(used.get(k, 0) + quota_request.get(k, 0) <= cap for k, cap in limit.items())


def select_victims_on_node(
    *,
    request: Mapping[str, int],
    quota_request: Mapping[str, int],
    node_free: Mapping[str, int],
    candidates: Sequence[Victim],
    quota_used: Mapping[str, int],
    quota_limit: Mapping[str, int],
) -> list[Victim] | None:
    """The victims on one node, or None when evicting every candidate would not be enough."""
    free = dict(node_free)
    used = dict(quota_used)
    for victim in candidates:
        for k, v in victim.request.items():
            free[k] = free.get(k, 0) + v
        for k, v in victim.quota_request.items():
            used[k] = used.get(k, 0) - v
    if not _fits(request, free, used, quota_limit, quota_request):
        return None
    victims: list[Victim] = []
    for victim in sorted(candidates, key=lambda v: (-v.priority, v.start_time, v.key)):
        trial_free = {k: free.get(k, 0) - victim.request.get(k, 0) for k in set(free) | set(victim.request)}
        trial_used = {k: used.get(k, 0) + victim.quota_request.get(k, 0) for k in set(used) | set(victim.quota_request)}
        if _fits(request, trial_free, trial_used, quota_limit, quota_request):
            free, used = trial_free, trial_used
        else:
            victims.append(victim)
    return victims


def pick_node(options: Mapping[str, Sequence[Victim]]) -> str | None:
    """The node whose victims matter least (see the module docstring)."""
    if not options:
        return None

    def cost(name: str) -> tuple[int, int, int, str]:
        victims = options[name]
        highest = max((v.priority for v in victims), default=-(2**31))
        return highest, sum(v.priority for v in victims), len(victims), name

    return min(options, key=cost)
