"""Collectors: read counters from ``/proc`` and cgroups, turn them into rates, append to the metric cache.

Formulas (Koordinator ``metricsadvisor/collectors``):

- node CPU cores = delta(user+nice+system+irq+softirq ticks) / (delta_t x USER_HZ); first sample dropped;
- node memory = MemTotal - MemAvailable;
- pod/container CPU cores = delta(cpuacct.usage ns) / delta_t ns (v2: usage_usec x 1000);
- pod/container memory = inactive_anon + active_anon + unevictable (usage without page cache);
- throttled ratio = delta(nr_throttled) / delta(nr_periods);
- BE: usage = delta(besteffort cpuacct.usage), request = sum of BE pods' batch-cpu requests,
  real-limit = min(#cpus in BE cpuset, quota/period), all in millicores;
- system = max(node - sum(pods), 0) for CPU and memory, from the same tick;
- with page cache (when enabled): node = MemTotal - MemFree, pod = anon + unevictable + file pages.

A counter that goes backwards (cgroup recreated) restarts the delta instead of reporting a negative rate.

One pod's cgroup files that cannot be read (a malformed ``cpuacct.usage``, a file that raises) cost that
pod only: the pod collectors record it in :attr:`TickResult.pod_failures` and go on with the next pod,
so the node's other pods keep their samples (and NodeMetric its ``podsMetric``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from apis.extension import RESOURCE_BATCH_CPU, KubeQOSClass
from koordlet.metriccache import MetricCache, MetricKind
from koordlet.statesinformer import PodMeta
from koordlet.system import CgroupFS, ProcFS

BE_USAGE, BE_REQUEST, BE_REAL_LIMIT = "cpu/usage", "cpu/request", "cpu/real-limit"


@dataclass(slots=True)
class _Counter:
    """Last value of a cumulative counter and when it was read."""

    last: dict[str, tuple[float, float]] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)

    def rate(self, key: str, now: float, value: float) -> float | None:
        """(value - previous) / (now - previous_time), or ``None`` for the first read or a reset."""
        self.seen.add(key)
        previous = self.last.get(key)
        self.last[key] = (now, value)
        if previous is None or now <= previous[0] or value < previous[1]:
            return None
        return (value - previous[1]) / (now - previous[0])

    def sweep(self) -> None:
        """Forget keys not read since the last sweep (pods that went away)."""
        for key in self.last.keys() - self.seen:
            del self.last[key]
        self.seen.clear()


@dataclass(frozen=True, slots=True)
class PodFailure:
    """``collector`` could not read ``pod``'s cgroup files: ``error`` says why."""

    collector: str
    pod: PodMeta
    error: Exception


@dataclass(slots=True)
class TickResult:
    node_cpu: float | None = None
    node_memory: float | None = None
    pods_cpu: float = 0.0
    pods_memory: float = 0.0
    pods_with_cpu: int = 0
    pod_failures: list[PodFailure] = field(default_factory=list)
    """Pods skipped by a collector this tick (the others were collected)."""


class NodeResourceCollector:
    def __init__(self, procfs: ProcFS, cache: MetricCache) -> None:
        self.procfs = procfs
        self.cache = cache
        self._last: tuple[float, int] | None = None

    def collect(self, now: float, result: TickResult) -> None:
        ticks = self.procfs.cpu_ticks()
        if ticks is not None:
            previous, self._last = self._last, (now, ticks.busy)
            if previous is not None and now > previous[0] and ticks.busy >= previous[1]:
                cores = (ticks.busy - previous[1]) / ((now - previous[0]) * self.procfs.clock_ticks)
                self.cache.append(MetricKind.NODE_CPU_USAGE, "", now, cores)
                result.node_cpu = cores
        memory = self.procfs.memory_used_bytes()
        if memory is not None:
            self.cache.append(MetricKind.NODE_MEMORY_USAGE, "", now, float(memory))
            result.node_memory = float(memory)


class PodResourceCollector:
    """Pod and container CPU, memory and throttling, for the pods the states informer knows."""

    def __init__(self, cgroupfs: CgroupFS, cache: MetricCache, *, collect_containers: bool = True) -> None:
        self.cgroupfs = cgroupfs
        self.cache = cache
        self.collect_containers = collect_containers
        self._cpu = _Counter()
        self._periods = _Counter()
        self._throttled = _Counter()

    def _collect_one(
        self, now: float, key: str, rel_dir: str, kinds: tuple[MetricKind, MetricKind, MetricKind]
    ) -> tuple[float | None, float | None]:
        cpu_kind, memory_kind, throttled_kind = kinds
        cpu: float | None = None
        usage_ns = self.cgroupfs.cpu_usage_ns(rel_dir)
        if usage_ns is not None:
            rate = self._cpu.rate(key, now, usage_ns / 1e9)
            if rate is not None:
                cpu = rate
                self.cache.append(cpu_kind, key, now, rate)
        memory: float | None = None
        stat = self.cgroupfs.memory_stat(rel_dir)
        if stat is not None:
            memory = float(stat.usage_without_page_cache)
            self.cache.append(memory_kind, key, now, memory)
        cpu_stat = self.cgroupfs.cpu_stat(rel_dir)
        if cpu_stat is not None:
            periods = self._periods.rate(key, now, cpu_stat.nr_periods)
            throttled = self._throttled.rate(key, now, cpu_stat.nr_throttled)
            if periods is not None and throttled is not None:
                ratio = throttled / periods if periods > 0 else 0.0
                self.cache.append(throttled_kind, key, now, ratio)
        return cpu, memory

    def collect(self, now: float, pods: Iterable[PodMeta], result: TickResult) -> None:
        pod_kinds = (MetricKind.POD_CPU_USAGE, MetricKind.POD_MEMORY_USAGE, MetricKind.POD_CPU_THROTTLED)
        container_kinds = (
            MetricKind.CONTAINER_CPU_USAGE,
            MetricKind.CONTAINER_MEMORY_USAGE,
            MetricKind.CONTAINER_CPU_THROTTLED,
        )
        layout = self.cgroupfs.layout
        for pod in pods:
            try:
                cpu, memory = self._collect_one(now, pod.uid, pod.cgroup_dir, pod_kinds)
                if self.collect_containers:
                    for container in pod.containers:
                        rel = pod.container_dir(layout, container)
                        if rel is not None and container.container_id is not None:
                            self._collect_one(now, container.container_id.id, rel, container_kinds)
            except Exception as err:
                result.pod_failures.append(PodFailure("PodResourceCollector", pod, err))
                continue
            if cpu is not None:
                result.pods_cpu += cpu
                result.pods_with_cpu += 1
            if memory is not None:
                result.pods_memory += memory
        for counter in (self._cpu, self._periods, self._throttled):
            counter.sweep()


