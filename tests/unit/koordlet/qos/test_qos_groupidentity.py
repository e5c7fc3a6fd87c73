"""GroupIdentity: the rule and pod values (cases marked ``koord:`` are transcribed from Koordinator v1.8.0
``runtimehooks/hooks/groupidentity/rule_test.go`` and ``interceptor_test.go``), and the reconciler on a fake
Anolis-like cgroup tree (``cpu.bvt_warp_ns`` present) with the sysctls under a fake /proc."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from koordlet_fakes import FakeCgroups
from qos_helpers import make_ctx, pod, run_until_ticked

from apis.extension import KubeQOSClass, QoSClass
from apis.slo import merge_node_slo_spec
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.qosmanager import FeatureGates, PluginContext, QOSManager, builtin_registry
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.plugins.groupidentity.plugin import GroupIdentity
from koordlet.qosmanager.plugins.groupidentity.policy import BvtRule, CPUQOSAnnotationError, bvt_rule, pod_bvt
from koordlet.system import CgroupDriver, CgroupVersion
from koordlet.system.clock import FakeClock

G, B, BE_K = KubeQOSClass.GUARANTEED, KubeQOSClass.BURSTABLE, KubeQOSClass.BEST_EFFORT


def slo(policy: str | None, lsr: tuple[bool, int], ls: tuple[bool, int], be: tuple[bool, int]) -> NodeSLOSpec:
    strategy: dict[str, Any] = {
        name: {"cpuQOS": {"enable": on, "groupIdentity": value}}
        for name, (on, value) in (("lsrClass", lsr), ("lsClass", ls), ("beClass", be))
    }
    strategy["policies"] = {} if policy is None else {"cpuPolicy": policy}
    return merge_node_slo_spec(NodeSLOSpec.model_validate({"resourceQOSStrategy": strategy}))


def rule(enable: bool, pods: tuple[int, int, int], dirs: tuple[int, int, int], g_pod: int) -> BvtRule:
    """``pods``: LSR, LS, BE values; ``dirs``: kubepods, burstable, besteffort (also the pods without a label,
    except a Guaranteed one, which gets ``g_pod``)."""
    (lsr, ls, be), (g_dir, b_dir, be_dir) = pods, dirs
    return BvtRule(
        enable=enable,
        pod_qos={QoSClass.LSE: lsr, QoSClass.LSR: lsr, QoSClass.LS: ls, QoSClass.BE: be},
        kube_dir={G: g_dir, B: b_dir, BE_K: be_dir},
        kube_pod={G: g_pod, B: b_dir, BE_K: be_dir},
    )


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        pytest.param(
            slo("groupIdentity", (True, 2), (True, 2), (True, -1)),
            rule(True, (2, 2, -1), (0, 2, -1), 2),
            id="koord:parse normal rules",
        ),
        pytest.param(
            slo("groupIdentity", (False, 0), (True, 2), (True, -1)),
            rule(True, (0, 2, -1), (0, 2, -1), 2),
            id="koord:parse rules with lsr disabled",
        ),
        pytest.param(
            slo("groupIdentity", (False, 0), (False, 0), (True, -1)),
            rule(True, (0, 0, -1), (0, 0, -1), 0),
            id="koord:parse rules with lsr and ls disabled",
        ),
        pytest.param(
            slo("groupIdentity", (False, 2), (False, 2), (False, -1)),
            rule(False, (0, 0, 0), (0, 0, 0), 0),
            id="koord:parse rules with all disabled",
        ),
        pytest.param(
            slo("groupIdentity", (False, 2), (False, 2), (True, -1)),
            rule(True, (0, 0, -1), (0, 0, -1), 0),
            id="koord:only enable cpu qos for BE",
        ),
        pytest.param(
            slo(None, (True, 2), (True, 2), (True, -1)),
            rule(True, (2, 2, -1), (0, 2, -1), 2),
            id="koord:parse default cpu qos policy",
        ),
        pytest.param(
            slo("coreSched", (True, 2), (True, 2), (True, -1)),
            rule(False, (0, 0, 0), (0, 0, 0), 0),
            id="koord:parse different cpu qos policy",
        ),
        pytest.param(merge_node_slo_spec(None), rule(False, (0, 0, 0), (0, 0, 0), 0), id="default NodeSLO: all off"),
    ],
)
def test_bvt_rule(spec: NodeSLOSpec, want: BvtRule) -> None:
    assert bvt_rule(spec) == want


DEFAULT_RULE = rule(True, (2, 2, -1), (0, 2, -1), 2)


@pytest.mark.parametrize(
    ("labels", "annotations", "kube_qos", "want"),
    [
        pytest.param({"koordinator.sh/qosClass": "LS"}, {}, G, 2, id="koord:use koord qos / set ls pod bvt"),
        pytest.param({}, {}, B, 2, id="koord:use kube qos"),
        pytest.param({}, {}, BE_K, -1, id="no label, BestEffort: BE"),
        pytest.param(
            {"koordinator.sh/qosClass": "LS"},
            {"koordinator.sh/cpuQOS": '{"enable":true,"groupIdentity":-1}'},
            G,
            -1,
            id="koord:set ls pod bvt with annoation override succeed",
        ),
        pytest.param(
            {"koordinator.sh/qosClass": "LS"},
            {"koordinator.sh/cpuQOS": '{"enable":false}'},
            G,
            0,
            id="koord:set ls pod bvt with annoation override failed (enable false gives 0)",
        ),
        pytest.param(
            {"koordinator.sh/qosClass": "BE"},
            {"koordinator.sh/cpuQOS": '{"enable":true,"groupIdentity":2}'},
            BE_K,
            -1,
            id="only LS pods may override (BE keeps -1)",
        ),
    ],
)
def test_pod_bvt(labels: dict[str, str], annotations: dict[str, str], kube_qos: KubeQOSClass, want: int) -> None:
    assert pod_bvt(DEFAULT_RULE, labels, annotations, kube_qos) == want


@pytest.mark.parametrize("raw", ['{"groupIdentity": 3}', "not json", "[1]", '{"groupIdentity": "x"}'])
def test_bad_cpu_qos_annotation_names_the_annotation(raw: str) -> None:
    with pytest.raises(CPUQOSAnnotationError, match=r"koordinator\.sh/cpuQOS"):
        pod_bvt(DEFAULT_RULE, {"koordinator.sh/qosClass": "LS"}, {"koordinator.sh/cpuQOS": raw}, B)


# -- the reconciler on a fake tree ---------------------------------------------------------------

UID_LS = "66666666-7777-4888-9999-aaaaaaaaaaaa"
UID_BE = "11111111-2222-4333-8444-555555555555"
UID_GONE = "22222222-2222-4333-8444-555555555555"
ALL_ON = {
    "spec": {"resourceQOSStrategy": {name: {"cpuQOS": {"enable": True}} for name in ("lsrClass", "lsClass", "beClass")}}
}


def anolis_tree(tmp_path: Path, *, sysctl: str | None = "0") -> tuple[PluginContext, FakeCgroups, Path]:
    fake = FakeCgroups(tmp_path / "cgroup", CgroupVersion.V1, CgroupDriver.CGROUPFS)
    layout = fake.fs().layout
    dirs = [layout.qos_dir(q) for q in KubeQOSClass]
    dirs += [f"{layout.pod_dir(B, UID_LS)}/c1", f"{layout.pod_dir(BE_K, UID_BE)}/c1"]
    dirs += [f"{layout.pod_dir(BE_K, UID_GONE)}/c9"]
    for rel in dirs:
        fake.make_dir(rel)
        parts = rel.split("/")
        for i in range(1, len(parts) + 1):
            (fake.root / "cpu" / "/".join(parts[:i]) / "cpu.bvt_warp_ns").write_text("0\n")
    proc = tmp_path / "proc"
    (proc / "sys" / "kernel").mkdir(parents=True)
    if sysctl is not None:
        (proc / "sys" / "kernel" / "sched_group_identity_enabled").write_text(sysctl + "\n")
        (proc / "sys" / "kernel" / "sched_core").write_text("1\n")
    ctx = make_ctx(fake.fs(), clock=FakeClock(), args={"proc_root": proc, "sysfs_root": tmp_path / "sys"})
    ctx.states_informer.replace_pods(
        [
            pod("ls", UID_LS).qos("Burstable", "LS").container("c1", "containerd://c1").build(),
            pod("be", UID_BE).be().container("c1", "containerd://c1").build(),
        ]
    )
    return ctx, fake, proc


def bvt(fake: FakeCgroups, rel: str) -> str:
    return (fake.root / "cpu" / rel / "cpu.bvt_warp_ns").read_text().strip()


def test_bvt_per_kube_qos_dir_pod_container_and_dangling_pod(tmp_path: Path) -> None:
    ctx, fake, proc = anolis_tree(tmp_path)
    ctx.states_informer.set_node_slo(ALL_ON)
    plugin = GroupIdentity()
    plugin.setup(ctx)
    plugin.tick()
    layout = fake.fs().layout
    got = {
        "kubepods": bvt(fake, layout.qos_dir(G)),
        "burstable": bvt(fake, layout.qos_dir(B)),
        "besteffort": bvt(fake, layout.qos_dir(BE_K)),
        "ls-pod": bvt(fake, layout.pod_dir(B, UID_LS)),
        "ls-container": bvt(fake, f"{layout.pod_dir(B, UID_LS)}/c1"),
        "be-pod": bvt(fake, layout.pod_dir(BE_K, UID_BE)),
        "be-container": bvt(fake, f"{layout.pod_dir(BE_K, UID_BE)}/c1"),
        "dangling-pod": bvt(fake, layout.pod_dir(BE_K, UID_GONE)),
        "dangling-container": bvt(fake, f"{layout.pod_dir(BE_K, UID_GONE)}/c9"),
    }
    assert got == {
        "kubepods": "0",
        "burstable": "2",
        "besteffort": "-1",
        "ls-pod": "2",
        "ls-container": "2",
        "be-pod": "-1",
        "be-container": "-1",
        "dangling-pod": "-1",
        "dangling-container": "-1",
    }
    # the kernel switch is turned on, core scheduling off (they exclude each other)
    assert (proc / "sys/kernel/sched_group_identity_enabled").read_text().strip() == "1"
    assert (proc / "sys/kernel/sched_core").read_text().strip() == "0"


def test_rule_off_and_kernel_switch_off_writes_nothing(tmp_path: Path) -> None:
    ctx, fake, _ = anolis_tree(tmp_path, sysctl="0")
    plugin = GroupIdentity()
    plugin.setup(ctx)
    (fake.root / "cpu" / fake.fs().layout.qos_dir(BE_K) / "cpu.bvt_warp_ns").write_text("-1\n")
    plugin.tick()  # default NodeSLO: every class off
    assert bvt(fake, fake.fs().layout.qos_dir(BE_K)) == "-1"


def test_rule_off_with_kernel_switch_on_resets_to_zero(tmp_path: Path) -> None:
    ctx, fake, _ = anolis_tree(tmp_path, sysctl="1")
    plugin = GroupIdentity()
    plugin.setup(ctx)
    (fake.root / "cpu" / fake.fs().layout.qos_dir(BE_K) / "cpu.bvt_warp_ns").write_text("-1\n")
    plugin.tick()
    assert bvt(fake, fake.fs().layout.qos_dir(BE_K)) == "0"


def test_kernel_without_the_sysctl_still_gets_cgroups(tmp_path: Path) -> None:
    """Older Anolis kernels: cpu.bvt_warp_ns without the sysctl, bvt always on."""
    ctx, fake, _ = anolis_tree(tmp_path, sysctl=None)
    ctx.states_informer.set_node_slo(ALL_ON)
    plugin = GroupIdentity()
    plugin.setup(ctx)
    plugin.tick()
    assert bvt(fake, fake.fs().layout.qos_dir(BE_K)) == "-1"


@pytest.mark.parametrize(("gate_on", "want"), [(True, "-1"), (False, "0")])
async def test_group_identity_acts_only_with_its_gate(tmp_path: Path, gate_on: bool, want: str) -> None:
    ctx, fake, _ = anolis_tree(tmp_path)
    ctx.states_informer.set_node_slo(ALL_ON)
    manager = QOSManager(builtin_registry())
    manager.instantiate()
    overrides: Mapping[str, bool] = {"AllBeta": False, "GroupIdentity": gate_on}
    gates = FeatureGates.resolve({**KOORDLET_FEATURES, **builtin_registry().feature_specs()}, overrides)
    await run_until_ticked(manager, gates, ctx)
    assert bvt(fake, fake.fs().layout.pod_dir(BE_K, UID_BE)) == want
