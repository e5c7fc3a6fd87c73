"""In-process scheduling throughput with Reservations: 0 vs N Available reservations.

Same shape as ``bench/scheduler_throughput.py`` (nodes of 4 CPU / 32Gi / 110 pods, pods of 100m / 500Mi,
``--placed`` pods already running), with the Reservation plugin enabled as in Koordinator's chart
(Score weight 5000, Bind before DefaultBinder). The "reservations" run adds one Available reservation per
node (1 CPU / 4Gi, allocateOnce false, owners ``app=owner``) and labels 10% of the measured pods
``app=owner``. A "plain" run (the default profile without the plugin) is the reference. Each run is a
separate process.

    python bench/reservation_throughput.py                       # 1000 nodes, 5000 pods
    python bench/reservation_throughput.py --nodes 1000 --pods 10000 --json
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

PLAIN_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: {pct}
"""

RESERVATION_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: {pct}
profiles:
- schedulerName: default-scheduler
  plugins:
    preFilter: {{enabled: [{{name: Reservation}}]}}
    filter: {{enabled: [{{name: Reservation}}]}}
    preScore: {{enabled: [{{name: Reservation}}]}}
    score: {{enabled: [{{name: Reservation, weight: 5000}}]}}
    reserve: {{enabled: [{{name: Reservation}}]}}
    preBind: {{enabled: [{{name: Reservation}}]}}
    bind:
      disabled: [{{name: "*"}}]
      enabled: [{{name: Reservation}}, {{name: DefaultBinder}}]
"""


def node_obj(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{i}", "labels": {"kubernetes.io/hostname": f"node-{i}"}},
        "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}},
    }


def pod_obj(i: int, node: str = "", *, owner: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}},
            }
        ]
    }
    if node:
        spec["nodeName"] = node
    labels = {"app": "owner" if owner else "other", "pod-index": str(i)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i}", "namespace": "bench", "uid": f"uid-{i}", "labels": labels},
        "spec": spec,
    }


def reservation_obj(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": f"r-{i}", "uid": f"r-uid-{i}"},
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "4Gi"}}}]}
            },
            "owners": [{"labelSelector": {"matchLabels": {"app": "owner"}}}],
            "allocateOnce": False,
            "ttl": "1h",
        },
        "status": {"phase": "Available", "nodeName": f"node-{i}", "allocatable": {"cpu": "1", "memory": "4Gi"}},
    }


async def run_once(  # noqa: PLR0917 (a benchmark entry point)
    nodes: int, placed: int, pods: int, reservations: int, config_text: str, owner_every: int
) -> dict[str, Any]:
    node_list = [parse_node(node_obj(i)) for i in range(nodes)]
    placed_pods = [parse_pod(pod_obj(i, f"node-{i % nodes}")) for i in range(placed)]
    pending = [parse_pod(pod_obj(placed + i, owner=owner_every > 0 and i % owner_every == 0)) for i in range(pods)]
    objects = {"Reservation": [(f"r-{i}", reservation_obj(i)) for i in range(reservations)]}
    cluster = MemoryCluster.from_objects(node_list, placed_pods + pending, objects)
    config = parse_scheduler_config(config_text, source="bench")
    scheduler = build_scheduler(config, build_registry(use_entry_points=False), cluster)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    m = await measure(scheduler, cluster, pending=pods, placed=placed)
    bound, elapsed = m.bound, m.seconds
    in_reservation = sum(
        1 for p in cluster.pods.values() if "scheduling.koordinator.sh/reservation-allocated" in p.annotations
    )
    return {
        "nodes": nodes,
        "reservations": reservations,
        "pods": pods,
        "bound": bound,
        "owners_in_reservations": in_reservation,
        "seconds": elapsed,
        "pods_per_second": round(bound / elapsed, 1),
        "p50_ms": m.p50_ms,
        "p99_ms": m.p99_ms,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


RUNS = {
    "plain": (PLAIN_CONFIG, False),
    "plugin-0": (RESERVATION_CONFIG, False),
    "plugin-N": (RESERVATION_CONFIG, True),
}


def child(args: argparse.Namespace) -> None:
    text, with_reservations = RUNS[args.run]
    reservations = args.nodes if with_reservations else 0
    result = asyncio.run(
        run_once(args.nodes, args.placed, args.pods, reservations, text.format(pct=args.percentage), args.owner_every)
    )
    result["run"] = args.run
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--placed", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--owner-every", type=int, default=10, help="every Nth pod is an owner (10 = 10%%)")
    parser.add_argument("--percentage", type=int, default=100, help="percentageOfNodesToScore (0 = adaptive)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per configuration; the best is reported")
    parser.add_argument("--run", choices=tuple(RUNS), default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.run is not None:
        child(args)
        return
    results: dict[str, dict[str, Any]] = {}
    for _ in range(args.repeat):
        for run in RUNS:
            cmd = [
                sys.executable,
                __file__,
                "--run",
                run,
                "--nodes",
                str(args.nodes),
                "--placed",
                str(args.placed),
                "--pods",
                str(args.pods),
                "--percentage",
                str(args.percentage),
                "--owner-every",
                str(args.owner_every),
            ]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            if run not in results or r["pods_per_second"] > results[run]["pods_per_second"]:
                results[run] = r
    if args.json:
        print(json.dumps(list(results.values()), indent=2))
        return
    base = results["plugin-0"]["pods_per_second"]
    print(
        f"{'run':>9} {'resv':>5} {'pods/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'in resv':>8} {'RSS MB':>8} "
        f"{'vs 0 resv':>9}"
    )
    for r in results.values():
        print(
            f"{r['run']:>9} {r['reservations']:>5} {r['pods_per_second']:>9.1f} {r['p50_ms']:>8.3f} "
            f"{r['p99_ms']:>8.3f} {r['owners_in_reservations']:>8} {r['peak_rss_mb']:>8.1f} "
            f"{r['pods_per_second'] / base:>9.2f}"
        )


if __name__ == "__main__":
    main()
