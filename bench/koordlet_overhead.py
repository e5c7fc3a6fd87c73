#!/usr/bin/env python3
"""koordlet overhead: N pod cgroups (temp tree, cgroup v1 files), 1 s collect interval, 30 min simulated.

Each simulated second runs what the agent runs per tick: every collector (node, pods + containers, BE,
system), the Prometheus usage gauges; every 60 s the NodeMetric status is decided (not sent). Time is
simulated with a fake clock, so 30 minutes take well under a minute; CPU is the process CPU time spent in
those calls (``time.process_time``), divided by the simulated duration. RSS is read after the cache holds
30 minutes of samples for every series.

    python bench/koordlet_overhead.py [--pods 100] [--minutes 30] [--json out.json]

Targets: < 2 % of one core and < 80 MB RSS at 100 pods. Koordinator's chart limits the
koordlet to 200m CPU and 256 Mi for up to 200 pods.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

import kubernetes  # noqa: F401  (the real agent has it loaded; count it in RSS)
import psutil
from prometheus_client import CollectorRegistry, generate_latest

from apis.extension import KubeQOSClass
from apis.slo import ResolvedCollectPolicy
from koordlet.app.metrics import KoordletMetrics
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import CacheUsageSource, MetricsAdvisor
from koordlet.statesinformer import StatesInformer, build_node_metric_status
from koordlet.system import CgroupFS, CgroupVersion, ProcFS
from koordlet.system.clock import FakeClock
from koordlet.system.layout import CgroupDriver

QOS = (KubeQOSClass.GUARANTEED, KubeQOSClass.BURSTABLE, KubeQOSClass.BEST_EFFORT)


def _write_cgroup(root: Path, rel: str, cpu_ns: int, mem: int) -> None:
    for sub in ("cpu", "cpuacct", "memory"):
        (root / sub / rel).mkdir(parents=True, exist_ok=True)
    (root / "cpuacct" / rel / "cpuacct.usage").write_text(f"{cpu_ns}\n")
    (root / "cpu" / rel / "cpu.stat").write_text(
        f"nr_periods {cpu_ns // 10**8}\nnr_throttled {cpu_ns // 10**9}\nthrottled_time {cpu_ns // 100}\n"
    )
    (root / "memory" / rel / "memory.stat").write_text(
        "cache 1000\nrss 2000\nrss_huge 0\nshmem 0\nmapped_file 0\ndirty 0\nwriteback 0\npgpgin 1\npgpgout 1\n"
        "pgfault 1\npgmajfault 0\ninactive_anon 1000\nactive_anon 1000\ninactive_file 500\nactive_file 500\n"
        "unevictable 0\nhierarchical_memory_limit 9223372036854771712\ntotal_cache 1000\n"
        f"total_rss {mem}\ntotal_rss_huge 0\ntotal_shmem 0\ntotal_mapped_file 0\ntotal_dirty 0\n"
        "total_writeback 0\ntotal_pgpgin 1\ntotal_pgpgout 1\ntotal_pgfault 1\ntotal_pgmajfault 0\n"
        f"total_inactive_anon {mem // 2}\ntotal_active_anon {mem // 2}\ntotal_inactive_file 500\n"
        "total_active_file 500\ntotal_unevictable 0\n"
    )


def build_tree(root: Path, pods: int) -> list[dict[str, object]]:
    layout = CgroupFS(root, CgroupVersion.V1, CgroupDriver.CGROUPFS).layout
    raw_pods = []
    for i in range(pods):
        uid = str(uuid.UUID(int=i + 1))
        qos = QOS[i % 3]
        cid = f"{i:064x}"
        pod_dir = layout.pod_dir(qos, uid)
        _write_cgroup(root, pod_dir, 10**9 * i, 100 << 20)
        _write_cgroup(root, f"{pod_dir}/{cid}", 10**9 * i, 90 << 20)
        raw_pods.append(
            {
                "metadata": {"name": f"pod-{i}", "namespace": "bench", "uid": uid},
                "spec": {
                    "priority": 9000 if i % 2 else 5000,
                    "containers": [{"name": "main", "resources": {"requests": {"cpu": "100m"}}}],
                },
                "status": {
                    "qosClass": qos.value,
                    "containerStatuses": [{"name": "main", "containerID": f"containerd://{cid}"}],
                },
            }
        )
    _write_cgroup(root, layout.qos_dir(KubeQOSClass.BEST_EFFORT), 0, 0)
    return raw_pods


def write_proc(proc: Path, ticks: int) -> None:
    proc.mkdir(exist_ok=True)
    (proc / "stat").write_text(
        f"cpu  {ticks} 0 0 {ticks} 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\ncpu1 0 0 0 0 0 0 0 0 0 0\n"
    )
    (proc / "meminfo").write_text("MemTotal: 8388608 kB\nMemFree: 1000 kB\nMemAvailable: 4194304 kB\n")


def run(pods: int, minutes: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root, proc = Path(tmp) / "cgroup", Path(tmp) / "proc"
        raw_pods = build_tree(root, pods)
        write_proc(proc, 0)
        fs = CgroupFS(root, CgroupVersion.V1, CgroupDriver.CGROUPFS)
        clock = FakeClock(1_800_000_000.0)
        cache = MetricCache(clock=clock)
        informer = StatesInformer("bench-node", fs.layout)
        informer.replace_pods(raw_pods)
        advisor = MetricsAdvisor(fs, ProcFS(proc, clock_ticks=100), cache, informer.get_all_pods, clock=clock)
        registry = CollectorRegistry()
        KoordletMetrics(registry, "bench-node").register_usage(cache, informer.get_all_pods, max_age=2.0)
        source = CacheUsageSource(cache)
        policy = ResolvedCollectPolicy()
        seconds = minutes * 60
        busy = 0.0
        report_busy = 0.0
        for second in range(seconds):
            if second % 60 == 0:  # counters move (cheap stand-in for real cgroup activity)
                for i, raw in enumerate(raw_pods):
                    uid = raw["metadata"]["uid"]  # type: ignore[index]
                    pod = informer.get_pod(uid)
                    assert pod is not None
                    (root / "cpuacct" / pod.cgroup_dir / "cpuacct.usage").write_text(
                        f"{10**9 * i + second * 10**8 * (i % 7)}\n"
                    )
                write_proc(proc, second * 50)
            clock.advance(1.0)
            started = time.process_time()
            advisor.collect_once()
            if second % 15 == 0:  # a Prometheus scrape every 15 s
                generate_latest(registry)
            busy += time.process_time() - started
            if second % 60 == 59:
                started = time.process_time()
                build_node_metric_status(source, informer.get_all_pods(), policy, clock())
                report_busy += time.process_time() - started
        rss = psutil.Process().memory_info().rss
        return {
            "pods": pods,
            "cgroups_read_per_tick": pods * 2 + 1,
            "series": cache.series_count(),
            "simulated_seconds": seconds,
            "cpu_percent_of_one_core": 100 * (busy + report_busy) / seconds,
            "collect_ms_per_tick": 1000 * busy / seconds,
            "report_ms_per_decision": 1000 * report_busy / (seconds // 60),
            "cache_buffer_bytes": cache.nbytes(),
            "bytes_per_series_marginal": cache.bytes_per_series(),
            "cache_bytes_per_live_series": cache.nbytes() / max(cache.series_count(), 1),
            "rss_mb": rss / 2**20,
            "advisor_errors": advisor.errors,
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--minutes", type=int, default=30)
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args()
    result = run(args.pods, args.minutes)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    ok = result["cpu_percent_of_one_core"] < 2.0 and result["rss_mb"] < 80
    print("PASS" if ok else "FAIL: targets are < 2% of a core and < 80 MB RSS", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
