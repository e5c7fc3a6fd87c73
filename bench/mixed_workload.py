"""The mixed workload of bench/scheduler_throughput.py (``--workload mixed``).

Four node sizes over three zones, and pods of 16 request shapes (four CPU sizes times four memory
sizes) in a seeded random order; one pod in three carries a DoNotSchedule zone topology-spread
constraint (maxSkew 1) over the pods of its own spread group. Already-bound pods follow the same mix.
"""

from __future__ import annotations

from typing import Any

import numpy as np

ZONE_KEY = "topology.kubernetes.io/zone"
ZONES = ("zone-a", "zone-b", "zone-c")
NODE_SIZES = (("4", "16Gi"), ("8", "32Gi"), ("16", "64Gi"), ("32", "128Gi"))
CPU_SIZES = ("100m", "250m", "500m", "1")
MEMORY_SIZES = ("256Mi", "512Mi", "1Gi", "2Gi")
SHAPES = tuple((cpu, memory) for cpu in CPU_SIZES for memory in MEMORY_SIZES)
SPREAD_GROUPS = 4
SPREAD_FRACTION = 1 / 3


def node_obj(i: int) -> dict[str, Any]:
    """Node ``i``: size ``i % 4``, zone ``i % 3`` (every size appears in every zone)."""
    cpu, memory = NODE_SIZES[i % len(NODE_SIZES)]
    name = f"node-{i}"
    resources = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, ZONE_KEY: ZONES[i % len(ZONES)]}},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod_obj(i: int, shape: int, spread_group: int | None, node: str = "") -> dict[str, Any]:
    """Pod ``i`` of request shape ``shape``; with ``spread_group``, labelled ``app: spread-<group>`` and
    spread over zones with maxSkew 1 against the pods of that group."""
    cpu, memory = SHAPES[shape]
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
    }
    labels = {"shape": str(shape)}
    if spread_group is not None:
        app = f"spread-{spread_group}"
        labels["app"] = app
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE_KEY,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": app}},
            }
        ]
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i}", "namespace": "bench", "uid": f"uid-{i}", "labels": labels},
        "spec": spec,
    }


def pod_objs(start: int, count: int, *, seed: int, nodes: int = 0) -> list[dict[str, Any]]:
    """``count`` pods numbered from ``start``, shapes and spread drawn from ``seed``; bound round-robin
    to the first ``nodes`` nodes when ``nodes`` > 0."""
    rng = np.random.default_rng(seed)
    shapes = rng.integers(0, len(SHAPES), size=count).tolist()
    spread = (rng.random(count) < SPREAD_FRACTION).tolist()
    groups = rng.integers(0, SPREAD_GROUPS, size=count).tolist()
    return [
        pod_obj(start + k, shapes[k], groups[k] if spread[k] else None, f"node-{(start + k) % nodes}" if nodes else "")
        for k in range(count)
    ]
