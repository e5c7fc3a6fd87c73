"""In-process preemption throughput: scheduler_perf's PreemptionBasic shape.

Nodes of 4 CPU / 32Gi / 110 pods (``node-default.yaml``); ``4 x nodes`` low-priority pods of 900m / 500Mi
already running (``pod-low-priority.yaml``: 3.6 of 4 CPU used on every node); then ``nodes`` pods of
3 CPU / 500Mi at priority 10 (``pod-high-priority.yaml``), each of which must preempt three low-priority
pods (4 - 0.9 = 3.1 >= 3) and is bound on its next attempt. Upstream's workloads are 500 nodes / 2000 /
500 and 5000 / 20000 / 5000; the default here is 1000 / 4000 / 1000.

Throughput counts measured pods bound per second of wall time, from the first attempt to the last
binding (two scheduling cycles per pod, the victims' deletion in between, as with the API server);
``cpu_pods_per_second`` divides by the process's CPU seconds instead, which a shared machine disturbs less.

Each size runs twice in the same invocation, each run in a fresh process: DefaultPreemption's victim search
by resource arithmetic (``fast``, the default) and the generic per-node Filter search it replaces
(``generic``); ``speedup`` is their ratio of CPU throughput. The generic run takes minutes at 1000 nodes:
``--pods`` measures fewer preemptors (the first ones, as in the full run), ``--path fast`` skips it.

    python bench/preemption_basic.py                  # 1000 nodes, 1000 preemptors, both searches
    python bench/preemption_basic.py --pods 200       # 1000 nodes, the first 200 preemptors
    python bench/preemption_basic.py --nodes 500 5000 --path fast --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time
from typing import Any

from apis.config import parse_scheduler_config
from apis.core.parse import parse_node, parse_pod
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
"""


def node_obj(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{i}", "labels": {"kubernetes.io/hostname": f"node-{i}"}},
        "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}},
    }


def pod_obj(name: str, cpu: str, priority: int, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "priority": priority,
        "containers": [
            {
                "name": "pause",
                "image": "registry.k8s.io/pause:3.10",
                "ports": [{"containerPort": 80}],
                "resources": {"requests": {"cpu": cpu, "memory": "500Mi"}, "limits": {"cpu": cpu, "memory": "500Mi"}},
            }
        ],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}"},
        "spec": spec,
    }


async def run_once(nodes: int, init_pods: int, measure_pods: int, *, fast: bool = True) -> dict[str, Any]:
    node_list = [parse_node(node_obj(i)) for i in range(nodes)]
    low = [parse_pod(pod_obj(f"low-{i}", "900m", 0, f"node-{i % nodes}")) for i in range(init_pods)]
    high = [parse_pod(pod_obj(f"high-{i}", "3", 10)) for i in range(measure_pods)]
    cluster = MemoryCluster.from_objects(node_list, low + high)
    scheduler = build_scheduler(
        parse_scheduler_config(CONFIG, source="bench"), build_registry(use_entry_points=False), cluster
    )
    for fwk in scheduler.profiles.values():
        fwk.plugins["DefaultPreemption"].fast_reprieve = fast
    await cluster.start(scheduler)
    started = time.perf_counter()
    cpu_started = time.process_time()
    await scheduler.run_until_idle()
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    bound = sum(1 for p in cluster.pods.values() if p.node_name and p.name.startswith("high-"))
    victims = init_pods - sum(1 for p in cluster.pods.values() if p.name.startswith("low-"))
    registry = scheduler.metrics.registry
    return {
        "path": "fast" if fast else "generic",
        "nodes": nodes,
        "init_pods": init_pods,
        "measure_pods": measure_pods,
        "bound": bound,
        "victims": victims,
        "preemption_attempts": registry.get_sample_value("scheduler_preemption_attempts_total"),
        "seconds": round(elapsed, 3),
        "pods_per_second": round(bound / elapsed, 1),
        "cpu_seconds": round(cpu, 3),
        "cpu_pods_per_second": round(bound / cpu, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000])
    parser.add_argument("--pods", type=int, default=0, help="preemptors to measure (default: as many as nodes)")
    parser.add_argument("--path", choices=("both", "fast", "generic"), default="both")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.child:
        n = args.nodes[0]
        # A child runs one search: the arithmetic one unless --path generic (bench/upstream_compare.py calls
        # --child without --path, and must measure the default search).
        print(json.dumps(asyncio.run(run_once(n, 4 * n, args.pods or n, fast=args.path != "generic"))))
        return
    paths = ("fast", "generic") if args.path == "both" else (args.path,)
    results = []
    for n in args.nodes:
        for path in paths:
            cmd = [sys.executable, __file__, "--child", "--nodes", str(n), "--pods", str(args.pods), "--path", path]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            results.append(json.loads(out.strip().splitlines()[-1]))
        if len(paths) == 2:
            fast, generic = results[-2], results[-1]
            fast["speedup"] = round(fast["cpu_pods_per_second"] / generic["cpu_pods_per_second"], 1)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(
        f"{'path':>8} {'nodes':>6} {'bound':>6} {'victims':>8} {'seconds':>8} {'pods/s':>8} {'CPU s':>8} "
        f"{'pods/CPU s':>10} {'speedup':>8} {'RSS MB':>8}"
    )
    for r in results:
        speedup = f"{r['speedup']:.1f}x" if "speedup" in r else ""
        print(
            f"{r['path']:>8} {r['nodes']:>6} {r['bound']:>6} {r['victims']:>8} {r['seconds']:>8.2f} "
            f"{r['pods_per_second']:>8.1f} {r['cpu_seconds']:>8.2f} {r['cpu_pods_per_second']:>10.1f} "
            f"{speedup:>8} {r['peak_rss_mb']:>8.1f}"
        )


if __name__ == "__main__":
    main()
