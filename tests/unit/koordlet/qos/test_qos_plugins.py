"""Strategies as plugins, on temp cgroup trees (v1 and v2 formats, both drivers), with fake time."""

from __future__ import annotations

from pathlib import Path

import pytest
from koordlet_fakes import FakeCgroups
from qos_helpers import make_ctx, make_node, pod, run_until_ticked, threshold_slo

from apis.extension import KubeQOSClass
from koordlet.metriccache import MetricKind
from koordlet.qosmanager import FeatureGates, PluginContext, QOSManager, QOSPluginRegistry, builtin_registry
from koordlet.qosmanager.evictor import EvictionOutcome, PodEvictor
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES, FeatureSpec, Maturity
from koordlet.qosmanager.framework import PluginEntry
from koordlet.qosmanager.plugins.batchresource import plugin as batchresource
from koordlet.qosmanager.plugins.cgreconcile import plugin as cgreconcile
from koordlet.qosmanager.plugins.cpuburst import plugin as cpuburst
from koordlet.qosmanager.plugins.cpusuppress import plugin as cpusuppress
from koordlet.qosmanager.plugins.memoryevict import plugin as memoryevict
from koordlet.qosmanager.plugins.strategy import Strategy
from koordlet.statesinformer import PodMeta
from koordlet.system import CgroupDriver, CgroupVersion
from koordlet.system.clock import FakeClock

UID_BE = "11111111-2222-4333-8444-555555555555"
UID_LS = "66666666-7777-4888-9999-aaaaaaaaaaaa"
GiB = 1 << 30


def tree(tmp_path: Path, version: CgroupVersion, driver: CgroupDriver) -> FakeCgroups:
    fake = FakeCgroups(tmp_path, version, driver)
    layout = fake.fs().layout
    for rel in (layout.kubepods_dir, layout.qos_dir(KubeQOSClass.BEST_EFFORT)):
        fake.set_usage(rel)
    return fake


def quota_file(fake: FakeCgroups, rel: str) -> str:
    if fake.version is CgroupVersion.V2:
        return (fake.root / rel / "cpu.max").read_text().strip()
    return (fake.root / "cpu" / rel / "cpu.cfs_quota_us").read_text().strip()


@pytest.mark.parametrize(
    ("version", "driver", "want_suppressed", "want_recovered"),
    [
        pytest.param(CgroupVersion.V1, CgroupDriver.CGROUPFS, "50000", "-1", id="v1-cgroupfs"),
        pytest.param(CgroupVersion.V1, CgroupDriver.SYSTEMD, "50000", "-1", id="v1-systemd"),
        pytest.param(CgroupVersion.V2, CgroupDriver.SYSTEMD, "50000", "max", id="v2-systemd-cpu.max"),
        pytest.param(CgroupVersion.V2, CgroupDriver.CGROUPFS, "50000", "max", id="v2-cgroupfs-cpu.max"),
    ],
)
def test_cpu_suppress_cfs_quota_on_temp_tree(
    tmp_path: Path, version: CgroupVersion, driver: CgroupDriver, want_suppressed: str, want_recovered: str
) -> None:
    fake = tree(tmp_path, version, driver)
    clock = FakeClock()
    ctx = make_ctx(fake.fs(), clock=clock)
    ctx.states_informer.set_node(make_node(cpu="2"))
    ctx.states_informer.replace_pods([pod("be", UID_BE).be().build(), pod("ls", UID_LS).build()])
    ctx.states_informer.set_node_slo(threshold_slo(cpuSuppressPolicy="cfsQuota"))
    ctx.metric_cache.append(MetricKind.NODE_CPU_USAGE, "", clock(), 0.8)
    ctx.metric_cache.append(MetricKind.POD_CPU_USAGE, UID_LS, clock(), 0.8)
    plugin = cpusuppress.CPUSuppress()
    plugin.setup(ctx)
    plugin.tick()
    be_dir = fake.fs().layout.qos_dir(KubeQOSClass.BEST_EFFORT)
    assert quota_file(fake, be_dir) == want_suppressed
    ctx.states_informer.set_node_slo(threshold_slo(enable=False))
    plugin.tick()
    assert quota_file(fake, be_dir) == want_recovered


