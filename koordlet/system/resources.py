"""cgroup v1 ↔ v2 file mapping and unit conversions (Koordinator's ``cgroup_resource.go`` registry).

A resource is always named after its v1 file (``cpu.cfs_quota_us``); :data:`RESOURCES` says where it lives
on v1 (controller) and which v2 file holds it. Conversions are pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from apis.extension import numa

MAX_CPU_SHARES: Final = 262144
MIN_CPU_SHARES: Final = 2
MAX_CPU_WEIGHT: Final = 10000
MIN_CPU_WEIGHT: Final = 1
DEFAULT_CFS_PERIOD_US: Final = 100000


@dataclass(frozen=True, slots=True)
class CgroupResource:
    """One cgroup knob. ``v2_file`` is ``None`` when v2 has no equivalent (reads return None)."""

    name: str
    v1_subsystem: str
    v2_file: str | None
    valid_range: tuple[int, int] | None = None


def _r(name: str, subsystem: str, v2: str | None, valid: tuple[int, int] | None = None) -> CgroupResource:
    return CgroupResource(name, subsystem, v2, valid)


RESOURCES: Final[dict[str, CgroupResource]] = {
    r.name: r
    for r in (
        _r("cpu.cfs_quota_us", "cpu", "cpu.max", (-1, 2**63 - 1)),
        _r("cpu.cfs_period_us", "cpu", "cpu.max", (1000, 1_000_000)),
        _r("cpu.shares", "cpu", "cpu.weight", (MIN_CPU_SHARES, MAX_CPU_SHARES)),
        _r("cpu.cfs_burst_us", "cpu", "cpu.max.burst", (0, 100_000_000)),
        _r("cpu.stat", "cpu", "cpu.stat"),
        _r("cpu.bvt_warp_ns", "cpu", "cpu.bvt_warp_ns", (-1, 2)),
        _r("cpu.idle", "cpu", "cpu.idle", (0, 1)),
        _r("cpuacct.usage", "cpuacct", "cpu.stat"),
        _r("cpuacct.stat", "cpuacct", "cpu.stat"),
        _r("cpu.pressure", "cpuacct", "cpu.pressure"),
        _r("memory.pressure", "cpuacct", "memory.pressure"),
        _r("io.pressure", "cpuacct", "io.pressure"),
        _r("tasks", "cpu", "cgroup.threads"),
        _r("cgroup.procs", "cpu", "cgroup.procs"),
        _r("cpuset.cpus", "cpuset", "cpuset.cpus"),
        _r("cpuset.mems", "cpuset", "cpuset.mems"),
        _r("memory.limit_in_bytes", "memory", "memory.max", (-1, 2**63 - 1)),
        _r("memory.usage_in_bytes", "memory", "memory.current"),
        _r("memory.stat", "memory", "memory.stat"),
        _r("memory.numa_stat", "memory", "memory.numa_stat"),
        _r("memory.min", "memory", "memory.min", (0, 2**63 - 1)),
        _r("memory.low", "memory", "memory.low", (0, 2**63 - 1)),
        _r("memory.high", "memory", "memory.high", (0, 2**63 - 1)),
        _r("memory.oom.group", "memory", "memory.oom.group", (0, 1)),
        _r("memory.priority", "memory", "memory.priority", (0, 12)),
        _r("memory.use_priority_oom", "memory", "memory.use_priority_oom", (0, 1)),
        _r("memory.wmark_ratio", "memory", "memory.wmark_ratio", (0, 100)),
        _r("memory.wmark_scale_factor", "memory", "memory.wmark_scale_factor", (1, 1000)),
        _r("memory.wmark_min_adj", "memory", "memory.wmark_min_adj", (-25, 50)),
        _r("memory.idle_page_stats", "memory", None),
        # blkio: "MAJ:MIN value" lines, one device per write (v1 throttles, Anolis iocost; v2 io.*)
        _r("blkio.throttle.read_iops_device", "blkio", None),
        _r("blkio.throttle.write_iops_device", "blkio", None),
        _r("blkio.throttle.read_bps_device", "blkio", None),
        _r("blkio.throttle.write_bps_device", "blkio", None),
        _r("blkio.cost.weight", "blkio", None),
        _r("blkio.cost.qos", "blkio", None),
        _r("blkio.cost.model", "blkio", None),
        _r("io.max", "blkio", "io.max"),
        _r("io.weight", "blkio", "io.weight"),
        _r("io.cost.qos", "blkio", "io.cost.qos"),
        _r("io.cost.model", "blkio", "io.cost.model"),
    )
}


def shares_to_weight(shares: int) -> int:
    """``cpu.shares`` → ``cpu.weight``: ``1 + (s-2)*9999/262142`` (integer), clamped to [1, 10000]."""
    shares = min(max(shares, MIN_CPU_SHARES), MAX_CPU_SHARES)
    return min(max(1 + (shares - 2) * 9999 // 262142, MIN_CPU_WEIGHT), MAX_CPU_WEIGHT)


def weight_to_shares(weight: int) -> int:
    """``cpu.weight`` → ``cpu.shares``: ``(w-1)*262142/9999 + 2`` (integer), clamped to [2, 262144]."""
    weight = min(max(weight, MIN_CPU_WEIGHT), MAX_CPU_WEIGHT)
    return min(max((weight - 1) * 262142 // 9999 + 2, MIN_CPU_SHARES), MAX_CPU_SHARES)


def milli_cpu_to_shares(milli: int) -> int:
    """Koordinator's (and the kubelet's) ``MilliCPUToShares``: ``milli * 1024 / 1000`` (integer division)
    clamped to [2, 262144]; 0 or less gives 2."""
    if milli <= 0:
        return MIN_CPU_SHARES
    return min(max(milli * 1024 // 1000, MIN_CPU_SHARES), MAX_CPU_SHARES)


def parse_cpu_max(text: str) -> tuple[int, int]:
    """``cpu.max`` (``"max 100000"`` / ``"50000 100000"``) → (quota µs, -1 for max; period µs)."""
    fields = text.split()
    quota = -1 if fields[0] == "max" else int(fields[0])
    period = int(fields[1]) if len(fields) > 1 else DEFAULT_CFS_PERIOD_US
    return quota, period


def format_cpu_max(quota: int, period: int) -> str:
    return f"{'max' if quota < 0 else quota} {period}"


def parse_limit(text: str) -> int:
    """``memory.max`` / ``memory.limit_in_bytes`` / quota: ``max`` (or a huge v1 value stays) → -1 for max."""
    text = text.strip()
    return -1 if text == "max" else int(text)


def format_v2_limit(value: int) -> str:
    return "max" if value < 0 else str(value)


def parse_flat_keyed_raw(text: str) -> dict[str, str]:
    """``key value`` lines → dict of strings (convert only the keys you need; memory.stat has ~35)."""
    return dict(line.split(" ", 1) for line in text.splitlines() if " " in line)


def parse_flat_keyed(text: str) -> dict[str, int]:
    """``key value`` lines (``cpu.stat``, ``memory.stat``) → dict; malformed lines are skipped."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        try:
            out[key] = int(value)
        except ValueError:
            continue
    return out


def parse_cpuset(text: str) -> frozenset[int]:
    """``"0-3,8,10-11"`` → {0, 1, 2, 3, 8, 10, 11}. Raises ``ValueError`` on a malformed list or a CPU id
    beyond :data:`~apis.extension.numa.MAX_CPUS` (refused before expansion)."""
    return numa.parse_cpuset(text)


def format_cpuset(cpus: frozenset[int] | set[int]) -> str:
    """{0, 1, 2, 3, 8} → ``"0-3,8"``."""
    out: list[str] = []
    ordered = sorted(cpus)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)
