"""``BECPUEvict`` and ``CPUEvict``: two plugins (one per gate) over one policy module.

Every ``--cpu-evict-interval-seconds`` (1 s), outside the ``--cpu-evict-cool-time-seconds`` (20 s) cool-down
(which also runs from start-up, as in Koordinator), decide from the metric cache and evict through the shared
evictor. Both read NodeSLO ``resourceUsedThresholdWithBE`` on every tick.
"""

from __future__ import annotations

import argparse

from koordlet.metriccache import MetricKind
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.flagtypes import non_negative_seconds, positive_seconds
from koordlet.qosmanager.framework import PluginEntry
from koordlet.qosmanager.plugins.allocatable import allocatable_evict_config, allocatable_evict_plan
from koordlet.qosmanager.plugins.cpuevict.policy import (
    ALLOCATABLE_GATE,
    BE_GATE,
    PRIORITY_GATE,
    BECPUEvictConfig,
    BEUsage,
    CPUSnapshot,
    be_allocatable_milli,
    be_cpu_evict_config,
    be_cpu_evict_plan,
    be_cpu_release,
    cpu_evict_config,
    cpu_evict_plan,
)
from koordlet.qosmanager.plugins.eviction import EvictionStrategy
from koordlet.qosmanager.plugins.strategy import add_flag
from koordlet.statesinformer import PodMeta

# the keys of the metrics advisor's BE series (koordlet.metricsadvisor.collectors; same layer, not importable)
BE_USAGE, BE_REQUEST, BE_REAL_LIMIT = "cpu/usage", "cpu/request", "cpu/real-limit"


class CPUEvictStrategy(EvictionStrategy):
    INTERVAL_FLAG = "cpu_evict_interval_seconds"
    COOL_FLAG = "cpu_evict_cool_time_seconds"
    DEFAULT_COOL_SECONDS = 20.0
    COOL_FROM_START = True

    def init_flags(self, parser: argparse.ArgumentParser) -> None:
        super().init_flags(parser)
        add_flag(parser, "--cpu-evict-interval-seconds", type=positive_seconds, default=1.0, help="CPU eviction tick")
        add_flag(
            parser,
            "--cpu-evict-cool-time-seconds",
            type=non_negative_seconds,
            default=20.0,
            help="pause after a CPU eviction",
        )

    def pods_cpu_milli(self) -> tuple[tuple[PodMeta, float | None], ...]:
        cache, max_age = self.ctx.metric_cache, 2 * self.collect_interval
        out = []
        for pod in self.active_pods().values():
            cores = cache.last(MetricKind.POD_CPU_USAGE, pod.uid, max_age)
            out.append((pod, None if cores is None else cores * 1000))
        return tuple(out)


class BECPUEvict(CPUEvictStrategy):
    NAME = BE_GATE

    def be_usage(self, cfg: BECPUEvictConfig) -> tuple[BEUsage | None, BEUsage | None]:
        """(window average, newest within two collect intervals) of the BE series."""
        cache, now = self.ctx.metric_cache, self.ctx.clock()
        stats = [cache.query(MetricKind.NODE_BE, key, now - cfg.window_seconds, now) for key in (BE_USAGE, BE_REQUEST)]
        limit_stats = cache.query(MetricKind.NODE_BE, BE_REAL_LIMIT, now - cfg.window_seconds, now)
        allocatable: float | None = None
        if cfg.by_allocatable:
            node = self.ctx.states_informer.node
            allocatable = be_allocatable_milli(node.allocatable if node else None)
            if allocatable is None:
                return None, None  # no batch-cpu on the node: Koordinator skips (limit -1)
        if any(s is None for s in stats) or (limit_stats is None and allocatable is None):
            return None, None
        usage, request = stats[0], stats[1]
        assert usage is not None and request is not None
        limit_avg = allocatable if allocatable is not None else limit_stats.avg  # type: ignore[union-attr]
        limit_last = allocatable if allocatable is not None else limit_stats.last  # type: ignore[union-attr]
        window = BEUsage(usage.avg, request.avg, limit_avg, count=usage.count)
        newest = None
        if now - usage.last_time <= 2 * self.collect_interval:
            newest = BEUsage(usage.last, request.last, limit_last)
        return window, newest

    def tick(self) -> None:
        cfg = be_cpu_evict_config(
            self.ctx.states_informer.node_slo.resource_used_threshold_with_be, self.collect_interval
        )
        if cfg is None or self.cooling():
            return
        window, newest = self.be_usage(cfg)
        need = be_cpu_release(window, newest, cfg, self.collect_interval)
        if need <= 0:
            return
        plan = be_cpu_evict_plan(CPUSnapshot(self.pods_cpu_milli()), need, cfg)
        if plan is not None:
            self.execute(plan.gate, plan.ordered, plan.need, plan.message)


class CPUEvict(CPUEvictStrategy):
    NAME = PRIORITY_GATE

    def tick(self) -> None:
        cfg = cpu_evict_config(self.ctx.states_informer.node_slo.resource_used_threshold_with_be, self.collect_interval)
        node = self.ctx.states_informer.node
        if cfg is None or node is None or self.cooling():
            return
        now = self.ctx.clock()
        stats = self.ctx.metric_cache.query(MetricKind.NODE_CPU_USAGE, "", now - cfg.window_seconds, now)
        if stats is None or stats.count * self.collect_interval < cfg.window_seconds / 3:
            return
        snap = CPUSnapshot(
            self.pods_cpu_milli(),
            capacity_milli=float(node.capacity.get("cpu", 0)),
            node_used_milli=stats.avg * 1000,
        )
        plan = cpu_evict_plan(snap, cfg)
        if plan is not None:
            self.execute(plan.gate, plan.ordered, plan.need, plan.message)


class CPUAllocatableEvict(CPUEvictStrategy):
    """Evict koord-batch / koord-mid pods while their CPU requests exceed the node's batch-cpu / mid-cpu
    allocatable by more than ``cpuAllocatableEvictThresholdPercent`` (see ``plugins.allocatable``)."""

    NAME = ALLOCATABLE_GATE

    def tick(self) -> None:
        cfg = allocatable_evict_config(self.ctx.states_informer.node_slo.resource_used_threshold_with_be, "cpu")
        node = self.ctx.states_informer.node
        if cfg is None or node is None or self.cooling():
            return
        plan = allocatable_evict_plan(
            self.pods_cpu_milli(), node.allocatable, cfg, resource="cpu", gate=ALLOCATABLE_GATE
        )
        if plan is not None:
            self.execute(plan.gate, plan.ordered, plan.need, plan.message)


BE_ENTRY = PluginEntry(BE_GATE, BECPUEvict, KOORDLET_FEATURES[BE_GATE])
ALLOCATABLE_ENTRY = PluginEntry(ALLOCATABLE_GATE, CPUAllocatableEvict, KOORDLET_FEATURES[ALLOCATABLE_GATE])
PRIORITY_ENTRY = PluginEntry(PRIORITY_GATE, CPUEvict, KOORDLET_FEATURES[PRIORITY_GATE])
