"""The gated strategies and probes against the machine's real cgroup v1 controllers and kernel (root).
Marked ``cgroup``. Each test builds a kubepods hierarchy under a unique directory of the controllers it needs
and removes everything it made, even when it fails. Where the kernel lacks an interface (core scheduling,
hardware perf events), the test checks that the probe says so, naming the missing interface.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from koordlet_real_cgroups import ROOT, writable_cgroup_v1
from qos_helpers import make_ctx, make_node, pod

from apis.extension import KubeQOSClass
from koordlet.metriccache import MetricCache, MetricKind
from koordlet.metricsadvisor.coldpage import ColdPageCollector
from koordlet.qosmanager.plugins.blkio.plugin import BlkIOReconcile
from koordlet.qosmanager.plugins.cgreconcile.plugin import CgroupReconcile
from koordlet.qosmanager.plugins.coresched.plugin import CoreSched
from koordlet.qosmanager.plugins.sysreconcile.plugin import SystemConfig
from koordlet.system import CgroupFS, CgroupVersion, ProcFS
from koordlet.system.clock import FakeClock
from koordlet.system.coresched import PrctlCoreSched, core_sched_missing
from koordlet.system.hugepages import read_numa_hugepages
from koordlet.system.kernelfeatures import kidled_missing
from koordlet.system.kidled import Kidled
from koordlet.system.layout import CgroupDriver
from koordlet.system.perf import (
    HARDWARE_CPI_EVENTS,
    PERF_COUNT_SW_TASK_CLOCK,
    PERF_TYPE_SOFTWARE,
    CounterSet,
    open_cgroup_counters,
    perf_hardware_missing,
)

pytestmark = [
    pytest.mark.cgroup,
    pytest.mark.skipif(writable_cgroup_v1() is not None, reason=str(writable_cgroup_v1())),
]
UID_BE = "9b5e6f70-8192-4da4-9ebf-3a4b5c6d7e8f"
UID_LS = "8a4d5e6f-7081-4c93-8dae-2f3a4b5c6d7e"


@contextlib.contextmanager
def real_tree(controllers: tuple[str, ...]) -> Iterator[tuple[CgroupFS, Callable[[str], None]]]:
    """A CgroupFS whose kubepods is ``<unique base>/kubepods`` in ``controllers``; ``make(rel)`` creates."""
    base = f"pykoord-gates-{uuid.uuid4().hex[:8]}"
    made: list[str] = []

    def make(rel: str) -> None:
        parts = rel.split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub not in made:
                for controller in controllers:
                    (ROOT / controller / sub).mkdir(exist_ok=True)
                made.append(sub)

    try:
        make(f"{base}/kubepods")
        yield CgroupFS(ROOT, CgroupVersion.V1, CgroupDriver.CGROUPFS, f"{base}/kubepods"), make
    finally:
        for rel in reversed(made):
            for controller in controllers:
                for _ in range(50):
                    try:
                        (ROOT / controller / rel).rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.1)
        assert not any((ROOT / c / base).exists() for c in controllers), "test cgroups left behind"


# -- CoreSched --------------------------------------------------------------------------------------


def test_core_sched_probe_matches_the_kernel() -> None:
    """The probe says core scheduling is there exactly when prctl(PR_SCHED_CORE_GET) works."""
    try:
        PrctlCoreSched().get(0)
        works = True
    except OSError as err:
        assert err.errno in (errno.EINVAL, errno.ENODEV, errno.EPERM)
        works = False
    missing = core_sched_missing()
    assert (missing is None) is works
    if not works:
        assert missing is not None and "PR_SCHED_CORE" in missing


@pytest.mark.skipif(not (ROOT / "cpu" / "cpu.idle").exists(), reason="this kernel has no cpu.idle in cgroup v1")
def test_core_sched_sets_cpu_idle_of_the_besteffort_cgroup(tmp_path: Path) -> None:
    with real_tree(("cpu",)) as (fs, make):
        for qos in KubeQOSClass:
            make(fs.layout.qos_dir(qos))
        ctx = make_ctx(fs, clock=FakeClock(), args={"proc_root": tmp_path, "sysfs_root": tmp_path})
        ctx.states_informer.set_node_slo(
            {
                "spec": {
                    "resourceQOSStrategy": {
                        "policies": {"cpuPolicy": "coreSched"},
                        "beClass": {"cpuQOS": {"enable": True, "schedIdle": 1}},
                    }
                }
            }
        )
        plugin = CoreSched()
        plugin.setup(ctx)
        plugin.tick()
        besteffort = ROOT / "cpu" / fs.layout.qos_dir(KubeQOSClass.BEST_EFFORT) / "cpu.idle"
        burstable = ROOT / "cpu" / fs.layout.qos_dir(KubeQOSClass.BURSTABLE) / "cpu.idle"
        assert (besteffort.read_text().strip(), burstable.read_text().strip()) == ("1", "0")
        ctx.states_informer.set_node_slo(None)
        plugin.tick()
        assert besteffort.read_text().strip() == "0"


@pytest.mark.skipif(core_sched_missing() is not None, reason=f"no core scheduling here: {core_sched_missing()}")
def test_core_sched_gives_one_cookie_per_group_to_real_processes(tmp_path: Path) -> None:
    with real_tree(("cpu",)) as (fs, make):
        procs: list[subprocess.Popen[bytes]] = []
        try:
            for uid, qos in ((UID_LS, KubeQOSClass.BURSTABLE), (UID_BE, KubeQOSClass.BEST_EFFORT)):
                rel = f"{fs.layout.pod_dir(qos, uid)}/c1"
                make(rel)
                for _ in range(2):
                    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
                    procs.append(proc)
                    (ROOT / "cpu" / rel / "cgroup.procs").write_text(str(proc.pid))
            ctx = make_ctx(fs, clock=FakeClock(), args={"proc_root": tmp_path, "sysfs_root": tmp_path})
            ctx.states_informer.replace_pods(
                [
                    pod("ls", UID_LS).qos("Burstable", "LS").container("c1", "containerd://c1").build(),
                    pod("be", UID_BE).be().container("c1", "containerd://c1").build(),
                ]
            )
            ctx.states_informer.set_node_slo(
                {
                    "spec": {
                        "resourceQOSStrategy": {
                            "policies": {"cpuPolicy": "coreSched"},
                            "lsClass": {"cpuQOS": {"enable": True}},
                            "beClass": {"cpuQOS": {"enable": True}},
                        }
                    }
                }
            )
            plugin = CoreSched()
            plugin.setup(ctx)
            plugin.tick()
            ops = PrctlCoreSched()
            ls = {ops.get(p.pid) for p in procs[:2]}
            be = {ops.get(p.pid) for p in procs[2:]}
            assert len(ls) == 1 and len(be) == 1 and ls != be and 0 not in ls | be
            ctx.states_informer.set_node_slo(None)
            plugin.tick()
            assert {ops.get(p.pid) for p in procs} == {0}
        finally:
            for proc in procs:
                proc.kill()
                proc.wait(timeout=10)


# -- BlkIOReconcile ---------------------------------------------------------------------------------


def _first_disk() -> str | None:
    for entry in sorted(Path("/sys/block").iterdir()):
        if not entry.name.startswith(("loop", "zram", "ram")) and (entry / "dev").exists():
            return entry.name
    return None


@pytest.mark.skipif(
    not (ROOT / "blkio" / "blkio.throttle.read_bps_device").exists() or _first_disk() is None,
    reason="no blkio throttle files or no disk",
)
def test_blkio_throttles_the_besteffort_cgroup_and_resets_it() -> None:
    disk = _first_disk()
    assert disk is not None
    number = (Path("/sys/block") / disk / "dev").read_text().strip()
    with real_tree(("blkio",)) as (fs, make):
        besteffort = fs.layout.qos_dir(KubeQOSClass.BEST_EFFORT)
        make(besteffort)
        ctx = make_ctx(fs, clock=FakeClock(), args={"sysfs_root": Path("/sys")})
        io = {"readBPS": 1048576, "writeIOPS": 300}
        ctx.states_informer.set_node_slo(
            {
                "spec": {
                    "resourceQOSStrategy": {
                        "beClass": {
                            "blkioQOS": {
                                "enable": True,
                                "blocks": [{"name": f"/dev/{disk}", "type": "device", "ioCfg": io}],
                            }
                        }
                    }
                }
            }
        )
        plugin = BlkIOReconcile()
        plugin.setup(ctx)
        plugin.tick()
        base = ROOT / "blkio" / besteffort
        assert (base / "blkio.throttle.read_bps_device").read_text().split() == [number, "1048576"]
        assert (base / "blkio.throttle.write_iops_device").read_text().split() == [number, "300"]
        assert (base / "blkio.throttle.read_iops_device").read_text() == ""
        assert plugin.errors == 0 and plugin.object_errors == 0
        ctx.states_informer.set_node_slo(None)  # blkio off: the rules are removed
        plugin.tick()
        assert (base / "blkio.throttle.read_bps_device").read_text() == ""
        assert (base / "blkio.throttle.write_iops_device").read_text() == ""


# -- SystemConfig -----------------------------------------------------------------------------------


def test_system_config_reads_the_real_sysctls_and_leaves_equal_values_alone() -> None:
    """On the machine's own /proc: a NodeSLO asking for the values the kernel already has writes nothing
    (the test must not change a shared machine's memory settings)."""
    min_free = int(Path("/proc/sys/vm/min_free_kbytes").read_text())
    watermark = int(Path("/proc/sys/vm/watermark_scale_factor").read_text())
    fs = CgroupFS(ROOT, CgroupVersion.V1, CgroupDriver.CGROUPFS, "pykoord-none/kubepods")
    ctx = make_ctx(fs, clock=FakeClock(), args={"proc_root": Path("/proc"), "sysfs_root": Path("/sys")})
    # capacity such that capacity / 1024 * 100 / 10000 == min_free_kbytes
    ctx.states_informer.set_node(make_node(memory=str(min_free * 100 * 1024)))
    strategy = {"minFreeKbytesFactor": 100, "watermarkScaleFactor": watermark, "memcgReapBackGround": 1}
    ctx.states_informer.set_node_slo({"spec": {"systemStrategy": strategy}})
    plugin = SystemConfig()
    plugin.setup(ctx)
    plugin.tick()
    assert plugin.errors == 0
    assert plugin.written == []  # equal values; no memcg_reaper on a mainline kernel: skipped
    assert int(Path("/proc/sys/vm/min_free_kbytes").read_text()) == min_free


# -- CgroupReconcile: the copied memory QoS fields ------------------------------------------------------

MEMORY_FIELDS = {
    "memory.wmark_ratio": "90",
    "memory.wmark_scale_factor": "30",
    "memory.wmark_min_adj": "-10",
    "memory.priority": "5",
    "memory.use_priority_oom": "1",
    "memory.oom.group": "1",
}


def test_cgroup_reconcile_writes_the_memory_fields_this_kernel_has() -> None:
    """Each field is written where the kernel offers the file and skipped without an error where it does not
    (mainline cgroup v1 has none of them; Anolis v1 has all; v2 has memory.oom.group)."""
    with real_tree(("memory", "cpu")) as (fs, make):
        pod_dir = fs.layout.pod_dir(KubeQOSClass.BURSTABLE, UID_LS)
        make(f"{pod_dir}/c1")
        ctx = make_ctx(fs, clock=FakeClock())
        ctx.states_informer.replace_pods(
            [pod("ls", UID_LS).qos("Burstable", "LS").container("c1", "containerd://c1").build()]
        )
        cfg = {"enable": True, "wmarkRatio": 90, "wmarkScalePermill": 30, "wmarkMinAdj": -10}
        cfg |= {"priority": 5, "priorityEnable": 1, "oomKillGroup": 1}
        ctx.states_informer.set_node_slo({"spec": {"resourceQOSStrategy": {"lsClass": {"memoryQOS": cfg}}}})
        plugin = CgroupReconcile()
        plugin.setup(ctx)
        plugin.tick()
        assert plugin.errors == 0 and plugin.object_errors == 0
        for rel in (pod_dir, f"{pod_dir}/c1"):
            for name, value in MEMORY_FIELDS.items():
                path = ROOT / "memory" / rel / name
                if path.exists():
                    assert path.read_text().strip() == value, path
        offered = {n for n in MEMORY_FIELDS if (ROOT / "memory" / fs.layout.kubepods_dir / n).exists()}
        assert plugin.supported_memory_files() & set(MEMORY_FIELDS) == offered


# -- HugePageReport, CPICollector, ColdPageCollector ---------------------------------------------------


def test_hugepages_per_numa_node_match_sysfs() -> None:
    found = read_numa_hugepages(Path("/sys"))
    nodes = sorted(Path("/sys/devices/system/node").glob("node[0-9]*"))
    assert sorted(found) == sorted(int(n.name[4:]) for n in nodes)
    for node in nodes:
        for size in (2048, 1048576):
            nr = node / "hugepages" / f"hugepages-{size}kB" / "nr_hugepages"
            assert found[int(node.name[4:])][size] == (int(nr.read_text()) if nr.exists() else 0)


def test_perf_event_open_counts_a_real_process() -> None:
    """The syscall wrapper on this kernel: a software task-clock counter on a busy child grows (hardware
    events need a PMU; see the next test)."""
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        counters = CounterSet.open([(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK)], pid=child.pid, cpus=[-1])
        try:
            counters.start()
            time.sleep(0.3)
            first = counters.read()[(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK)]
            time.sleep(0.3)
            second = counters.read()[(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK)]
        finally:
            counters.close()
        assert 0 < first < second  # nanoseconds of CPU the child used
    finally:
        child.kill()
        child.wait(timeout=10)


def test_cpi_probe_names_what_is_missing_or_cpi_counts_a_real_cgroup() -> None:
    missing = perf_hardware_missing(ROOT, v2=False)
    if missing is not None:
        assert "perf_event" in missing or "PMU" in missing
        return
    with real_tree(("perf_event", "cpu")) as (fs, make):
        rel = f"{fs.layout.pod_dir(KubeQOSClass.BURSTABLE, UID_LS)}/c1"
        make(rel)
        child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            (ROOT / "perf_event" / rel / "cgroup.procs").write_text(str(child.pid))
            counters = open_cgroup_counters(
                ROOT / "perf_event" / rel, list(range(os.cpu_count() or 1)), HARDWARE_CPI_EVENTS
            )
            counters.start()
            time.sleep(0.5)
            counts = counters.read()
            counters.close()
            assert all(v > 0 for v in counts.values())
        finally:
            child.kill()
            child.wait(timeout=10)


def test_cold_page_probe_or_collector_on_the_real_kernel(tmp_path: Path) -> None:
    missing = kidled_missing(Path("/sys"))
    if missing is not None:
        assert "kidled" in missing
        assert not Kidled(Path("/sys")).supported()
        return
    clock = FakeClock()
    fs = CgroupFS(ROOT, CgroupVersion.V1, CgroupDriver.CGROUPFS, "kubepods")
    cache = MetricCache(clock=clock)
    collector = ColdPageCollector(
        fs, ProcFS(Path("/proc")), cache, lambda: (), kidled=Kidled(Path("/sys")), clock=clock
    )
    assert collector.collect_once() == 1  # the node
    assert cache.last(MetricKind.NODE_COLD_PAGE_SIZE, "", 10) is not None
