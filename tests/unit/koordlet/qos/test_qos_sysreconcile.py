"""SystemConfig: values from NodeSLO systemStrategy (cases marked ``koord:`` are Koordinator v1.8.0
``qosmanager/plugins/sysreconcile/system_config_test.go`` ``Test_systemConfig_reconcile``, node memory 512 GiB)
and the reconciler on a fake /proc and /sys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from koordlet_fakes import FakeCgroups
from qos_helpers import make_ctx, make_node, run_until_ticked

from apis.slo.nodeslo import SystemStrategy
from koordlet.qosmanager import FeatureGates, PluginContext, QOSManager, builtin_registry
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.plugins.sysreconcile.plugin import SystemConfig
from koordlet.qosmanager.plugins.sysreconcile.policy import (
    parse_sched_features,
    sched_feature_writes,
    system_writes,
)
from koordlet.system import CgroupDriver, CgroupVersion
from koordlet.system.clock import FakeClock

GiB = 1 << 30
NODE_MEMORY = 512 * GiB


def values(strategy: SystemStrategy, memory: int = NODE_MEMORY) -> dict[str, str]:
    return {w.name: w.value for w in system_writes(strategy, memory)}


@pytest.mark.parametrize(
    ("strategy", "want"),
    [
        pytest.param(
            SystemStrategy(min_free_kbytes_factor=-1, watermark_scale_factor=-1, memcg_reap_back_ground=-1),
            {},
            id="koord:testInvalid (nothing written, the files keep their values)",
        ),
        pytest.param(
            SystemStrategy(min_free_kbytes_factor=0, watermark_scale_factor=5, memcg_reap_back_ground=-1),
            {},
            id="koord:testTooSmall",
        ),
        pytest.param(
            SystemStrategy(min_free_kbytes_factor=88, watermark_scale_factor=99, memcg_reap_back_ground=1),
            {
                "vm/min_free_kbytes": str(NODE_MEMORY // 1024 * 88 // 10000),
                "vm/watermark_scale_factor": "99",
                "kernel/mm/memcg_reaper/reap_background": "1",
            },
            id="koord:testValid",
        ),
        pytest.param(
            SystemStrategy(min_free_kbytes_factor=400, watermark_scale_factor=500, memcg_reap_back_ground=2),
            {},
            id="koord:testToolarge (512 GiB x 4 % is over 10 GiB)",
        ),
        pytest.param(SystemStrategy(), {}, id="koord:skip unset parameters"),
        pytest.param(
            SystemStrategy(min_free_kbytes_factor=88, sched_idle_saver_wmark=5000000),
            {"vm/min_free_kbytes": str(NODE_MEMORY // 1024 * 88 // 10000), "kernel/sched_idle_saver_wmark": "5000000"},
            id="koord:set part of parameters",
        ),
        pytest.param(
            SystemStrategy(sched_group_identity_enabled=0, sched_idle_saver_wmark=5000000),
            {"kernel/sched_group_identity_enabled": "0", "kernel/sched_idle_saver_wmark": "5000000"},
            id="koord:set part of parameters 1",
        ),
    ],
)
def test_system_writes(strategy: SystemStrategy, want: dict[str, str]) -> None:
    assert values(strategy) == want


def test_min_free_kbytes_needs_the_node_memory() -> None:
    """koord: testNodeMemoryInvalid."""
    assert values(SystemStrategy(min_free_kbytes_factor=100), memory=0) == {}


@pytest.mark.parametrize(
    ("current", "wanted", "want"),
    [
        pytest.param(
            "GENTLE_FAIR_SLEEPERS NO_ID_ABSOLUTE_EXPEL",
            {"ID_ABSOLUTE_EXPEL": True},
            ["ID_ABSOLUTE_EXPEL"],
            id="koord:set part of parameters (feature on)",
        ),
        pytest.param(
            "ID_EXPELLER_SHARE_CORE",
            {"ID_EXPELLER_SHARE_CORE": False},
            ["NO_ID_EXPELLER_SHARE_CORE"],
            id="koord:set part of parameters 1 (feature off)",
        ),
        pytest.param("A NO_B", {"A": True, "B": False}, [], id="unchanged features are not written"),
    ],
)
def test_sched_features(current: str, wanted: dict[str, bool], want: list[str]) -> None:
    assert sched_feature_writes(parse_sched_features(current), wanted) == want


def kernel_tree(tmp_path: Path, strategy: dict[str, Any] | None) -> tuple[PluginContext, Path, Path]:
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    for rel, value in (("sys/vm/min_free_kbytes", "67584"), ("sys/vm/watermark_scale_factor", "10")):
        (proc / rel).parent.mkdir(parents=True, exist_ok=True)
        (proc / rel).write_text(value + "\n")
    fake = FakeCgroups(tmp_path / "cgroup", CgroupVersion.V1, CgroupDriver.CGROUPFS)
    ctx = make_ctx(fake.fs(), clock=FakeClock(), args={"proc_root": proc, "sysfs_root": sys})
    ctx.states_informer.set_node(make_node(memory="64Gi"))
    ctx.states_informer.set_node_slo({"spec": {"systemStrategy": strategy}} if strategy else None)
    return ctx, proc, sys


def test_writes_only_what_differs_and_never_puts_back(tmp_path: Path) -> None:
    ctx, proc, _ = kernel_tree(
        tmp_path, {"minFreeKbytesFactor": 100, "watermarkScaleFactor": 10, "memcgReapBackGround": 1}
    )
    plugin = SystemConfig()
    plugin.setup(ctx)
    plugin.tick()
    want_kb = str(64 * GiB // 1024 * 100 // 10000)
    assert (proc / "sys/vm/min_free_kbytes").read_text().strip() == want_kb
    assert [Path(p).name for p, _ in plugin.written] == ["min_free_kbytes"]  # watermark already 10; no reaper file
    plugin.tick()
    assert len(plugin.written) == 1
    ctx.states_informer.set_node_slo(None)
    plugin.tick()
    assert (proc / "sys/vm/min_free_kbytes").read_text().strip() == want_kb


@pytest.mark.parametrize(("gate_on", "want"), [(True, "150"), (False, "10")])
async def test_system_config_acts_only_with_its_gate(tmp_path: Path, gate_on: bool, want: str) -> None:
    ctx, proc, _ = kernel_tree(tmp_path, {"watermarkScaleFactor": 150})
    manager = QOSManager(builtin_registry())
    manager.instantiate()
    gates = FeatureGates.resolve(
        {**KOORDLET_FEATURES, **builtin_registry().feature_specs()}, {"AllBeta": False, "SystemConfig": gate_on}
    )
    await run_until_ticked(manager, gates, ctx)
    assert (proc / "sys/vm/watermark_scale_factor").read_text().strip() == want
