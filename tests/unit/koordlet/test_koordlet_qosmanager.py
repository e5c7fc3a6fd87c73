import argparse
import asyncio
from functools import partial
from pathlib import Path

import pytest
from koordlet_fakes import FakeCgroups, make_raw_pod
from prometheus_client import CollectorRegistry

from koordlet.metriccache import MetricCache, MetricKind
from koordlet.qosmanager import (
    KOORDLET_FEATURES,
    DuplicatePluginError,
    FeatureGateError,
    FeatureGates,
    FeatureSpec,
    Maturity,
    PluginContext,
    QOSManager,
    QOSPluginRegistry,
    ResourceExecutor,
    ResourceUpdate,
    builtin_registry,
    parse_feature_gate_flag,
)
from koordlet.qosmanager.executor import ExecutorOptions
from koordlet.qosmanager.plugins.becputhrottle.policy import be_throttled_ratio
from koordlet.statesinformer import StatesInformer
from koordlet.system import CgroupDriver, CgroupVersion, WriteStatus
from koordlet.system.clock import FakeClock

SPECS = {**KOORDLET_FEATURES, "Stable": FeatureSpec(True, Maturity.GA)}


@pytest.mark.parametrize(
    ("flag", "want"),
    [
        pytest.param("", {"BECPUSuppress": True, "CPUBurst": True, "BECPUEvict": False}, id="defaults"),
        pytest.param("BECPUEvict=true,CPUBurst=false", {"BECPUEvict": True, "CPUBurst": False}, id="explicit"),
        pytest.param("AllAlpha=true", {"BECPUEvict": True, "PSICollector": True, "CPUBurst": True}, id="all-alpha"),
        pytest.param(
            "AllBeta=false,AllAlpha=true,PSICollector=false",
            {"CPUBurst": False, "BECPUEvict": True, "PSICollector": False},
            id="all-then-explicit",
        ),
        pytest.param(" CPUEvict = TRUE ", {"CPUEvict": True}, id="spaces-and-case"),
        pytest.param("Stable=true", {"Stable": True}, id="ga-on-ok"),
    ],
)
def test_feature_gates_resolve(flag: str, want: dict[str, bool]) -> None:
    gates = FeatureGates.resolve(SPECS, parse_feature_gate_flag(flag))
    assert {name: gates.enabled(name) for name in want} == want


@pytest.mark.parametrize(
    ("flag", "want_message"),
    [
        pytest.param("NoSuchGate=true", "unrecognized feature gate: NoSuchGate", id="unknown"),
        pytest.param("CPUBurst=yes", "invalid value of CPUBurst='yes'", id="bad-bool"),
        pytest.param("CPUBurst", "missing bool value for 'CPUBurst'", id="no-value"),
        pytest.param("Stable=false", "cannot set feature gate Stable to false, feature is GA", id="ga-locked"),
    ],
)
def test_feature_gates_refused(flag: str, want_message: str) -> None:
    with pytest.raises(FeatureGateError, match=want_message.replace("(", r"\(")):
        FeatureGates.resolve(SPECS, parse_feature_gate_flag(flag))


def test_config_then_flags() -> None:
    gates = FeatureGates.resolve(SPECS, {"BECPUEvict": True, "CPUBurst": False}, {"CPUBurst": "true"})
    assert (gates.enabled("BECPUEvict"), gates.enabled("CPUBurst")) == (True, True)


def test_gates_frozen() -> None:
    gates = FeatureGates.resolve(SPECS)
    with pytest.raises(AttributeError):
        gates.values = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        gates.values["CPUBurst"] = False  # type: ignore[index]


class _Recorder:
    def __init__(self, name: str, log: list[str], *, crash_in: str = "") -> None:
        self.name, self.log, self.crash_in = name, log, crash_in

    def init_flags(self, parser: argparse.ArgumentParser) -> None:
        self.log.append(f"flags:{self.name}")

    def setup(self, ctx: PluginContext) -> None:
        self.log.append(f"setup:{self.name}")
        if self.crash_in == "setup":
            raise RuntimeError("boom")

    async def run(self, stop: asyncio.Event) -> None:
        self.log.append(f"run:{self.name}")
        if self.crash_in == "run":
            raise RuntimeError("boom")
        await stop.wait()


def _ctx(tmp_path: Path) -> PluginContext:
    fake = FakeCgroups(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS)
    clock = FakeClock()
    return PluginContext(
        node_name="node-1",
        metric_cache=MetricCache(clock=clock),
        states_informer=StatesInformer("node-1", fake.fs().layout),
        executor=ResourceExecutor(fake.fs(), clock=clock),
        metrics_registry=CollectorRegistry(),
        args=argparse.Namespace(),
        clock=clock,
    )


def test_registry_duplicate_is_error() -> None:
    registry = QOSPluginRegistry()
    registry.register_qos_ext_plugin("A", lambda: _Recorder("A", []), FeatureSpec(True, Maturity.ALPHA))
    with pytest.raises(DuplicatePluginError, match="'A' is already registered"):
        registry.register_qos_ext_plugin("A", lambda: _Recorder("A", []), FeatureSpec(True, Maturity.ALPHA))
    with pytest.raises(DuplicatePluginError):
        builtin_registry().merge(builtin_registry())


