"""CPUSetAllocator over cgroup trees in a temp directory, v1 and v2: bound containers get their cpuset and
no CFS quota, LS containers the LS pool, BE containers are left to CPU suppress."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from apis.extension.qos import KubeQOSClass
from koordlet.qosmanager.plugins.cpuset.plugin import CPUSetAllocator
from koordlet.system import CgroupFS, CgroupVersion
from koordlet.system.layout import CgroupDriver, parse_container_id
from tests.unit.koordlet.topology.sysfs_tree import write_sysfs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "qos"))
from qos_helpers import make_ctx, pod

STATUS = "scheduling.koordinator.sh/resource-status"
UIDS = {"lsr": "11111111-0000-0000-0000-000000000001", "ls": "11111111-0000-0000-0000-000000000002",
        "be": "11111111-0000-0000-0000-000000000003"}  # fmt: skip


def _tree(root: Path, version: CgroupVersion) -> tuple[CgroupFS, dict[str, str]]:
    fs = CgroupFS(root, version, CgroupDriver.CGROUPFS, "kubepods")
    qos = {"lsr": "Guaranteed", "ls": "Burstable", "be": "BestEffort"}
    dirs: dict[str, str] = {}
    for name, uid in UIDS.items():
        cid = parse_container_id(f"containerd://{name}0000")
        assert cid is not None
        rel = fs.layout.container_dir(KubeQOSClass(qos[name]), uid, cid)
        pod_rel = fs.layout.pod_dir(KubeQOSClass(qos[name]), uid)
        dirs[name] = rel
        dirs[f"{name}-pod"] = pod_rel
        for sub in ("cpuset", "cpu") if version is CgroupVersion.V1 else ("",):
            for d in (pod_rel, rel):
                path = (root / sub / d) if sub else (root / d)
                path.mkdir(parents=True, exist_ok=True)
                if version is CgroupVersion.V1 and sub == "cpuset":
                    (path / "cpuset.cpus").write_text("0-15\n")
                elif version is CgroupVersion.V1:
                    (path / "cpu.cfs_quota_us").write_text("400000\n")
                    (path / "cpu.cfs_period_us").write_text("100000\n")
                else:
                    (path / "cpuset.cpus").write_text("\n")
                    (path / "cpu.max").write_text("400000 100000\n")
    return fs, dirs


@pytest.mark.parametrize("version", [CgroupVersion.V1, CgroupVersion.V2], ids=["v1", "v2"])
def test_cpusets_and_quota(tmp_path: Path, version: CgroupVersion) -> None:
    fs, dirs = _tree(tmp_path / "cgroup", version)
    sysfs = write_sysfs(tmp_path / "sys", sockets=2, nodes_per_socket=1, cores_per_node=4, threads=2)
    ctx = make_ctx(fs, clock=lambda: 1000.0, args={"sysfs_root": sysfs,
                                                     "kubelet_cpu_manager_state": tmp_path / "none"})  # fmt: skip
    informer = ctx.states_informer
    informer.replace_pods([
        pod("lsr", UIDS["lsr"]).qos("Guaranteed", "LSR").annotation(STATUS, json.dumps({"cpuset": "0-1,8-9"}))
        .container("main", "containerd://lsr0000").build(),
        pod("ls", UIDS["ls"]).qos("Burstable", "LS").container("main", "containerd://ls0000").build(),
        pod("be", UIDS["be"]).be().container("main", "containerd://be0000").build(),
    ])  # fmt: skip
    plugin = CPUSetAllocator()
    plugin.setup(ctx)
    plugin.tick()
    assert fs.cpuset(dirs["lsr"]) == frozenset({0, 1, 8, 9})
    assert fs.cpuset(dirs["ls"]) == frozenset(range(16)) - {0, 1, 8, 9}
    # BE is left to CPU suppress: its file keeps what it had.
    assert fs.cpuset(dirs["be"]) == (frozenset(range(16)) if version is CgroupVersion.V1 else frozenset())
    assert fs.cfs_quota(dirs["lsr"])[0] == -1  # type: ignore[index]
    assert fs.cfs_quota(dirs["lsr-pod"])[0] == -1  # type: ignore[index]
    assert fs.cfs_quota(dirs["ls"])[0] == 400000  # type: ignore[index]
