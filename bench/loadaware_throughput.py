"""In-process throughput with LoadAwareScheduling enabled, against the same run without it.

bench/scheduler_throughput.py's shape (nodes of 4 CPU / 32Gi / 110 pods, pods of 100m / 500Mi,
``--placed`` pods already running, ``--pods`` measured), plus a NodeMetric for every node (fresh, with
usage between 5% and 60% cpu and the placed pods in ``podsMetric``). ``baseline`` is the default
profile; ``loadaware`` adds LoadAwareScheduling (Filter, Score, Reserve) with Koordinator's defaults.
Each run is its own process; the profiles alternate (``--repeat`` runs each, 5 by default) and the run
with the lowest CPU time per pod is kept, because the machines this runs on drift by tens of percent
over a minute. One extra instrumented run gives the plugin's own CPU time per pod. Target: < 15%
slowdown.

    python bench/loadaware_throughput.py                  # 1000 and 5000 nodes
    python bench/loadaware_throughput.py --nodes 5000 --pods 5000 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from measure import measure  # bench/ is the script directory

from apis.config import parse_scheduler_config
from apis.core.parse import parse_node, parse_pod
from bench.scheduler_throughput import node_obj, pod_obj
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.plugins.loadaware.plugin import LoadAwareScheduling
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster

NOW = 1_767_225_600.0
PLUGIN_SECONDS = [0.0]
"""CPU time spent inside LoadAwareScheduling's own methods (the plugin's cost; CPU time, not wall, so
that other processes on a shared machine do not count)."""


def _timed(method: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.process_time()
        try:
            return method(*args, **kwargs)
        finally:
            PLUGIN_SECONDS[0] += time.process_time() - t

    return wrapper


def instrument_plugin() -> None:
    for name in ("sign_pod", "filter_nodes", "score_nodes", "reserve", "unreserve", "on_node_metric"):
        setattr(LoadAwareScheduling, name, _timed(getattr(LoadAwareScheduling, name)))


BASELINE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: {pct}
"""

LOADAWARE = (
    BASELINE
    + """
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled: [{{name: LoadAwareScheduling}}]
"""
)


def node_metric_obj(i: int, placed_on_node: list[int]) -> dict[str, Any]:
    cpu_milli = 200 + (i * 37) % 2200  # 5% .. 60% of 4 cores
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": f"node-{i}"},
        "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        "status": {
            "updateTime": datetime.fromtimestamp(NOW - 20, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": f"{cpu_milli}m", "memory": f"{4 + i % 12}Gi"}}},
            "podsMetric": [
                {
                    "namespace": "bench",
                    "name": f"pod-{p}",
                    "priority": "koord-prod",
                    "podUsage": {"resources": {"cpu": "80m", "memory": "400Mi"}},
                }
                for p in placed_on_node
            ],
        },
    }


