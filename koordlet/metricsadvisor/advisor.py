"""The metrics advisor: runs the collectors every collect interval, and answers usage queries."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from apis.slo.nodeslo import HostApplicationSpec
from koordlet.metriccache import MetricCache, MetricKind, WindowStats
from koordlet.metricsadvisor.collectors import (
    BEResourceCollector,
    NodeResourceCollector,
    PageCacheCollector,
    PodResourceCollector,
    PSICollector,
    TickResult,
)
from koordlet.metricsadvisor.hostapps import HostAppCollector
from koordlet.statesinformer import PodMeta
from koordlet.system import CgroupFS, ProcFS
from koordlet.system.clock import Clock, wall_clock
from koordlet.system.errorlog import FailureLog

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AdvisorOptions:
    collect_interval_seconds: float = 1.0
    """``--collect-res-used-interval``."""
    psi_interval_seconds: float = 10.0
    enable_psi: bool = False
    collect_containers: bool = True
    gc_interval_seconds: float = 60.0
    page_cache: Callable[[], bool] | None = None
    """Asked each tick: collect memory with page cache? (``--enable-pagecache-collector``, or a NodeMetric
    spec asking for ``usageWithPageCache``); ``None`` = never."""
    host_applications: Callable[[], Sequence[HostApplicationSpec]] | None = None
    """Asked each tick: the NodeSLO's ``hostApplications`` (their usage is collected and taken out of the
    system usage, as Koordinator does); ``None`` = none."""


class MetricsAdvisor:
    """Collects node, pod/container, BE, system (and PSI) usage into ``cache``.

    ``pods`` returns the current pod list (the states informer's ``get_all_pods``).
    """

    def __init__(
        self,
        cgroupfs: CgroupFS,
        procfs: ProcFS,
        cache: MetricCache,
        pods: Callable[[], Iterable[PodMeta]],
        *,
        options: AdvisorOptions | None = None,
        clock: Clock = wall_clock,
    ) -> None:
        self.options = options or AdvisorOptions()
        self.cache = cache
        self.pods = pods
        self.clock = clock
        self.node = NodeResourceCollector(procfs, cache)
        self.pod = PodResourceCollector(cgroupfs, cache, collect_containers=self.options.collect_containers)
        self.be = BEResourceCollector(cgroupfs, cache, num_cpus=procfs.num_cpus())
        self.psi = PSICollector(cgroupfs, procfs, cache)
        self.page_cache = PageCacheCollector(cgroupfs, procfs, cache)
        self.host_apps = HostAppCollector(cgroupfs, cache)
        self.page_cache_wanted = self.options.page_cache or (lambda: False)
        self.ticks = 0
        self.errors = 0
        self.failure_log = FailureLog(log)
        self._last_psi = float("-inf")
        self._last_gc = float("-inf")

    def collect_once(self, now: float | None = None) -> TickResult:
        """One tick of every collector, then the cache's "collected" signal (``notify_collected(now)``) so
        subscribers (CPUSuppress) decide on this tick's samples at once. Exceptions are counted and logged,
        never raised; one pod's unreadable cgroup files cost that pod's samples only (each such pod is
        counted and logged, at most once a minute per pod and collector)."""
        now = self.clock() if now is None else now
        pods = list(self.pods())
        result = TickResult()
        host_usage = [0.0, 0.0]

        def host_apps() -> None:
            listed = self.options.host_applications
            if listed is not None:
                host_usage[:] = self.host_apps.collect(now, listed())

        steps: tuple[tuple[str, Callable[[], None]], ...] = (
            ("NodeResourceCollector", lambda: self.node.collect(now, result)),
            ("PodResourceCollector", lambda: self.pod.collect(now, pods, result)),
            ("BEResourceCollector", lambda: self.be.collect(now, pods)),
            (
                "PageCacheCollector",
                lambda: self.page_cache.collect(now, pods, result) if self.page_cache_wanted() else None,
            ),
            ("HostAppCollector", host_apps),
        )
        for name, step in steps:
            try:
                step()
            except Exception as err:
                self.errors += 1
                self.failure_log.failed(name, err)
            else:
                self.failure_log.succeeded(name)
        if result.node_cpu is not None:
            system_cpu = max(result.node_cpu - result.pods_cpu - host_usage[0], 0.0)
            self.cache.append(MetricKind.SYS_CPU_USAGE, "", now, system_cpu)
        if result.node_memory is not None:
            system_memory = max(result.node_memory - result.pods_memory - host_usage[1], 0.0)
            self.cache.append(MetricKind.SYS_MEMORY_USAGE, "", now, system_memory)
        if self.options.enable_psi and now - self._last_psi >= self.options.psi_interval_seconds:
            self._last_psi = now
            try:
                self.psi.collect(now, pods, result)
            except Exception as err:
                self.errors += 1
                self.failure_log.failed("PSICollector", err)
        for failure in result.pod_failures:
            self.errors += 1
            pod = failure.pod
            what = f"{failure.collector} for pod {pod.namespace}/{pod.name} ({pod.uid})"
            self.failure_log.failed(what, failure.error)
        if now - self._last_gc >= self.options.gc_interval_seconds:
            self._last_gc = now
            self.cache.gc()
        self.ticks += 1
        self.cache.notify_collected(now)
        return result

    async def run(self, stop: asyncio.Event) -> None:
        interval = self.options.collect_interval_seconds
        while not stop.is_set():
            started = self.clock()
            self.collect_once(started)
            delay = max(interval - (self.clock() - started), 0.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=delay)


_NODE_KINDS = {
    "cpu": MetricKind.NODE_CPU_USAGE,
    "memory": MetricKind.NODE_MEMORY_USAGE,
    "memoryWithPageCache": MetricKind.NODE_MEMORY_USAGE_WITH_PAGE_CACHE,
    "memoryWithHotPage": MetricKind.NODE_MEMORY_WITH_HOT_PAGE,
}
_SYS_KINDS = {"cpu": MetricKind.SYS_CPU_USAGE, "memory": MetricKind.SYS_MEMORY_USAGE}
_POD_KINDS = {
    "cpu": MetricKind.POD_CPU_USAGE,
    "memory": MetricKind.POD_MEMORY_USAGE,
    "memoryWithPageCache": MetricKind.POD_MEMORY_USAGE_WITH_PAGE_CACHE,
    "memoryWithHotPage": MetricKind.POD_MEMORY_WITH_HOT_PAGE,
}
_HOT_PAGE = "memoryWithHotPage"
"""Memory with hot page cache (ColdPageCollector); until it has samples, the default memory stands in."""


class CacheUsageSource:
    """The statesinformer's ``UsageSource`` over the metric cache (cpu in cores, memory in bytes;
    ``memoryWithPageCache`` for node and pods)."""

    def __init__(self, cache: MetricCache) -> None:
        self.cache = cache

    def node_usage(self, resource: str, start: float, end: float) -> WindowStats | None:
        found = self.cache.query(_NODE_KINDS[resource], "", start, end)
        if found is None and resource == _HOT_PAGE:  # no cold page collector: the default memory (Koordinator)
            return self.cache.query(_NODE_KINDS["memory"], "", start, end)
        return found

    def system_usage(self, resource: str, start: float, end: float) -> WindowStats | None:
        return self.cache.query(_SYS_KINDS[resource], "", start, end)

    def host_app_usage(self, name: str, resource: str, start: float, end: float) -> WindowStats | None:
        kind = MetricKind.HOST_APP_CPU_USAGE if resource == "cpu" else MetricKind.HOST_APP_MEMORY_USAGE
        return self.cache.query(kind, name, start, end)

    def pod_usage(self, pod_uid: str, resource: str, start: float, end: float) -> WindowStats | None:
        found = self.cache.query(_POD_KINDS[resource], pod_uid, start, end)
        if found is None and resource == _HOT_PAGE:
            return self.cache.query(_POD_KINDS["memory"], pod_uid, start, end)
        return found
