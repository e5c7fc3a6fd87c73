"""The colocation set-up of ``bench/e2e_throughput.py --controllers ...`` (not run on its own).

When a koord-scheduler contender runs any of the colocation controllers (``nodeslo``, ``noderesource``,
``nodemetric``) or the ``descheduler``, the bench cluster gets what those controllers read, so they do the
work they do on a real cluster instead of idling:

- the NodeMetric and NodeSLO CRDs from ``deploy/crds``;
- the ``slo-controller-config`` ConfigMap of ``deploy/slo-controller-config.yaml`` (Koordinator's chart
  default: colocation on) in ``koordinator-system``;
- one NodeMetric per node with a fresh status, as each node's koordlet reports it (node usage 500m / 2Gi,
  system usage 200m / 1Gi, no pods).

Before every contender (on or off, so both see the same cluster) :func:`reset` puts the cluster back to
"controllers never ran": NodeSLOs deleted, batch resources removed from every node's status, each
NodeMetric's collect policy cleared and its status stamped now. So each run with the controllers on
creates every NodeSLO, writes every node's NodeMetric policy and batch resources, and reconciles every
bind while the backlog drains: the worst case of a scheduler restart on a colocated cluster.

:func:`observe` counts that work afterwards (NodeSLOs, nodes with ``kubernetes.io/batch-cpu``).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from kubeapi import ApiError, ApiHttp

REPO = Path(__file__).resolve().parents[1]
COLOCATION_CONTROLLERS = frozenset({"nodeslo", "noderesource", "nodemetric"})
# Also reads the NodeMetrics (LowNodeLoad), so it gets the same set-up; off under ``*``, as in koord-scheduler.
NODEMETRIC_READERS = COLOCATION_CONTROLLERS | {"descheduler"}
CONFIG_NAMESPACE = "koordinator-system"
SLO = "/apis/slo.koordinator.sh/v1alpha1"
CRDS = ("nodemetrics", "nodeslos")
BATCH = ("kubernetes.io/batch-cpu", "kubernetes.io/batch-memory")
MERGE_PATCH = "application/merge-patch+json"
CONCURRENCY = 64


def needs_colocation(controller_lists: list[str]) -> bool:
    """Whether any ``--controllers`` value turns on a colocation controller (``*`` does) or the
    ``descheduler`` (which reads the NodeMetrics)."""
    for text in controller_lists:
        items = {item.strip() for item in text.split(",")}
        on = {i for i in items if not i.startswith("-")} | (COLOCATION_CONTROLLERS if "*" in items else set())
        if (on - {i[1:] for i in items if i.startswith("-")}) & NODEMETRIC_READERS:
            return True
    return False


async def post_ignoring_conflict(http: ApiHttp, path: str, body: dict[str, Any]) -> None:
    try:
        await http.request("POST", path, body=body)
    except ApiError as err:
        if not err.conflict:
            raise


async def bounded_each(items: list[Any], make: Any) -> None:
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(item: Any) -> None:
        async with sem:
            await make(item)

    await asyncio.gather(*(one(item) for item in items))


async def install(http: ApiHttp, nodes: list[str]) -> None:
    """CRDs, the namespace and ConfigMap, and a NodeMetric per node (idempotent)."""
    for plural in CRDS:
        doc = next(
            d for d in yaml.safe_load_all((REPO / "deploy/crds" / f"slo.koordinator.sh_{plural}.yaml").read_text()) if d
        )
        await post_ignoring_conflict(http, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
    for _ in range(120):
        try:
            for plural in CRDS:
                await http.request_json("GET", f"{SLO}/{plural}", params={"limit": "1"})
            break
        except ApiError:
            await asyncio.sleep(0.5)
    else:
        raise RuntimeError("the NodeMetric / NodeSLO CRDs were not served within 60 s")
    await post_ignoring_conflict(
        http, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CONFIG_NAMESPACE}}
    )
    config = yaml.safe_load((REPO / "deploy/slo-controller-config.yaml").read_text())
    await post_ignoring_conflict(http, f"/api/v1/namespaces/{CONFIG_NAMESPACE}/configmaps", config)
    await bounded_each(
        nodes,
        lambda node: post_ignoring_conflict(
            http,
            f"{SLO}/nodemetrics",
            {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": node}},
        ),
    )


def _status_now() -> dict[str, Any]:
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "status": {
            "updateTime": stamp,
            "nodeMetric": {
                "nodeUsage": {"resources": {"cpu": "500m", "memory": "2Gi"}},
                "systemUsage": {"resources": {"cpu": "200m", "memory": "1Gi"}},
            },
            "podsMetric": [],
        }
    }


async def reset(http: ApiHttp, nodes: list[str]) -> None:
    """Back to "the controllers never ran", with every NodeMetric fresh (see the module docstring)."""
    try:
        await http.request("DELETE", f"{SLO}/nodeslos")
    except ApiError as err:  # a loaded server may time out while the deletion goes on; waited for below
        if err.status != 504:
            raise
    strip = {"status": {part: dict.fromkeys(BATCH) for part in ("allocatable", "capacity")}}
    status = _status_now()

    async def one(node: str) -> None:
        await http.request("PATCH", f"/api/v1/nodes/{node}/status", body=strip, content_type=MERGE_PATCH)
        await http.request("PATCH", f"{SLO}/nodemetrics/{node}", body={"spec": None}, content_type=MERGE_PATCH)
        await http.request("PATCH", f"{SLO}/nodemetrics/{node}/status", body=status, content_type=MERGE_PATCH)

    await bounded_each(nodes, one)
    for _ in range(120):
        left = await http.request_json("GET", f"{SLO}/nodeslos", params={"limit": "1"})
        if not left.get("items"):
            return
        await asyncio.sleep(0.5)
    raise RuntimeError("NodeSLOs were not deleted within 60 s")


async def observe(http: ApiHttp) -> dict[str, int]:
    """The controllers' work visible in the cluster now: NodeSLOs, nodes with batch resources, and
    NodeMetrics with a collect policy."""
    slos = await http.request_json("GET", f"{SLO}/nodeslos")
    nodes = await http.request_json("GET", "/api/v1/nodes")
    metrics = await http.request_json("GET", f"{SLO}/nodemetrics")
    return {
        "nodeslos": len(slos.get("items") or ()),
        "nodes_with_batch": sum(
            1 for n in nodes.get("items") or () if BATCH[0] in ((n.get("status") or {}).get("allocatable") or {})
        ),
        "nodemetrics_with_policy": sum(
            1 for m in metrics.get("items") or () if ((m.get("spec") or {}).get("metricCollectPolicy"))
        ),
    }
