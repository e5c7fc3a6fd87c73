"""Micro-benchmark: NodeResourcesFit and NodeResourcesBalancedAllocation over one large snapshot.

5,000 nodes of 4 CPU / 32Gi / 110 pods (scheduler_perf's shape) with pods already placed so that about a
tenth of the nodes reject the pod, then each measured pod runs PreFilter + Filter and PreScore + Score
over every node, as one scheduling cycle would. Prints microseconds per pod for each phase.

    python bench/plugins_noderesources.py
    python bench/plugins_noderesources.py --nodes 5000 --pods 2000 --strategy MostAllocated
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from apis.config.plugin_args import NodeResourcesBalancedAllocationArgs, NodeResourcesFitArgs
from apis.core.frozendict import FrozenDict
from apis.core.types import Node, ObjectMeta, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.plugins.balancedallocation.plugin import BalancedAllocation
from koord_scheduler.plugins.noderesources.plugin import Fit

GI = 1024**3
MI = 1024**2


def make_pod(name: str, cpu: int, memory: int, node: str = "") -> Pod:
    return Pod(
        meta=ObjectMeta(name=name, namespace="bench"),
        node_name=node,
        requests=FrozenDict({"cpu": cpu, "memory": memory}),
        non_zero_cpu=cpu,
        non_zero_memory=memory,
    )


def build_snapshot(nodes: int, rng: np.random.Generator) -> ClusterSnapshot:
    snap = ClusterSnapshot(initial_capacity=nodes)
    alloc = FrozenDict({"cpu": 4000, "memory": 32 * GI, "pods": 110, "ephemeral-storage": 100 * GI})
    for i in range(nodes):
        snap.upsert_node(Node(meta=ObjectMeta(name=f"node-{i}"), allocatable=alloc, capacity=alloc))
    for i in range(nodes):
        # Most nodes partly used; every tenth one nearly full on cpu.
        cpu = 3900 if i % 10 == 0 else int(rng.integers(0, 3000))
        snap.add_pod(make_pod(f"placed-{i}", cpu, int(rng.integers(0, 24)) * GI, node=f"node-{i}"))
    return snap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--strategy", default="LeastAllocated")
    opts = parser.parse_args()

    rng = np.random.default_rng(1)
    snap = build_snapshot(opts.nodes, rng)
    strategy: dict[str, object] = {"type": opts.strategy}
    if opts.strategy == "RequestedToCapacityRatio":
        shape = [
            {"utilization": 0, "score": 0},
            {"utilization": 50, "score": 10},
            {"utilization": 100, "score": 3},
        ]
        strategy["requestedToCapacityRatio"] = {"shape": shape}
    fit = Fit(NodeResourcesFitArgs.model_validate({"scoringStrategy": strategy}))
    balanced = BalancedAllocation(NodeResourcesBalancedAllocationArgs())
    pods = [make_pod(f"p-{i}", 100 + 100 * (i % 5), 500 * MI) for i in range(opts.pods)]
    positions = snap.node_order()

    timings = {"fit_filter": 0.0, "fit_score": 0.0, "balanced_score": 0.0}
    feasible = 0
    for pod in pods:
        state = CycleState()
        t0 = time.perf_counter()
        fit.pre_filter(state, pod, snap)
        result = fit.filter_nodes(state, pod, snap, positions)
        t1 = time.perf_counter()
        alive = positions[result.passed]
        fit.pre_score(state, pod, snap, alive)
        fit.score_nodes(state, pod, snap, alive)
        t2 = time.perf_counter()
        balanced.pre_score(state, pod, snap, alive)
        balanced.score_nodes(state, pod, snap, alive)
        t3 = time.perf_counter()
        timings["fit_filter"] += t1 - t0
        timings["fit_score"] += t2 - t1
        timings["balanced_score"] += t3 - t2
        feasible += len(alive)

    print(
        f"{opts.nodes} nodes, {opts.pods} pods, strategy {opts.strategy}, "
        f"{feasible / opts.pods:.0f} feasible nodes per pod"
    )
    for phase, seconds in timings.items():
        print(f"  {phase:<15} {seconds / opts.pods * 1e6:8.1f} us/pod")
    print(f"  {'total':<15} {sum(timings.values()) / opts.pods * 1e6:8.1f} us/pod")


if __name__ == "__main__":
    main()
