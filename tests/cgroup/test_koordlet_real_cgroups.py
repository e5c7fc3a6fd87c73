"""Collectors against the machine's real cgroup v1 controllers (root). Marked ``cgroup``."""

from __future__ import annotations

import time

import pytest
from koordlet_real_cgroups import ALLOC, BURN, proc_cpu_seconds, real_pods, writable_cgroup_v1

from apis.extension import KubeQOSClass
from apis.slo import ResolvedCollectPolicy
from koordlet.metriccache import MetricCache, MetricKind
from koordlet.metricsadvisor import CacheUsageSource, MetricsAdvisor
from koordlet.statesinformer import StatesInformer, build_node_metric_status
from koordlet.system import ProcFS

pytestmark = [pytest.mark.cgroup]

_SKIP = writable_cgroup_v1()

UID_BUSY = "6a0f3c52-1d2e-4b7a-9c3d-0e1f2a3b4c5d"
UID_IDLE = "7b1e4d63-2e3f-4c8b-8d4e-1f2a3b4c5d6e"
UID_ALLOC = "8c2f5e74-3f4a-4d9c-9e5f-2a3b4c5d6e7f"


def _raw_pod(name: str, uid: str, qos: str, priority: int) -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": "cgtest", "uid": uid},
        "spec": {"priority": priority, "containers": [{"name": "main"}]},
        "status": {"qosClass": qos, "phase": "Running"},
    }


@pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
def test_real_pod_cpu_and_memory() -> None:
    with real_pods() as pods:
        fs = pods.cgroupfs()
        layout = fs.layout
        busy_dir = layout.pod_dir(KubeQOSClass.BURSTABLE, UID_BUSY)
        idle_dir = layout.pod_dir(KubeQOSClass.BEST_EFFORT, UID_IDLE)
        alloc_dir = layout.pod_dir(KubeQOSClass.BURSTABLE, UID_ALLOC)
        for rel in (busy_dir, idle_dir, alloc_dir):
            pods.make(rel)
        busy = pods.spawn(busy_dir, BURN)
        pods.spawn(idle_dir, "import time; time.sleep(600)")
        alloc = pods.spawn(alloc_dir, ALLOC)
        assert alloc.stdin is not None and alloc.stdout is not None
        alloc.stdin.write("\n")
        alloc.stdin.flush()
        assert alloc.stdout.readline().strip() == "ok"

        informer = StatesInformer("node-1", layout)
        informer.replace_pods(
            [
                _raw_pod("busy", UID_BUSY, "Burstable", 9500),
                _raw_pod("idle", UID_IDLE, "BestEffort", 5500),
                _raw_pod("alloc", UID_ALLOC, "Burstable", 7500),
            ]
        )
        cache = MetricCache()
        advisor = MetricsAdvisor(fs, ProcFS(), cache, informer.get_all_pods)

        time.sleep(0.5)  # let the burner get going
        advisor.collect_once(time.time())
        truth_start = proc_cpu_seconds(busy.pid)
        t_start = time.time()
        for _ in range(3):
            time.sleep(1.0)
            advisor.collect_once(time.time())
        truth_cores = (proc_cpu_seconds(busy.pid) - truth_start) / (time.time() - t_start)
        now = time.time()

        busy_stats = cache.query(MetricKind.POD_CPU_USAGE, UID_BUSY, 0, now)
        idle_stats = cache.query(MetricKind.POD_CPU_USAGE, UID_IDLE, 0, now)
        alloc_mem = cache.query(MetricKind.POD_MEMORY_USAGE, UID_ALLOC, 0, now)
        assert busy_stats is not None and idle_stats is not None and alloc_mem is not None
        print(
            f"busy pod: collected {busy_stats.avg:.3f} cores, /proc truth {truth_cores:.3f} cores; "
            f"idle {idle_stats.avg:.4f}; alloc pod memory {alloc_mem.last / 2**20:.1f} MiB"
        )
        assert busy_stats.count == 3
        assert busy_stats.avg == pytest.approx(truth_cores, rel=0.15)
        # It really burns: a core on a quiet machine, less when neighbours share the 2 CPUs; the check that
        # matters is the agreement with /proc above, this one only rules out agreeing on next to nothing.
        assert busy_stats.avg > 0.1
        assert idle_stats.avg < 0.05
        assert alloc_mem.last >= 200 * 2**20
        assert alloc_mem.last < 260 * 2**20

        status = build_node_metric_status(
            CacheUsageSource(cache), informer.get_all_pods(), ResolvedCollectPolicy(), now
        ).to_wire()
        got = {(p["name"], p["priority"], p["qos"]) for p in status["podsMetric"]}
        assert got == {
            ("busy", "koord-prod", "LS"),
            ("idle", "koord-batch", "BE"),
            ("alloc", "koord-mid", "LS"),
        }
        assert advisor.errors == 0
