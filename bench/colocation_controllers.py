"""Cost of the colocation controllers (nodeslo, noderesource, nodemetric) on a large steady cluster.

In-process, against an in-memory API (:class:`MemoryControllerApi`, which records writes): N nodes with
P high-priority pods each; every node's koordlet reports a NodeMetric once a minute, staggered over the
minute, with pod usage wandering a few percent around its mean (a steady cluster). Each noderesource
write is echoed back as a Node MODIFIED event, as the watch would deliver it. Simulated time, real CPU:
the CPU seconds are those of the controllers' event handling and reconciles (building the metric records
is the informer's work and is not counted).

Prints, per simulated minute: CPU seconds, reconciles, API writes by controller, and writes per node per
minute. The first minute creates every NodeSLO and writes every node's batch resources; afterwards, update
gating (``resourceDiffThreshold`` 10 %, ``updateTimeThresholdSeconds`` 300 s) keeps writes to the nodes
whose value drifted, at most once per 5 minutes.

    .venv/bin/python bench/colocation_controllers.py [--nodes 5000] [--pods 20] [--minutes 7] [--jitter 0.03]
        [--zones 0] [--compare BatchResource:0 '*:2']

``--zones N`` gives every node a NodeResourceTopology with N NUMA zones (NUMA-level batch resources are
computed and written into them). ``--compare A B`` runs the same cluster with A and B, each
``PLUGINS[:ZONES]`` (``--noderesource-plugins`` and zones per node), in the order A B B A (a fresh
controller each run) and prints each run's steady state and the B/A ratios of CPU and writes. Reports carry
a ``prodReclaimableMetric`` (wandering like the usage), so the mid tier has something to compute.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections import Counter

from apis.configuration import CONFIG_MAP_NAME, DEFAULT_NAMESPACE
from apis.configuration.colocation import ColocationStrategy
from apis.core.frozendict import FrozenDict
from apis.core.types import Node, ObjectMeta, Pod
from apis.slo.nodemetric_record import NodeMetricRecord, PodUsage
from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.controllers.api import ConfigMapRecord, MemoryControllerApi
from koord_scheduler.scheduler.controllers.decide import canonical, collect_policy
from koord_scheduler.scheduler.controllers.nrt_batch import TopologyRecord, canonical_zones
from koord_scheduler.scheduler.controllers.runner import ColocationControllers, ColocationOptions
from koord_scheduler.scheduler.controllers.selection import parse_noderesource_plugins

GI = 1024**3
CHART = {"colocation-config": '{"enable": true}', "resource-threshold-config": '{"clusterStrategy": {"enable": true}}'}
START = 1_700_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def build_cluster(nodes: int, pods: int) -> tuple[list[Node], list[Pod]]:
    resources = FrozenDict({"cpu": 32000, "memory": 128 * GI, "pods": 110})
    node_list = [
        Node(
            ObjectMeta(f"node-{i:05d}", labels=FrozenDict({"pool": f"p{i % 4}"})),
            allocatable=resources,
            capacity=resources,
        )
        for i in range(nodes)
    ]
    pod_list = [
        Pod(
            ObjectMeta(
                f"pod-{i}-{j}", "default", uid=f"u-{i}-{j}", labels=FrozenDict({"koordinator.sh/qosClass": "LS"})
            ),
            node_name=f"node-{i:05d}",
            phase="Running",
            priority=9500,
            qos_class="Burstable",
            requests=FrozenDict({"cpu": 1000, "memory": 4 * GI}),
        )
        for i in range(nodes)
        for j in range(pods)
    ]
    return node_list, pod_list


def metric(node: str, pods: int, now: float, *, rng: random.Random, jitter: float, policy: str) -> NodeMetricRecord:
    def wander(amount: int) -> int:
        return int(amount * (1 + rng.uniform(-jitter, jitter)))

    usage = {
        f"default/pod-{node[5:].lstrip('0') or '0'}-{j}": PodUsage(
            FrozenDict({"cpu": wander(500), "memory": wander(2 * GI)}), True, "koord-prod"
        )
        for j in range(pods)
    }
    return NodeMetricRecord(
        name=node,
        update_time=now,
        has_node_metric=True,
        node_usage=FrozenDict({"cpu": wander(500 * pods + 1500), "memory": wander((2 * pods + 4) * GI)}),
        system_usage=FrozenDict({"cpu": wander(1500), "memory": wander(4 * GI)}),
        pods=FrozenDict(usage),
        collect_policy=policy,
        prod_reclaimable=FrozenDict({"cpu": wander(400 * pods), "memory": wander(2 * pods * GI)}),
    )


def topology(node: str, zones: int) -> TopologyRecord:
    """An NRT with ``zones`` NUMA zones splitting the node's 32 cores and 128Gi."""
    share = [
        {
            "name": f"node-{i}",
            "type": "Node",
            "resources": [
                {
                    "name": "cpu",
                    "capacity": str(32 // zones),
                    "allocatable": str(32 // zones),
                    "available": str(32 // zones),
                },
                {
                    "name": "memory",
                    "capacity": f"{128 // zones}Gi",
                    "allocatable": f"{128 // zones}Gi",
                    "available": f"{128 // zones}Gi",
                },
            ],
        }
        for i in range(zones)
    ]
    return TopologyRecord(node, "", canonical_zones(share), "1")


async def run(args: argparse.Namespace, plugins: str = "*", zones: int = 0) -> list[tuple[float, int, int]]:
    """Per simulated minute: (CPU seconds, reconciles, API writes), with ``--noderesource-plugins`` ``plugins``
    and ``zones`` NUMA zones per node (0: no NodeResourceTopology)."""
    rng = random.Random(7)
    clock = Clock()
    api = MemoryControllerApi()
    options = ColocationOptions(noderesource_plugins=parse_noderesource_plugins(plugins))
    controllers = ColocationControllers(api, clock=clock, options=options)
    nodes, pods = build_cluster(args.nodes, args.pods)
    policy = canonical(collect_policy(ColocationStrategy(enable=True)))
    controllers.on_config_map(ConfigMapRecord(DEFAULT_NAMESPACE, CONFIG_MAP_NAME, "uid", CHART))
    for node in nodes:
        controllers.on_node(EventType.ADDED, None, node)
    for pod in pods:
        controllers.on_pod(EventType.ADDED, None, pod)
    if zones:
        for node in nodes:
            controllers.on_object("NodeResourceTopology", EventType.ADDED, None, topology(node.name, zones))
    for node in nodes:
        controllers.on_object(
            "NodeMetric",
            EventType.ADDED,
            None,
            metric(node.name, args.pods, clock.now, rng=rng, jitter=args.jitter, policy=policy),
        )
    names = [n.name for n in nodes]
    ticks = 60  # reconcile once per simulated second, as the loop does when events keep coming
    print(
        f"{args.nodes} nodes, {args.pods} HP pods each, NodeMetric every 60 s, usage jitter ±{args.jitter:.0%}, "
        f"noderesource plugins {plugins}, {zones} NUMA zones per node"
    )
    print(f"{'minute':>6} {'cpu s':>7} {'reconciles':>10} {'writes':>7} {'per node':>8}  by controller")
    rows: list[tuple[float, int, int]] = []
    for minute in range(args.minutes):
        reports = [
            [
                metric(name, args.pods, clock.now + tick, rng=rng, jitter=args.jitter, policy=policy)
                for name in names[tick::ticks]
            ]
            for tick in range(ticks)
        ]
        before = len(api.writes)
        reconciles = 0
        cpu = time.process_time()
        for tick in range(ticks):
            clock.now += 1
            for record in reports[tick]:
                controllers.on_object(
                    "NodeMetric", EventType.MODIFIED, controllers.node_metrics.get(record.name), record
                )
            reconciles += sum(len(d) for d in controllers._dirty.values())
            start = len(api.writes)
            await controllers.reconcile_pending()
            for write in api.writes[start:]:  # the watch echoes each node status write
                if write.controller == "noderesource":
                    node = controllers.nodes[write.node]
                    controllers.on_node(EventType.MODIFIED, node, node)
        cpu = time.process_time() - cpu
        writes = api.writes[before:]
        by = Counter(f"{w.controller} {w.verb}" for w in writes)
        print(
            f"{minute:>6} {cpu:>7.2f} {reconciles:>10} {len(writes):>7} {len(writes) / args.nodes:>8.3f}  "
            + ", ".join(f"{k}: {v}" for k, v in sorted(by.items()))
        )
        rows.append((cpu, reconciles, len(writes)))
    steady = rows[1:]
    if steady:
        cpu_avg = sum(r[0] for r in steady) / len(steady)
        writes_avg = sum(r[2] for r in steady) / len(steady)
        print(
            f"steady state (minutes 1-{len(rows) - 1}): {cpu_avg:.2f} CPU s/min, {writes_avg:.0f} writes/min = "
            f"{writes_avg / args.nodes:.3f} per node per minute"
        )
    return rows


def steady(rows: list[tuple[float, int, int]]) -> tuple[float, float]:
    """Mean CPU seconds and writes per minute after the first minute."""
    tail = rows[1:] or rows
    return sum(r[0] for r in tail) / len(tail), sum(r[2] for r in tail) / len(tail)


def compare(args: argparse.Namespace, a: str, b: str) -> None:
    results: dict[str, list[tuple[float, float]]] = {a: [], b: []}
    for spec in (a, b, b, a):
        plugins, _, zones = spec.partition(":")
        results[spec].append(steady(asyncio.run(run(args, plugins, int(zones or 0)))))
        print()
    mean = {k: (sum(c for c, _ in v) / len(v), sum(w for _, w in v) / len(v)) for k, v in results.items()}
    for k, (cpu, writes) in mean.items():
        print(
            f"{k:>20}: {cpu:.2f} CPU s/min, {writes:.0f} writes/min (runs: "
            + ", ".join(f"{c:.2f}" for c, _ in results[k])
            + ")"
        )
    print(f"{b} / {a}: CPU x{mean[b][0] / mean[a][0]:.2f}, writes x{mean[b][1] / max(mean[a][1], 1):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=20, help="HP pods per node")
    parser.add_argument("--minutes", type=int, default=7, help="simulated minutes (the first creates everything)")
    parser.add_argument("--jitter", type=float, default=0.03, help="relative wander of each reported usage")
    parser.add_argument("--plugins", default="*", help="--noderesource-plugins of a single run")
    parser.add_argument("--zones", type=int, default=0, help="NUMA zones per node (0: no NodeResourceTopology)")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="two PLUGINS[:ZONES] settings, run A B B A")
    args = parser.parse_args()
    if args.compare:
        compare(args, *args.compare)
    else:
        asyncio.run(run(args, args.plugins, args.zones))


if __name__ == "__main__":
    main()
