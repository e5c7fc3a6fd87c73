"""CPU suppress decisions (Koordinator ``plugins/cpusuppress``), as pure functions.

How much CPU BE pods may use (millicores), on **capacity**, not allocatable::

    reserved = max(capacity - allocatable, node.koordinator.sh/reservation cpu)
    system   = max(max(node used - all pods used - host apps used, 0), reserved)
    BE       = capacity * cpuSuppressThresholdPercent/100 - non-BE pods used - non-BE host apps used - system
    BE       = max(BE, capacity * cpuSuppressMinPercent/100)          if cpuSuppressMinPercent is set

Policy ``cfsQuota`` turns that into the besteffort QoS cgroup's quota; policy ``cpuset`` into a set of CPUs.
Both tighten at once and loosen by at most 10 % of the node per tick.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from koordlet.qosmanager.executor import ResourceUpdate
from koordlet.system.resources import format_cpuset

MIN_QUOTA_US = 2000
"""The smallest BE quota written: 2 ms per period keeps BE pods alive (they can still be evicted)."""
QUOTA_DEAD_BAND = 0.01
"""Changes smaller than 1 % of the node's quota are not written (no flapping on noise)."""
MAX_STEP_UP = 0.10
"""Loosen by at most 10 % of the node (quota or CPUs) per tick; tightening is immediate."""
MIN_BE_CPUS = 2
CFS_QUOTA, CPUSET = "cfsQuota", "cpuset"


@dataclass(frozen=True, slots=True)
class PodCPU:
    is_be: bool
    used_milli: float | None
    """``None``: no recent sample (the pod counts as using nothing)."""


@dataclass(frozen=True, slots=True)
class SuppressInput:
    capacity_milli: float
    allocatable_milli: float
    node_used_milli: float
    pods: tuple[PodCPU, ...]
    threshold_percent: int = 65
    min_percent: int | None = None
    reservation_milli: float = 0.0
    """CPU reserved by the ``node.koordinator.sh/reservation`` annotation."""
    host_apps: tuple[PodCPU, ...] = ()


def node_reserved_milli(capacity: float, allocatable: float, reservation: float) -> float:
    return max(capacity - allocatable, reservation, 0.0)


def suppress_be_milli(inp: SuppressInput) -> float:
    """Millicores BE pods may use; may be negative (the writers apply their floors)."""
    pods_used = sum(p.used_milli or 0.0 for p in inp.pods)
    apps_used = sum(a.used_milli or 0.0 for a in inp.host_apps)
    system = max(inp.node_used_milli - pods_used - apps_used, 0.0)
    system = max(system, node_reserved_milli(inp.capacity_milli, inp.allocatable_milli, inp.reservation_milli))
    non_be = sum(p.used_milli or 0.0 for p in inp.pods if not p.is_be)
    non_be_apps = sum(a.used_milli or 0.0 for a in inp.host_apps if not a.is_be)
    be = inp.capacity_milli * inp.threshold_percent / 100 - non_be - non_be_apps - system
    if inp.min_percent is not None:
        be = max(be, inp.capacity_milli * inp.min_percent / 100)
    return be


def be_cfs_quota(suppress_milli: float, current_quota_us: int, capacity_milli: float, period_us: int) -> int | None:
    """The besteffort quota to write, or ``None`` to leave it.

    ``quota = suppress * period / 1000`` with a floor of 2000 us. With a quota in place (``current > 0``): a
    change under 1 % of the node's quota is skipped (unless it is the floor), and an increase is capped at
    10 % of the node's quota per tick. From unlimited (-1) the target is written at once.
    """
    target = max(int(suppress_milli * period_us / 1000), MIN_QUOTA_US)
    node_quota = capacity_milli * period_us / 1000
    if current_quota_us > 0:
        if target == current_quota_us:
            return None
        if abs(target - current_quota_us) < QUOTA_DEAD_BAND * node_quota and target != MIN_QUOTA_US:
            return None
        if target > current_quota_us:
            target = min(target, current_quota_us + int(MAX_STEP_UP * node_quota))
    return target


def be_cpuset_size(suppress_milli: float, current_size: int, num_cpus: int) -> int:
    """CPUs for BE: ``ceil(suppress / 1000)``, at least 2, growing by at most ``ceil(10 % of CPUs)`` a tick."""
    want = max(math.ceil(suppress_milli / 1000), MIN_BE_CPUS)
    if 0 < current_size < want:
        want = min(want, current_size + math.ceil(MAX_STEP_UP * num_cpus))
    return min(want, num_cpus)


