"""The node-wide rules of the hook decisions, taken from where the reconcilers take them.

``BatchResource`` and ``CPUNormalization`` read the merged NodeSLO and the node's annotations
(:func:`~koordlet.qosmanager.plugins.batchresource.policy.batch_rule`); ``CPUSetAllocator`` asks the running
``CPUSetAllocator`` strategy for its rule (the share pools from the CPU topology, the pods and the kubelet's
checkpoint), so the cpuset a container gets at creation is the one the reconciler would write.

The rules are kept between events: :meth:`HookRuleSource.current` returns the last ones while nothing they
are made of has changed (the same node, NodeSLO and pod objects in the informer, which replaces rather than
mutates them, and the same kubelet checkpoint by ``stat``), so a container's decision normally reads no
file and can be answered on the connection's own thread.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

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
    _last: tuple[tuple[object, ...], HookRules] | None = field(default=None, init=False, repr=False)

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

    def _inputs(self) -> tuple[object, ...]:
        """What the rules are made of, cheaply: the informer's objects (compared by identity) and the
        kubelet checkpoint's ``stat`` (the static CPU manager writes it just before it creates a container)."""
        strategy = self.cpuset_strategy
        checkpoint: object = None
        topology_known = False
        if strategy is not None and strategy.node_state is not None:
            topology_known = strategy.node_state.topology is not None
            try:
                st = os.stat(strategy.node_state.state_file)
                checkpoint = (st.st_ino, st.st_mtime_ns, st.st_size)
            except OSError:
                checkpoint = None
        return (self.informer.node, self.informer.node_slo, self.informer.get_all_pods(), checkpoint, topology_known)

    def current(self) -> HookRules | None:
        """The rules computed last, when nothing they are made of has changed since; ``None`` otherwise
        (then call the source, which reads the checkpoint again)."""
        last = self._last
        if last is None:
            return None
        inputs, rules = last
        now = self._inputs()
        same = all(
            a is b or (isinstance(a, tuple) and isinstance(b, tuple) and _same_items(a, b))
            for a, b in zip(inputs, now, strict=True)
        )
        return rules if same else None

    def __call__(self) -> HookRules:
        """The rules now (reads the checkpoint); kept for :meth:`current`. The inputs are taken before the
        computation, so a change meanwhile makes the next :meth:`current` compute again; the CPU topology,
        read once by the computation itself, is taken after it."""
        inputs = self._inputs()
        rules = self._compute()
        self._last = ((*inputs[:-1], self._inputs()[-1]), rules)
        return rules

    def _compute(self) -> HookRules:
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


def _same_items(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """Same length and the same objects (or equal ones, for the checkpoint's stat numbers) at each place."""
    return len(a) == len(b) and all(x is y or (type(x) is int and x == y) for x, y in zip(a, b, strict=True))
