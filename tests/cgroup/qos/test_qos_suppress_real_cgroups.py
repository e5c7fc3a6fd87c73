"""CPUSuppress and CgroupReconcile against the machine's real cgroup v1 controllers (root). Marked ``cgroup``.

Each test builds its own kubepods hierarchy under a unique dir of every controller, runs real processes in
it, and removes it all even when the test fails.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from koordlet_real_cgroups import BURN, ROOT, real_pods, writable_cgroup_v1
from qos_helpers import make_ctx, make_node, pod, threshold_slo

from apis.extension import KubeQOSClass
from koordlet.metriccache import MetricKind
from koordlet.qosmanager import FeatureGates, PluginContext, QOSManager, QOSPluginRegistry
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.plugins.batchresource import plugin as batchresource
from koordlet.qosmanager.plugins.cpusuppress import plugin as cpusuppress
from koordlet.system import CgroupFS

pytestmark = [pytest.mark.cgroup]
_SKIP = writable_cgroup_v1()

UID_BE = "5d1a2b3c-4d5e-4f60-8a7b-9c0d1e2f3a4b"
UID_LS = "6e2b3c4d-5e6f-4a71-9b8c-0d1e2f3a4b5c"
LS_LOAD_CORES = 0.8
"""Synthetic non-BE load: with capacity 2 and threshold 65 %, BE may use 1.3 - 0.8 = 0.5 CPU."""


def favour(pods: object) -> None:
    """Give the test's hierarchy the largest ``cpu.shares``: on a machine busy with other work the BE loop
    would otherwise get well under 0.5 CPU and never meet its quota."""
    (ROOT / "cpu" / pods.base / "cpu.shares").write_text("262144")  # type: ignore[attr-defined]


def be_cores_over(fs: CgroupFS, rel: str, seconds: float) -> float:
    start_ns, start = fs.cpu_usage_ns(rel), time.monotonic()
    time.sleep(seconds)
    end_ns = fs.cpu_usage_ns(rel)
    assert start_ns is not None and end_ns is not None
    return (end_ns - start_ns) / 1e9 / (time.monotonic() - start)


def feed_synthetic_load(ctx: PluginContext) -> None:
    """Node used = the LS pod's 0.8 cores (no system load); the BE pod has no sample (it does not count)."""
    now = ctx.clock()
    ctx.metric_cache.append(MetricKind.NODE_CPU_USAGE, "", now, LS_LOAD_CORES)
    ctx.metric_cache.append(MetricKind.POD_CPU_USAGE, UID_LS, now, LS_LOAD_CORES)


def suppress_ticks(plugin: cpusuppress.CPUSuppress, ctx: PluginContext, n: int) -> None:
    for _ in range(n):
        feed_synthetic_load(ctx)
        plugin.tick()


@pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
def test_cfs_quota_suppress_throttles_real_busy_loop_then_recovers() -> None:
    with real_pods() as pods:
        fs = pods.cgroupfs()
        be_qos = fs.layout.qos_dir(KubeQOSClass.BEST_EFFORT)
        be_pod = fs.layout.pod_dir(KubeQOSClass.BEST_EFFORT, UID_BE)
        pods.make(be_pod)
        favour(pods)
        for _ in range(2):  # the busy loop on 2 threads of execution
            pods.spawn(be_pod, BURN)
        ctx = make_ctx(fs, clock=time.time)
        informer = ctx.states_informer
        informer.set_node(make_node(cpu="2"))
        informer.replace_pods([pod("be", UID_BE).be().build(), pod("ls", UID_LS).qos("Burstable").build()])
        informer.set_node_slo(threshold_slo(cpuSuppressPolicy="cfsQuota", cpuSuppressThresholdPercent=65))
        plugin = cpusuppress.CPUSuppress()
        plugin.setup(ctx)

        free_before = be_cores_over(fs, be_pod, 1.0)
        suppress_ticks(plugin, ctx, 2)
        assert plugin.last_suppress_milli == pytest.approx(500)
        assert fs.cfs_quota(be_qos) == (50000, 100000)
        stat_before = fs.cpu_stat(be_qos)
        suppressed = be_cores_over(fs, be_pod, 3.0)
        stat_after = fs.cpu_stat(be_qos)
        assert stat_before is not None and stat_after is not None
        throttled = stat_after.nr_throttled - stat_before.nr_throttled
        print(f"BE free {free_before:.2f} cores; suppressed to {suppressed:.3f} cores, {throttled} throttled periods")
        assert throttled > 10  # the kernel's own cpu.stat
        assert suppressed == pytest.approx(0.5, rel=0.2)

        # the NodeSLO switch off: quota back to -1, the loop runs free
        informer.set_node_slo(threshold_slo(enable=False, cpuSuppressPolicy="cfsQuota"))
        plugin.tick()
        assert fs.cfs_quota(be_qos) == (-1, 100000)
        free_again = be_cores_over(fs, be_pod, 1.5)
        print(f"NodeSLO off: {free_again:.2f} cores")
        assert free_again > 0.8

        # on again, then the process gate off: the QoS manager recovers the quota of the disabled plugin
        informer.set_node_slo(threshold_slo(cpuSuppressPolicy="cfsQuota"))
        suppress_ticks(plugin, ctx, 1)
        assert fs.cfs_quota(be_qos) == (50000, 100000)
        registry = QOSPluginRegistry()
        registry.add(cpusuppress.ENTRY)
        manager = QOSManager(registry)
        manager.instantiate()
        stop = asyncio.Event()
        stop.set()
        gates = FeatureGates.resolve({**KOORDLET_FEATURES}, {"BECPUSuppress": False})
        asyncio.run(manager.run(gates, ctx, stop))
        assert fs.cfs_quota(be_qos) == (-1, 100000)
        free_gate_off = be_cores_over(fs, be_pod, 1.5)
        print(f"gate off: {free_gate_off:.2f} cores")
        assert free_gate_off > 0.8


@pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
def test_suppress_via_manager_run_loop_and_stop_recovers() -> None:
    """The plugin as the agent runs it: QOSManager, gate on, 1 s ticks; stopping the agent recovers."""
    with real_pods() as pods:
        fs = pods.cgroupfs()
        be_qos = fs.layout.qos_dir(KubeQOSClass.BEST_EFFORT)
        be_pod = fs.layout.pod_dir(KubeQOSClass.BEST_EFFORT, UID_BE)
        pods.make(be_pod)
        pods.spawn(be_pod, BURN)
        ctx = make_ctx(fs, clock=time.time, args={"cpu_suppress_interval_seconds": 0.2})
        ctx.states_informer.set_node(make_node(cpu="2"))
        ctx.states_informer.replace_pods([pod("be", UID_BE).be().build(), pod("ls", UID_LS).build()])
        ctx.states_informer.set_node_slo(threshold_slo(cpuSuppressPolicy="cfsQuota"))
        registry = QOSPluginRegistry()
        registry.add(cpusuppress.ENTRY)
        manager = QOSManager(registry)
        manager.instantiate()
        gates = FeatureGates.resolve({**KOORDLET_FEATURES})
        seen: list[tuple[int, int] | None] = []

        async def scenario() -> None:
            stop = asyncio.Event()
            task = asyncio.create_task(manager.run(gates, ctx, stop))
            for _ in range(10):
                feed_synthetic_load(ctx)
                await asyncio.sleep(0.1)
            seen.append(fs.cfs_quota(be_qos))
            stop.set()
            await task

        asyncio.run(scenario())
        assert seen == [(50000, 100000)]
        assert fs.cfs_quota(be_qos) == (-1, 100000)
        assert manager.plugins[0].failures == 0


@pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
def test_batch_resource_writes_hook_values_on_real_pod_cgroups() -> None:
    """Koordinator's BatchResource values on a real BE pod: pod = sums, containers = their own; a second
    tick writes nothing; with CPU suppress policy ``cfsQuota`` every BE quota becomes -1; all removed after."""
    with real_pods() as pods:
        fs = pods.cgroupfs()
        be_pod = fs.layout.pod_dir(KubeQOSClass.BEST_EFFORT, UID_BE)
        raw = (
            pod("batch", UID_BE)
            .be()
            .container(
                "c1",
                "containerd://c1aaaa",
                requests={"kubernetes.io/batch-cpu": "1500", "kubernetes.io/batch-memory": "256Mi"},
                limits={"kubernetes.io/batch-cpu": "1500", "kubernetes.io/batch-memory": "256Mi"},
            )
            .container(
                "c2",
                "containerd://c2bbbb",
                requests={"kubernetes.io/batch-cpu": "500"},
                limits={"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "128Mi"},
            )
            .build()
        )
        ctx = make_ctx(fs, clock=time.time)
        ctx.states_informer.replace_pods([raw])
        meta = ctx.states_informer.get_all_pods()[0]
        dirs = [meta.container_dir(fs.layout, c) for c in meta.containers]
        for rel in (be_pod, *dirs):
            assert rel is not None
            pods.make(rel)
        pods.spawn(dirs[0] or "", "import time; time.sleep(600)")
        plugin = batchresource.BatchResource()
        plugin.setup(ctx)
        plugin.tick()

        def read(sub: str, rel: str, name: str) -> str:
            return (ROOT / sub / rel / name).read_text().strip()

        got = {
            rel: (
                read("cpu", rel, "cpu.shares"),
                read("cpu", rel, "cpu.cfs_quota_us"),
                read("memory", rel, "memory.limit_in_bytes"),
            )
            for rel in (be_pod, *dirs)
            if rel is not None
        }
        assert got == {
            be_pod: ("2048", "200000", str(384 << 20)),
            dirs[0]: ("1536", "150000", str(256 << 20)),
            dirs[1]: ("512", "50000", str(128 << 20)),
        }
        # a second tick changes nothing and writes nothing new
        audit = len(ctx.executor.audit)
        plugin.tick()
        assert len(ctx.executor.audit) == audit
        ctx.states_informer.set_node_slo(threshold_slo(cpuSuppressPolicy="cfsQuota"))
        plugin.tick()
        assert [read("cpu", rel, "cpu.cfs_quota_us") for rel in (be_pod, *dirs) if rel is not None] == ["-1"] * 3
        created = [ROOT / c / pods.base for c in ("cpu", "cpuacct", "memory")]
    assert not any(path.exists() for path in created)