def test_builtin_registry_is_fresh() -> None:
    assert builtin_registry() is not builtin_registry()
    assert builtin_registry().names() == [
        "BECPUThrottleReporter",
        "BECPUSuppress",
        "CPUBurst",
        "CgroupReconcile",
        "RdtResctrl",
        "Resctrl",
        "BlkIOReconcile",
        "SystemConfig",
        "CPUSetAllocator",
        "NodeTopologyReport",
        "BatchResource",
        "CPUNormalization",
        "OOMScoreAdj",
        "GroupIdentity",
        "CoreSched",
        "BEMemoryEvict",
        "MemoryAllocatableEvict",
        "MemoryEvict",
        "BECPUEvict",
        "CPUAllocatableEvict",
        "CPUEvict",
    ]


async def test_manager_runs_enabled_in_order_and_survives_crashes(tmp_path: Path) -> None:
    log: list[str] = []
    registry = QOSPluginRegistry()
    alpha = FeatureSpec(False, Maturity.ALPHA)
    for name, crash in (
        ("Zed", ""),
        ("Off", ""),
        ("CrashSetup", "setup"),
        ("CrashRun", "run"),
        ("Alpha", ""),
    ):
        registry.register_qos_ext_plugin(name, partial(_Recorder, name, log, crash_in=crash), alpha)
    manager = QOSManager(registry)
    manager.instantiate()
    manager.init_flags(argparse.ArgumentParser())
    gates = FeatureGates.resolve(
        registry.feature_specs(), {"Zed": True, "CrashSetup": True, "CrashRun": True, "Alpha": True}
    )
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(gates, _ctx(tmp_path), stop))
    for _ in range(5):
        await asyncio.sleep(0)
    stop.set()
    await task
    assert log == [
        "flags:Zed",
        "flags:Off",
        "flags:CrashSetup",
        "flags:CrashRun",
        "flags:Alpha",
        "setup:Zed",
        "setup:CrashSetup",
        "setup:CrashRun",
        "setup:Alpha",
        "run:Zed",
        "run:CrashRun",
        "run:Alpha",
    ]
    failures = {s.name: (s.failures, s.last_error) for s in manager.plugins if s.failures}
    assert failures == {"CrashSetup": (1, "setup"), "CrashRun": (1, "run")}


def test_be_throttled_ratio_policy() -> None:
    assert be_throttled_ratio([]) is None
    assert be_throttled_ratio([None, None]) is None
    assert be_throttled_ratio([0.2, None, 0.4]) == pytest.approx(0.3)


async def test_be_cpu_throttle_reporter_end_to_end(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    ctx.states_informer.replace_pods(
        [
            make_raw_pod("be", "uid-be", qos="BestEffort"),
            make_raw_pod("ls", "uid-ls", qos="Burstable"),
        ]
    )
    now = ctx.clock()
    ctx.metric_cache.append(MetricKind.POD_CPU_THROTTLED, "uid-be", now, 0.5)
    ctx.metric_cache.append(MetricKind.POD_CPU_THROTTLED, "uid-ls", now, 0.9)
    registry = builtin_registry()
    manager = QOSManager(registry)
    manager.instantiate()
    parser = argparse.ArgumentParser()
    manager.init_flags(parser)
    ctx = PluginContext(**{**{f: getattr(ctx, f) for f in ctx.__dataclass_fields__}, "args": parser.parse_args([])})
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(FeatureGates.resolve(registry.feature_specs()), ctx, stop))
    for _ in range(5):
        await asyncio.sleep(0)
    stop.set()
    await task
    value = ctx.metrics_registry.get_sample_value("koordlet_be_cpu_throttled_ratio", {"node": "node-1"})
    assert value == 0.5


def test_executor_dedup_and_audit(tmp_path: Path) -> None:
    fake = FakeCgroups(tmp_path, CgroupVersion.V2, CgroupDriver.CGROUPFS)
    fake.set_usage("kubepods/besteffort")
    clock = FakeClock()
    executor = ResourceExecutor(fake.fs(), options=ExecutorOptions(force_update_seconds=60), clock=clock)
    plan = [ResourceUpdate("cpu.cfs_quota_us", "kubepods/besteffort", "200000", owner="test")]
    assert [r.status for r in executor.apply(plan)] == [WriteStatus.WRITTEN]
    assert (tmp_path / "kubepods/besteffort/cpu.max").read_text() == "200000"
    executor.apply(plan)  # cached: no write, no audit
    assert len(executor.audit) == 1 and executor.skipped == 1
    clock.advance(61)
    (tmp_path / "kubepods/besteffort/cpu.max").write_text("max 100000")  # someone reset it
    executor.apply(plan)
    assert (tmp_path / "kubepods/besteffort/cpu.max").read_text() == "200000"
    assert [e.old for e in executor.audit] == ["max 100000", "max 100000"]
    # the file already holds the value: "max" equals -1
    fresh = ResourceExecutor(fake.fs(), clock=clock)
    fake.set_usage("kubepods/burstable")
    fresh.apply([ResourceUpdate("cpu.cfs_quota_us", "kubepods/burstable", "-1")])
    assert len(fresh.audit) == 0 and fresh.skipped == 1
    # missing cgroup and invalid value: recorded, not raised
    results = fresh.apply(
        [
            ResourceUpdate("cpu.shares", "kubepods/gone", "1024"),
            ResourceUpdate("cpu.shares", "kubepods/burstable", "1"),
        ]
    )
    assert [r.status for r in results] == [WriteStatus.MISSING_CGROUP, WriteStatus.INVALID]
