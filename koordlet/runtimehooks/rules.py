"""The node-wide rules of the hook decisions, taken from where the reconcilers take them.

``BatchResource`` and ``CPUNormalization`` read the merged NodeSLO and the node's annotations
(:func:`~koordlet.qosmanager.plugins.batchresource.policy.batch_rule`); ``CPUSetAllocator`` asks the running
``CPUSetAllocator`` strategy for its rule (the share pools from the CPU topology, the pods and the kubelet's
checkpoint), so the cpuset a container gets at creation is the one the reconciler would write.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from koordlet.qosmanager.featuregates import FeatureGates
from koordlet.qosmanager.plugins.batchresource.policy import batch_rule
from koordlet.qosmanager.plugins.cpuset.plugin import CPUSetAllocator
from koordlet.runtimehooks.hooks import CPUSET_ALLOCATOR, DEFAULT_HAMI_CORE_LIBRARY, HookRules
from koordlet.statesinformer import StatesInformer
from koordlet.system.cputopology import TopologyError

log = logging.getLogger("koordlet.nri")


@dataclass(slots=True)
class HookRuleSource:
    """Callable: the rules as they are now. ``strategies`` are the QoS manager's plugin instances."""

    informer: StatesInformer
    gates: FeatureGates
    cpuset_strategy: CPUSetAllocator | None = None
    cgroup_v2: bool = False
    hami_core_library: str = DEFAULT_HAMI_CORE_LIBRARY

    @classmethod
    def of(
        cls,
        informer: StatesInformer,
        gates: FeatureGates,
        strategies: Iterable[object],
        *,
        cgroup_v2: bool = False,
        hami_core_library: str = DEFAULT_HAMI_CORE_LIBRARY,
    ) -> HookRuleSource:
        cpuset = next((s for s in strategies if isinstance(s, CPUSetAllocator)), None)
        return cls(informer, gates, cpuset, cgroup_v2, hami_core_library)

    def __call__(self) -> HookRules:
        node = self.informer.node
        batch = batch_rule(self.informer.node_slo, node.annotations if node is not None else {})
        cpuset = None
        strategy = self.cpuset_strategy
        if self.gates.enabled(CPUSET_ALLOCATOR) and strategy is not None and strategy.node_state is not None:
            try:
                cpuset = strategy.rule()
            except TopologyError as err:
                log.debug("no cpuset decisions at creation yet: %s", err)
        return HookRules(
            self.gates,
            batch=batch,
            cpuset=cpuset,
            normalization_ratio=batch.normalization_ratio,
            node_slo=self.informer.node_slo,
            node_memory_allocatable=node.allocatable.get("memory", 0) if node is not None else 0,
            cgroup_v2=self.cgroup_v2,
            hami_core_library=self.hami_core_library,
        )