@dataclass(frozen=True, slots=True)
class CPUInfo:
    cpu: int
    core: int
    socket: int = 0
    numa: int = 0


def choose_be_cpus(count: int, cpus: Sequence[CPUInfo], excluded: Iterable[int] = ()) -> frozenset[int]:
    """``count`` CPUs for BE, spread over NUMA nodes and sockets, whole hyper-thread pairs first.

    Buckets are (NUMA, socket), largest first; each round takes one whole core (its sibling pair) from
    each bucket while at least 2 CPUs are wanted, then single CPUs round-robin. Lower CPU ids first inside
    a bucket, so the choice is stable from tick to tick.
    """
    skip = set(excluded)
    buckets: dict[tuple[int, int], dict[tuple[int, int], list[int]]] = {}
    for info in cpus:
        if info.cpu in skip:
            continue
        cores = buckets.setdefault((info.numa, info.socket), {})
        cores.setdefault((info.socket, info.core), []).append(info.cpu)
    ordered = sorted(buckets.items(), key=lambda kv: (-sum(len(c) for c in kv[1].values()), kv[0]))
    queues = [sorted((sorted(c) for c in cores.values()), key=lambda c: c[0]) for _, cores in ordered]
    chosen: list[int] = []
    turn = 0  # the bucket whose turn it is: singles continue the rotation the pairs left off
    taken_pair = True
    while taken_pair and count - len(chosen) >= 2:
        taken_pair = False
        for i, queue in enumerate(queues):
            need = count - len(chosen)
            for j, core in enumerate(queue):
                if 2 <= len(core) <= need:
                    chosen.extend(core)
                    del queue[j]
                    taken_pair = True
                    turn = i + 1
                    break
    singles = [sorted(cpu for core in queue for cpu in core) for queue in queues]
    while len(chosen) < count and any(singles):
        for k in range(len(singles)):
            single = singles[(turn + k) % len(singles)]
            if single and len(chosen) < count:
                chosen.append(single.pop(0))
    return frozenset(chosen)


def cpuset_write_plan(
    levels: Sequence[Sequence[str]], current: frozenset[int], target: frozenset[int], owner: str
) -> list[ResourceUpdate]:
    """Writes that move ``levels`` (parent first: besteffort, pods, containers) from ``current`` to ``target``
    without a child ever holding a CPU its parent lacks: the union top-down, then the target bottom-up."""
    plan: list[ResourceUpdate] = []
    union = current | target
    if union != current:
        plan += [ResourceUpdate("cpuset.cpus", d, format_cpuset(union), owner) for level in levels for d in level]
    plan += [
        ResourceUpdate("cpuset.cpus", d, format_cpuset(target), owner) for level in reversed(levels) for d in level
    ]
    return plan


def choose_be_cpus_around_bound(
    count: int,
    cpus: Sequence[CPUInfo],
    *,
    excluded: frozenset[int],
    lse: frozenset[int],
    lsr: frozenset[int],
) -> frozenset[int]:
    """``adjustByCPUSet``: BE never runs on LSE CPUs; it shares LSR CPUs in proportion to their count.

    Candidates are every CPU but ``excluded`` (reserved, exclusive system QoS) and ``lse``. Of ``count``,
    the LSR share is ``count * |LSR| // (|LSR| + |LS|)`` picked from the LSR CPUs, the rest from the
    others (LS), each with :func:`choose_be_cpus`. A pool smaller than its share gives nothing, as upstream.
    """
    candidates = [c for c in cpus if c.cpu not in excluded and c.cpu not in lse]
    lsr_cpus = [c for c in candidates if c.cpu in lsr]
    ls_cpus = [c for c in candidates if c.cpu not in lsr]
    total = len(lsr_cpus) + len(ls_cpus)
    if total == 0:
        return frozenset()
    lsr_share = count * len(lsr_cpus) // total
    ls_share = count - lsr_share
    chosen: frozenset[int] = frozenset()
    if lsr_cpus and len(lsr_cpus) >= lsr_share:
        chosen |= choose_be_cpus(lsr_share, lsr_cpus)
    if ls_cpus and len(ls_cpus) >= ls_share:
        chosen |= choose_be_cpus(ls_share, ls_cpus)
    return chosen