def test_cpu_suppress_dry_run_writes_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fake = tree(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS)
    clock = FakeClock()
    ctx = make_ctx(fake.fs(), clock=clock, args={"qos_dry_run": True})
    ctx.states_informer.set_node(make_node(cpu="2"))
    ctx.states_informer.set_node_slo(threshold_slo(cpuSuppressPolicy="cfsQuota"))
    ctx.metric_cache.append(MetricKind.NODE_CPU_USAGE, "", clock(), 0.8)
    plugin = cpusuppress.CPUSuppress()
    plugin.setup(ctx)
    plugin.tick()
    assert quota_file(fake, "kubepods/besteffort") == "-1"
    assert "dry-run: would write kubepods/besteffort/cpu.cfs_quota_us = 50000" in caplog.text
    assert len(ctx.executor.audit) == 0


def test_cpu_suppress_cpuset_policy_writes_union_then_target(tmp_path: Path) -> None:
    fake = tree(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS)
    be_pod = fake.fs().layout.pod_dir(KubeQOSClass.BEST_EFFORT, UID_BE)
    fake.set_usage(be_pod)
    for rel in ("kubepods", "kubepods/besteffort", be_pod):
        (fake.root / "cpuset" / rel / "cpuset.cpus").write_text("0-7\n")
    clock = FakeClock()
    ctx = make_ctx(fake.fs(), clock=clock, args={"sysfs_root": tmp_path / "no-sysfs"})
    ctx.states_informer.set_node(make_node(cpu="8"))
    ctx.states_informer.replace_pods([pod("be", UID_BE).be().build(), pod("ls", UID_LS).build()])
    ctx.states_informer.set_node_slo(threshold_slo(cpuSuppressPolicy="cpuset"))
    ctx.metric_cache.append(MetricKind.NODE_CPU_USAGE, "", clock(), 3.0)
    ctx.metric_cache.append(MetricKind.POD_CPU_USAGE, UID_LS, clock(), 3.0)
    plugin = cpusuppress.CPUSuppress()
    plugin.setup(ctx)
    plugin.tick()  # 8 x 65 % - 3 = 2.2 cores -> 3 CPUs
    got = [(u.rel_dir, u.value) for u in plugin.last_plan]
    assert got == [(be_pod, "0-2"), ("kubepods/besteffort", "0-2")]
    assert (fake.root / "cpuset" / be_pod / "cpuset.cpus").read_text() == "0-2"
    ctx.states_informer.set_node_slo(threshold_slo(enable=False))
    plugin.tick()
    assert (fake.root / "cpuset" / "kubepods/besteffort" / "cpuset.cpus").read_text() == "0-7"
    assert (fake.root / "cpuset" / be_pod / "cpuset.cpus").read_text() == "0-7"


