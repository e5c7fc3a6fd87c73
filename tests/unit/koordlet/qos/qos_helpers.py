"""Builders for QoS strategy tests: a plugin context over a states informer, a metric cache and a cgroup
tree (a temp dir or the machine's real one), with the node, pods and NodeSLO a test wants."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry

from koordlet.metriccache import MetricCache
from koordlet.qosmanager import FeatureGates, PluginContext, QOSManager, ResourceExecutor
from koordlet.qosmanager.evictor import PodEvictor
from koordlet.qosmanager.plugins.strategy import Strategy
from koordlet.statesinformer import StatesInformer
from koordlet.system import CgroupFS

NODE = "node-1"


def make_node(
    cpu: str = "2",
    memory: str = "8Gi",
    *,
    allocatable: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    capacity = {"cpu": cpu, "memory": memory}
    return {
        "metadata": {"name": NODE, "annotations": annotations or {}},
        "status": {"capacity": capacity, "allocatable": {**capacity, **(allocatable or {})}},
    }


class PodBuilder:
    """``pod("be-1").be().priority(5000).batch(cpu_request=1000).container("c1", "containerd://abc").build()``"""

    def __init__(self, name: str, uid: str | None = None) -> None:
        self.name = name
        self.uid = uid or f"00000000-0000-0000-0000-{abs(hash(name)) % 10**12:012d}"
        self.kube_qos = "Burstable"
        self.labels: dict[str, str] = {}
        self.annotations: dict[str, str] = {}
        self._priority: int | None = None
        self.containers: list[dict[str, Any]] = []
        self.statuses: list[dict[str, str]] = []
        self.phase = "Running"

    def be(self) -> PodBuilder:
        self.kube_qos = "BestEffort"
        self.labels["koordinator.sh/qosClass"] = "BE"
        return self

    def qos(self, kube_qos: str, koord_qos: str | None = None) -> PodBuilder:
        self.kube_qos = kube_qos
        if koord_qos:
            self.labels["koordinator.sh/qosClass"] = koord_qos
        return self

    def priority(self, value: int) -> PodBuilder:
        self._priority = value
        return self

    def label(self, key: str, value: str) -> PodBuilder:
        self.labels[key] = value
        return self

    def annotation(self, key: str, value: str) -> PodBuilder:
        self.annotations[key] = value
        return self

    def container(
        self,
        name: str,
        container_id: str = "",
        *,
        requests: dict[str, str] | None = None,
        limits: dict[str, str] | None = None,
    ) -> PodBuilder:
        self.containers.append({"name": name, "resources": {"requests": requests or {}, "limits": limits or {}}})
        if container_id:
            self.statuses.append({"name": name, "containerID": container_id})
        return self

    def build(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"nodeName": NODE, "containers": self.containers or [{"name": "main"}]}
        if self._priority is not None:
            spec["priority"] = self._priority
        return {
            "metadata": {
                "name": self.name,
                "namespace": "default",
                "uid": self.uid,
                "labels": self.labels,
                "annotations": self.annotations,
            },
            "spec": spec,
            "status": {"phase": self.phase, "qosClass": self.kube_qos, "containerStatuses": self.statuses},
        }


def pod(name: str, uid: str | None = None) -> PodBuilder:
    return PodBuilder(name, uid)


def threshold_slo(**fields: Any) -> dict[str, Any]:
    """A NodeSLO object with ``resourceUsedThresholdWithBE`` = {enable: true, **fields}."""
    return {"spec": {"resourceUsedThresholdWithBE": {"enable": True, **fields}}}


def make_ctx(
    fs: CgroupFS,
    *,
    clock: Callable[[], float],
    args: dict[str, Any] | None = None,
    evictor: PodEvictor | None = None,
    registry: CollectorRegistry | None = None,
) -> PluginContext:
    informer = StatesInformer(NODE, fs.layout)
    return PluginContext(
        node_name=NODE,
        metric_cache=MetricCache(clock=clock),
        states_informer=informer,
        executor=ResourceExecutor(fs, clock=clock),
        metrics_registry=registry or CollectorRegistry(),
        args=argparse.Namespace(**(args or {})),
        clock=clock,
        evictor=evictor,
    )


class ScriptedEvictionAPI:
    """An Eviction API whose answer per pod name is scripted (201 unless ``statuses`` says e.g. 429 for a
    PodDisruptionBudget); records evictions and events (name, reason, type, message)."""

    def __init__(self, statuses: dict[str, int] | None = None) -> None:
        self.statuses = statuses or {}
        self.evicted: list[str] = []
        self.events: list[tuple[str, str, str, str]] = []

    def evict(self, namespace: str, name: str, uid: str) -> int:
        self.evicted.append(name)
        return self.statuses.get(name, 201)

    def record_event(self, pod: Any, reason: str, message: str, event_type: str) -> None:
        self.events.append((pod.name, reason, event_type, message))


def uid_for(n: int) -> str:
    return f"abcdef00-0000-4000-8000-{n:012d}"


async def run_until_ticked(
    manager: QOSManager,
    gates: FeatureGates,
    ctx: PluginContext,
    *,
    ticks: int = 1,
    until: Callable[[], bool] | None = None,
    timeout: float = 60.0,
) -> None:
    """Run ``manager`` until every enabled strategy that started has ticked ``ticks`` times (and ``until()``,
    when given, holds), then stop it and wait for it to finish. Event-driven: each strategy's ``safe_tick``
    is wrapped to wake this waiter, so the wait does not depend on how busy the machine is; ``timeout``
    (seconds) only bounds a hang. Strategies whose setup failed are not waited for."""
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()
    strategies = [s.plugin for s in manager.enabled(gates) if isinstance(s.plugin, Strategy)]
    for plugin in strategies:
        original = plugin.safe_tick

        def notifying(original: Callable[[], None] = original) -> None:
            try:
                original()
            finally:
                loop.call_soon_threadsafe(woken.set)  # ticks of BLOCKING strategies run in worker threads

        plugin.safe_tick = notifying  # type: ignore[method-assign]
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(gates, ctx, stop))
    task.add_done_callback(lambda _: woken.set())
    failed = {s.name for s in manager.plugins if s.failures}

    def done() -> bool:
        failed.update(s.name for s in manager.plugins if s.failures)
        waiting = [p for p in strategies if p.NAME not in failed and p.ticks < ticks]
        return task.done() or (not waiting and (until is None or until()))

    try:
        async with asyncio.timeout(timeout):
            await asyncio.sleep(0)  # setup runs synchronously in the task's first step
            while not done():
                await woken.wait()
                woken.clear()
    finally:
        stop.set()
        await task
