"""In-process throughput with ElasticQuota enabled, against the same run without it, plus the cost of one
runtime-quota update.

bench/scheduler_throughput.py's SchedulingBasic shape (nodes of 4 CPU / 32Gi / 110 pods, pods of
100m / 500Mi, ``--placed`` running, ``--pods`` measured), plus 100 ElasticQuotas in a three-level tree
(4 parents, each with 4 parents, each with 5 leaves; generous maxes so every pod is admitted) and every
pod labelled with a leaf quota, round-robin. ``baseline`` is the default profile (with DefaultPreBind, which
any profile that configures plugins gets); ``elasticquota`` adds
ElasticQuota (PreFilter, PostFilter, Reserve) with Koordinator's defaults. Both are measured in one
process in alternating chunks (ABBA, CPU time), as bench/loadaware_throughput.py does, after freezing
the objects built so far out of the cyclic garbage collector (an A-vs-A run is then within a few percent
instead of 10% apart). Target: < 10%.

The update cost: a 1,000-quota tree (10 x 10 x 10 leaves under 10 + 100 parents), one pod added to a
random leaf and that leaf's runtime read (the path re-split), in microseconds per update.

    python bench/elasticquota_throughput.py                 # 1,000 nodes, 3,000 pods
    python bench/elasticquota_throughput.py --nodes 5000 --pods 5000 --json
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import time
from typing import Any

from apis.config import parse_scheduler_config
from apis.core.parse import parse_node, parse_pod
from apis.scheduling.elasticquota import parse_elastic_quota
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.quota.tree import PodEntry, QuotaTree
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.scheduler import Scheduler

HEADER = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
"""
BASELINE = (
    HEADER
    + """
profiles:
- schedulerName: default-scheduler
  plugins:
    preBind: {enabled: [{name: DefaultPreBind}]}
"""
)
"""The same profile without ElasticQuota (a profile that configures plugins gets DefaultPreBind)."""
ELASTICQUOTA = (
    HEADER
    + """
profiles:
- schedulerName: default-scheduler
  plugins:
    preBind: {enabled: [{name: DefaultPreBind}]}
    preFilter: {enabled: [{name: ElasticQuota}]}
    postFilter: {enabled: [{name: ElasticQuota}]}
    reserve: {enabled: [{name: ElasticQuota}]}
"""
)
PROFILES = ("baseline", "elasticquota")
PREFIX = "quota.scheduling.koordinator.sh/"


def node_obj(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{i}", "labels": {"kubernetes.io/hostname": f"node-{i}"}},
        "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}},
    }


def pod_obj(i: int, quota: str, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i}", "namespace": "bench", "uid": f"uid-{i}", "labels": {PREFIX + "name": quota}},
        "spec": spec,
    }


def quota_obj(name: str, parent: str, *, is_parent: bool, cpu: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "labels": {PREFIX + "parent": parent, PREFIX + "is-parent": "true" if is_parent else "false"},
        },
        "spec": {"min": {"cpu": str(cpu), "memory": f"{cpu * 8}Gi"}, "max": {"cpu": "100000", "memory": "1000Ti"}},
    }


def three_level_tree(top: int, mid: int, leaves: int, leaf_min: int) -> tuple[list[dict[str, Any]], list[str]]:
    objs: list[dict[str, Any]] = []
    leaf_names: list[str] = []
    for a in range(top):
        objs.append(quota_obj(f"q{a}", "", is_parent=True, cpu=mid * leaves * leaf_min))
        for b in range(mid):
            objs.append(quota_obj(f"q{a}-{b}", f"q{a}", is_parent=True, cpu=leaves * leaf_min))
            for c in range(leaves):
                name = f"q{a}-{b}-{c}"
                objs.append(quota_obj(name, f"q{a}-{b}", is_parent=False, cpu=leaf_min))
                leaf_names.append(name)
    return objs, leaf_names


