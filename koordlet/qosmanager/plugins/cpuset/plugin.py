"""CPUSetAllocator: containers run on the CPUs the scheduler bound, or on the shared pool (Koordinator
``pkg/koordlet/runtimehooks/hooks/cpuset``; gate ``CPUSetAllocator``, Beta, on by default).

A new container gets its cpuset at creation through the NRI plugin (:mod:`koordlet.runtimehooks`, the same
:func:`~.policy.container_cpuset`); this reconciler is the repair path: every
``--runtime-hooks-reconcile-interval`` (10 s) and whenever the pod set changes, each container's
``cpuset.cpus`` is set by it and pods with a bound cpuset get ``cpu.cfs_quota_us = -1`` at pod and
container level. Values are written through the executor (v1 and v2 file names; unchanged values are
skipped). The pod-level cpuset is never written, as upstream; the sandbox (pause) container is not
reached because the pod records carry no sandbox id.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from apis.core import boundedjson
from apis.extension.numa import ANNOTATION_NODE_SYSTEM_QOS_RESOURCE
from koordlet.qosmanager.executor import ResourceUpdate
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.flagtypes import positive_seconds
from koordlet.qosmanager.framework import PluginContext, PluginEntry
from koordlet.qosmanager.plugins.cpuset.node_state import NodeCPUState, add_node_state_flags
from koordlet.qosmanager.plugins.cpuset.policy import CPUSetRule, container_cpuset, unset_cfs_quota
from koordlet.qosmanager.plugins.strategy import Strategy, add_flag
from koordlet.statesinformer.informer import RegisterType, StatesInformer
from koordlet.statesinformer.nodetopology import node_reserved_cpus, pools_by_numa, shared_pools

NAME = "CPUSetAllocator"


class CPUSetAllocator(Strategy):
    NAME = NAME
    INTERVAL_FLAG = "runtime_hooks_reconcile_interval"
    DEFAULT_INTERVAL = 10.0

    def __init__(self) -> None:
        super().__init__()
        self.node_state: NodeCPUState | None = None
        self._pods_changed: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def init_flags(self, parser: argparse.ArgumentParser) -> None:
        super().init_flags(parser)
        add_flag(
            parser,
            "--runtime-hooks-reconcile-interval",
            dest="runtime_hooks_reconcile_interval",
            type=positive_seconds,
            default=10.0,
            help="runtime-hook reconcile period: CPUSetAllocator and BatchResource (Go duration or seconds)",
        )
        add_node_state_flags(parser)

    def configure(self, ctx: PluginContext) -> None:
        self.node_state = NodeCPUState.from_context(ctx)
        ctx.states_informer.register_callback(RegisterType.ALL_PODS, NAME, self._on_pods)

    def _on_pods(self, kind: RegisterType, informer: StatesInformer) -> None:
        # Called on the informer's API thread (its watches): wake the loop through the loop itself.
        loop, event = self._loop, self._pods_changed
        if loop is not None and event is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(event.set)

    async def run(self, stop: asyncio.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._pods_changed = asyncio.Event()
        try:
            while not stop.is_set():
                self._pods_changed.clear()
                await self._tick_once()
                waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._pods_changed.wait())]
                try:
                    await asyncio.wait(waiters, timeout=self.interval, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiter in waiters:
                        waiter.cancel()
        finally:
            self._loop = None

    def rule(self) -> CPUSetRule | None:
        """The node-wide inputs; ``None`` until the CPU topology is readable."""
        assert self.node_state is not None
        topology = self.node_state.cpu_topology()
        kubelet = self.node_state.kubelet()
        node = self.ctx.states_informer.node
        annotations = node.annotations if node is not None else {}
        pools = shared_pools(
            topology, self.ctx.states_informer.get_all_pods(), kubelet, node_reserved_cpus(annotations)
        )
        system_qos = ""
        raw = annotations.get(ANNOTATION_NODE_SYSTEM_QOS_RESOURCE)
        if raw:
            with contextlib.suppress(ValueError, AttributeError):
                system_qos = str(boundedjson.loads(raw).get("cpuset") or "")
        return CPUSetRule(tuple(pools_by_numa(topology, pools.ls)), kubelet.policy == "static", system_qos)

    def tick(self) -> None:
        rule = self.rule()
        if rule is None:
            return
        layout = self.ctx.executor.cgroupfs.layout
        plan: list[ResourceUpdate] = []
        for pod in self.ctx.states_informer.get_all_pods():
            cpuset = container_cpuset(pod, rule)
            dirs = [d for c in pod.containers if (d := pod.container_dir(layout, c)) is not None]
            if unset_cfs_quota(pod):
                plan += [ResourceUpdate("cpu.cfs_quota_us", d, "-1", NAME) for d in (pod.cgroup_dir, *dirs)]
            if cpuset:
                plan += [ResourceUpdate("cpuset.cpus", d, cpuset, NAME) for d in dirs]
        self.apply(plan)


ENTRY = PluginEntry(NAME, CPUSetAllocator, KOORDLET_FEATURES[NAME])
