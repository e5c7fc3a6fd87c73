"""Shared driver for the scheduler_perf-shaped topology benchmarks (bench/topology_spread.py,
bench/pod_anti_affinity.py): in-process, MemoryCluster + build_scheduler with the default profile, as
bench/scheduler_throughput.py does. Only the measured pods are timed."""

from __future__ import annotations

import asyncio
import resource
import time
from collections.abc import Callable
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


def node_obj(i: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """scheduler_perf's node-default.yaml: 4 CPU, 32Gi, 110 pods."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{i}", "labels": {"kubernetes.io/hostname": f"node-{i}", **(labels or {})}},
        "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}},
    }


def pod_obj(name: str, namespace: str, *, labels: dict[str, str] | None = None,
            spec_extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """scheduler_perf's pod-default.yaml: one pause container requesting 100m / 500Mi."""
    spec: dict[str, Any] = {
        "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"},
                                      "limits": {"cpu": "100m", "memory": "500Mi"}}}],
        **(spec_extra or {}),
    }
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                         "labels": labels or {}},
            "spec": spec}


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


async def run(nodes: list[dict[str, Any]], init_pods: list[dict[str, Any]], measure_pods: list[dict[str, Any]],
              *, pct: int = 0) -> dict[str, Any]:
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
