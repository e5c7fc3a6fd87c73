"""In-process scheduling throughput, through the same scheduler core with no API server.

``--workload basic`` (the default) is scheduler_perf's SchedulingBasic shape: nodes of 4 CPU / 32Gi /
110 pods, pods of 100m / 500Mi, ``--placed`` pods already running and ``--pods`` pods measured. Each
size runs in its own process so peak RSS is per run. A "ceiling" profile (queue sort + binder only)
runs in the same invocation as the baseline the full profile is compared with.

``--workload mixed`` (bench/mixed_workload.py: 16 request shapes in seeded random order, a third with a
zone spread constraint, four node sizes over three zones) runs the full profile on the mixed pods and,
in the same invocation, on SchedulingBasic, and reports the ratio and the share of nodes scored per
cycle (percentageOfNodesToScore is 100 unless ``--percentage`` says otherwise).

``--report-rss`` adds the process's RSS after building the cluster (before scheduling); with several
``--bound-pods`` values each runs in its own process, so the CPU time per pod shows whether a cycle's
cost grows with the bound pods (scale checks, e.g. ``--nodes 30000 --bound-pods 10000 150000 --pods 2000
--report-rss``).

    python bench/scheduler_throughput.py                 # 500, 1000, 5000 nodes
    python bench/scheduler_throughput.py --nodes 5000 --pods 10000 --json
    python bench/scheduler_throughput.py --workload mixed --nodes 5000
    python bench/scheduler_throughput.py --nodes 30000 --bound-pods 10000 150000 --pods 2000 --report-rss
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time
import tracemalloc
from typing import Any

import mixed_workload  # bench/ is the script directory
from measure import measure

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
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}},
            }
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


def _rss_mb() -> float:
    """The process's resident set now (Linux), in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _objects(workload: str, nodes: int, placed: int, pods: int, seed: int) -> tuple[list[Any], list[Any], list[Any]]:
    if workload == "mixed":
        node_list = [parse_node(mixed_workload.node_obj(i)) for i in range(nodes)]
        placed_pods = [parse_pod(o) for o in mixed_workload.pod_objs(0, placed, seed=seed, nodes=nodes)]
        pending = [parse_pod(o) for o in mixed_workload.pod_objs(placed, pods, seed=seed + 1)]
        return node_list, placed_pods, pending
    node_list = [parse_node(node_obj(i)) for i in range(nodes)]
    placed_pods = [parse_pod(pod_obj(i, f"node-{i % nodes}")) for i in range(placed)]
    pending = [parse_pod(pod_obj(placed + i)) for i in range(pods)]
    return node_list, placed_pods, pending


class _ScoredShare:
    """Per cycle: how many nodes Score saw against how many passed Filter over the whole node list."""

    def __init__(self, scheduler: Any) -> None:
        self.feasible = 0
        self.scored = 0
        self.cycles = 0
        for fwk in scheduler.profiles.values():
            self._wrap(fwk)

    def _wrap(self, fwk: Any) -> None:
        run_filter, run_score = fwk.run_filter_plugins, fwk.run_score_plugins

        def filtered(state: Any, pod: Any, positions: Any, diagnosis: Any, **kw: Any) -> Any:
            out = run_filter(state, pod, positions, diagnosis, **kw)
            if len(positions) == fwk.snapshot.num_nodes:
                self.feasible += len(out)
                self.cycles += 1
            return out

        def scored(state: Any, pod: Any, positions: Any) -> Any:
            self.scored += len(positions)
            return run_score(state, pod, positions)

        fwk.run_filter_plugins, fwk.run_score_plugins = filtered, scored

    def percent(self) -> float:
        return round(100.0 * self.scored / self.feasible, 2) if self.feasible else 0.0


