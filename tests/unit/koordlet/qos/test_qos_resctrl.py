"""RdtResctrl, Resctrl and ResctrlCollector on a fake resctrl tree laid out as the kernel's.

Table cases marked ``koord:`` are transcribed from Koordinator v1.8.0
``pkg/koordlet/qosmanager/plugins/resctrl/resctrl_reconcile_test.go`` (``Test_calculateCatL3Schemata``,
``Test_calculateMbaPercentForGroup``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from koordlet_fakes import FakeCgroups
from prometheus_client import CollectorRegistry
from qos_helpers import make_ctx, pod, run_until_ticked

from apis.extension import KubeQOSClass, QoSClass
from apis.slo.nodeslo import ResctrlQOSCfg
from koordlet.metriccache import MetricCache, MetricKind
from koordlet.metricsadvisor.resctrl import ResctrlCollector
from koordlet.qosmanager import FeatureGates, PluginContext, QOSManager, builtin_registry
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.plugins.resctrl.plugin import PodResctrl, ResctrlReconcile, ResctrlUnavailableError
from koordlet.qosmanager.plugins.resctrl.policy import (
    AMD_MAX_MB_GBPS,
    NONE_RESCTRL,
    PodResctrlConfig,
    ResctrlConfigError,
    cat_l3_mask,
    class_resctrl,
    mba_value,
    parse_pod_resctrl,
    pod_group,
    pod_schemata,
)
from koordlet.system import CgroupDriver, CgroupVersion
from koordlet.system.clock import FakeClock
from koordlet.system.resctrl import AMD_VENDOR_ID, INTEL_VENDOR_ID, ResctrlFS, Schemata, parse_schemata

INTEL = INTEL_VENDOR_ID
UID_BE = "11111111-2222-4333-8444-555555555555"
UID_LS = "66666666-7777-4888-9999-aaaaaaaaaaaa"
UID_ANNOTATED = "99999999-7777-4888-9999-aaaaaaaaaaaa"


# -- pure policy ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cbm", "start", "end", "want"),
    [
        pytest.param(0x101, 0, 100, None, id="koord:cbm value is invalid"),
        pytest.param(4, 0, 100, None, id="koord:cbm value is invalid 1"),
        pytest.param(0xFF, -10, 100, None, id="koord:percent value is invalid"),
        pytest.param(0xFF, 30, 30, None, id="koord:percent value is invalid 1"),
        pytest.param(0, 0, 0, None, id="koord:do not panic but throw an error for empty input"),
        pytest.param(0xFF, 0, 100, 0xFF, id="koord:calculate l3 schemata correctly"),
        pytest.param(0x3FF, 10, 80, 0xFE, id="koord:calculate l3 schemata correctly 1"),
        pytest.param(0x7FF, 10, 50, 0x3C, id="koord:calculate l3 schemata correctly 2"),
        pytest.param(0x3FF, 0, 30, 0x7, id="koord:calculate l3 schemata correctly 3"),
        pytest.param(0x3FF, 10, 85, 0x1FE, id="koord:calculate l3 schemata correctly 4"),
        pytest.param(0x7FF, 0, 30, 0xF, id="BE default 0-30% of 11 ways: ceil(3.3)=4 ways"),
    ],
)
def test_cat_l3_mask(cbm: int, start: int, end: int, want: int | None) -> None:
    if want is None:
        with pytest.raises(ResctrlConfigError):
            cat_l3_mask(cbm, start, end)
    else:
        assert cat_l3_mask(cbm, start, end) == want


@pytest.mark.parametrize(
    ("percent", "vendor", "want"),
    [
        pytest.param(None, INTEL, None, id="koord:mbPercent not config"),
        pytest.param(0, INTEL, None, id="koord:mbPercent value is invalid,not between (0,100] (0)"),
        pytest.param(101, INTEL, None, id="koord:mbPercent value is invalid,not between (0,100] (101)"),
        pytest.param(85, INTEL, 90, id="koord:mbPercent value is invalid, not multiple of 10"),
        pytest.param(80, INTEL, 80, id="koord:mbPercent value is valid on intel"),
        pytest.param(80, AMD_VENDOR_ID, int(0.8 * AMD_MAX_MB_GBPS), id="koord:mbPercent value is valid on amd"),
        pytest.param(100, AMD_VENDOR_ID, 2048, id="koord:mbPercent value is unlimited on amd"),
    ],
)
def test_mba_value(percent: int | None, vendor: str, want: int | None) -> None:
    assert mba_value(percent, vendor) == want


@pytest.mark.parametrize(
    ("qos", "want"),
    [
        pytest.param(QoSClass.LSE, "LSR", id="LSE-shares-LSR"),
        pytest.param(QoSClass.LSR, "LSR", id="LSR"),
        pytest.param(QoSClass.LS, "LS", id="LS"),
        pytest.param(QoSClass.BE, "BE", id="BE"),
        pytest.param(QoSClass.SYSTEM, None, id="SYSTEM-unknown-group"),
        pytest.param(QoSClass.NONE, None, id="none-unknown-group"),
    ],
)
def test_pod_group(qos: QoSClass, want: str | None) -> None:
    assert pod_group(qos) == want


def test_disabled_class_gets_the_none_config() -> None:
    from apis.slo import merge_node_slo_spec

    default = merge_node_slo_spec(None)
    assert class_resctrl(default.resource_qos_strategy, "BE") == NONE_RESCTRL  # BE default 0-30 is off
    spec = merge_node_slo_spec(
        merge_node_slo_spec(None).model_validate({"resourceQOSStrategy": {"beClass": {"resctrlQOS": {"enable": True}}}})
    )
    assert class_resctrl(spec.resource_qos_strategy, "BE") == ResctrlQOSCfg(
        enable=True, cat_range_start_percent=0, cat_range_end_percent=30, mba_percent=100
    )


@pytest.mark.parametrize(
    ("annotation", "want"),
    [
        pytest.param(
            {"llc": {"schemata": {"range": [0, 30]}}, "mb": {"schemata": {"percent": 20}}},
            Schemata({0: 0xF, 1: 0xF}, {0: 20, 1: 20}),
            id="whole-node-range-and-percent",
        ),
        pytest.param(
            {"llc": {"schemata": {"range": [0, 100]}, "schemataPerCache": [{"cacheID": 1, "range": [50, 100]}]}},
            Schemata({0: 0x7FF, 1: 0x7C0}, {}),
            id="per-cache-overrides-one-cache; mb unset is not written",
        ),
        pytest.param(
            {"llc": {"schemataPerCache": [{"cacheID": 0, "range": [0, 50]}]}, "mb": {"schemata": {"percent": 55}}},
            Schemata({}, {0: 60, 1: 60}),
            id="l3 for one cache only is not written (ValidateL3); intel rounds 55 up",
        ),
    ],
)
def test_pod_schemata(annotation: dict[str, object], want: Schemata) -> None:
    cfg = parse_pod_resctrl(json.dumps(annotation))
    assert pod_schemata(cfg, cbm=0x7FF, cache_ids=[0, 1], vendor=INTEL) == want


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param("{not json", id="not-json"),
        pytest.param('{"llc": {"schemata": {"range": [0]}}}', id="range-not-a-pair"),
        pytest.param('{"mb": {"schemata": {"percent": "20"}}}', id="percent-not-int"),
        pytest.param('{"llc": []}', id="llc-not-an-object"),
    ],
)
def test_bad_pod_annotation_is_refused_with_the_field(raw: str) -> None:
    with pytest.raises(ResctrlConfigError):
        parse_pod_resctrl(raw)
    assert parse_pod_resctrl("{}") == PodResctrlConfig()


# -- the fake resctrl tree -----------------------------------------------------------------------


def make_resctrl(root: Path, *, cbm: str = "7ff", caches: tuple[int, ...] = (0, 1)) -> Path:
    """/sys/fs/resctrl as the kernel mounts it (root group only)."""
    resctrl = root / "resctrl"
    (resctrl / "info" / "L3").mkdir(parents=True)
    (resctrl / "info" / "L3" / "cbm_mask").write_text(cbm + "\n")
    l3 = ";".join(f"{c}={cbm}" for c in caches)
    mb = ";".join(f"{c}=100" for c in caches)
    (resctrl / "schemata").write_text(f"    L3:{l3}\n    MB:{mb}\n")
    (resctrl / "tasks").write_text("1\n2\n")
    return resctrl


def cgroups_with_pods(tmp_path: Path) -> FakeCgroups:
    fake = FakeCgroups(tmp_path / "cgroup", CgroupVersion.V1, CgroupDriver.CGROUPFS)
    layout = fake.fs().layout
    for uid, qos, tids in (
        (UID_BE, KubeQOSClass.BEST_EFFORT, "101\n102\n"),
        (UID_LS, KubeQOSClass.BURSTABLE, "201\n"),
        (UID_ANNOTATED, KubeQOSClass.BURSTABLE, "301\n"),
    ):
        pod_dir = layout.pod_dir(qos, uid)
        for child, text in (("c1", tids), ("sandbox", "")):
            fake.make_dir(f"{pod_dir}/{child}")
            (fake.root / "cpu" / pod_dir / child / "tasks").write_text(text)
    return fake


def resctrl_ctx(tmp_path: Path, *, slo: Mapping[str, Any] | None = None) -> tuple[PluginContext, Path]:
    resctrl = make_resctrl(tmp_path / "sysfs")
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cpuinfo").write_text("processor\t: 0\nvendor_id\t: GenuineIntel\n")
    fake = cgroups_with_pods(tmp_path)
    ctx = make_ctx(fake.fs(), clock=FakeClock(), args={"sys_fs_root_dir": tmp_path / "sysfs", "proc_root": proc})
    informer = ctx.states_informer
    informer.replace_pods(
        [
            pod("be", UID_BE).be().container("c1", "containerd://c1").build(),
            pod("ls", UID_LS).qos("Burstable", "LS").container("c1", "containerd://c1").build(),
            pod("annotated", UID_ANNOTATED)
            .qos("Burstable", "LS")
            .annotation("node.koordinator.sh/resctrl", json.dumps({"llc": {"schemata": {"range": [0, 50]}}}))
            .container("c1", "containerd://c1")
            .build(),
        ]
    )
    informer.set_node_slo(slo)
    return ctx, resctrl


BE_ON = {"spec": {"resourceQOSStrategy": {"beClass": {"resctrlQOS": {"enable": True, "mbaPercent": 45}}}}}


def test_class_groups_get_schemata_and_threads_of_enabled_classes(tmp_path: Path) -> None:
    ctx, resctrl = resctrl_ctx(tmp_path, slo=BE_ON)
    plugin = ResctrlReconcile()
    plugin.setup(ctx)
    plugin.tick()
    assert sorted(p.name for p in resctrl.iterdir() if p.name != "info") == ["BE", "LS", "LSR", "schemata", "tasks"]
    # BE: its class is on (0-30 % of 11 ways, MBA 45 -> 50); LS and LSR are off: the "None" config
    assert parse_schemata((resctrl / "BE" / "schemata").read_text()) == Schemata({0: 0xF, 1: 0xF}, {0: 50, 1: 50})
    assert parse_schemata((resctrl / "LS" / "schemata").read_text()) == Schemata({0: 0x7FF, 1: 0x7FF}, {0: 100, 1: 100})
    assert (resctrl / "BE" / "tasks").read_text() == "101\n102\n"
    assert not (resctrl / "LS" / "tasks").exists()  # LS resctrl is off: its pods' threads stay in the root


def test_writes_only_what_differs(tmp_path: Path) -> None:
    ctx, resctrl = resctrl_ctx(tmp_path, slo=BE_ON)
    plugin = ResctrlReconcile()
    plugin.setup(ctx)
    plugin.tick()
    (resctrl / "BE" / "schemata").write_text("L3:0=00f;1=00f\nMB:0=50;1=50\n")  # what the kernel shows back
    before = {p: p.stat().st_mtime_ns for p in resctrl.rglob("*") if p.is_file()}
    plugin.tick()
    after = {p: p.stat().st_mtime_ns for p in resctrl.rglob("*") if p.is_file()}
    assert before == after
    (resctrl / "BE" / "schemata").write_text("L3:0=7ff;1=7ff\nMB:0=100;1=100\n")  # someone reset it
    plugin.tick()
    assert parse_schemata((resctrl / "BE" / "schemata").read_text()) == Schemata({0: 0xF, 1: 0xF}, {0: 50, 1: 50})


def test_annotated_pod_gets_its_own_group_and_is_removed_when_gone(tmp_path: Path) -> None:
    ctx, resctrl = resctrl_ctx(tmp_path)
    plugin = PodResctrl()
    plugin.setup(ctx)
    plugin.tick()
    group = resctrl / f"koordlet-{UID_ANNOTATED}"
    assert parse_schemata((group / "schemata").read_text()) == Schemata({0: 0x3F, 1: 0x3F}, {})
    assert (group / "tasks").read_text() == "301\n"
    ctx.states_informer.delete_pod(UID_ANNOTATED)
    plugin.tick()
    assert not group.exists()


def test_class_reconcile_leaves_annotated_pods_alone(tmp_path: Path) -> None:
    slo = {"spec": {"resourceQOSStrategy": {"lsClass": {"resctrlQOS": {"enable": True}}}}}
    ctx, resctrl = resctrl_ctx(tmp_path, slo=slo)
    plugin = ResctrlReconcile()
    plugin.setup(ctx)
    plugin.tick()
    assert (resctrl / "LS" / "tasks").read_text() == "201\n"  # not 301, the annotated pod's


def test_mount_without_l3_is_an_error_of_the_tick(tmp_path: Path) -> None:
    ctx, resctrl = resctrl_ctx(tmp_path)
    (resctrl / "info" / "L3" / "cbm_mask").unlink()
    plugin = ResctrlReconcile()
    plugin.setup(ctx)
    with pytest.raises(ResctrlUnavailableError):
        plugin.tick()


@pytest.mark.parametrize(("gate_on", "want_groups"), [(True, True), (False, False)])
async def test_rdt_resctrl_acts_only_with_its_gate(tmp_path: Path, gate_on: bool, want_groups: bool) -> None:
    ctx, resctrl = resctrl_ctx(tmp_path, slo=BE_ON)
    manager = QOSManager(builtin_registry())
    manager.instantiate()
    gates = FeatureGates.resolve(
        {**KOORDLET_FEATURES, **builtin_registry().feature_specs()}, {"AllBeta": False, "RdtResctrl": gate_on}
    )
    await run_until_ticked(manager, gates, ctx)
    assert (resctrl / "BE").is_dir() is want_groups


def test_collector_reads_mon_data_into_cache_and_gauges(tmp_path: Path) -> None:
    resctrl = make_resctrl(tmp_path)
    for group, values in (("BE", (1000, 10, 20)), ("LS", (2000, 30, 40))):
        for cache_id in (0, 1):
            mon = resctrl / group / "mon_data" / f"mon_L3_{cache_id:02d}"
            mon.mkdir(parents=True)
            for name, value in zip(("llc_occupancy", "mbm_local_bytes", "mbm_total_bytes"), values, strict=True):
                (mon / name).write_text(f"{value + cache_id}\n")
    (resctrl / "LSR").mkdir()  # no mon_data: skipped
    clock = FakeClock()
    cache = MetricCache(clock=clock)
    registry = CollectorRegistry()
    collector = ResctrlCollector(ResctrlFS(resctrl), cache, registry, node="n1", clock=clock)
    assert collector.collect_once() == 12
    assert cache.last(MetricKind.RESCTRL_LLC, "BE/1", 10) == 1001
    assert cache.last(MetricKind.RESCTRL_MB, "LS/0/mbm_total_bytes", 10) == 40
    llc = registry.get_sample_value("koordlet_resctrl_llc_occupancy", {"node": "n1", "cache_id": "0", "qos": "LS"})
    mb = registry.get_sample_value(
        "koordlet_resctrl_memory_bandwidth", {"node": "n1", "cache_id": "1", "qos": "BE", "mb_type": "mbm_local_bytes"}
    )
    assert (llc, mb) == (2000, 11)
