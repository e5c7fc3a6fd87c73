"""``ColdPageCollector``: cold page cache of the node, pods and containers from kidled (Koordinator
``metricsadvisor/collectors/coldmemoryresource/cold_page_kidled.go``), every ``--coldpage-collector-interval``
(5 s).

At start it turns kidled on (scan period 5 s, ``use_hierarchy`` 1). Each pass stores, per object:

- the cold page bytes (``memory.idle_page_stats``, :func:`koordlet.system.kidled.cold_page_bytes`);
- memory used with hot page cache (node and pods): node ``MemTotal - MemFree - cold``; a pod its usage with
  page cache (``memory.stat``) ``- cold``.

The NodeMetric reporter reports the latter as memory when the NodeMetric's ``nodeMemoryCollectPolicy`` is
``usageWithHotPageCache`` (as Koordinator does once the collector runs). An object whose file cannot be read
is skipped (logged at debug level); a malformed file counts as a collector error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable

from koordlet.metriccache import MetricCache, MetricKind
from koordlet.statesinformer import PodMeta
from koordlet.system import CgroupFS, ProcFS
from koordlet.system.clock import Clock
from koordlet.system.kidled import IdlePageStatsError, Kidled, cold_page_bytes, parse_idle_page_stats

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_SECONDS = 5.0


class ColdPageCollector:
    def __init__(
        self,
        cgroupfs: CgroupFS,
        procfs: ProcFS,
        cache: MetricCache,
        pods: Callable[[], Iterable[PodMeta]],
        *,
        kidled: Kidled,
        clock: Clock,
    ) -> None:
        self.cgroupfs = cgroupfs
        self.procfs = procfs
        self.cache = cache
        self.pods = pods
        self.kidled = kidled
        self.clock = clock
        self.errors = 0

    def cold_bytes(self, rel: str) -> int | None:
        text = self.cgroupfs.read_raw("memory.idle_page_stats", rel)
        return None if text is None else cold_page_bytes(parse_idle_page_stats(text))

    def collect_once(self) -> int:
        """One pass; returns how many objects were stored."""
        now = self.clock()
        stored = 0
        cold = self.cold_bytes("")
        info = self.procfs.meminfo()
        if cold is not None and info and "MemTotal" in info and "MemFree" in info:
            self.cache.append(MetricKind.NODE_COLD_PAGE_SIZE, "", now, float(cold))
            hot = info["MemTotal"] - info["MemFree"] - cold
            self.cache.append(MetricKind.NODE_MEMORY_WITH_HOT_PAGE, "", now, float(max(hot, 0)))
            stored += 1
        layout = self.cgroupfs.layout
        for pod in self.pods():
            stored += self._object(pod.cgroup_dir, pod.uid, now, MetricKind.POD_COLD_PAGE_SIZE, pod=True)
            for container in pod.containers:
                rel = pod.container_dir(layout, container)
                if rel is not None and container.container_id is not None:
                    key = container.container_id.id
                    stored += self._object(rel, key, now, MetricKind.CONTAINER_COLD_PAGE_SIZE, pod=False)
        return stored

    def _object(self, rel: str, key: str, now: float, kind: MetricKind, *, pod: bool) -> int:
        try:
            cold = self.cold_bytes(rel)
        except IdlePageStatsError as err:
            self.errors += 1
            log.debug("ColdPageCollector: %s: %s", rel, err)
            return 0
        stat = self.cgroupfs.memory_stat(rel)
        if cold is None or stat is None:
            return 0
        self.cache.append(kind, key, now, float(cold))
        if pod:
            hot = max(stat.usage_with_page_cache - cold, 0)
            self.cache.append(MetricKind.POD_MEMORY_WITH_HOT_PAGE, key, now, float(hot))
        return 1

    async def run(self, stop: asyncio.Event, *, interval: float = DEFAULT_INTERVAL_SECONDS) -> None:
        try:
            self.kidled.start()
        except OSError as err:
            log.warning("ColdPageCollector: cannot start kidled: %s; collecting what the kernel already scans", err)
        while not stop.is_set():
            try:
                self.collect_once()
            except Exception as err:  # a collector never stops the agent
                self.errors += 1
                log.warning("ColdPageCollector: %s", err)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval)
