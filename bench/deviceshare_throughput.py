"""DeviceShare's cost: SchedulingBasic with DeviceShare on and no GPU pods against the same run without
it (one process, alternating chunks, CPU time per pod; target < 5%), and GPU-sharing throughput
(``--gpu-nodes`` nodes of 8 GPUs with Device objects, pods asking for half a GPU).

    python bench/deviceshare_throughput.py                          # 1000 nodes / 1000 pods; 250x8 GPUs / 1000 pods
    python bench/deviceshare_throughput.py --nodes 1000 --pods 2000 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apis.config import parse_scheduler_config
from apis.core.parse import parse_node, parse_pod
from bench.scheduler_throughput import node_obj, pod_obj
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.scheduler import Scheduler

BASELINE = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
DEVICESHARE = (
    BASELINE
    + """profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled: [{name: DeviceShare}]
"""
)
GPU = "koordinator.sh/gpu"


def gpu_node_obj(i: int, gpus: int) -> dict[str, Any]:
    obj = node_obj(i)
    obj["status"]["allocatable"].update(
        {
            "cpu": "64",
            "memory": "512Gi",
            f"{GPU}-core": str(100 * gpus),
            f"{GPU}-memory-ratio": str(100 * gpus),
            f"{GPU}-memory": f"{80 * gpus}Gi",
        }
    )
    return obj


def device_obj(i: int, gpus: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"node-{i}"},
        "spec": {
            "devices": [
                {
                    "type": "gpu",
                    "minor": m,
                    "health": True,
                    "resources": {f"{GPU}-core": "100", f"{GPU}-memory-ratio": "100", f"{GPU}-memory": "80Gi"},
                }
                for m in range(gpus)
            ]
        },
    }


def gpu_pod_obj(i: int) -> dict[str, Any]:
    obj = pod_obj(i)
    obj["spec"]["containers"][0]["resources"]["requests"].update({f"{GPU}-core": "50", f"{GPU}-memory-ratio": "50"})
    return obj


async def build(profile: str, nodes: list[Any], pods: list[Any], devices: list[Any]) -> tuple[Scheduler, MemoryCluster]:
    cluster = MemoryCluster.from_objects(nodes, pods, {"Device": devices} if devices else {})
    config = parse_scheduler_config(DEVICESHARE if profile == "deviceshare" else BASELINE, source="bench")
    scheduler = build_scheduler(config, build_registry(use_entry_points=False), cluster, clock=lambda: 0.0)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    scheduler.warm_up()
    return scheduler, cluster


async def _chunk(scheduler: Scheduler, size: int) -> tuple[float, float, int]:
    cpu, wall = time.process_time(), time.perf_counter()
    n = 0
    while n < size and scheduler.schedule_one():
        n += 1
        if n % 32 == 0:
            await asyncio.sleep(0)
    await scheduler.drain()
    return time.process_time() - cpu, time.perf_counter() - wall, n


async def overhead(nodes: int, pods: int, chunk: int) -> dict[str, Any]:
    built = {}
    for profile in ("baseline", "deviceshare"):
        node_list = [parse_node(node_obj(i)) for i in range(nodes)]
        built[profile] = await build(profile, node_list, [parse_pod(pod_obj(i)) for i in range(pods)], [])
    totals = {p: [0.0, 0] for p in built}
    ratios: list[float] = []
    turn = 0
    while True:
        order = ("baseline", "deviceshare") if turn % 2 == 0 else ("deviceshare", "baseline")
        got = {p: await _chunk(built[p][0], chunk) for p in order}
        turn += 1
        if all(n == 0 for _, _, n in got.values()):
            break
        for p, (cpu, _, n) in got.items():
            totals[p][0] += cpu
            totals[p][1] += n
        (b_cpu, _, b_n), (d_cpu, _, d_n) = got["baseline"], got["deviceshare"]
        if b_n and d_n and b_cpu > 0:
            ratios.append((d_cpu / d_n) / (b_cpu / b_n))
    ms = {p: round(cpu * 1000 / max(n, 1), 4) for p, (cpu, n) in totals.items()}
    return {
        "nodes": nodes,
        "pods": pods,
        "cpu_ms_per_pod": ms,
        "slowdown_pct": round(100 * (ms["deviceshare"] / ms["baseline"] - 1), 2),
        "median_chunk_ratio": round(statistics.median(ratios), 4) if ratios else None,
    }


async def gpu_throughput(gpu_nodes: int, gpus: int, pods: int) -> dict[str, Any]:
    nodes = [parse_node(gpu_node_obj(i, gpus)) for i in range(gpu_nodes)]
    devices = [(f"node-{i}", device_obj(i, gpus)) for i in range(gpu_nodes)]
    pending = [parse_pod(gpu_pod_obj(i)) for i in range(pods)]
    scheduler, cluster = await build("deviceshare", nodes, pending, devices)
    cpu, wall, _ = await _chunk(scheduler, pods)
    bound = sum(1 for p in cluster.pods.values() if p.node_name)
    return {
        "gpu_nodes": gpu_nodes,
        "gpus_per_node": gpus,
        "pods": pods,
        "bound": bound,
        "pods_per_second": round(bound / wall, 1),
        "cpu_ms_per_pod": round(cpu * 1000 / max(bound, 1), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--chunk", type=int, default=100)
    parser.add_argument("--gpu-nodes", type=int, default=250)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--gpu-pods", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = {
        "overhead": asyncio.run(overhead(args.nodes, args.pods, args.chunk)),
        "gpu": asyncio.run(gpu_throughput(args.gpu_nodes, args.gpus, args.gpu_pods)),
    }
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
