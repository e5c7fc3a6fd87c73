"""BlkIOReconcile: values per block, disk resolution from sysfs, and the reconciler on fake v1 and v2 trees.

The NodeSLO of the reconciler test is Koordinator v1.8.0's ``blkio_reconcile_test.go`` ``newNodeSLO``
(BE: volume group ``yoda-pool0`` on /dev/vdb = 253:16; root: /dev/vdb with a user cost model); Koordinator's
test only checks that nothing panics, so the expected files here are computed from its formulas.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koordlet_fakes import FakeCgroups
from qos_helpers import make_ctx, pod, run_until_ticked

from apis.extension import KubeQOSClass
from apis.slo.nodeslo import IOCfg
from koordlet.qosmanager import FeatureGates, PluginContext, QOSManager, builtin_registry
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.plugins.blkio.plugin import BlkIOReconcile
from koordlet.qosmanager.plugins.blkio.policy import (
    BlkioConfigError,
    BlkioWrite,
    class_writes,
    configured_disks,
    is_applied,
    parse_pod_blkio,
    root_writes,
)
from koordlet.system import CgroupDriver, CgroupVersion
from koordlet.system.blockdev import disk_number, vg_disk_number, volume_group_of
from koordlet.system.clock import FakeClock

BE = KubeQOSClass.BEST_EFFORT


@pytest.mark.parametrize(
    ("version", "io", "want"),
    [
        pytest.param(
            1,
            None,
            [
                "blkio.throttle.read_iops_device=253:16 0",
                "blkio.throttle.read_bps_device=253:16 0",
                "blkio.throttle.write_iops_device=253:16 0",
                "blkio.throttle.write_bps_device=253:16 0",
                "blkio.cost.weight=253:16 100",
            ],
            id="koord:defaults (no throttle, weight 100)",
        ),
        pytest.param(
            1,
            IOCfg(io_weight_percent=40, read_iops=1024, write_iops=1024, read_bps=1048576, write_bps=1048576),
            [
                "blkio.throttle.read_iops_device=253:16 1024",
                "blkio.throttle.read_bps_device=253:16 1048576",
                "blkio.throttle.write_iops_device=253:16 1024",
                "blkio.throttle.write_bps_device=253:16 1048576",
                "blkio.cost.weight=253:16 40",
            ],
            id="koord:newNodeSLO beClass yoda-pool0",
        ),
        pytest.param(
            2,
            IOCfg(io_weight_percent=40, read_bps=1048576),
            ["io.max=253:16 rbps=1048576 wbps=max riops=max wiops=max", "io.weight=253:16 40"],
            id="v2 io.max and io.weight",
        ),
    ],
)
def test_class_writes(version: int, io: IOCfg | None, want: list[str]) -> None:
    assert [f"{w.resource}={w.value}" for w in class_writes(version, "253:16", io)] == want


@pytest.mark.parametrize(
    ("io", "want_model"),
    [
        pytest.param(
            IOCfg(
                read_latency=1000,
                write_latency=1000,
                read_latency_percent=90,
                write_latency_percent=90,
                enable_user_model=True,
                model_read_bps=3324911720,
                model_write_bps=2765819289,
                model_read_seq_iops=168274,
                model_write_seq_iops=367565,
                model_read_rand_iops=352545,
                model_write_rand_iops=339390,
            ),
            "253:16 ctrl=user rbps=3324911720 rseqiops=168274 rrandiops=352545 wbps=2765819289 wseqiops=367565"
            " wrandiops=339390",
            id="koord:newNodeSLO cgroupRoot /dev/vdb user model",
        ),
        pytest.param(IOCfg(), "253:16 ctrl=auto", id="koord:auto model by default"),
    ],
)
def test_root_writes(io: IOCfg, want_model: str) -> None:
    qos, model = root_writes(1, "253:16", io)
    rlat = io.read_latency or 3000
    rpct = io.read_latency_percent or 95
    assert qos == BlkioWrite(
        "blkio.cost.qos", "253:16", f"253:16 enable=1 ctrl=user rpct={rpct} rlat={rlat} wpct={rpct} wlat={rlat}"
    )
    assert model == BlkioWrite("blkio.cost.model", "253:16", want_model)


@pytest.mark.parametrize(
    ("write", "file", "want"),
    [
        pytest.param(BlkioWrite("r", "8:0", "8:0 100"), "8:0 100\n", True, id="same value"),
        pytest.param(BlkioWrite("r", "8:0", "8:0 200"), "8:0 100\n8:16 5\n", False, id="other value"),
        pytest.param(BlkioWrite("r", "8:0", "8:0 0"), "8:16 5\n", True, id="reset of an unlisted disk"),
        pytest.param(BlkioWrite("r", "8:0", "8:0 100"), "default 100\n", True, id="v2 io.weight default"),
        pytest.param(
            BlkioWrite("q", "8:0", "8:0 enable=1 ctrl=user rpct=95 rlat=3000 wpct=95 wlat=3000"),
            "8:0 enable=1 ctrl=user rpct=95.00 rlat=3000 wpct=95.00 wlat=3000 min=50.00 max=150.00\n",
            True,
            id="kernel formatting and extra fields",
        ),
        pytest.param(BlkioWrite("q", "8:0", "8:0 enable=0"), "", True, id="iocost off for an unlisted disk"),
        pytest.param(BlkioWrite("m", "8:0", "8:0 rbps=1 wbps=max riops=max wiops=max"), "", False, id="a limit to add"),
    ],
)
def test_is_applied(write: BlkioWrite, file: str, want: bool) -> None:
    assert is_applied(write, configured_disks(file)) is want


def test_bad_pod_annotation_names_the_field() -> None:
    with pytest.raises(BlkioConfigError, match=r"blkioQOS: blocks"):
        parse_pod_blkio('{"blocks": 3}')
    with pytest.raises(BlkioConfigError, match="not JSON"):
        parse_pod_blkio("{")


# -- disks from sysfs ------------------------------------------------------------------------------


def fake_sysfs(root: Path) -> Path:
    """vda (253:0) with partition vda1, vdb (253:16), and dm-0 = LV of VG yoda-pool0 on vdb1."""
    block = root / "devices" / "virtual" / "block"
    for disk, dev in (("vda", "253:0"), ("vdb", "253:16")):
        (block / disk).mkdir(parents=True)
        (block / disk / "dev").write_text(dev + "\n")
        part = block / disk / f"{disk}1"
        part.mkdir()
        (part / "dev").write_text(dev.replace(":0", ":1").replace(":16", ":17") + "\n")
        (part / "partition").write_text("1\n")
    (block / "dm-0" / "dm").mkdir(parents=True)
    (block / "dm-0" / "dev").write_text("252:0\n")
    (block / "dm-0" / "dm" / "name").write_text("yoda--pool0-yoda--test1\n")
    (block / "dm-0" / "slaves").mkdir()
    (block / "dm-0" / "slaves" / "vdb1").symlink_to(block / "vdb" / "vdb1")
    links = root / "class" / "block"
    links.mkdir(parents=True)
    for name, target in (
        ("vda", block / "vda"),
        ("vda1", block / "vda" / "vda1"),
        ("vdb", block / "vdb"),
        ("vdb1", block / "vdb" / "vdb1"),
        ("dm-0", block / "dm-0"),
    ):
        (links / name).symlink_to(target)
    return root


@pytest.mark.parametrize(
    ("name", "want"),
    [
        pytest.param("/dev/vda", "253:0", id="disk"),
        pytest.param("/dev/vda1", "253:0", id="partition-resolves-to-its-disk"),
        pytest.param("vdb", "253:16", id="bare-name"),
        pytest.param("/dev/vdc", None, id="unknown"),
    ],
)
def test_disk_number(tmp_path: Path, name: str, want: str | None) -> None:
    assert disk_number(fake_sysfs(tmp_path), name) == want


def test_volume_group_disk(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path)
    assert volume_group_of("yoda--pool0-yoda--87d8625a--dcc9") == "yoda-pool0"
    assert vg_disk_number(sysfs, "yoda-pool0") == "253:16"
    assert vg_disk_number(sysfs, "other") is None


# -- the reconciler --------------------------------------------------------------------------------

KOORD_NODE_SLO: dict[str, Any] = {
    "spec": {
        "resourceQOSStrategy": {
            "lsrClass": {"blkioQOS": {"enable": True, "blocks": [{"name": "/dev/vdc", "type": "device"}]}},
            "beClass": {
                "blkioQOS": {
                    "enable": True,
                    "blocks": [
                        {
                            "name": "yoda-pool0",
                            "type": "volumegroup",
                            "ioCfg": {
                                "ioWeightPercent": 40,
                                "readIOPS": 1024,
                                "writeIOPS": 1024,
                                "readBPS": 1048576,
                                "writeBPS": 1048576,
                            },
                        }
                    ],
                }
            },
            "cgroupRoot": {
                "blkioQOS": {
                    "enable": True,
                    "blocks": [{"name": "/dev/vdb", "type": "device", "ioCfg": {"readLatency": 1000}}],
                }
            },
        }
    }
}
V1_FILES = (
    "blkio.throttle.read_iops_device",
    "blkio.throttle.read_bps_device",
    "blkio.throttle.write_iops_device",
    "blkio.throttle.write_bps_device",
    "blkio.cost.weight",
)


class KernelFile:
    """Stands in for a v1 blkio file: a write of ``MAJ:MIN value`` sets (0: removes) that disk's line."""

    @staticmethod
    def apply(path: Path) -> None:
        lines = configured_disks(path.read_text())
        path.write_text("".join(f"{d} {v}\n" for d, v in sorted(lines.items()) if v != "0"))


