"""NodeNUMAResource cost: the CPU allocator per pod, and SchedulingBasic with the plugin on vs off.

1. ``allocation``: pods of 4 CPUs (FullPCPUs, LeastAllocated) allocated one after another on a
   2-socket, 4-NUMA, 64-core, 128-thread topology until it is full, then released and repeated; µs per
   allocation (the pure :func:`allocate_cpus`, what Filter's dry run and Reserve each call once).
2. ``scheduling``: bench/scheduler_throughput.py's shape (nodes of 4 CPU / 32Gi, pods of 100m / 500Mi,
   no LSR pods, no NodeResourceTopology) scheduled by the default profile and by the default profile plus
   NodeNUMAResource, in one process, in alternating chunks (ABBA) so machine drift hits both; the
   slowdown is total CPU time per pod of the NodeNUMAResource profile over the baseline's. Target: < 5%.
3. ``hooks``: the preemption hooks on the no-preemption path: LSR pods of 2 CPUs (bound CPUs) on
   ``--hook-nodes`` nodes with a NodeResourceTopology (2 sockets, 16 threads), NodeNUMAResource with its
   PreFilterExtensions and dry-run view of each node's holdings, and with them taken out, in alternating
   chunks of one process. Target: < 3%.

    python bench/numa_throughput.py                       # all three, 1000 nodes, 2000 pods
    python bench/numa_throughput.py --nodes 1000 --pods 5000 --json
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
from apis.extension.numa import CPUBindPolicy
from bench.scheduler_throughput import node_obj, pod_obj
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.plugins.nodenumaresource import preemption as numa_preemption
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


_CPUS = [{"id": t * 8 + c, "core": c, "socket": c // 4, "node": c // 4} for t in range(2) for c in range(8)]
TOPOLOGY = json.dumps({"detail": sorted(_CPUS, key=lambda d: d["id"])})


def nrt_obj(i: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"node-{i}", "annotations": {"node.koordinator.sh/cpu-topology": TOPOLOGY}},
        "topologyPolicies": ["None"],
        "zones": [],
    }


def lsr_pod_obj(i: int) -> dict[str, Any]:
    obj = pod_obj(i)
    obj["metadata"]["labels"] = {"koordinator.sh/qosClass": "LSR"}
    container = obj["spec"]["containers"][0]
    container["resources"]["requests"] = {"cpu": "2", "memory": "500Mi"}
    container["resources"]["limits"] = dict(container["resources"]["requests"])
    return obj


@contextlib.contextmanager
def hooks_off(scheduler: Scheduler) -> Iterator[None]:
    """NodeNUMAResource without its preemption hooks: no PreFilterExtensions, and each node's holdings
    read without looking for a dry run's changes."""
    name = "NodeNUMAResource"
    plugins = [fwk.plugins[name] for fwk in scheduler.profiles.values() if name in fwk.plugins]
    saved = numa_preemption.deltas_of
    numa_preemption.deltas_of = lambda state: None
    for p in plugins:
        p.pre_filter_extensions = lambda: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        numa_preemption.deltas_of = saved
        for p in plugins:
            del p.pre_filter_extensions


async def hooks(nodes: int, pods: int, chunk: int) -> dict[str, Any]:
    """LSR pods with the hooks and without them, alternating chunks (ABBA)."""
    built: dict[str, Scheduler] = {}
    for variant in ("hooks", "no_hooks"):
        node_list = []
        for i in range(nodes):
            obj = node_obj(i)
            obj["status"]["allocatable"].update({"cpu": "16", "memory": "64Gi"})
            node_list.append(parse_node(obj))
        pending = [parse_pod(lsr_pod_obj(i)) for i in range(pods)]
        cluster = MemoryCluster.from_objects(
            node_list, pending, {"NodeResourceTopology": [(f"node-{i}", nrt_obj(i)) for i in range(nodes)]}
        )
        config = parse_scheduler_config(NUMA, source="bench")
        scheduler = build_scheduler(config, build_registry(use_entry_points=False), cluster, clock=lambda: 0.0)
        await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
        scheduler.warm_up()
        built[variant] = scheduler
    totals = {v: [0.0, 0] for v in built}
    ratios: list[float] = []
    turn = 0
    while True:
        order = ("hooks", "no_hooks") if turn % 2 == 0 else ("no_hooks", "hooks")
        got: dict[str, tuple[float, int]] = {}
        for v in order:
            if v == "no_hooks":
                with hooks_off(built[v]):
                    got[v] = await _chunk(built[v], chunk)
            else:
                got[v] = await _chunk(built[v], chunk)
        turn += 1
        if all(n == 0 for _, n in got.values()):
            break
        for v, (cpu, n) in got.items():
            totals[v][0] += cpu
            totals[v][1] += n
        (h_cpu, h_n), (o_cpu, o_n) = got["hooks"], got["no_hooks"]
        if h_n and o_n and o_cpu > 0:
            ratios.append((h_cpu / h_n) / (o_cpu / o_n))
    per_pod = {v: 1000 * cpu / max(n, 1) for v, (cpu, n) in totals.items()}
    bound = {v: sum(1 for q in built[v].cache.snapshot.iter_nodes() for _ in q.pods) for v in built}
    return {
        "nodes": nodes,
        "pods": pods,
        "cpu_ms_per_pod": {v: round(ms, 4) for v, ms in per_pod.items()},
        "slowdown_pct": round(100 * (per_pod["hooks"] / per_pod["no_hooks"] - 1), 2),
        "median_chunk_ratio": round(statistics.median(ratios), 4) if ratios else None,
        "bound": bound,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--chunk", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20, help="allocation: fill the machine this many times")
    parser.add_argument("--hook-nodes", type=int, default=1000)
    parser.add_argument("--hook-pods", type=int, default=2000)
    parser.add_argument("--only", nargs="+", choices=("allocation", "scheduling", "hooks"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    wanted = set(args.only or ("allocation", "scheduling", "hooks"))
    result: dict[str, Any] = {}
    if "allocation" in wanted:
        result["allocation"] = allocation_us(args.rounds)
    if "scheduling" in wanted:
        result["scheduling"] = asyncio.run(scheduling(args.nodes, args.pods, args.chunk))
    if "hooks" in wanted:
        result["hooks"] = asyncio.run(hooks(args.hook_nodes, args.hook_pods, args.chunk))
    if args.json or wanted != {"allocation", "scheduling", "hooks"}:
        print(json.dumps(result, indent=2))
        return
    h = result["hooks"]
    print(
        f"preemption hooks, {h['nodes']} NRT nodes, {h['pods']} LSR pods: {h['cpu_ms_per_pod']} ms/pod, "
        f"slowdown {h['slowdown_pct']}%"
    )
    a, s = result["allocation"], result["scheduling"]
    print(f"allocation ({a['topology']}): median {a['median_us']} µs, p99 {a['p99_us']} µs over {a['allocations']}")
    print(
        f"SchedulingBasic {s['nodes']} nodes, {s['pods']} pods: baseline {s['baseline_cpu_ms_per_pod']} ms/pod, "
        f"NodeNUMAResource on {s['numa_cpu_ms_per_pod']} ms/pod, slowdown {s['slowdown_pct']}%"
    )


if __name__ == "__main__":
    main()
