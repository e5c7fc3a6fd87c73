"""The repair half of the hook gates that had no reconciler: CPUNormalization and OOMScoreAdj keep running
containers at the values the NRI hook gave them at creation (temp cgroup trees and a temp /proc)."""

from __future__ import annotations

from pathlib import Path

from koordlet_fakes import FakeCgroups
from qos_helpers import make_ctx, make_node, pod

from koordlet.qosmanager.plugins.cpunormalization import plugin as cpunormalization
from koordlet.qosmanager.plugins.oomscoreadj import plugin as oomscoreadj
from koordlet.qosmanager.plugins.oomscoreadj.policy import ANNOTATION_OOM_SCORE_ADJ, ANNOTATION_OOM_SCORE_ADJ_SPEC
from koordlet.system import CgroupDriver, CgroupVersion
from koordlet.system.clock import FakeClock

RATIO = "node.koordinator.sh/cpu-normalization-ratio"
LS_UID, BE_UID = "11111111-2222-4333-8444-000000000001", "11111111-2222-4333-8444-000000000002"


def _read(fake: FakeCgroups, rel: str, name: str) -> str:
    return (fake.root / ("memory" if name.startswith("memory") else "cpu") / rel / name).read_text().strip()


def test_cpu_normalization_scales_ls_pod_and_containers_and_leaves_be_alone(tmp_path: Path) -> None:
    fake = FakeCgroups(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS)
    fs = fake.fs()
    ctx = make_ctx(fs, clock=FakeClock())
    ctx.states_informer.set_node(make_node(cpu="8", annotations={RATIO: "1.25"}))
    ls = pod("ls", LS_UID).qos("Burstable", "LS").container("main", "containerd://ls1", limits={"cpu": "1"})
    be = pod("be", BE_UID).be().container("main", "containerd://be1")
    ctx.states_informer.replace_pods([ls.build(), be.build()])
    metas = {m.name: m for m in ctx.states_informer.get_all_pods()}
    dirs = {}
    for name, meta in metas.items():
        container_dir = meta.container_dir(fs.layout, meta.containers[0])
        assert container_dir is not None
        dirs[name] = (meta.cgroup_dir, container_dir)
        for rel in dirs[name]:
            fake.set_usage(rel)
            (fake.root / "cpu" / rel / "cpu.cfs_quota_us").write_text("100000\n")
    plugin = cpunormalization.CPUNormalization()
    plugin.setup(ctx)
    plugin.tick()
    assert [_read(fake, rel, "cpu.cfs_quota_us") for rel in dirs["ls"]] == ["80000", "80000"]
    assert [_read(fake, rel, "cpu.cfs_quota_us") for rel in dirs["be"]] == ["100000", "100000"]
    # the ratio goes back to 1: the kubelet's quota comes back (Koordinator's enabled rule with ratio <= 1)
    ctx.states_informer.set_node(make_node(cpu="8", annotations={RATIO: "1.0"}))
    plugin.tick()
    assert [_read(fake, rel, "cpu.cfs_quota_us") for rel in dirs["ls"]] == ["100000", "100000"]


def test_oom_score_adj_reconciler_rewrites_processes_that_drifted(tmp_path: Path) -> None:
    fake = FakeCgroups(tmp_path / "cgroup", CgroupVersion.V1, CgroupDriver.CGROUPFS)
    fs = fake.fs()
    proc = tmp_path / "proc"
    ctx = make_ctx(fs, clock=FakeClock(), args={"proc_root": proc})
    ctx.states_informer.set_node(make_node())
    builder = (
        pod("web", LS_UID)
        .qos("Burstable", "LS")
        .annotation(ANNOTATION_OOM_SCORE_ADJ, "500")
        .annotation(ANNOTATION_OOM_SCORE_ADJ_SPEC, '{"sidecar": 900}')
        .container("main", "containerd://m1")
        .container("sidecar", "containerd://s1")
    )
    ctx.states_informer.replace_pods([builder.build()])
    meta = ctx.states_informer.get_all_pods()[0]
    pids = {"main": [101, 102], "sidecar": [201]}
    for container in meta.containers:
        rel = meta.container_dir(fs.layout, container)
        assert rel is not None
        fake.make_dir(rel)
        (fake.root / "cpu" / rel / "cgroup.procs").write_text("".join(f"{p}\n" for p in pids[container.name]))
        for pid in pids[container.name]:
            (proc / str(pid)).mkdir(parents=True)
            (proc / str(pid) / "oom_score_adj").write_text("0\n")
    (proc / "102" / "oom_score_adj").write_text("500\n")  # already right: not rewritten
    plugin = oomscoreadj.OOMScoreAdj()
    plugin.setup(ctx)
    plugin.tick()
    got = {pid: (proc / str(pid) / "oom_score_adj").read_text().strip() for pid in (101, 102, 201)}
    assert got == {101: "500", 102: "500", 201: "900"}
    assert plugin.written == 2 and plugin.object_errors == 0


def test_oom_score_adj_bad_annotation_is_contained_to_its_pod(tmp_path: Path) -> None:
    fake = FakeCgroups(tmp_path / "cgroup", CgroupVersion.V1, CgroupDriver.CGROUPFS)
    ctx = make_ctx(fake.fs(), clock=FakeClock(), args={"proc_root": tmp_path / "proc"})
    bad = pod("bad", LS_UID).annotation(ANNOTATION_OOM_SCORE_ADJ, "-2000").container("main", "containerd://b1")
    ctx.states_informer.replace_pods([bad.build()])
    plugin = oomscoreadj.OOMScoreAdj()
    plugin.setup(ctx)
    plugin.tick()
    assert plugin.object_errors == 1 and plugin.errors == 0
