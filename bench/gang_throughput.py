"""Gangs against the same pods without gangs, in process: 100 gangs of 50 pods at 1,000 nodes.

SchedulingBasic's nodes (4 CPU / 32Gi / 110 pods) and pods (100m / 500Mi), a profile of the defaults plus
Coscheduling (multiPoint) for both modes. The pods arrive one gang at a time: the gang's members are
created, then the scheduler runs until it is idle (every member bound), then the next gang comes. Reported
per mode:

- pods/s: all pods over the whole run (creation, scheduling, binding), and pods per CPU-second of the
  process (what other load on a shared machine disturbs far less);
- gang latency: from the creation of a gang's last member to the bind of its last member (p50, p99, max);
  without gang annotations the same 50 pods are timed the same way.

Each mode runs in its own process; the modes alternate (A B A B ...) and the best run of each is kept. This
is the in-process form (memory cluster, no API server): it measures the scheduler's own work, not API
latency.

    python bench/gang_throughput.py                           # 100 gangs x 50 pods, 1,000 nodes, 1 round
    python bench/gang_throughput.py --gangs 20 --rounds 2 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from typing import Any

from scheduler_throughput import node_obj, pod_obj  # bench/ is the script directory

from apis.config import parse_scheduler_config
from apis.core.parse import parse_node, parse_pod
from apis.core.types import Pod
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.heap import HeapSettler
from koord_scheduler.scheduler.memory_source import MemoryCluster

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled: [{name: Coscheduling}]
"""
MODES = ("gang", "plain")
ANN = "gang.scheduling.koordinator.sh/"


def member(gang: int, i: int, size: int, *, annotated: bool) -> Pod:
    obj = pod_obj(gang * size + i)
    if annotated:
        obj["metadata"]["annotations"] = {ANN + "name": f"gang-{gang}", ANN + "min-available": str(size)}
    return parse_pod(obj)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run_once(nodes: int, gangs: int, size: int, *, annotated: bool) -> dict[str, Any]:
    cluster = MemoryCluster.from_objects([parse_node(node_obj(i)) for i in range(nodes)], [])
    scheduler = build_scheduler(
        parse_scheduler_config(CONFIG, source="bench"), build_registry(use_entry_points=False), cluster
    )
    await cluster.start(scheduler)
    bound_at: dict[str, float] = {}

    def on_pod(event: EventType, old: Pod | None, new: Pod | None) -> None:
        if new is not None and new.node_name and (old is None or not old.node_name):
            bound_at[new.key] = time.perf_counter()

    scheduler.watch_pods(on_pod)
    scheduler.warm_up()
    HeapSettler().start()
    latencies: list[float] = []
    cpu_started, started = time.process_time(), time.perf_counter()
    for g in range(gangs):
        pods = [member(g, i, size, annotated=annotated) for i in range(size)]
        for pod in pods:
            cluster.pods[pod.key] = pod
            scheduler.on_pod(EventType.ADDED, None, pod)
        created = time.perf_counter()
        await scheduler.run_until_idle()
        missing = [p.key for p in pods if p.key not in bound_at]
        if missing:
            raise SystemExit(f"gang {g}: {len(missing)} pods not bound, e.g. {missing[0]}")
        latencies.append(max(bound_at[p.key] for p in pods) - created)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    total = gangs * size
    return {
        "mode": "gang" if annotated else "plain",
        "nodes": nodes,
        "pods": total,
        "seconds": round(elapsed, 3),
        "cpu_seconds": round(cpu, 3),
        "pods_per_second": round(total / elapsed, 1),
        "pods_per_cpu_second": round(total / cpu, 1) if cpu else 0.0,
        "latency_p50_ms": round(percentile(latencies, 0.5) * 1000, 1),
        "latency_p99_ms": round(percentile(latencies, 0.99) * 1000, 1),
        "latency_max_ms": round(max(latencies) * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gangs", type=int, default=100)
    parser.add_argument("--size", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--mode", choices=MODES, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.mode is not None:
        result = asyncio.run(run_once(args.nodes, args.gangs, args.size, annotated=args.mode == "gang"))
        print(json.dumps(result))
        return
    runs: list[dict[str, Any]] = []
    for _ in range(args.rounds):
        for mode in MODES:
            cmd = [
                sys.executable,
                __file__,
                "--mode",
                mode,
                "--nodes",
                str(args.nodes),
                "--gangs",
                str(args.gangs),
                "--size",
                str(args.size),
            ]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
    best = {m: max((r for r in runs if r["mode"] == m), key=lambda r: r["pods_per_second"]) for m in MODES}
    ratio = best["gang"]["pods_per_second"] / best["plain"]["pods_per_second"]
    cpu_ratio = best["gang"]["pods_per_cpu_second"] / best["plain"]["pods_per_cpu_second"]
    if args.json:
        print(
            json.dumps(
                {"runs": runs, "best": best, "ratio": round(ratio, 3), "cpu_ratio": round(cpu_ratio, 3)}, indent=2
            )
        )
        return
    print(f"{'mode':>6} {'pods/s':>8} {'pods/CPU-s':>11} {'last-create->last-bind p50/p99/max ms':>40}")
    for mode, r in best.items():
        lat = f"{r['latency_p50_ms']:.1f} / {r['latency_p99_ms']:.1f} / {r['latency_max_ms']:.1f}"
        print(f"{mode:>6} {r['pods_per_second']:>8.1f} {r['pods_per_cpu_second']:>11.1f} {lat:>40}")
    print(f"gang / plain: pods/s {ratio:.3f}, pods/CPU-s {cpu_ratio:.3f}")


if __name__ == "__main__":
    main()
