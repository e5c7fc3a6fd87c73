"""In-process scheduling throughput, through the same scheduler core with no API server.

scheduler_perf's SchedulingBasic shape: nodes of 4 CPU / 32Gi / 110 pods, pods of 100m / 500Mi,
``--placed`` pods already running and ``--pods`` pods measured. Each size runs in its own process so
peak RSS is per run. A "ceiling" profile (queue sort + binder only) runs in the same invocation as the
baseline the full profile is compared with.

    python bench/scheduler_throughput.py                 # 500, 1000, 5000 nodes
    python bench/scheduler_throughput.py --nodes 5000 --pods 10000 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
from typing import Any

from measure import measure  # bench/ is the script directory

from apis.config import parse_scheduler_config
from apis.core.parse import parse_node, parse_pod
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster

CEILING_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      disabled: [{name: '*'}]
      enabled: [{name: PrioritySort}, {name: DefaultBinder}]
"""

FULL_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: {pct}
"""


def node_obj(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{i}", "labels": {"kubernetes.io/hostname": f"node-{i}"}},
        "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}},
    }


def pod_obj(i: int, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "c", "image": "registry.k8s.io/pause:3.10",
             "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}
        ]
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i}", "namespace": "bench", "uid": f"uid-{i}"},
        "spec": spec,
    }


async def run_once(nodes: int, placed: int, pods: int, config_text: str) -> dict[str, Any]:
    node_list = [parse_node(node_obj(i)) for i in range(nodes)]
    placed_pods = [parse_pod(pod_obj(i, f"node-{i % nodes}")) for i in range(placed)]
    pending = [parse_pod(pod_obj(placed + i)) for i in range(pods)]
    cluster = MemoryCluster.from_objects(node_list, placed_pods + pending)
    config = parse_scheduler_config(config_text, source="bench")
    scheduler = build_scheduler(config, build_registry(use_entry_points=False), cluster)
    await cluster.start(scheduler)
    m = await measure(scheduler, cluster, pending=pods, placed=placed)
    bound, elapsed = m.bound, m.seconds
    return {
        "nodes": nodes,
        "placed": placed,
        "pods": pods,
        "bound": bound,
        "seconds": elapsed,
        "cpu_seconds": round(m.cpu_seconds, 3),
        "pods_per_second": round(bound / elapsed, 1),
        "p50_ms": m.p50_ms,
        "p99_ms": m.p99_ms,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def child(args: argparse.Namespace) -> None:
    text = CEILING_CONFIG if args.profile == "ceiling" else FULL_CONFIG.format(pct=args.percentage)
    result = asyncio.run(run_once(args.nodes[0], args.placed, args.pods, text))
    result["profile"] = args.profile
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[500, 1000, 5000])
    parser.add_argument("--placed", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--percentage", type=int, default=100, help="percentageOfNodesToScore (0 = adaptive)")
    parser.add_argument("--profile", choices=("full", "ceiling"), default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.profile is not None:
        child(args)
        return
    results = []
    for nodes in args.nodes:
        for profile in ("ceiling", "full"):
            cmd = [sys.executable, __file__, "--profile", profile, "--nodes", str(nodes),
                   "--placed", str(args.placed), "--pods", str(args.pods), "--percentage", str(args.percentage)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            results.append(json.loads(out.strip().splitlines()[-1]))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'nodes':>6} {'profile':>8} {'pods/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'RSS MB':>8} {'vs ceiling':>10}")
    ceiling: dict[int, float] = {}
    for r in results:
        if r["profile"] == "ceiling":
            ceiling[r["nodes"]] = r["pods_per_second"]
        ratio = r["pods_per_second"] / ceiling[r["nodes"]] if r["nodes"] in ceiling else float("nan")
        print(f"{r['nodes']:>6} {r['profile']:>8} {r['pods_per_second']:>9.1f} {r['p50_ms']:>8.3f} "
              f"{r['p99_ms']:>8.3f} {r['peak_rss_mb']:>8.1f} {ratio:>10.2f}")


if __name__ == "__main__":
    main()
