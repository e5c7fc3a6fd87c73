"""In-process SchedulingBasic throughput with the volume plugins and ImageLocality on, against the same
run with them off (pods without volumes, nodes without images: what every cluster pays for them).

bench/scheduler_throughput.py's shape: nodes of 4 CPU / 32Gi / 110 pods, pods of 100m / 500Mi,
``--placed`` running, ``--pods`` measured. ``without`` is the default profile with VolumeRestrictions,
NodeVolumeLimits, VolumeBinding, VolumeZone and ImageLocality disabled; ``with`` is the default profile.
Both run in one process in alternating chunks (ABBA), timed in CPU time, as bench/loadaware_throughput.py
does; each of ``--repeat`` processes gives one slowdown, and the median is reported. Target: < 5%.

    python bench/volume_plugins_throughput.py                 # 1000 nodes, 3 processes
    python bench/volume_plugins_throughput.py --nodes 1000 5000 --repeat 5 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
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

VOLUME_PLUGINS = ("VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "ImageLocality")
WITH = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: {pct}
"""
WITHOUT = (
    WITH
    + """profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      disabled: [{disabled}]
"""
)
PROFILES = ("without", "with")


async def build(nodes: int, placed: int, pods: int, profile: str, pct: int) -> tuple[Scheduler, MemoryCluster]:
    node_list = [parse_node(node_obj(i)) for i in range(nodes)]
    placed_pods = [parse_pod(pod_obj(i, f"node-{i % nodes}")) for i in range(placed)]
    pending = [parse_pod(pod_obj(placed + i)) for i in range(pods)]
    cluster = MemoryCluster.from_objects(node_list, placed_pods + pending)
    disabled = ", ".join(f"{{name: {name}}}" for name in VOLUME_PLUGINS)
    text = WITH.format(pct=pct) if profile == "with" else WITHOUT.format(pct=pct, disabled=disabled)
    scheduler = build_scheduler(
        parse_scheduler_config(text, source="bench"), build_registry(use_entry_points=False), cluster
    )
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    return scheduler, cluster


async def _chunk(scheduler: Scheduler, size: int) -> tuple[float, int]:
    """Schedule up to ``size`` pods and wait for their bindings: (CPU seconds, cycles)."""
    cpu = time.process_time()
    n = 0
    while n < size and scheduler.schedule_one():
        n += 1
        if n % 32 == 0:
            await asyncio.sleep(0)
    await scheduler.drain()
    return time.process_time() - cpu, n


async def run_interleaved(nodes: int, placed: int, pods: int, pct: int, chunk: int) -> dict[str, Any]:
    built = {profile: await build(nodes, placed, pods, profile, pct) for profile in PROFILES}
    for scheduler, _ in built.values():
        scheduler.warm_up()
    totals = {profile: [0.0, 0] for profile in PROFILES}
    turn = 0
    while True:
        order = PROFILES if turn % 2 == 0 else PROFILES[::-1]
        got = {profile: await _chunk(built[profile][0], chunk) for profile in order}
        turn += 1
        if all(n == 0 for _, n in got.values()):
            break
        for profile, (cpu, n) in got.items():
            totals[profile][0] += cpu
            totals[profile][1] += n
    out: dict[str, Any] = {"nodes": nodes, "pods": pods}
    for profile, (cpu, _) in totals.items():
        bound = sum(1 for p in built[profile][1].pods.values() if p.node_name) - placed
        out[profile] = {"bound": bound, "cpu_ms_per_pod": round(float(cpu) * 1000 / max(bound, 1), 4)}
    base, plugged = out["without"]["cpu_ms_per_pod"], out["with"]["cpu_ms_per_pod"]
    out["slowdown_pct"] = round(100 * (1 - base / plugged), 2) if plugged else None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000])
    parser.add_argument("--placed", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--percentage", type=int, default=100)
    parser.add_argument("--chunk", type=int, default=250)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.child:
        out = asyncio.run(run_interleaved(args.nodes[0], args.placed, args.pods, args.percentage, args.chunk))
        print(json.dumps(out))
        return
    rows = []
    for nodes in args.nodes:
        cmd = [
            sys.executable,
            __file__,
            "--child",
            "--nodes",
            str(nodes),
            "--placed",
            str(args.placed),
            "--pods",
            str(args.pods),
            "--percentage",
            str(args.percentage),
            "--chunk",
            str(args.chunk),
        ]
        runs = [
            json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
            for _ in range(args.repeat)
        ]
        slowdowns = [r["slowdown_pct"] for r in runs]
        rows.append({"nodes": nodes, "runs": runs, "median_slowdown_pct": round(statistics.median(slowdowns), 2)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'nodes':>6} {'without cpu ms/pod':>18} {'with':>8} {'slowdown per process':>28} {'median':>7}")
    for row in rows:
        base = min(r["without"]["cpu_ms_per_pod"] for r in row["runs"])
        plugged = min(r["with"]["cpu_ms_per_pod"] for r in row["runs"])
        per_run = ", ".join(f"{r['slowdown_pct']:.1f}%" for r in row["runs"])
        print(f"{row['nodes']:>6} {base:>18.3f} {plugged:>8.3f} {per_run:>28} {row['median_slowdown_pct']:>6.1f}%")


if __name__ == "__main__":
    main()
