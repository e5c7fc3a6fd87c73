"""The resource executor: applies plans of cgroup writes, validated, deduplicated and audited.

Strategies decide a :class:`ResourceUpdate` plan from a snapshot; only the executor writes. A write is
skipped when the same value was written less than ``force_update_seconds`` ago, or when the file already
holds it (``-1`` and ``max`` compare equal). A missing cgroup or an unsupported file is recorded and
skipped quietly. Every attempted write lands in the audit log.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from koordlet.system import CgroupFS, WriteResult, WriteStatus
from koordlet.system.clock import Clock, wall_clock
from koordlet.system.resources import parse_cpuset

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

    def forget(self, rel_dir_prefix: str) -> None:
        """Drop cache entries of cgroups under a prefix (a pod went away)."""
        for key in [k for k in self._written if k[1].startswith(rel_dir_prefix)]:
            del self._written[key]