@pytest.mark.parametrize(
    ("version", "driver", "want"),
    [
        pytest.param(
            CgroupVersion.V1,
            CgroupDriver.SYSTEMD,
            {"cpu.shares": "1536", "cpu.cfs_quota_us": "200000", "memory.limit_in_bytes": str(GiB)},
            id="v1-systemd",
        ),
        pytest.param(
            CgroupVersion.V2,
            CgroupDriver.SYSTEMD,
            {"cpu.weight": "59", "cpu.max": "200000", "memory.max": str(GiB), "memory.min": str(GiB // 2)},
            id="v2-systemd-weight-max-memory-qos",
        ),
    ],
)
def test_cgroup_reconcile_on_temp_tree(
    tmp_path: Path, version: CgroupVersion, driver: CgroupDriver, want: dict[str, str]
) -> None:
    fake = tree(tmp_path, version, driver)
    fs = fake.fs()
    ctx = make_ctx(fs, clock=FakeClock())
    raw = (
        pod("batch", UID_BE)
        .be()
        .container(
            "c1",
            "containerd://abc123",
            requests={"kubernetes.io/batch-cpu": "1500", "kubernetes.io/batch-memory": "1Gi"},
            limits={"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "1Gi"},
        )
        .build()
    )
    ctx.states_informer.replace_pods([raw])
    ctx.states_informer.set_node_slo(
        {"spec": {"resourceQOSStrategy": {"beClass": {"memoryQOS": {"enable": True, "minLimitPercent": 50}}}}}
    )
    meta: PodMeta = ctx.states_informer.get_all_pods()[0]
    container_dir = meta.container_dir(fs.layout, meta.containers[0])
    assert container_dir is not None
    if version is CgroupVersion.V2:
        assert container_dir.endswith(
            "kubepods-besteffort-pod11111111_2222_4333_8444_555555555555.slice/cri-containerd-abc123.scope"
        )
        for rel in (fs.layout.kubepods_dir, meta.cgroup_dir, container_dir):
            fake.make_dir(rel)
            (fake.root / rel / "memory.min").write_text("0\n")
    for rel in (meta.cgroup_dir, container_dir):
        fake.set_usage(rel)
    for plugin in (batchresource.BatchResource(), cgreconcile.CgroupReconcile()):
        plugin.setup(ctx)
        plugin.tick()

    def read(name: str) -> str:
        base = (
            fake.root if version is CgroupVersion.V2 else fake.root / ("memory" if name.startswith("memory") else "cpu")
        )
        return (base / container_dir / name).read_text().strip()

    assert {name: read(name) for name in want} == want


def test_cpu_burst_static_burst_and_quota_scale_up(tmp_path: Path) -> None:
    fake = tree(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS)
    fs = fake.fs()
    clock = FakeClock()
    ctx = make_ctx(fs, clock=clock)
    raw = pod("web", UID_LS).qos("Burstable").container("c", "containerd://web1", limits={"cpu": "1"}).build()
    ctx.states_informer.set_node(make_node(cpu="8"))
    ctx.states_informer.replace_pods([raw])
    ctx.states_informer.set_node_slo({"spec": {"cpuBurstStrategy": {"policy": "auto"}}})
    meta = ctx.states_informer.get_all_pods()[0]
    cdir = meta.container_dir(fs.layout, meta.containers[0])
    assert cdir is not None
    for rel in (meta.cgroup_dir, cdir):
        fake.set_usage(rel)
        (fake.root / "cpu" / rel / "cpu.cfs_quota_us").write_text("100000")
        (fake.root / "cpu" / rel / "cpu.cfs_burst_us").write_text("0")
    for t in range(3):
        ctx.metric_cache.append(MetricKind.NODE_CPU_USAGE, "", clock() - t, 1.0)
    ctx.metric_cache.append(MetricKind.CONTAINER_CPU_THROTTLED, "web1", clock(), 0.4)
    plugin = cpuburst.CPUBurst()
    plugin.setup(ctx)
    plugin.tick()
    assert plugin.last_pool_state == "idle"
    assert (fake.root / "cpu" / cdir / "cpu.cfs_burst_us").read_text() == "1000000"
    assert (fake.root / "cpu" / cdir / "cpu.cfs_quota_us").read_text() == "120000"
    assert (fake.root / "cpu" / meta.cgroup_dir / "cpu.cfs_quota_us").read_text() == "120000"
    ctx.states_informer.set_node_slo({"spec": {"cpuBurstStrategy": {"policy": "none"}}})
    plugin.tick()
    assert (fake.root / "cpu" / cdir / "cpu.cfs_quota_us").read_text() == "100000"
    assert (fake.root / "cpu" / cdir / "cpu.cfs_burst_us").read_text() == "0"


class FakeEvictionAPI:
    def __init__(self, status: int = 201) -> None:
        self.status = status
        self.evicted: list[str] = []
        self.events: list[tuple[str, str]] = []

    def evict(self, namespace: str, name: str, uid: str) -> int:
        self.evicted.append(name)
        return self.status

    def record_event(self, pod: PodMeta, reason: str, message: str, event_type: str) -> None:
        self.events.append((pod.name, reason))


def test_be_memory_evict_plugin_evicts_lowest_priority_then_cools_down(tmp_path: Path) -> None:
    fake = tree(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS)
    clock = FakeClock()
    api = FakeEvictionAPI()
    evictor = PodEvictor(api, node_name="node-1", clock=clock)
    ctx = make_ctx(fake.fs(), clock=clock, evictor=evictor)
    uids = {"be-low": "a" * 8 + "-0000-4000-8000-000000000001", "be-high": "a" * 8 + "-0000-4000-8000-000000000002"}
    ctx.states_informer.set_node(make_node(memory="10Gi"))
    ctx.states_informer.replace_pods(
        [
            pod("be-low", uids["be-low"]).be().priority(5000).build(),
            pod("be-high", uids["be-high"]).be().priority(5900).build(),
            pod("ls", UID_LS).qos("Burstable").priority(9000).build(),
        ]
    )
    ctx.states_informer.set_node_slo(threshold_slo())

    def feed(node_gib: float) -> None:
        ctx.metric_cache.append(MetricKind.NODE_MEMORY_USAGE, "", clock(), node_gib * GiB)
        for uid in uids.values():
            ctx.metric_cache.append(MetricKind.POD_MEMORY_USAGE, uid, clock(), 0.5 * GiB)
        ctx.metric_cache.append(MetricKind.POD_MEMORY_USAGE, UID_LS, clock(), 5 * GiB)

    plugin = memoryevict.BEMemoryEvict()
    plugin.setup(ctx)
    feed(7.2)  # 72 % >= 70: release 4 % of 10 GiB = 0.4 GiB -> one 0.5 GiB BE pod
    plugin.tick()
    assert api.evicted == ["be-low"]
    assert api.events == [("be-low", "evictPodSuccess")]
    clock.advance(2)
    feed(7.2)
    plugin.tick()  # cooling down (4 s)
    assert api.evicted == ["be-low"]
    clock.advance(3)
    feed(7.2)
    plugin.tick()  # be-low still listed: counted as pending, so be-high goes only if still not enough
    assert api.evicted == ["be-low"]
    feed(9.0)
    plugin.tick()  # 90 %: release 2.2 GiB; be-low pending 0.5, be-high 0.5; never the LS pod
    assert api.evicted == ["be-low", "be-high"]


def test_evictor_guards_dedup_be_only_and_pdb() -> None:
    clock = FakeClock()
    api = FakeEvictionAPI()
    evictor = PodEvictor(api, node_name="n", clock=clock)
    from koordlet.statesinformer import parse_pod
    from koordlet.system import CgroupLayout

    layout = CgroupLayout.for_driver(CgroupDriver.CGROUPFS)
    be = parse_pod(pod("be", UID_BE).be().build(), layout)
    ls = parse_pod(pod("ls", UID_LS).qos("Guaranteed").build(), layout)
    assert evictor.evict(ls, "BEMemoryEvict", "x") is EvictionOutcome.NOT_ALLOWED
    assert evictor.evict(be, "BEMemoryEvict", "x") is EvictionOutcome.EVICTED
    assert evictor.evict(be, "BECPUEvict", "x") is EvictionOutcome.RECENTLY_EVICTED
    clock.advance(121)
    assert evictor.evict(be, "BEMemoryEvict", "x") is EvictionOutcome.EVICTED
    assert api.evicted == ["be", "be"]
    api.status = 429
    assert PodEvictor(api, node_name="n", clock=clock).evict(be, "MemoryEvict", "x") is EvictionOutcome.BLOCKED
    assert api.events[-1] == ("be", "evictPodFail")
    assert (
        PodEvictor(api, node_name="n", clock=clock, dry_run=True).evict(be, "MemoryEvict", "x")
        is EvictionOutcome.DRY_RUN
    )
    assert api.evicted == ["be", "be", "be"]


# -- feature gates and supervision ---------------------------------------------------------------

STRATEGY_GATES = [
    "BatchResource",
    "BECPUSuppress",
    "CPUBurst",
    "CgroupReconcile",
    "BEMemoryEvict",
    "MemoryAllocatableEvict",
    "MemoryEvict",
    "BECPUEvict",
    "CPUAllocatableEvict",
    "CPUEvict",
]


@pytest.mark.parametrize("gate", STRATEGY_GATES)
async def test_strategy_off_when_its_gate_is_off(tmp_path: Path, gate: str) -> None:
    fake = tree(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS)
    ctx = make_ctx(fake.fs(), clock=FakeClock())
    manager = QOSManager(builtin_registry())
    manager.instantiate()
    gates = FeatureGates.resolve(
        {**KOORDLET_FEATURES, **builtin_registry().feature_specs()},
        {name: True for name in STRATEGY_GATES},
        {gate: False},
    )
    assert gate not in [s.name for s in manager.enabled(gates)]
    await run_until_ticked(manager, gates, ctx)
    by_name = {s.name: s.plugin for s in manager.plugins}
    off = by_name[gate]
    assert isinstance(off, Strategy) and off.ticks == 0
    assert all(
        p.ticks >= 1 for n, p in by_name.items() if n in STRATEGY_GATES and n != gate and isinstance(p, Strategy)
    )


def test_default_gates_run_suppress_burst_cpuset_and_batch_resource() -> None:
    manager = QOSManager(builtin_registry())
    manager.instantiate()
    assert [
        s.name
        for s in manager.enabled(FeatureGates.resolve({**KOORDLET_FEATURES, **builtin_registry().feature_specs()}))
    ] == [
        "BECPUThrottleReporter",
        "BECPUSuppress",
        "CPUBurst",
        "RdtResctrl",
        "CPUSetAllocator",
        "NodeTopologyReport",
        "BatchResource",
        "GroupIdentity",
    ]


class Exploding(Strategy):
    NAME = "Exploding"

    def tick(self) -> None:
        raise RuntimeError("bad snapshot")


async def test_agent_keeps_running_when_a_strategy_raises(tmp_path: Path) -> None:
    fake = tree(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS)
    ctx: PluginContext = make_ctx(fake.fs(), clock=FakeClock())
    registry = QOSPluginRegistry()
    registry.add(PluginEntry("Exploding", Exploding, FeatureSpec(True, Maturity.ALPHA)))
    registry.add(cpusuppress.ENTRY)
    manager = QOSManager(registry)
    manager.instantiate()
    for state in manager.plugins:
        state.plugin.interval = 0.01  # type: ignore[attr-defined]
    gates = FeatureGates.resolve({**KOORDLET_FEATURES, **registry.feature_specs()})
    exploding, suppress = (s.plugin for s in manager.plugins)
    assert isinstance(exploding, Strategy) and isinstance(suppress, Strategy)
    still_running: list[bool] = []

    def kept_ticking() -> bool:
        if exploding.errors < 2:
            return False
        still_running.append(all(s.running for s in manager.plugins))  # checked before the stop
        return True

    await run_until_ticked(manager, gates, ctx, until=kept_ticking)
    assert exploding.errors >= 2 and exploding.ticks >= 2  # it keeps ticking
    assert suppress.ticks >= 1 and suppress.errors == 0
    assert still_running == [True]
