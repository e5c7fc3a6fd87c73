"""DeviceShare's cost, four measurements:

1. ``overhead``: SchedulingBasic with DeviceShare on and no GPU pods against the same run without it (one
   process, alternating chunks, CPU time per pod; target < 5%);
2. ``gpu``: GPU-sharing throughput (``--gpu-nodes`` nodes of 8 GPUs with Device objects, pods asking for
   half a GPU);
3. ``hooks``: the preemption hooks on the no-preemption path: the same GPU-sharing workload on
   ``--hook-nodes`` nodes, with the hooks (PreFilterExtensions, the dry-run view of each node's devices)
   and with them taken out, in alternating chunks of one process; target < 3%;
4. ``preemption``: GPU preemption at ``--preempt-nodes`` nodes of 8 GPUs, every GPU held by a low-priority
   pod; ``--preemptors`` high-priority pods of one GPU each preempt one pod each (DefaultPreemption, the
   per-node Filter search that DeviceShare's hooks keep exact), against the same shape where the GPUs are
   only an extended resource (no DeviceShare: the resource-arithmetic search); seconds per preemption.

    python bench/deviceshare_throughput.py                          # all four, default sizes
    python bench/deviceshare_throughput.py --only hooks preemption --json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apis.config import parse_scheduler_config
from apis.core.parse import parse_node, parse_pod
from bench.scheduler_throughput import node_obj, pod_obj
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.plugins.deviceshare import preemption as deviceshare_preemption
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


@contextlib.contextmanager
def hooks_off(scheduler: Scheduler) -> Iterator[None]:
    """DeviceShare without its preemption hooks: no PreFilterExtensions, and each node's devices read
    without looking for a dry run's changes."""
    plugins = [fwk.plugins["DeviceShare"] for fwk in scheduler.profiles.values() if "DeviceShare" in fwk.plugins]
    saved = deviceshare_preemption.dry_run_of
    deviceshare_preemption.dry_run_of = lambda state: None
    for p in plugins:
        p.pre_filter_extensions = lambda: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        deviceshare_preemption.dry_run_of = saved
        for p in plugins:
            del p.pre_filter_extensions


async def hooks_overhead(gpu_nodes: int, gpus: int, pods: int, chunk: int) -> dict[str, Any]:
    """The GPU-sharing workload with the hooks and without them, alternating chunks (ABBA)."""
    built = {}
    for variant in ("hooks", "no_hooks"):
        nodes = [parse_node(gpu_node_obj(i, gpus)) for i in range(gpu_nodes)]
        devices = [(f"node-{i}", device_obj(i, gpus)) for i in range(gpu_nodes)]
        built[variant] = await build("deviceshare", nodes, [parse_pod(gpu_pod_obj(i)) for i in range(pods)], devices)
    totals = {v: [0.0, 0] for v in built}
    ratios: list[float] = []
    turn = 0
    while True:
        order = ("hooks", "no_hooks") if turn % 2 == 0 else ("no_hooks", "hooks")
        got: dict[str, tuple[float, float, int]] = {}
        for v in order:
            scheduler = built[v][0]
            if v == "no_hooks":
                with hooks_off(scheduler):
                    got[v] = await _chunk(scheduler, chunk)
            else:
                got[v] = await _chunk(scheduler, chunk)
        turn += 1
        if all(n == 0 for _, _, n in got.values()):
            break
        for v, (cpu, _, n) in got.items():
            totals[v][0] += cpu
            totals[v][1] += n
        (h_cpu, _, h_n), (o_cpu, _, o_n) = got["hooks"], got["no_hooks"]
        if h_n and o_n and o_cpu > 0:
            ratios.append((h_cpu / h_n) / (o_cpu / o_n))
    ms = {v: round(cpu * 1000 / max(n, 1), 4) for v, (cpu, n) in totals.items()}
    return {
        "gpu_nodes": gpu_nodes,
        "pods": pods,
        "cpu_ms_per_pod": ms,
        "slowdown_pct": round(100 * (ms["hooks"] / ms["no_hooks"] - 1), 2),
        "median_chunk_ratio": round(statistics.median(ratios), 4) if ratios else None,
    }


ALLOCATED = "scheduling.koordinator.sh/device-allocated"
PLAIN_GPU = (
    BASELINE
    + """profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      disabled: [{name: DeviceShare}]
"""
)