def blkio_tree(tmp_path: Path, version: CgroupVersion) -> tuple[PluginContext, FakeCgroups]:
    fake = FakeCgroups(tmp_path / "cgroup", version, CgroupDriver.CGROUPFS)
    be = fake.fs().layout.qos_dir(BE)
    base = fake.root / ("blkio" if version is CgroupVersion.V1 else "")
    (base / be).mkdir(parents=True)
    files = V1_FILES if version is CgroupVersion.V1 else ("io.max", "io.weight")
    for name in files:
        (base / be / name).write_text("")
    for name in ("blkio.cost.qos", "blkio.cost.model") if version is CgroupVersion.V1 else ("io.cost.qos",):
        (base / name).write_text("")
    (base / be / files[0]).write_text("253:0 2048\n")  # a disk configured earlier, now gone from the NodeSLO
    sysfs = fake_sysfs(tmp_path / "sys")
    ctx = make_ctx(fake.fs(), clock=FakeClock(), args={"sysfs_root": sysfs})
    ctx.states_informer.set_node_slo(KOORD_NODE_SLO)
    return ctx, fake


def test_v1_be_class_and_root_from_koordinators_node_slo(tmp_path: Path) -> None:
    ctx, fake = blkio_tree(tmp_path, CgroupVersion.V1)
    plugin = BlkIOReconcile()
    plugin.setup(ctx)
    plugin.tick()
    be = fake.root / "blkio" / fake.fs().layout.qos_dir(BE)
    got = {name: (be / name).read_text() for name in V1_FILES}
    assert got == {
        "blkio.throttle.read_iops_device": "253:0 0",  # the earlier disk reset (the kernel drops the line)
        "blkio.throttle.read_bps_device": "253:16 1048576",
        "blkio.throttle.write_iops_device": "253:16 1024",
        "blkio.throttle.write_bps_device": "253:16 1048576",
        "blkio.cost.weight": "253:16 40",
    }
    assert (fake.root / "blkio" / "blkio.cost.qos").read_text() == (
        "253:16 enable=1 ctrl=user rpct=95 rlat=1000 wpct=95 wlat=3000"
    )
    assert (fake.root / "blkio" / "blkio.cost.model").read_text() == "253:16 ctrl=auto"


