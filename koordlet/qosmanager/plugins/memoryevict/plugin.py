"""``BEMemoryEvict`` and ``MemoryEvict``: two plugins (one per gate) over one policy module.

Every ``--memory-evict-interval-seconds`` (1 s): if NodeSLO ``resourceUsedThresholdWithBE.enable`` is on and
the last eviction is more than ``--memory-evict-cool-time-seconds`` (4 s) ago, take node memory used (the
newest sample within two collect intervals) and the pods' memory, decide, and evict through the shared
evictor.
"""

from __future__ import annotations

import argparse

from koordlet.metriccache import MetricKind
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.flagtypes import non_negative_seconds, positive_seconds
from koordlet.qosmanager.framework import PluginEntry
from koordlet.qosmanager.plugins.allocatable import allocatable_evict_config, allocatable_evict_plan
from koordlet.qosmanager.plugins.eviction import EvictionStrategy
from koordlet.qosmanager.plugins.memoryevict.policy import (
    ALLOCATABLE_GATE,
    BE_GATE,
    PRIORITY_GATE,
    EvictPlan,
    MemoryEvictConfig,
    MemorySnapshot,
    be_memory_evict_plan,
    memory_evict_config,
    memory_evict_plan,
)
from koordlet.qosmanager.plugins.strategy import add_flag


class MemoryEvictStrategy(EvictionStrategy):
    INTERVAL_FLAG = "memory_evict_interval_seconds"
    COOL_FLAG = "memory_evict_cool_time_seconds"
    DEFAULT_COOL_SECONDS = 4.0

    def init_flags(self, parser: argparse.ArgumentParser) -> None:
        super().init_flags(parser)
        add_flag(
            parser, "--memory-evict-interval-seconds", type=positive_seconds, default=1.0, help="memory eviction tick"
        )
        add_flag(
            parser,
            "--memory-evict-cool-time-seconds",
            type=non_negative_seconds,
            default=4.0,
            help="pause after a memory eviction",
        )

    def snapshot(self) -> MemorySnapshot | None:
        informer, cache = self.ctx.states_informer, self.ctx.metric_cache
        node = informer.node
        max_age = 2 * self.collect_interval
        used = cache.last(MetricKind.NODE_MEMORY_USAGE, "", max_age)
        if node is None or used is None or node.capacity.get("memory", 0) <= 0:
            return None
        pods = tuple(
            (pod, cache.last(MetricKind.POD_MEMORY_USAGE, pod.uid, max_age)) for pod in self.active_pods().values()
        )
        return MemorySnapshot(float(node.capacity["memory"]), used, pods)

    def decide(self, snap: MemorySnapshot, cfg: MemoryEvictConfig) -> EvictPlan | None:
        raise NotImplementedError

    def tick(self) -> None:
        cfg = memory_evict_config(self.ctx.states_informer.node_slo.resource_used_threshold_with_be)
        if cfg is None or self.cooling():
            return
        snap = self.snapshot()
        if snap is None:
            return
        plan = self.decide(snap, cfg)
        if plan is not None:
            self.execute(plan.gate, plan.ordered, plan.need, plan.message)


class BEMemoryEvict(MemoryEvictStrategy):
    NAME = BE_GATE

    def decide(self, snap: MemorySnapshot, cfg: MemoryEvictConfig) -> EvictPlan | None:
        return be_memory_evict_plan(snap, cfg)


class MemoryEvict(MemoryEvictStrategy):
    NAME = PRIORITY_GATE

    def decide(self, snap: MemorySnapshot, cfg: MemoryEvictConfig) -> EvictPlan | None:
        return memory_evict_plan(snap, cfg)


class MemoryAllocatableEvict(MemoryEvictStrategy):
    """Evict koord-batch / koord-mid pods while their memory requests exceed the node's batch-memory /
    mid-memory allocatable by more than ``memoryAllocatableEvictThresholdPercent``."""

    NAME = ALLOCATABLE_GATE

    def tick(self) -> None:
        slo = self.ctx.states_informer.node_slo.resource_used_threshold_with_be
        cfg = allocatable_evict_config(slo, "memory")
        node = self.ctx.states_informer.node
        if cfg is None or node is None or self.cooling():
            return
        cache, max_age = self.ctx.metric_cache, 2 * self.collect_interval
        pods = tuple(
            (pod, cache.last(MetricKind.POD_MEMORY_USAGE, pod.uid, max_age)) for pod in self.active_pods().values()
        )
        plan = allocatable_evict_plan(pods, node.allocatable, cfg, resource="memory", gate=ALLOCATABLE_GATE)
        if plan is not None:
            self.execute(plan.gate, plan.ordered, plan.need, plan.message)


BE_ENTRY = PluginEntry(BE_GATE, BEMemoryEvict, KOORDLET_FEATURES[BE_GATE])
ALLOCATABLE_ENTRY = PluginEntry(ALLOCATABLE_GATE, MemoryAllocatableEvict, KOORDLET_FEATURES[ALLOCATABLE_GATE])
PRIORITY_ENTRY = PluginEntry(PRIORITY_GATE, MemoryEvict, KOORDLET_FEATURES[PRIORITY_GATE])
