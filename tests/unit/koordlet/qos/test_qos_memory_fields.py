"""CgroupReconcile's copied memory QoS fields (wmark, priority, priority OOM, OOM group): on a fake Anolis-like
cgroup v1 tree that has the files, and on cgroup v2 where only ``memory.oom.group`` exists. Values follow
Koordinator v1.8.0 ``qosmanager/plugins/cgreconcile`` ``calculatePodResources`` /
``calculateContainerResources`` / ``calculateQoSResources`` (defaults: ``sloconfig.DefaultMemoryQOS``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from koordlet_fakes import FakeCgroups
from qos_helpers import make_ctx, pod, run_until_ticked

from apis.extension import KubeQOSClass
from apis.slo import merge_node_slo_spec
from apis.slo.nodeslo import MemoryQOSCfg
from koordlet.qosmanager import FeatureGates, PluginContext, QOSManager, builtin_registry
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.plugins.cgreconcile.plugin import CgroupReconcile
from koordlet.qosmanager.plugins.cgreconcile.policy import memory_qos_fields
from koordlet.system import CgroupDriver, CgroupVersion
from koordlet.system.clock import FakeClock

UID = "66666666-7777-4888-9999-aaaaaaaaaaaa"
FIELDS = (
    "memory.wmark_ratio",
    "memory.wmark_scale_factor",
    "memory.wmark_min_adj",
    "memory.priority",
    "memory.use_priority_oom",
    "memory.oom.group",
)


@pytest.mark.parametrize(
    ("cls", "qos_level", "want"),
    [
        pytest.param(
            "lsClass",
            False,
            {
                "memory.wmark_ratio": 95,
                "memory.wmark_scale_factor": 20,
                "memory.wmark_min_adj": -25,
                "memory.priority": 0,
                "memory.use_priority_oom": 0,
                "memory.oom.group": 0,
            },
            id="koord:DefaultMemoryQOS(LS) pod/container",
        ),
        pytest.param(
            "beClass",
            False,
            {
                "memory.wmark_ratio": 95,
                "memory.wmark_scale_factor": 20,
                "memory.wmark_min_adj": 50,
                "memory.priority": 0,
                "memory.use_priority_oom": 0,
                "memory.oom.group": 0,
            },
            id="koord:DefaultMemoryQOS(BE) pod/container",
        ),
        pytest.param(
            "lsClass",
            True,
            {"memory.priority": 0, "memory.use_priority_oom": 0, "memory.oom.group": 0},
            id="koord:calculateQoSResources copies priority, priorityEnable, oomKillGroup only",
        ),
    ],
)
def test_memory_qos_fields(cls: str, qos_level: bool, want: dict[str, int]) -> None:
    strategy = merge_node_slo_spec(None).resource_qos_strategy
    assert strategy is not None
    cfg = getattr(strategy, cls.replace("Class", "_class")).memory_qos
    assert memory_qos_fields(cfg, qos_level=qos_level) == want


def test_unset_fields_are_not_written() -> None:
    assert memory_qos_fields(MemoryQOSCfg(enable=True, wmark_ratio=80)) == {"memory.wmark_ratio": 80}


LS_ON = {
    "spec": {
        "resourceQOSStrategy": {
            "lsClass": {
                "memoryQOS": {
                    "enable": True,
                    "wmarkRatio": 90,
                    "wmarkScalePermill": 30,
                    "wmarkMinAdj": -10,
                    "priority": 5,
                    "priorityEnable": 1,
                    "oomKillGroup": 1,
                }
            }
        }
    }
}


def tree(
    tmp_path: Path, version: CgroupVersion, files: tuple[str, ...]
) -> tuple[PluginContext, FakeCgroups, list[str]]:
    fake = FakeCgroups(tmp_path / "cgroup", version, CgroupDriver.CGROUPFS)
    layout = fake.fs().layout
    pod_dir = layout.pod_dir(KubeQOSClass.BURSTABLE, UID)
    dirs = [layout.kubepods_dir, layout.qos_dir(KubeQOSClass.BURSTABLE), pod_dir, f"{pod_dir}/c1"]
    for rel in dirs:
        fake.make_dir(rel)
        base = fake.root / ("memory" if version is CgroupVersion.V1 else "") / rel
        for name in ("memory.min", *files):
            (base / name).write_text("0\n")
    ctx = make_ctx(fake.fs(), clock=FakeClock())
    ctx.states_informer.replace_pods(
        [pod("ls", UID).qos("Burstable", "LS").container("c1", "containerd://c1", requests={"memory": "1Gi"}).build()]
    )
    ctx.states_informer.set_node_slo(LS_ON)
    return ctx, fake, dirs


def read_all(fake: FakeCgroups, rel: str, names: tuple[str, ...]) -> dict[str, str]:
    base = fake.root / ("memory" if fake.version is CgroupVersion.V1 else "") / rel
    return {n: (base / n).read_text().strip() for n in names if (base / n).exists()}


def test_anolis_v1_pod_container_and_kube_qos_get_the_fields(tmp_path: Path) -> None:
    ctx, fake, (kubepods, burstable, pod_dir, container) = tree(tmp_path, CgroupVersion.V1, FIELDS)
    plugin = CgroupReconcile()
    plugin.setup(ctx)
    plugin.tick()
    want_pod = {
        "memory.wmark_ratio": "90",
        "memory.wmark_scale_factor": "30",
        "memory.wmark_min_adj": "-10",
        "memory.priority": "5",
        "memory.use_priority_oom": "1",
        "memory.oom.group": "1",
    }
    assert read_all(fake, pod_dir, FIELDS) == want_pod
    assert read_all(fake, container, FIELDS) == want_pod
    want_qos = {n: "0" for n in FIELDS} | {
        "memory.priority": "5",
        "memory.use_priority_oom": "1",
        "memory.oom.group": "1",
    }
    assert read_all(fake, burstable, FIELDS) == want_qos
    assert read_all(fake, kubepods, FIELDS) == {n: "0" for n in FIELDS}  # LSR's memory QoS is off


def test_v2_sets_the_oom_group_it_has_and_skips_the_rest(tmp_path: Path) -> None:
    ctx, fake, (_, _, _, container) = tree(tmp_path, CgroupVersion.V2, ("memory.oom.group",))
    plugin = CgroupReconcile()
    plugin.setup(ctx)
    plugin.tick()
    assert read_all(fake, container, FIELDS) == {"memory.oom.group": "1"}
    assert plugin.errors == 0 and plugin.object_errors == 0


@pytest.mark.parametrize(("gate_on", "want"), [(True, "1"), (False, "0")])
async def test_fields_only_with_the_gate(tmp_path: Path, gate_on: bool, want: str) -> None:
    ctx, fake, (_, _, pod_dir, _) = tree(tmp_path, CgroupVersion.V1, FIELDS)
    manager = QOSManager(builtin_registry())
    manager.instantiate()
    gates = FeatureGates.resolve(
        {**KOORDLET_FEATURES, **builtin_registry().feature_specs()}, {"AllBeta": False, "CgroupReconcile": gate_on}
    )
    await run_until_ticked(manager, gates, ctx)
    assert read_all(fake, pod_dir, ("memory.oom.group",)) == {"memory.oom.group": want}
