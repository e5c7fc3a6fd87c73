"""Shared driver for the scheduler_perf-shaped benchmarks (bench/topology_spread.py,
bench/pod_anti_affinity.py), and the one definition of those shapes at 1,000 nodes (``SHAPES``) that
bench/upstream_compare.py, bench/e2e_throughput.py and bench/upstream/performance-config.yaml share.

The templates are upstream's ``test/integration/scheduler_perf/templates`` (k8s.io/kubernetes v1.35.8):
node-default (4 CPU / 32Gi / 110 pods), pod-default (100m / 500Mi), pod-with-topology-spreading,
pod-with-pod-anti-affinity, pod-low-priority (900m) and pod-high-priority (3 CPU, priority 10).
tests/unit/bench checks them against the YAML copies in bench/upstream/templates.

In-process: MemoryCluster + build_scheduler with the default profile, as bench/scheduler_throughput.py
does. Only the measured pods are timed."""

from __future__ import annotations

import asyncio
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from apis.config import parse_scheduler_config
from apis.core.parse import parse_node, parse_pod
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster

DEFAULT_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: {pct}
"""

PodFactory = Callable[[int], dict[str, Any]]

ZONE_KEY = "topology.kubernetes.io/zone"
ZONES = ("moon-1", "moon-2", "moon-3")
PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1"


def node_obj(i: int, labels: dict[str, str] | None = None, *, prefix: str = "node") -> dict[str, Any]:
    """scheduler_perf's node-default.yaml: 4 CPU, 32Gi, 110 pods, Ready, plus the hostname label the
    harness adds."""
    name = f"{prefix}-{i}"
    resources = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True"}],
            "phase": "Running",
        },
    }


def pod_obj(
    name: str,
    namespace: str,
    *,
    labels: dict[str, str] | None = None,
    spec_extra: dict[str, Any] | None = None,
    cpu: str = "100m",
) -> dict[str, Any]:
    """scheduler_perf's pod-default.yaml: one pause container requesting (and limited to) ``cpu`` / 500Mi."""
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "pause",
                "image": PAUSE_IMAGE,
                "ports": [{"containerPort": 80}],
                "resources": {"requests": {"cpu": cpu, "memory": "500Mi"}, "limits": {"cpu": cpu, "memory": "500Mi"}},
            }
        ],
        **(spec_extra or {}),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}", "labels": labels or {}},
        "spec": spec,
    }


SPREAD_LABELS = {"color": "blue"}
SPREAD = {
    "topologySpreadConstraints": [
        {
            "maxSkew": 5,
            "topologyKey": ZONE_KEY,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": dict(SPREAD_LABELS)},
        }
    ]
}
ANTI_LABELS = {"color": "green"}
ANTI = {
    "affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": dict(ANTI_LABELS)},
                    "topologyKey": "kubernetes.io/hostname",
                    "namespaces": ["sched-1", "sched-0"],
                }
            ]
        }
    }
}
LOW_PRIORITY = 0
HIGH_PRIORITY = 10


def default_pod(name: str, namespace: str) -> dict[str, Any]:
    """pod-default.yaml."""
    return pod_obj(name, namespace)


def spreading_pod(name: str, namespace: str) -> dict[str, Any]:
    """pod-with-topology-spreading.yaml: ``color: blue``, DoNotSchedule zone spread with maxSkew 5."""
    return pod_obj(name, namespace, labels=dict(SPREAD_LABELS), spec_extra=SPREAD)


def anti_affinity_pod(name: str, namespace: str) -> dict[str, Any]:
    """pod-with-pod-anti-affinity.yaml: ``color: green``, required hostname anti-affinity to ``color:
    green`` in sched-0 and sched-1 (so at most one per node)."""
    return pod_obj(name, namespace, labels=dict(ANTI_LABELS), spec_extra=ANTI)


def low_priority_pod(name: str, namespace: str) -> dict[str, Any]:
    """pod-low-priority.yaml: 900m / 500Mi, terminationGracePeriodSeconds 0, no priority (0)."""
    return pod_obj(name, namespace, cpu="900m", spec_extra={"terminationGracePeriodSeconds": 0})


def high_priority_pod(name: str, namespace: str) -> dict[str, Any]:
    """pod-high-priority.yaml: 3 CPU / 500Mi at priority 10 (must preempt three low-priority pods)."""
    return pod_obj(name, namespace, cpu="3000m", spec_extra={"priority": HIGH_PRIORITY})