async def run_once(nodes: int, placed: int, pods: int, profile: str, pct: int) -> dict[str, Any]:
    node_list = [parse_node(node_obj(i)) for i in range(nodes)]
    placed_pods = [parse_pod(pod_obj(i, f"node-{i % nodes}")) for i in range(placed)]
    pending = [parse_pod(pod_obj(placed + i)) for i in range(pods)]
    per_node: list[list[int]] = [[] for _ in range(nodes)]
    for i in range(placed):
        per_node[i % nodes].append(i)
    metrics = [(f"node-{i}", node_metric_obj(i, per_node[i])) for i in range(nodes)]
    cluster = MemoryCluster.from_objects(node_list, placed_pods + pending, {"NodeMetric": metrics})
    text = (LOADAWARE if profile == "loadaware" else BASELINE).format(pct=pct)
    config = parse_scheduler_config(text, source="bench")
    scheduler = build_scheduler(config, build_registry(use_entry_points=False), cluster, clock=lambda: NOW)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    PLUGIN_SECONDS[0] = 0.0
    m = await measure(scheduler, cluster, pending=pods, placed=placed)
    cpu_seconds = m.cpu_seconds
    bound, elapsed = m.bound, m.seconds
    return {
        "profile": profile,
        "nodes": nodes,
        "pods": pods,
        "bound": bound,
        "seconds": elapsed,
        "pods_per_second": round(bound / elapsed, 1),
        "p50_ms": m.p50_ms,
        "p99_ms": m.p99_ms,
        "cpu_ms_per_pod": round(cpu_seconds * 1000 / max(bound, 1), 4),
        "plugin_ms_per_pod": round(PLUGIN_SECONDS[0] * 1000 / max(bound, 1), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--placed", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--percentage", type=int, default=100, help="percentageOfNodesToScore (0 = adaptive)")
    parser.add_argument(
        "--repeat", type=int, default=5, help="runs per profile, alternating; the lowest CPU ms/pod is kept"
    )
    parser.add_argument("--profile", choices=("baseline", "loadaware", "loadaware-timed"), default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.profile is not None:
        timed = args.profile == "loadaware-timed"
        if timed:
            instrument_plugin()
        profile = "loadaware" if timed else args.profile
        result = asyncio.run(run_once(args.nodes[0], args.placed, args.pods, profile, args.percentage))
        print(json.dumps(result))
        return
    results: list[dict[str, Any]] = []
    for nodes in args.nodes:
        # The profiles alternate (baseline, loadaware, baseline, ...) so that a drift in the machine's
        # speed over the run (other tenants, clock scaling) reaches both alike; the lowest CPU ms/pod of
        # each is kept.
        # The slowdown comes from uninstrumented runs; one more run times the plugin's own methods (the
        # timer calls cost ~10 µs per pod themselves, so that run is not compared).
        best: dict[str, dict[str, Any]] = {}
        for attempt in range(args.repeat):
            for profile in ("baseline", "loadaware", "loadaware-timed")[: 3 if attempt == 0 else 2]:
                cmd = [
                    sys.executable,
                    __file__,
                    "--profile",
                    profile,
                    "--nodes",
                    str(nodes),
                    "--placed",
                    str(args.placed),
                    "--pods",
                    str(args.pods),
                    "--percentage",
                    str(args.percentage),
                ]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                run = json.loads(out.strip().splitlines()[-1])
                if profile not in best or run["cpu_ms_per_pod"] < best[profile]["cpu_ms_per_pod"]:
                    best[profile] = run
        best["loadaware"]["plugin_ms_per_pod"] = best["loadaware-timed"]["plugin_ms_per_pod"]
        results.extend((best["baseline"], best["loadaware"]))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    # "slowdown" is the pods/s ratio (wall clock); "cpu slowdown" the same from CPU ms per pod, which
    # other processes on a shared machine disturb less. "plugin share": CPU time inside
    # LoadAwareScheduling per pod over the baseline's CPU time per pod (the plugin's own part of the
    # slowdown; the rest is the runtime's per-plugin work and the different placements).
    print(
        f"{'nodes':>6} {'profile':>10} {'pods/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'slowdown':>9} "
        f"{'cpu ms/pod':>10} {'cpu slowdown':>12} {'plugin ms/pod':>13} {'plugin share':>12}"
    )
    base: dict[int, dict[str, Any]] = {}
    for r in results:
        slowdown = cpu_slowdown = share = plugin_ms = ""
        if r["profile"] == "baseline":
            base[r["nodes"]] = r
        else:
            b = base[r["nodes"]]
            slowdown = f"{100 * (1 - r['pods_per_second'] / b['pods_per_second']):.1f}%"
            cpu_slowdown = f"{100 * (1 - b['cpu_ms_per_pod'] / r['cpu_ms_per_pod']):.1f}%"
            plugin_ms = f"{r['plugin_ms_per_pod']:.3f}"
            share = f"{100 * r['plugin_ms_per_pod'] / b['cpu_ms_per_pod']:.1f}%"
        print(
            f"{r['nodes']:>6} {r['profile']:>10} {r['pods_per_second']:>9.1f} {r['p50_ms']:>8.3f} "
            f"{r['p99_ms']:>8.3f} {slowdown:>9} {r['cpu_ms_per_pod']:>10.3f} {cpu_slowdown:>12} {plugin_ms:>13} "
            f"{share:>12}"
        )


if __name__ == "__main__":
    main()
