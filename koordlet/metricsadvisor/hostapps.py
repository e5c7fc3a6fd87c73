"""Usage of the host applications a NodeSLO names (Koordinator
``pkg/koordlet/metricsadvisor/collectors/hostapplication``): processes outside pods that run in their own
cgroup, so their usage is reported apart from the system's and the batch calculation can count the
high-priority ones.

Where an application's cgroup is (``GetHostAppCgroupRelativePath``): with ``cgroupPath``, its ``base``
(``CgroupRoot``: the mount root; ``Kubepods``, ``KubepodsBurstable``, ``KubepodsBesteffort``: those QoS
cgroups) joined with ``parentDir`` and ``relativePath``; without it, ``host-latency-sensitive/<name>`` for
LSE/LSR/LS, ``host-best-effort/<name>`` for BE and ``<name>`` otherwise. A path that would leave the cgroup
mount (an absolute path or ``..``) is refused and the application skipped, with one log line.

CPU is the rate of ``cpuacct.usage`` (cores; the first read of an application gives none), memory the
usage without page cache, both stored under the application's name.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterable

from apis.extension import KubeQOSClass
from apis.slo.nodeslo import HostApplicationSpec
from koordlet.metriccache import MetricCache, MetricKind
from koordlet.metricsadvisor.collectors import _Counter
from koordlet.system import CgroupFS
from koordlet.system.errorlog import FailureLog
from koordlet.system.layout import CgroupLayout

log = logging.getLogger(__name__)

_LS = ("LSE", "LSR", "LS")
_BASES = {
    "Kubepods": KubeQOSClass.GUARANTEED,
    "KubepodsBurstable": KubeQOSClass.BURSTABLE,
    "KubepodsBesteffort": KubeQOSClass.BEST_EFFORT,
}


def host_app_cgroup_dir(app: HostApplicationSpec, layout: CgroupLayout) -> str:
    """The application's cgroup relative to each controller's mount. Raises ``ValueError`` for a path
    that leaves the mount."""
    name = app.name or ""
    if app.cgroup_path is None:
        base = "host-latency-sensitive" if app.qos in _LS else "host-best-effort" if app.qos == "BE" else ""
        parts = [base, name]
    else:
        qos = _BASES.get(app.cgroup_path.base or "")
        parts = [
            layout.qos_dir(qos) if qos is not None else "",
            app.cgroup_path.parent_dir or "",
            app.cgroup_path.relative_path or "",
        ]
    for part in parts:
        if part.startswith("/") or ".." in part.split("/") or "\0" in part:
            raise ValueError(f"host application {name!r}: cgroup path {part!r} leaves the cgroup mount")
    joined = posixpath.normpath(posixpath.join(*[p for p in parts if p] or ["."]))
    if joined in (".", "") or joined.startswith(".."):
        raise ValueError(f"host application {name!r}: no cgroup path")
    return joined


class HostAppCollector:
    """Collects the usage of ``hostApplications`` into the metric cache each tick."""

    def __init__(self, cgroupfs: CgroupFS, cache: MetricCache) -> None:
        self.cgroupfs = cgroupfs
        self.cache = cache
        self._cpu = _Counter()
        self.failure_log = FailureLog(log)

    def collect(self, now: float, apps: Iterable[HostApplicationSpec]) -> tuple[float, float]:
        """Collect each application; returns the summed (cores, bytes) of this tick (for system usage)."""
        total_cpu = total_memory = 0.0
        for app in apps:
            if not app.name:
                continue
            try:
                rel = host_app_cgroup_dir(app, self.cgroupfs.layout)
            except ValueError as err:
                self.failure_log.failed(f"host application {app.name}", err)
                continue
            usage_ns = self.cgroupfs.cpu_usage_ns(rel)
            stat = self.cgroupfs.memory_stat(rel)
            if usage_ns is None or stat is None:
                continue  # not there (yet): Koordinator skips it too
            rate = self._cpu.rate(app.name, now, usage_ns / 1e9)
            memory = float(stat.usage_without_page_cache)
            self.cache.append(MetricKind.HOST_APP_MEMORY_USAGE, app.name, now, memory)
            total_memory += memory
            if rate is not None:
                self.cache.append(MetricKind.HOST_APP_CPU_USAGE, app.name, now, rate)
                total_cpu += rate
        self._cpu.sweep()
        return total_cpu, total_memory
