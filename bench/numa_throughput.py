"""NodeNUMAResource cost: the CPU allocator per pod, and SchedulingBasic with the plugin on vs off.

1. ``allocation``: pods of 4 CPUs (FullPCPUs, LeastAllocated) allocated one after another on a
   2-socket, 4-NUMA, 64-core, 128-thread topology until it is full, then released and repeated; µs per
   allocation (the pure :func:`allocate_cpus`, what Filter's dry run and Reserve each call once).
2. ``scheduling``: bench/scheduler_throughput.py's shape (nodes of 4 CPU / 32Gi, pods of 100m / 500Mi,
   no LSR pods, no NodeResourceTopology) scheduled by the default profile and by the default profile plus
   NodeNUMAResource, in one process, in alternating chunks (ABBA) so machine drift hits both; the
   slowdown is total CPU time per pod of the NodeNUMAResource profile over the baseline's. Target: < 5%.

    python bench/numa_throughput.py                       # both, 1000 nodes, 2000 pods
    python bench/numa_throughput.py --nodes 1000 --pods 5000 --json
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
from apis.extension.numa import CPUBindPolicy
from bench.scheduler_throughput import node_obj, pod_obj
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.plugins.nodenumaresource.allocation import AllocationRequest, allocate_cpus
from koord_scheduler.plugins.nodenumaresource.topology import symmetric_topology
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.scheduler import Scheduler

BASELINE = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
NUMA = BASELINE + (
    "profiles:\n- schedulerName: default-scheduler\n  plugins:\n"
    "    multiPoint:\n      enabled: [{name: NodeNUMAResource}]\n"
)
PROFILES = {"baseline": BASELINE, "numa": NUMA}


def allocation_us(rounds: int) -> dict[str, Any]:
    topo = symmetric_topology(sockets=2, nodes_per_socket=2, cores_per_node=16, threads=2)
    request = AllocationRequest(4, CPUBindPolicy.FULL_PCPUS)
    samples: list[float] = []
    for _ in range(rounds):
        taken: set[int] = set()
        while len(taken) + 4 <= topo.num_cpus:
            available = frozenset(topo.cpus) - taken
            start = time.perf_counter()
            cpus = allocate_cpus(topo, available, {}, request)
            samples.append((time.perf_counter() - start) * 1e6)
            taken.update(cpus)
    return {
        "topology": "2 sockets, 4 NUMA, 64 cores, 128 threads",
        "allocations": len(samples),
        "median_us": round(statistics.median(samples), 1),
        "p99_us": round(sorted(samples)[int(0.99 * (len(samples) - 1))], 1),
    }


async def build(nodes: int, pods: int, profile: str) -> Scheduler:
    node_list = [parse_node(node_obj(i)) for i in range(nodes)]
    pending = [parse_pod(pod_obj(i)) for i in range(pods)]
    cluster = MemoryCluster.from_objects(node_list, pending, {})
    config = parse_scheduler_config(PROFILES[profile], source="bench")
    scheduler = build_scheduler(config, build_registry(use_entry_points=False), cluster, clock=lambda: 0.0)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    scheduler.warm_up()
    return scheduler


async def _chunk(scheduler: Scheduler, size: int) -> tuple[float, int]:
    cpu = time.process_time()
    n = 0
    while n < size and scheduler.schedule_one():
        n += 1
        if n % 32 == 0:
            await asyncio.sleep(0)
    await scheduler.drain()
    return time.process_time() - cpu, n


async def scheduling(nodes: int, pods: int, chunk: int) -> dict[str, Any]:
    built = {p: await build(nodes, pods, p) for p in PROFILES}
    totals = {p: [0.0, 0] for p in PROFILES}
    turn = 0
    while True:
        order = list(PROFILES) if turn % 2 == 0 else list(PROFILES)[::-1]
        got = {p: await _chunk(built[p], chunk) for p in order}
        turn += 1
        if all(n == 0 for _, n in got.values()):
            break
        for p, (cpu, n) in got.items():
            totals[p][0] += cpu
            totals[p][1] += n
    per_pod = {p: 1000 * cpu / max(n, 1) for p, (cpu, n) in totals.items()}
    return {
        "nodes": nodes,
        "pods": pods,
        "baseline_cpu_ms_per_pod": round(per_pod["baseline"], 4),
        "numa_cpu_ms_per_pod": round(per_pod["numa"], 4),
        "slowdown_pct": round(100 * (per_pod["numa"] / per_pod["baseline"] - 1), 2),
        "cycles": {p: n for p, (_, n) in totals.items()},
        "bound": {p: sum(1 for q in built[p].cache.snapshot.iter_nodes() for _ in q.pods) for p in PROFILES},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--chunk", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20, help="allocation: fill the machine this many times")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = {
        "allocation": allocation_us(args.rounds),
        "scheduling": asyncio.run(scheduling(args.nodes, args.pods, args.chunk)),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    a, s = result["allocation"], result["scheduling"]
    print(f"allocation ({a['topology']}): median {a['median_us']} µs, p99 {a['p99_us']} µs over {a['allocations']}")
    print(
        f"SchedulingBasic {s['nodes']} nodes, {s['pods']} pods: baseline {s['baseline_cpu_ms_per_pod']} ms/pod, "
        f"NodeNUMAResource on {s['numa_cpu_ms_per_pod']} ms/pod, slowdown {s['slowdown_pct']}%"
    )


if __name__ == "__main__":
    main()