class BEResourceCollector:
    def __init__(self, cgroupfs: CgroupFS, cache: MetricCache, *, num_cpus: int) -> None:
        self.cgroupfs = cgroupfs
        self.cache = cache
        self.num_cpus = num_cpus
        self._cpu = _Counter()

    def collect(self, now: float, pods: Iterable[PodMeta]) -> None:
        be_dir = self.cgroupfs.layout.qos_dir(KubeQOSClass.BEST_EFFORT)
        usage_ns = self.cgroupfs.cpu_usage_ns(be_dir)
        if usage_ns is not None:
            rate = self._cpu.rate("be", now, usage_ns / 1e9)
            if rate is not None:
                self.cache.append(MetricKind.NODE_BE, BE_USAGE, now, rate * 1000)
        request = sum(p.total_request(RESOURCE_BATCH_CPU) for p in pods if p.labelled_be)
        self.cache.append(MetricKind.NODE_BE, BE_REQUEST, now, float(request))
        cpuset = self.cgroupfs.cpuset(be_dir)
        limit = float((len(cpuset) if cpuset else self.num_cpus) * 1000)
        quota = self.cgroupfs.cfs_quota(be_dir)
        if quota is not None and quota[0] > 0 and quota[1] > 0:
            limit = min(limit, quota[0] * 1000 / quota[1])
        self.cache.append(MetricKind.NODE_BE, BE_REAL_LIMIT, now, limit)


class PageCacheCollector:
    """Memory usage with page cache (Koordinator ``collectors/pagecache``): node = MemTotal - MemFree; each
    pod = anon + unevictable + active/inactive file (``memory.stat``). Feeds NodeMetric when its
    ``nodeMemoryCollectPolicy`` is ``usageWithPageCache``."""

    def __init__(self, cgroupfs: CgroupFS, procfs: ProcFS, cache: MetricCache) -> None:
        self.cgroupfs = cgroupfs
        self.procfs = procfs
        self.cache = cache

    def collect(self, now: float, pods: Iterable[PodMeta], result: TickResult | None = None) -> None:
        """One tick; a pod whose files cannot be read is added to ``result.pod_failures`` and skipped."""
        node = self.procfs.memory_used_with_page_cache_bytes()
        if node is not None:
            self.cache.append(MetricKind.NODE_MEMORY_USAGE_WITH_PAGE_CACHE, "", now, float(node))
        for pod in pods:
            try:
                stat = self.cgroupfs.memory_stat(pod.cgroup_dir)
            except Exception as err:
                if result is not None:
                    result.pod_failures.append(PodFailure("PageCacheCollector", pod, err))
                continue
            if stat is not None:
                self.cache.append(
                    MetricKind.POD_MEMORY_USAGE_WITH_PAGE_CACHE, pod.uid, now, float(stat.usage_with_page_cache)
                )


class PSICollector:
    """avg10 "some"/"full" of cpu, memory and io pressure for the node and each pod, where present."""

    RESOURCES = ("cpu", "memory", "io")

    def __init__(self, cgroupfs: CgroupFS, procfs: ProcFS, cache: MetricCache) -> None:
        self.cgroupfs = cgroupfs
        self.procfs = procfs
        self.cache = cache

    def collect(self, now: float, pods: Iterable[PodMeta], result: TickResult | None = None) -> None:
        """One tick; a pod whose files cannot be read is added to ``result.pod_failures`` and skipped."""
        for resource in self.RESOURCES:
            for degree, value in (self.procfs.pressure(resource) or {}).items():
                self.cache.append(MetricKind.NODE_PSI, f"{resource}/{degree}", now, value)
        for pod in pods:
            try:
                pressures = [(r, self.cgroupfs.pressure(pod.cgroup_dir, r) or {}) for r in self.RESOURCES]
            except Exception as err:
                if result is not None:
                    result.pod_failures.append(PodFailure("PSICollector", pod, err))
                continue
            for resource, values in pressures:
                for degree, value in values.items():
                    self.cache.append(MetricKind.POD_PSI, f"{pod.uid}/{resource}/{degree}", now, value)