def holder_obj(node: int, minor: int) -> dict[str, Any]:
    """A low-priority pod holding one whole GPU of ``node-<node>`` (its device-allocated annotation)."""
    obj = pod_obj(node * 1000 + minor)
    obj["metadata"]["name"] = f"low-{node}-{minor}"
    obj["metadata"]["uid"] = f"uid-low-{node}-{minor}"
    obj["spec"]["nodeName"] = f"node-{node}"
    obj["spec"]["priority"] = 0
    obj["spec"]["containers"][0]["resources"]["requests"].update({f"{GPU}-core": "100", f"{GPU}-memory-ratio": "100"})
    share = {f"{GPU}-core": "100", f"{GPU}-memory-ratio": "100", f"{GPU}-memory": "80Gi"}
    obj["metadata"]["annotations"] = {ALLOCATED: json.dumps({"gpu": [{"minor": minor, "resources": share}]})}
    return obj


def preemptor_obj(i: int) -> dict[str, Any]:
    obj = pod_obj(10_000_000 + i)
    obj["metadata"]["name"] = f"high-{i}"
    obj["metadata"]["uid"] = f"uid-high-{i}"
    obj["spec"]["priority"] = 10
    obj["spec"]["containers"][0]["resources"]["requests"].update({f"{GPU}-core": "100", f"{GPU}-memory-ratio": "100"})
    return obj


async def preemption(nodes: int, gpus: int, preemptors: int, *, with_deviceshare: bool) -> dict[str, Any]:
    """Every GPU held; ``preemptors`` whole-GPU pods of higher priority, each preempting one holder."""
    node_list = [parse_node(gpu_node_obj(i, gpus)) for i in range(nodes)]
    devices = [(f"node-{i}", device_obj(i, gpus)) for i in range(nodes)] if with_deviceshare else []
    holders = [parse_pod(holder_obj(n, m)) for n in range(nodes) for m in range(gpus)]
    high = [parse_pod(preemptor_obj(i)) for i in range(preemptors)]
    cluster = MemoryCluster.from_objects(node_list, holders + high, {"Device": devices} if devices else {})
    config = parse_scheduler_config(BASELINE if with_deviceshare else PLAIN_GPU, source="bench")
    if with_deviceshare:
        config = parse_scheduler_config(DEVICESHARE, source="bench")
    scheduler = build_scheduler(config, build_registry(use_entry_points=False), cluster, clock=lambda: 0.0)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    scheduler.warm_up()
    cpu, wall = time.process_time(), time.perf_counter()
    await scheduler.run_until_idle()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    bound = sum(1 for p in cluster.pods.values() if p.node_name and p.name.startswith("high-"))
    victims = len(holders) - sum(1 for p in cluster.pods.values() if p.name.startswith("low-"))
    return {
        "search": "deviceshare (per-node Filter)" if with_deviceshare else "extended resource (arithmetic)",
        "nodes": nodes,
        "gpus_per_node": gpus,
        "preemptors": preemptors,
        "bound": bound,
        "victims": victims,
        "seconds": round(wall, 3),
        "ms_per_preemption": round(1000 * wall / max(bound, 1), 2),
        "cpu_ms_per_preemption": round(1000 * cpu / max(bound, 1), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--chunk", type=int, default=100)
    parser.add_argument("--gpu-nodes", type=int, default=250)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--gpu-pods", type=int, default=1000)
    parser.add_argument("--hook-nodes", type=int, default=1000)
    parser.add_argument("--hook-pods", type=int, default=2000)
    parser.add_argument("--preempt-nodes", type=int, default=1000)
    parser.add_argument("--preemptors", type=int, default=100)
    parser.add_argument("--only", nargs="+", choices=("overhead", "gpu", "hooks", "preemption"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    wanted = set(args.only or ("overhead", "gpu", "hooks", "preemption"))
    result: dict[str, Any] = {}
    if "overhead" in wanted:
        result["overhead"] = asyncio.run(overhead(args.nodes, args.pods, args.chunk))
    if "gpu" in wanted:
        result["gpu"] = asyncio.run(gpu_throughput(args.gpu_nodes, args.gpus, args.gpu_pods))
    if "hooks" in wanted:
        result["hooks"] = asyncio.run(hooks_overhead(args.hook_nodes, args.gpus, args.hook_pods, args.chunk))
    if "preemption" in wanted:
        result["preemption"] = [
            asyncio.run(preemption(args.preempt_nodes, args.gpus, args.preemptors, with_deviceshare=flag))
            for flag in (True, False)
        ]
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