async def run_once(
    nodes: int,
    placed: int,
    pods: int,
    config_text: str,
    *,
    workload: str = "basic",
    seed: int = 1,
    report_rss: bool = False,
    trace_memory: int = 0,
) -> dict[str, Any]:
    """One measured run. With ``report_rss``, also the RSS after building the cluster and the time the
    build took: ``parse_*`` (the bench's dicts to typed objects) and ``build_*`` (the scheduler's state
    from those objects: MemoryCluster, the scheduler, its snapshot and queue), wall and CPU seconds.
    ``trace_memory`` > 0 traces allocations during the build and adds the top sites by size."""
    if trace_memory:
        tracemalloc.start()
    wall, cpu = time.perf_counter(), time.process_time()
    node_list, placed_pods, pending = _objects(workload, nodes, placed, pods, seed)
    parsed_wall, parsed_cpu = time.perf_counter(), time.process_time()
    cluster = MemoryCluster.from_objects(node_list, placed_pods + pending)
    del node_list, placed_pods
    config = parse_scheduler_config(config_text, source="bench")
    scheduler = build_scheduler(config, build_registry(use_entry_points=False), cluster)
    await cluster.start(scheduler)
    built_wall, built_cpu = time.perf_counter(), time.process_time()
    rss_built = _rss_mb()
    top_sites = _top_allocations(trace_memory) if trace_memory else []
    share = _ScoredShare(scheduler)
    m = await measure(scheduler, cluster, pending=pods, placed=placed)
    bound, elapsed = m.bound, m.seconds
    result = {
        "workload": workload,
        "nodes": nodes,
        "placed": placed,
        "pods": pods,
        "bound": bound,
        "seconds": elapsed,
        "cpu_seconds": round(m.cpu_seconds, 3),
        "pods_per_second": round(bound / elapsed, 1),
        "p50_ms": m.p50_ms,
        "p99_ms": m.p99_ms,
        "scored_percent": share.percent(),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    if report_rss:
        result["rss_after_build_mb"] = rss_built
        result["parse_seconds"] = round(parsed_wall - wall, 2)
        result["parse_cpu_seconds"] = round(parsed_cpu - cpu, 2)
        result["build_seconds"] = round(built_wall - parsed_wall, 2)
        result["build_cpu_seconds"] = round(built_cpu - parsed_cpu, 2)
    if top_sites:
        result["top_allocations"] = top_sites
    return result


def _top_allocations(limit: int) -> list[dict[str, Any]]:
    """The ``limit`` source lines holding the most memory still allocated since tracing began (MiB and
    blocks), then stops tracing (the measured cycles are not traced)."""
    snapshot = tracemalloc.take_snapshot()
    tracemalloc.stop()
    stats = snapshot.statistics("lineno")
    total = sum(s.size for s in stats)
    top = [
        {
            "site": f"{s.traceback[0].filename}:{s.traceback[0].lineno}",
            "mb": round(s.size / 2**20, 1),
            "blocks": s.count,
        }
        for s in stats[:limit]
    ]
    top.append({"site": "(all traced)", "mb": round(total / 2**20, 1), "blocks": sum(s.count for s in stats)})
    return top


def child(args: argparse.Namespace) -> None:
    text = CEILING_CONFIG if args.profile == "ceiling" else FULL_CONFIG.format(pct=args.percentage)
    result = asyncio.run(
        run_once(
            args.nodes[0],
            args.placed[0],
            args.pods,
            text,
            workload=args.workload,
            seed=args.seed,
            report_rss=args.report_rss,
            trace_memory=args.trace_memory,
        )
    )
    result["profile"] = args.profile
    print(json.dumps(result))


def _child_run(args: argparse.Namespace, nodes: int, placed: int, profile: str, workload: str) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--profile",
        profile,
        "--nodes",
        str(nodes),
        "--workload",
        workload,
        "--placed",
        str(placed),
        "--pods",
        str(args.pods),
        "--percentage",
        str(args.percentage),
        "--seed",
        str(args.seed),
    ]
    if args.report_rss:
        cmd.append("--report-rss")
    if args.trace_memory:
        cmd += ["--trace-memory", str(args.trace_memory)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--nodes",
        type=int,
        nargs="+",
        default=None,
        help="node counts (default 500 1000 5000; 5000 for --workload mixed)",
    )
    parser.add_argument(
        "--placed",
        "--bound-pods",
        dest="placed",
        type=int,
        nargs="+",
        default=[1000],
        help="pods already bound before the measured ones (several: one run each, to check "
        "that the cycle time stays flat as bound pods grow)",
    )
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--percentage", type=int, default=100, help="percentageOfNodesToScore (0 = adaptive)")
    parser.add_argument("--workload", choices=("basic", "mixed"), default="basic")
    parser.add_argument("--seed", type=int, default=1, help="seed of the mixed workload's shapes and order")
    parser.add_argument("--report-rss", action="store_true", help="also report RSS after building the cluster")
    parser.add_argument(
        "--trace-memory",
        type=int,
        default=0,
        metavar="N",
        help="trace allocations while building the cluster and report the N largest sites (slower)",
    )
    parser.add_argument("--profile", choices=("full", "ceiling"), default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.nodes is None:
        args.nodes = [5000] if args.workload == "mixed" else [500, 1000, 5000]
    if args.profile is not None:
        child(args)
        return
    results = []
    if args.workload == "mixed":
        runs = [("full", "basic"), ("full", "mixed")]
    elif len(args.placed) > 1 or args.report_rss or args.trace_memory:
        runs = [("full", "basic")]
    else:
        runs = [("ceiling", "basic"), ("full", "basic")]
    for nodes in args.nodes:
        for placed in args.placed:
            for profile, workload in runs:
                results.append(_child_run(args, nodes, placed, profile, workload))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    _print_table(results, args.workload)


def _print_table(results: list[dict[str, Any]], workload: str) -> None:
    """One row per run; the last column compares pods/s with the first run of the same node count (the
    ceiling, SchedulingBasic for ``--workload mixed``, or the fewest bound pods)."""
    print(
        f"{'nodes':>6} {'bound':>7} {'workload':>8} {'profile':>8} {'pods/s':>9} {'CPU ms/pod':>10} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'scored %':>8} {'RSS MB':>8} {'ratio':>6}"
    )
    base: dict[int, float] = {}
    for r in results:
        base.setdefault(r["nodes"], r["pods_per_second"])
        ratio = r["pods_per_second"] / base[r["nodes"]] if base[r["nodes"]] else float("nan")
        cpu_ms = 1000 * r["cpu_seconds"] / r["bound"] if r["bound"] else float("nan")
        print(
            f"{r['nodes']:>6} {r['placed']:>7} {r['workload']:>8} {r['profile']:>8} {r['pods_per_second']:>9.1f} "
            f"{cpu_ms:>10.3f} {r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f} {r['scored_percent']:>8.2f} "
            f"{r['peak_rss_mb']:>8.1f} {ratio:>6.2f}"
        )
        if "rss_after_build_mb" in r:
            print(
                f"{'':>6} RSS after building the cluster: {r['rss_after_build_mb']} MB; objects parsed in "
                f"{r['parse_seconds']} s ({r['parse_cpu_seconds']} CPU-s), scheduler state built in "
                f"{r['build_seconds']} s ({r['build_cpu_seconds']} CPU-s)"
            )
        for site in r.get("top_allocations", ()):
            print(f"{'':>6} {site['mb']:>8.1f} MB {site['blocks']:>9} blocks  {site['site']}")


if __name__ == "__main__":
    main()