async def build(nodes: int, placed: int, pods: int, profile: str) -> tuple[Scheduler, MemoryCluster]:
    quotas, leaves = three_level_tree(4, 4, 5, leaf_min=10)
    node_list = [parse_node(node_obj(i)) for i in range(nodes)]
    placed_pods = [parse_pod(pod_obj(i, leaves[i % len(leaves)], f"node-{i % nodes}")) for i in range(placed)]
    pending = [parse_pod(pod_obj(placed + i, leaves[(placed + i) % len(leaves)])) for i in range(pods)]
    cluster = MemoryCluster.from_objects(
        node_list, placed_pods + pending, {"ElasticQuota": [(q["metadata"]["name"], q) for q in quotas]}
    )
    config = parse_scheduler_config(ELASTICQUOTA if profile == "elasticquota" else BASELINE, source="bench")
    scheduler = build_scheduler(config, build_registry(use_entry_points=False), cluster)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    return scheduler, cluster


async def _chunk(scheduler: Scheduler, size: int) -> tuple[float, int]:
    cpu = time.process_time()
    n = 0
    while n < size and scheduler.schedule_one():
        n += 1
        if n % 32 == 0:
            await asyncio.sleep(0)
    await scheduler.drain()
    return time.process_time() - cpu, n


async def interleaved(nodes: int, placed: int, pods: int, chunk: int) -> dict[str, Any]:
    built = {p: await build(nodes, placed, pods, p) for p in PROFILES}
    for scheduler, _ in built.values():
        scheduler.warm_up()
    # Without this the scheduler built first runs ~10% slower than an identical one built second (the
    # cyclic collector keeps walking its older objects), which flatters whichever profile is built last.
    gc.collect()
    gc.freeze()
    totals = {p: [0.0, 0] for p in PROFILES}
    turn = 0
    while True:
        order = PROFILES if turn % 2 == 0 else PROFILES[::-1]
        got = {p: await _chunk(built[p][0], chunk) for p in order}
        turn += 1
        if all(n == 0 for _, n in got.values()):
            break
        for p, (cpu, n) in got.items():
            totals[p][0] += cpu
            totals[p][1] += n
    out: dict[str, Any] = {"nodes": nodes, "placed": placed, "pods": pods, "quotas": 100}
    for p, (cpu, _) in totals.items():
        bound = sum(1 for x in built[p][1].pods.values() if x.node_name) - placed
        out[p] = {"bound": bound, "cpu_ms_per_pod": round(cpu * 1000 / max(bound, 1), 4)}
    base, eq = out["baseline"]["cpu_ms_per_pod"], out["elasticquota"]["cpu_ms_per_pod"]
    out["slowdown_pct"] = round(100 * (1 - base / eq), 2) if eq else None
    return out


def update_cost(updates: int, seed: int = 1) -> dict[str, Any]:
    """Microseconds per pod arrival plus the runtime read of its quota, on a 1,110-quota tree."""
    quotas, leaves = three_level_tree(10, 10, 10, leaf_min=1)
    tree = QuotaTree()
    tree.set_quotas(parse_elastic_quota(q) for q in quotas)
    tree.set_total({"cpu": 10**9, "memory": 10**15})
    tree.refresh_all()
    rng = random.Random(seed)
    chosen = [rng.choice(leaves) for _ in range(updates)]
    start = time.process_time()  # CPU time: the machines this runs on are shared
    for i, leaf in enumerate(chosen):
        tree.upsert_pod(f"p{i}", PodEntry(leaf, {"cpu": 1000, "memory": 1 << 30}, assigned=True))
        tree.runtime(leaf)
    per_update = (time.process_time() - start) / updates
    return {"quotas": len(quotas), "updates": updates, "us_per_update": round(per_update * 1e6, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--placed", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--chunk", type=int, default=250)
    parser.add_argument("--updates", type=int, default=20000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = {
        "throughput": asyncio.run(interleaved(args.nodes, args.placed, args.pods, args.chunk)),
        "runtime_update": update_cost(args.updates),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    t, u = result["throughput"], result["runtime_update"]
    print(f"SchedulingBasic {t['nodes']} nodes, {t['pods']} pods, {t['quotas']} quotas (3 levels):")
    for p in PROFILES:
        print(f"  {p:13s} {t[p]['cpu_ms_per_pod']:.3f} ms CPU/pod  ({t[p]['bound']} bound)")
    print(f"  slowdown {t['slowdown_pct']}%")
    print(f"runtime-quota update on a {u['quotas']}-quota tree: {u['us_per_update']} us")


if __name__ == "__main__":
    main()