def test_v2_io_max_and_weight(tmp_path: Path) -> None:
    ctx, fake = blkio_tree(tmp_path, CgroupVersion.V2)
    (fake.root / fake.fs().layout.qos_dir(BE) / "io.max").write_text("")
    plugin = BlkIOReconcile()
    plugin.setup(ctx)
    plugin.tick()
    be = fake.root / fake.fs().layout.qos_dir(BE)
    assert (be / "io.max").read_text() == "253:16 rbps=1048576 wbps=1048576 riops=1024 wiops=1024"
    assert (be / "io.weight").read_text() == "253:16 40"


def test_disabled_class_resets_what_it_set_and_then_writes_nothing(tmp_path: Path) -> None:
    ctx, fake = blkio_tree(tmp_path, CgroupVersion.V1)
    plugin = BlkIOReconcile()
    plugin.setup(ctx)
    plugin.tick()
    be = fake.root / "blkio" / fake.fs().layout.qos_dir(BE)
    for name in V1_FILES:
        KernelFile.apply(be / name)
    ctx.states_informer.set_node_slo(None)  # default NodeSLO: blkio off everywhere
    plugin.tick()
    assert (be / "blkio.throttle.read_bps_device").read_text() == "253:16 0"
    for name in V1_FILES:
        KernelFile.apply(be / name)
    before = {p: p.stat().st_mtime_ns for p in be.iterdir()}
    plugin.tick()
    assert {p: p.stat().st_mtime_ns for p in be.iterdir()} == before


