"""CPUSetAllocator against the machine's real cgroup v1 cpuset and cpu controllers (root). Marked ``cgroup``.

The test builds a kubepods hierarchy under a unique directory of both controllers, puts a real process in
each container cgroup, and removes everything it created even when it fails.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from koordlet_real_cgroups import ROOT, writable_cgroup_v1
from qos_helpers import make_ctx, pod

from apis.extension import KubeQOSClass
from koordlet.qosmanager.plugins.cpuset.plugin import CPUSetAllocator
from koordlet.system import CgroupFS, CgroupVersion
from koordlet.system.cputopology import read_cpu_topology
from koordlet.system.layout import CgroupDriver, parse_container_id

pytestmark = [pytest.mark.cgroup]
_SKIP = writable_cgroup_v1()
CONTROLLERS = ("cpuset", "cpu")
UID_LSE = "7f3c4d5e-6f70-4b82-9c9d-1e2f3a4b5c6d"
UID_LS = "8a4d5e6f-7081-4c93-8dae-2f3a4b5c6d7e"
UID_BE = "9b5e6f70-8192-4da4-9ebf-3a4b5c6d7e8f"


@contextlib.contextmanager
def hierarchy() -> Iterator[tuple[CgroupFS, list[str], list[subprocess.Popen[bytes]]]]:
    base = f"pykoord-cpuset-{uuid.uuid4().hex[:8]}"
    made: list[str] = []
    procs: list[subprocess.Popen[bytes]] = []
    try:
        yield CgroupFS(ROOT, CgroupVersion.V1, CgroupDriver.CGROUPFS, f"{base}/kubepods"), made, procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=10)
        for rel in reversed(made):
            for controller in CONTROLLERS:
                for _ in range(50):
                    try:
                        (ROOT / controller / rel).rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.1)
        assert not any((ROOT / c / base).exists() for c in CONTROLLERS), "test cgroups left behind"


def make(rel: str, made: list[str]) -> None:
    """Create every level of ``rel`` in both controllers; a new v1 cpuset starts empty, so copy the parent's."""
    parts = rel.split("/")
    for i in range(1, len(parts) + 1):
        sub = "/".join(parts[:i])
        if sub in made:
            continue
        for controller in CONTROLLERS:
            path = ROOT / controller / sub
            path.mkdir(exist_ok=True)
            if controller == "cpuset":
                for name in ("cpuset.cpus", "cpuset.mems"):
                    (path / name).write_text((path.parent / name).read_text())
        made.append(sub)


@pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
def test_bound_pod_gets_its_cpuset_shared_pods_do_not_include_it() -> None:
    cpus = sorted(read_cpu_topology(Path("/sys")).all_cpus())
    assert len(cpus) >= 2, "needs two CPUs"
    bound = str(cpus[-1])
    with hierarchy() as (fs, made, procs):
        containers = {}
        for name, uid, qos in (
            ("lse", UID_LSE, "Guaranteed"),
            ("ls", UID_LS, "Burstable"),
            ("be", UID_BE, "BestEffort"),
        ):
            cid = parse_container_id(f"containerd://{name}{uid[:8]}")
            assert cid is not None
            rel = fs.layout.container_dir(KubeQOSClass(qos), uid, cid)
            make(rel, made)
            proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            procs.append(proc)
            for controller in CONTROLLERS:
                (ROOT / controller / rel / "cgroup.procs").write_text(str(proc.pid))
            containers[name] = rel
        lse_pod = fs.layout.pod_dir(KubeQOSClass.GUARANTEED, UID_LSE)
        (ROOT / "cpu" / lse_pod / "cpu.cfs_quota_us").write_text("200000")
        ctx = make_ctx(fs, clock=time.time, args={"kubelet_cpu_manager_state": Path("/nonexistent")})
        ctx.states_informer.replace_pods([
            pod("lse", UID_LSE).qos("Guaranteed", "LSE")
            .annotation("scheduling.koordinator.sh/resource-status", json.dumps({"cpuset": bound}))
            .container("main", f"containerd://lse{UID_LSE[:8]}").build(),
            pod("ls", UID_LS).qos("Burstable", "LS").container("main", f"containerd://ls{UID_LS[:8]}").build(),
            pod("be", UID_BE).be().container("main", f"containerd://be{UID_BE[:8]}").build(),
        ])  # fmt: skip
        plugin = CPUSetAllocator()
        plugin.setup(ctx)
        plugin.tick()
        assert fs.cpuset(containers["lse"]) == {int(bound)}
        ls = fs.cpuset(containers["ls"])
        assert ls and int(bound) not in ls and ls == set(cpus) - {int(bound)}
        assert fs.cpuset(containers["be"]) == set(cpus)  # left to CPU suppress
        assert fs.cfs_quota(lse_pod)[0] == -1  # type: ignore[index]
        # The kernel really confines the LSE container's process.
        status = Path(f"/proc/{procs[0].pid}/status").read_text()
        allowed = next(line for line in status.splitlines() if line.startswith("Cpus_allowed_list"))
        assert allowed.split()[-1] == bound