PodTemplate = Callable[[str, str], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Shape:
    """One scheduler_perf test case at one size: ``nodes`` node-default nodes (labelled round-robin with
    ``zone_values`` under ZONE_KEY when given), ``init_pods`` from ``init_template`` in ``init_namespace``
    (scheduled, not timed), then ``measure_pods`` from ``measure_template`` in ``measure_namespace``
    (timed; upstream's ``collectMetrics: true`` op)."""

    name: str
    nodes: int
    init_pods: int
    measure_pods: int
    init_template: PodTemplate
    measure_template: PodTemplate
    init_namespace: str = "default"
    measure_namespace: str = "default"
    zone_values: tuple[str, ...] = ()

    def node_objs(self, *, prefix: str = "node") -> list[dict[str, Any]]:
        zones = self.zone_values
        return [
            node_obj(i, {ZONE_KEY: zones[i % len(zones)]} if zones else None, prefix=prefix) for i in range(self.nodes)
        ]

    def init_objs(self) -> list[dict[str, Any]]:
        return [self.init_template(f"init-{i}", self.init_namespace) for i in range(self.init_pods)]

    def measure_objs(self) -> list[dict[str, Any]]:
        return [self.measure_template(f"measure-{i}", self.measure_namespace) for i in range(self.measure_pods)]


SHAPES: dict[str, Shape] = {
    # misc/performance-config.yaml SchedulingBasic: 500Nodes is 500 + 1000, 5000Nodes is 1000 + 1000.
    "SchedulingBasic": Shape("SchedulingBasic", 1000, 1000, 1000, default_pod, default_pod),
    # topology_spreading/performance-config.yaml TopologySpreading: 500Nodes is 1000 + 1000.
    "TopologySpreading": Shape("TopologySpreading", 1000, 1000, 1000, default_pod, spreading_pod, zone_values=ZONES),
    # affinity/performance-config.yaml SchedulingPodAntiAffinity: 500Nodes is 100 + 400 (x2 here; at most
    # one pod per node, so init + measured must stay <= nodes).
    "SchedulingPodAntiAffinity": Shape(
        "SchedulingPodAntiAffinity",
        1000,
        200,
        800,
        anti_affinity_pod,
        anti_affinity_pod,
        init_namespace="sched-0",
        measure_namespace="sched-1",
    ),
    # misc/performance-config.yaml PreemptionBasic/1000Nodes exactly: 4000 low-priority + 1000 high-priority.
    "PreemptionBasic": Shape("PreemptionBasic", 1000, 4000, 1000, low_priority_pod, high_priority_pod),
}


def _create(cluster: MemoryCluster, scheduler: Any, pod: Any) -> None:
    """A pod created through the API: stored, and its watch event delivered."""
    cluster.pods[pod.key] = pod
    scheduler.on_pod(EventType.ADDED, None, pod)


async def _drain(scheduler: Any) -> int:
    n = 0
    while scheduler.schedule_one():
        n += 1
        if n % 32 == 0:
            await asyncio.sleep(0)
    await scheduler.drain()
    return n


async def run(
    nodes: list[dict[str, Any]], init_pods: list[dict[str, Any]], measure_pods: list[dict[str, Any]], *, pct: int = 0
) -> dict[str, Any]:
    """Schedule ``init_pods`` (untimed), then ``measure_pods`` (timed), like createPods with
    collectMetrics on the second op only."""
    cluster = MemoryCluster.from_objects([parse_node(n) for n in nodes], [])
    config = parse_scheduler_config(DEFAULT_CONFIG.format(pct=pct), source="bench")
    scheduler = build_scheduler(config, build_registry(use_entry_points=False), cluster)
    await cluster.start(scheduler)
    for obj in init_pods:
        _create(cluster, scheduler, parse_pod(obj))
    await _drain(scheduler)
    measured = [parse_pod(obj) for obj in measure_pods]
    for pod in measured:
        _create(cluster, scheduler, pod)
    latencies = []
    started = time.perf_counter()
    n = 0
    while True:
        t = time.perf_counter()
        if not scheduler.schedule_one():
            break
        latencies.append(time.perf_counter() - t)
        n += 1
        if n % 32 == 0:
            await asyncio.sleep(0)
    await scheduler.drain()
    elapsed = time.perf_counter() - started
    keys = {p.key for p in measured}
    bound = sum(1 for p in cluster.pods.values() if p.key in keys and p.node_name)
    lat = np.asarray(latencies or [0.0])
    return {
        "nodes": len(nodes),
        "init_pods": len(init_pods),
        "measure_pods": len(measure_pods),
        "bound": bound,
        "seconds": round(elapsed, 3),
        "pods_per_second": round(bound / elapsed, 1) if elapsed else 0.0,
        "p50_ms": round(float(np.percentile(lat, 50)) * 1000, 3),
        "p99_ms": round(float(np.percentile(lat, 99)) * 1000, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
