"""Cluster-file objects (JSON text) for GPU scenarios in ``simulate``: a node with its Device object,
pods holding whole GPUs or shares, and pods asking for them."""

from __future__ import annotations

import json
from typing import Any

CORE = "koordinator.sh/gpu-core"
RATIO = "koordinator.sh/gpu-memory-ratio"
MEM = "koordinator.sh/gpu-memory"
ALLOCATED = "scheduling.koordinator.sh/device-allocated"


def gpu_node(name: str, gpus: int, *, cpu: str = "32", labels: dict[str, str] | None = None) -> list[str]:
    """The Node (allocatable as the deviceresource controller writes it, plus ``nvidia.com/gpu``) and its
    Device object with ``gpus`` healthy 80Gi GPUs."""
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {
            "allocatable": {
                "cpu": cpu,
                "memory": "256Gi",
                "pods": "110",
                "nvidia.com/gpu": str(gpus),
                CORE: str(100 * gpus),
                RATIO: str(100 * gpus),
                MEM: f"{80 * gpus}Gi",
            }
        },
    }
    device = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": name},
        "spec": {
            "devices": [
                {
                    "type": "gpu",
                    "minor": i,
                    "health": True,
                    "id": f"GPU-{name}-{i}",
                    "resources": {CORE: "100", RATIO: "100", MEM: "80Gi"},
                }
                for i in range(gpus)
            ]
        },
    }
    return [json.dumps(node), json.dumps(device)]


def gpu_pod(
    name: str,
    priority: int,
    *,
    percent: int = 100,
    gpus: int = 1,
    node: str = "",
    minors: tuple[int, ...] = (),
    created: str = "",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> str:
    """A pod asking for ``gpus`` GPUs of ``percent`` each (core and memory ratio); bound to ``node`` with
    the devices of ``minors`` when given."""
    requests: dict[str, str] = {"cpu": "1", "memory": "1Gi"}
    if percent == 100:
        requests["nvidia.com/gpu"] = str(gpus)
    else:
        requests[CORE] = requests[RATIO] = str(percent * gpus)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "labels": labels or {},
        "annotations": dict(annotations or {}),
    }
    if created:
        meta["creationTimestamp"] = created
    spec: dict[str, Any] = {
        "priority": priority,
        "containers": [{"name": "c", "image": "app", "resources": {"requests": requests, "limits": requests}}],
    }
    if node:
        spec["nodeName"] = node
        share = {CORE: str(percent), RATIO: str(percent), MEM: f"{80 * percent // 100}Gi"}
        meta["annotations"][ALLOCATED] = json.dumps({"gpu": [{"minor": m, "resources": share} for m in minors]})
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


def gpu_reservation(
    name: str,
    gpus: int,
    *,
    app: str,
    policy: str = "",
    status: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
) -> str:
    """A Reservation whose template asks for ``gpus`` whole GPUs, for pods labelled ``app``; ``status``
    (an Available one, say) and ``annotations`` as given."""
    requests = {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {
        "allocateOnce": False,
        "ttl": "1h",
        "template": {
            "metadata": {"namespace": "default"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": requests, "limits": requests}}]},
        },
        "owners": [{"labelSelector": {"matchLabels": {"app": app}}}],
    }
    if policy:
        spec["allocatePolicy"] = policy
    body: dict[str, Any] = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name, "uid": f"uid-{name}", "annotations": dict(annotations or {})},
        "spec": spec,
    }
    if status is not None:
        body["status"] = status
    return json.dumps(body)
