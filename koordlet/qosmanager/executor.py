"""The resource executor: applies plans of cgroup writes, validated, deduplicated and audited.

Strategies decide a :class:`ResourceUpdate` plan from a snapshot; only the executor writes. A write is
skipped when the same value was written less than ``force_update_seconds`` ago, or when the file already
holds it (``-1`` and ``max`` compare equal). A missing cgroup or an unsupported file is recorded and
skipped quietly. Every attempted write lands in the audit log.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from koordlet.system import CgroupFS, WriteResult, WriteStatus
from koordlet.system.clock import Clock, wall_clock
from koordlet.system.resources import format_cpuset, parse_cpuset

audit_log = logging.getLogger("koordlet.audit")


@dataclass(frozen=True, slots=True)
class ResourceUpdate:
    """Write ``value`` (v1 semantics) to ``resource`` of cgroup ``rel_dir``; ``owner`` names the plugin."""

    resource: str
    rel_dir: str
    value: str
    owner: str = ""


@dataclass(frozen=True, slots=True)
class AuditEvent:
    time: float
    owner: str
    resource: str
    rel_dir: str
    old: str | None
    new: str
    status: str
    message: str = ""


@dataclass(frozen=True, slots=True)
class ExecutorOptions:
    force_update_seconds: float = 60.0
    """``--resource-force-update-seconds``: rewrite an unchanged value this often (someone may reset it)."""
    audit_capacity: int = 4096


def _normalize(resource: str, value: str) -> str:
    value = value.strip()
    if resource == "cpuset.cpus":
        return ",".join(str(c) for c in sorted(parse_cpuset(value)))
    if value == "max" or value.startswith("max "):
        return "-1"
    return value.split()[0] if value else value


_MERGE_MAX = frozenset({"cpu.cfs_quota_us", "memory.limit_in_bytes", "memory.min", "memory.low", "memory.high"})
"""Resources whose parent may be widened to ``max(old, new)`` first (-1 = unlimited is the largest)."""


def merged_value(resource: str, old: str, new: str) -> str | None:
    """The value a parent takes before its children change: ``max(old, new)`` (``-1`` = unlimited wins), or
    ``union(old, new)`` for ``cpuset.cpus``; ``None`` if the resource does not merge."""
    if resource == "cpuset.cpus":
        return format_cpuset(parse_cpuset(old) | parse_cpuset(new))
    if resource not in _MERGE_MAX:
        return None
    a, b = int(_normalize(resource, old)), int(_normalize(resource, new))
    return "-1" if a < 0 or b < 0 else str(max(a, b))


class ResourceExecutor:
    def __init__(
        self, cgroupfs: CgroupFS, *, options: ExecutorOptions | None = None, clock: Clock = wall_clock
    ) -> None:
        self.cgroupfs = cgroupfs
        self.options = options or ExecutorOptions()
        self.clock = clock
        self._written: dict[tuple[str, str], tuple[str, float]] = {}
        self.audit: deque[AuditEvent] = deque(maxlen=self.options.audit_capacity)
        self.skipped = 0

    def _current(self, update: ResourceUpdate) -> str | None:
        raw = self.cgroupfs.read_raw(update.resource, update.rel_dir)
        if raw is None:
            return None
        if update.resource == "cpu.shares" and self.cgroupfs.version == 2:
            shares = self.cgroupfs.cpu_shares(update.rel_dir)
            return None if shares is None else str(shares)
        return raw.strip()

    def apply(self, plan: Iterable[ResourceUpdate]) -> list[WriteResult]:
        """Apply the plan in order; returns one result per update (``WRITTEN`` also for skips)."""
        results: list[WriteResult] = []
        now = self.clock()
        for update in plan:
            key = (update.resource, update.rel_dir)
            want = _normalize(update.resource, update.value) if update.value.strip() else ""
            cached = self._written.get(key)
            if cached is not None and cached[0] == want and now - cached[1] < self.options.force_update_seconds:
                self.skipped += 1
                results.append(WriteResult(WriteStatus.WRITTEN, message="unchanged (cached)"))
                continue
            old = self._current(update)
            if old is not None and cached is None and _normalize(update.resource, old) == want:
                self._written[key] = (want, now)
                self.skipped += 1
                results.append(WriteResult(WriteStatus.WRITTEN, message="unchanged (file)"))
                continue
            result = self.cgroupfs.write(update.resource, update.rel_dir, update.value)
            if result.status is WriteStatus.WRITTEN:
                self._written[key] = (want, now)
            event = AuditEvent(
                now,
                update.owner,
                update.resource,
                update.rel_dir,
                old,
                update.value,
                result.status.value,
                result.message,
            )
            self.audit.append(event)
            level = logging.DEBUG if result.ignorable else logging.INFO
            audit_log.log(
                level,
                "%s %s/%s %s -> %s: %s",
                update.owner,
                update.rel_dir,
                update.resource,
                old,
                update.value,
                result.status.value,
            )
            results.append(result)
        return results

    def apply_leveled(self, levels: Sequence[Sequence[ResourceUpdate]]) -> list[WriteResult]:
        """Koordinator's ``LeveledUpdateBatch``: ``levels`` is ordered parent first (QoS, pods, containers).

        Pass 1 walks top-down and widens each mergeable resource to ``max(old, new)`` (cpusets to the union),
        so a parent is never tighter than a child mid-update (cgroup v1 refuses a child quota above its
        parent's and a cpuset outside it). Pass 2 walks bottom-up and writes the exact values.
        """
        now = self.clock()
        for level in levels:
            widen: list[ResourceUpdate] = []
            for update in level:
                cached = self._written.get((update.resource, update.rel_dir))
                want = _normalize(update.resource, update.value)
                if cached is not None and cached[0] == want and now - cached[1] < self.options.force_update_seconds:
                    continue
                old = self._current(update)
                if old is None or not old.strip():
                    continue
                merged = merged_value(update.resource, old, update.value)
                if merged is not None and _normalize(update.resource, merged) != _normalize(update.resource, old):
                    widen.append(replace(update, value=merged))
            self.apply(widen)
        results: list[WriteResult] = []
        for level in reversed(levels):
            results.extend(self.apply(level))
        return results

    def forget(self, rel_dir_prefix: str) -> None:
        """Drop cache entries of cgroups under a prefix (a pod went away)."""
        for key in [k for k in self._written if k[1].startswith(rel_dir_prefix)]:
            del self._written[key]