def test_pod_annotation_blocks_and_unsupported_podvolume(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ctx, fake = blkio_tree(tmp_path, CgroupVersion.V1)
    uid = "11111111-2222-4333-8444-555555555555"
    blocks = {"blocks": [{"name": "/dev/vda", "type": "device", "ioCfg": {"readBPS": 4096}}]}
    bad = {"blocks": [{"name": "html", "type": "podvolume"}]}
    ctx.states_informer.replace_pods(
        [
            pod("p", uid).be().annotation("koordinator.sh/blkioQOS", json.dumps(blocks)).build(),
            pod("q", "21111111-2222-4333-8444-555555555555")
            .be()
            .annotation("koordinator.sh/blkioQOS", json.dumps(bad))
            .build(),
        ]
    )
    rel = fake.fs().layout.pod_dir(BE, uid)
    (fake.root / "blkio" / rel).mkdir(parents=True)
    for name in V1_FILES:
        (fake.root / "blkio" / rel / name).write_text("")
    plugin = BlkIOReconcile()
    plugin.setup(ctx)
    plugin.tick()
    assert (fake.root / "blkio" / rel / "blkio.throttle.read_bps_device").read_text() == "253:0 4096"
    assert plugin.object_errors == 1
    assert "pod default/q" in caplog.text and "podvolume" in caplog.text


@pytest.mark.parametrize(("gate_on", "want"), [(True, "253:16 1048576"), (False, "")])
async def test_blkio_acts_only_with_its_gate(tmp_path: Path, gate_on: bool, want: str) -> None:
    ctx, fake = blkio_tree(tmp_path, CgroupVersion.V1)
    manager = QOSManager(builtin_registry())
    manager.instantiate()
    gates = FeatureGates.resolve(
        {**KOORDLET_FEATURES, **builtin_registry().feature_specs()}, {"AllBeta": False, "BlkIOReconcile": gate_on}
    )
    await run_until_ticked(manager, gates, ctx)
    be = fake.root / "blkio" / fake.fs().layout.qos_dir(BE)
    assert (be / "blkio.throttle.read_bps_device").read_text() == want
