"""Cost of one descheduling round (LowNodeLoad, the chart's thresholds) on a large cluster.

In-process, no API server: N nodes with P pods each (every pod owned by a ReplicaSet), one fresh NodeMetric
per node. ``--hot`` of the nodes run at 85% CPU, the rest at 20%. The round is
:meth:`koord_scheduler.descheduler.round.Descheduler.plan` over a :class:`ClusterView` as the descheduler
controller builds it; building the records (the informers' work) is not counted. Prints wall and CPU
seconds per round (the median of ``--rounds``) and the migrations planned.

    .venv/bin/python bench/descheduling_round.py [--nodes 5000] [--pods 10] [--hot 0.1] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from apis.config.descheduler import parse_descheduler_config
from apis.core.frozendict import FrozenDict
from apis.core.types import Node, ObjectMeta, OwnerReference, Pod
from apis.slo.nodemetric_record import NodeMetricRecord, PodUsage
from koord_scheduler.descheduler.lownodeload.plugin import ClusterView
from koord_scheduler.descheduler.round import Descheduler

GI = 1024**3
NOW = 1_700_000_000.0
CONFIG = """
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: koord-descheduler
  plugins: {balance: {enabled: [{name: LowNodeLoad}]}}
  pluginConfig:
  - name: LowNodeLoad
    args:
      lowThresholds: {cpu: 45, memory: 55}
      highThresholds: {cpu: 75, memory: 80}
      anomalyCondition: {consecutiveAbnormalities: 1}
"""


def build(nodes: int, pods: int, hot: float) -> ClusterView:
    resources = FrozenDict({"cpu": 32000, "memory": 128 * GI, "pods": 110})
    node_list = []
    by_node: dict[str, list[Pod]] = {}
    metrics = {}
    hot_count = int(nodes * hot)
    owner = (OwnerReference("apps/v1", "ReplicaSet", "web", "uid-web", controller=True),)
    for i in range(nodes):
        name = f"node-{i:05d}"
        node_list.append(Node(ObjectMeta(name), allocatable=resources, capacity=resources))
        per_pod_cpu = (27200 if i < hot_count else 6400) // pods
        on = []
        usage = {}
        for j in range(pods):
            pod = Pod(
                ObjectMeta(
                    f"pod-{i}-{j}", "default", uid=f"u-{i}-{j}", owner_references=owner, creation_timestamp=NOW - j
                ),
                node_name=name,
                phase="Running",
                qos_class="Burstable",
                requests=FrozenDict({"cpu": 1000, "memory": 4 * GI}),
            )
            on.append(pod)
            usage[pod.key] = PodUsage(FrozenDict({"cpu": per_pod_cpu, "memory": 4 * GI}), prod=False)
        by_node[name] = on
        metrics[name] = NodeMetricRecord(name, update_time=NOW - 10, has_node_metric=True, pods=FrozenDict(usage))
    return ClusterView(node_list, by_node, metrics, NOW)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10)
    parser.add_argument("--hot", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    view = build(args.nodes, args.pods, args.hot)
    config, plugin_args = parse_descheduler_config(CONFIG)
    first: list[tuple[float, float]] = []
    steady: list[tuple[float, float]] = []
    planned = 0
    for _ in range(args.rounds):
        descheduler = Descheduler(config, plugin_args, clock=lambda: NOW)
        for into in (first, steady):  # the first round builds every pod's record; later ones reuse them
            wall, cpu = time.perf_counter(), time.process_time()
            plan = descheduler.plan(view)
            into.append((time.perf_counter() - wall, time.process_time() - cpu))
            planned = len(plan.migrations)
    for label, runs in (("first round", first), ("steady round", steady)):
        print(
            f"{args.nodes} nodes, {args.nodes * args.pods} pods, {int(args.nodes * args.hot)} hot, {label}: "
            f"wall {statistics.median(w for w, _ in runs):.3f}s, CPU {statistics.median(c for _, c in runs):.3f}s "
            f"(median of {args.rounds}), {planned} migrations planned"
        )


if __name__ == "__main__":
    main()
