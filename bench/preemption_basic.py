"""In-process preemption throughput: scheduler_perf's PreemptionBasic shape.

Nodes of 4 CPU / 32Gi / 110 pods (``node-default.yaml``); ``4 x nodes`` low-priority pods of 900m / 500Mi
already running (``pod-low-priority.yaml``: 3.6 of 4 CPU used on every node); then ``nodes`` pods of
3 CPU / 500Mi at priority 10 (``pod-high-priority.yaml``), each of which must preempt three low-priority
pods (4 - 0.9 = 3.1 >= 3) and is bound on its next attempt. Upstream's workloads are 500 nodes / 2000 /
500 and 5000 / 20000 / 5000; the default here is 1000 / 4000 / 1000.

Throughput counts measured pods bound per second of wall time, from the first attempt to the last
binding (two scheduling cycles per pod, the victims' deletion in between, as with the API server).

    python bench/preemption_basic.py                  # 1000 nodes
    python bench/preemption_basic.py --nodes 500 5000 --json
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
            {"name": "pause", "image": "registry.k8s.io/pause:3.10", "ports": [{"containerPort": 80}],
             "resources": {"requests": {"cpu": cpu, "memory": "500Mi"}, "limits": {"cpu": cpu, "memory": "500Mi"}}}
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


async def run_once(nodes: int, init_pods: int, measure_pods: int) -> dict[str, Any]:
    node_list = [parse_node(node_obj(i)) for i in range(nodes)]
    low = [parse_pod(pod_obj(f"low-{i}", "900m", 0, f"node-{i % nodes}")) for i in range(init_pods)]
    high = [parse_pod(pod_obj(f"high-{i}", "3", 10)) for i in range(measure_pods)]
    cluster = MemoryCluster.from_objects(node_list, low + high)
    scheduler = build_scheduler(parse_scheduler_config(CONFIG, source="bench"), build_registry(use_entry_points=False),
                                cluster)
    await cluster.start(scheduler)
    started = time.perf_counter()
    await scheduler.run_until_idle()
    elapsed = time.perf_counter() - started
    bound = sum(1 for p in cluster.pods.values() if p.node_name and p.name.startswith("high-"))
    victims = init_pods - sum(1 for p in cluster.pods.values() if p.name.startswith("low-"))
    registry = scheduler.metrics.registry
    return {
        "nodes": nodes,
        "init_pods": init_pods,
        "measure_pods": measure_pods,
        "bound": bound,
        "victims": victims,
        "preemption_attempts": registry.get_sample_value("scheduler_preemption_attempts_total"),
        "seconds": round(elapsed, 3),
        "pods_per_second": round(bound / elapsed, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.child:
        n = args.nodes[0]
        print(json.dumps(asyncio.run(run_once(n, 4 * n, n))))
        return
    results = []
    for n in args.nodes:
        out = subprocess.run([sys.executable, __file__, "--child", "--nodes", str(n)],
                             check=True, capture_output=True, text=True).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'nodes':>6} {'bound':>6} {'victims':>8} {'seconds':>8} {'pods/s':>8} {'RSS MB':>8}")
    for r in results:
        print(f"{r['nodes']:>6} {r['bound']:>6} {r['victims']:>8} {r['seconds']:>8.2f} {r['pods_per_second']:>8.1f} "
              f"{r['peak_rss_mb']:>8.1f}")


if __name__ == "__main__":
    main()
