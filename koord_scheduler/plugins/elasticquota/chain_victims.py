"""Quota preemption for pods whose fit arithmetic cannot decide: the pod asks for devices (DeviceShare)
or bound CPUs (NodeNUMAResource), which are held per device or per CPU, not as node totals.

Koordinator's quota preemption selects victims with the upstream ``SelectVictimsOnNode``: every eligible
pod off, then put back most important first while the Filter chain (kept in step through the PreFilter
extensions) still passes and the quota still fits. The arithmetic of :mod:`.preemption` is that search
when only node totals matter; for these pods the same search runs with the Filter chain
(:class:`~koord_scheduler.plugins.defaultpreemption.dryrun.NodeTrial`), so that the victims free the
GPUs or cores the pod needs (two halves of one GPU, not one half of each of two).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.snapshot import ClusterSnapshot, NodeInfo
from koord_scheduler.plugins import names
from koord_scheduler.plugins.defaultpreemption.dryrun import DryRunError, NodeTrial
from koord_scheduler.plugins.elasticquota.preemption import Victim

HELD_PER_DEVICE = frozenset({names.DEVICE_SHARE, names.NODE_NUMA_RESOURCE})
"""Plugins whose Filter depends on which pods hold which devices or CPUs on the node."""


def needs_filter_chain(fwk: Handle | None, state: CycleState) -> bool:
    """Whether a plugin of :data:`HELD_PER_DEVICE` takes part in this pod's Filter."""
    if fwk is None:
        return False
    return any(p.name in HELD_PER_DEVICE and p.name not in state.skip_filter for p in fwk.pre_filter_plugins)


def _quota_fits(used: Mapping[str, int], quota_request: Mapping[str, int], limit: Mapping[str, int]) -> bool:
    return all(used.get(k, 0) + quota_request.get(k, 0) <= cap for k, cap in limit.items())


def select_victims_by_filter(
    fwk: Handle,
    snapshot: ClusterSnapshot,
    state: CycleState,
    pod: Pod,
    info: NodeInfo,
    *,
    candidates: Sequence[Victim],
    nominated: Sequence[Pod],
    quota_request: Mapping[str, int],
    quota_used: Mapping[str, int],
    quota_limit: Mapping[str, int],
) -> list[Victim] | None:
    """The victims on one node, or None when the pod does not pass Filter (or the quota) even with every
    candidate gone. Candidates are put back in :func:`.preemption.select_victims_on_node`'s order. The
    snapshot is restored before returning."""
    on_node = {p.key: p for p in info.pods.values()}
    kept = [v for v in candidates if v.key in on_node]
    used = dict(quota_used)
    for victim in kept:
        for k, v in victim.quota_request.items():
            used[k] = used.get(k, 0) - v
    trial = NodeTrial(fwk, snapshot, state.clone(), pod, info, nominated=nominated)
    try:
        for victim in kept:
            trial.remove(on_node[victim.key])
        if not _quota_fits(used, quota_request, quota_limit) or not trial.filter().is_success:
            return None
        victims: list[Victim] = []
        for victim in sorted(kept, key=lambda v: (-v.priority, v.start_time, v.key)):
            with_it = {
                k: used.get(k, 0) + victim.quota_request.get(k, 0) for k in set(used) | set(victim.quota_request)
            }
            if _quota_fits(with_it, quota_request, quota_limit) and trial.fits_with(on_node[victim.key]):
                used = with_it
            else:
                victims.append(victim)
        return victims
    except DryRunError:
        return None
    finally:
        trial.restore()
