"""koordlet's CgroupLayout and the unit tests' fake cgroup trees against the layout a real kubelet
(cgroupfs driver, cgroup v1) and containerd made: tests/fixtures/node-layout/cgroupfs-v1.json, recorded on
the real node by tests/node/test_real_layout_fixture.py (which fails when the node stops matching it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from koordlet_fakes import FakeCgroups

from apis.extension import KubeQOSClass
from koordlet.system import CgroupVersion
from koordlet.system.cgroupfs import CgroupFS
from koordlet.system.layout import CgroupDriver, CgroupLayout, ContainerID, ContainerRuntime
from koordlet.system.resources import RESOURCES

REPO = Path(__file__).resolve().parents[3]
REAL = json.loads((REPO / "tests" / "fixtures" / "node-layout" / "cgroupfs-v1.json").read_text())
UID = "0a1b2c3d-0000-4000-8000-000000000001"
CONTAINER = "c" * 64


@pytest.mark.parametrize(
    "qos",
    [
        pytest.param(KubeQOSClass.GUARANTEED, id="guaranteed"),
        pytest.param(KubeQOSClass.BURSTABLE, id="burstable"),
        pytest.param(KubeQOSClass.BEST_EFFORT, id="besteffort"),
    ],
)
def test_pod_and_container_dirs_are_kubelets(qos: KubeQOSClass) -> None:
    layout = CgroupLayout.for_driver(CgroupDriver.CGROUPFS, "<kubepods>")
    assert layout.pod_dir(qos, "<uid>") == REAL["pod_dirs"][qos.value]
    container = layout.container_dir(qos, "<uid>", ContainerID(ContainerRuntime.CONTAINERD, CONTAINER))
    assert container == f"{REAL['pod_dirs'][qos.value]}/{CONTAINER}"
    # Beside the containers, a pod's cgroup holds its sandbox (pause): koordlet must not take it for one.
    assert REAL["pod_children"][qos.value] == ["<container-id>", "<sandbox-id>"]


def test_every_file_the_fakes_write_exists_on_a_real_container_cgroup(tmp_path: Path) -> None:
    fake = FakeCgroups(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS)
    fake.set_usage("kubepods/burstable/podx/c", cpu_ns=1, mem_anon=2, mem_file=3, periods=4, throttled=5)
    written = {p.name for p in tmp_path.rglob("*") if p.is_file()}
    real_files = {name for name, present in REAL["container_files"].items() if present}
    assert written <= real_files
    memory_stat = (tmp_path / "memory" / "kubepods/burstable/podx/c" / "memory.stat").read_text()
    assert {line.split()[0] for line in memory_stat.splitlines()} <= set(REAL["memory_stat_keys"])
    cpu_stat = (tmp_path / "cpu" / "kubepods/burstable/podx/c" / "cpu.stat").read_text()
    assert {line.split()[0] for line in cpu_stat.splitlines()} <= set(REAL["cpu_stat_keys"])


def test_the_memory_koordlet_reads_is_in_a_real_memory_stat() -> None:
    """MemoryStat's v1 keys (hierarchical ``total_*``, ``total_rss``/``total_cache``) are the kernel's."""
    wanted = {
        "total_rss",
        "total_cache",
        "total_active_anon",
        "total_inactive_anon",
        "total_active_file",
        "total_inactive_file",
        "total_unevictable",
    }
    assert wanted <= set(REAL["memory_stat_keys"])


def test_the_files_koordlet_reads_and_writes_for_qos_exist_on_the_real_kernel() -> None:
    needed = {
        "cpu.cfs_quota_us",
        "cpu.cfs_period_us",
        "cpu.shares",
        "cpu.stat",
        "cpuacct.usage",
        "cpuset.cpus",
        "memory.limit_in_bytes",
        "memory.usage_in_bytes",
        "memory.stat",
        "cgroup.procs",
    }
    missing = {name for name in needed if not REAL["container_files"][name]}
    assert missing == set()
    assert set(REAL["container_files"]) == set(RESOURCES)


def test_koordlet_reads_a_fake_tree_shaped_like_the_real_one(tmp_path: Path) -> None:
    """The same tree the fixture describes (kubepods under a cgroupRoot, a container beside its sandbox):
    the driver is detected from the kubepods dir and the container's usage is read."""
    kubepods = "pykoord-1/kubepods"
    fake = FakeCgroups(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS)
    pod_dir = REAL["pod_dirs"]["Burstable"].replace("<kubepods>", kubepods).replace("<uid>", UID)
    fake.set_usage(f"{pod_dir}/{CONTAINER}", cpu_ns=7_000_000_000, mem_anon=64 << 20)
    fake.set_usage(f"{pod_dir}/{'d' * 64}", cpu_ns=1_000)
    fs = CgroupFS.detect(tmp_path, kubepods)
    assert fs.driver is CgroupDriver.CGROUPFS
    container = fs.layout.container_dir(
        KubeQOSClass.BURSTABLE, UID, ContainerID(ContainerRuntime.CONTAINERD, CONTAINER)
    )
    assert fs.cpu_usage_ns(container) == 7_000_000_000
    stat = fs.memory_stat(container)
    assert stat is not None and stat.usage_without_page_cache == 64 << 20
