"""The mixed Koordinator workload of bench/e2e_throughput.py (contender ``koord-scheduler-mixed``).

Cluster state, made once (:func:`install`): a fresh NodeMetric per node (LoadAwareScheduling reads it:
500m CPU and 2Gi in use of the bench nodes' 4 CPUs and 32Gi), a NodeResourceTopology per node with a CPU
topology of 4 logical CPUs (2 cores of 2 threads, one NUMA node; NodeNUMAResource binds LSR pods' cpusets
from it) and :data:`QUOTAS` ElasticQuotas in the bench namespace (min 100 CPU, max 10,000 CPU).

Before each run (:func:`prepare`), pods and Reservations are deleted and made again, so every run starts
from the same pending backlog of ``n`` pods (100m / 500Mi unless said) and ``n // 20`` pending
Reservations, in this order of pod index ``i``:

- ``i % 20 == 0``: owned by Reservation ``r-<i>`` (label ``bench-reservation: r-<i>``), which reserves
  the same requests: the scheduler places the Reservation, then the pod into it;
- ``i % 20 in 1..2``: LSR (``koordinator.sh/qosClass: LSR``, 1 CPU with the limit equal to the request):
  NodeNUMAResource gives it a cpuset;
- ``i % 20 in 3..7``: one member of a gang of five (``gang.scheduling.koordinator.sh/name`` and
  ``min-available: 5``): the gang binds all or nothing;
- ``i % 20 in 8..12``: in ElasticQuota ``q-<i % QUOTAS>`` (``quota.scheduling.koordinator.sh/name``);
- the rest plain.

So a quarter of the pods are gang members, a quarter in quotas, a tenth LSR and one in twenty reserved.
The counts are per run; the bench counts only the ``n`` pods as bound, not the Reservations.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from e2e_colocation import bounded_each, post_ignoring_conflict

from kubeapi import ApiError, ApiHttp

RESERVATIONS = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
NRTS = "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies"
QUOTAS = 4
GANG_SIZE = 5
RESERVED_EVERY = 20
RESERVATION_LABEL = "bench-reservation"
SCHEDULER_NAME = "default-scheduler"
MERGE_PATCH = "application/merge-patch+json"


def pod_kind(i: int) -> str:
    """Which part of the mix pod ``i`` is (see the module docstring)."""
    slot = i % RESERVED_EVERY
    if slot == 0:
        return "reserved"
    if slot <= 2:
        return "lsr"
    if slot <= 7:
        return "gang"
    if slot <= 12:
        return "quota"
    return "plain"


def pod_obj(i: int, namespace: str) -> dict[str, Any]:
    """Pod ``i`` of the mix."""
    kind = pod_kind(i)
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    resources: dict[str, Any] = {"requests": {"cpu": "100m", "memory": "500Mi"}}
    if kind == "reserved":
        labels[RESERVATION_LABEL] = f"r-{i}"
    elif kind == "lsr":
        labels["koordinator.sh/qosClass"] = "LSR"
        resources = {"requests": {"cpu": "1", "memory": "500Mi"}, "limits": {"cpu": "1", "memory": "500Mi"}}
    elif kind == "gang":
        annotations["gang.scheduling.koordinator.sh/name"] = f"gang-{i // RESERVED_EVERY}"
        annotations["gang.scheduling.koordinator.sh/min-available"] = str(GANG_SIZE)
    elif kind == "quota":
        labels["quota.scheduling.koordinator.sh/name"] = f"q-{i % QUOTAS}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i}", "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10", "resources": resources}]},
    }


def reservation_obj(i: int, namespace: str) -> dict[str, Any]:
    """The Reservation of pod ``i`` (one whose :func:`pod_kind` is ``reserved``)."""
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": f"bench-r-{i}", "labels": {"bench": "mixed"}},
        "spec": {
            "template": {
                "metadata": {"namespace": namespace},
                "spec": {
                    "schedulerName": SCHEDULER_NAME,
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}],
                },
            },
            "owners": [{"labelSelector": {"matchLabels": {RESERVATION_LABEL: f"r-{i}"}}}],
            "allocateOnce": True,
        },
    }


def cpu_topology() -> str:
    """4 logical CPUs: 2 cores of 2 threads (CPU k and k+2 are siblings), one socket, one NUMA node."""
    detail = [{"id": t * 2 + c, "core": c, "socket": 0, "node": 0} for t in range(2) for c in range(2)]
    return json.dumps({"detail": sorted(detail, key=lambda d: d["id"])})


async def install(http: ApiHttp, nodes: list[str], namespace: str) -> None:
    """NodeMetrics, NodeResourceTopologies and ElasticQuotas (idempotent); the CRDs are the cluster's."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    usage = {
        "updateTime": stamp,
        "nodeMetric": {
            "nodeUsage": {"resources": {"cpu": "500m", "memory": "2Gi"}},
            "systemUsage": {"resources": {"cpu": "200m", "memory": "1Gi"}},
        },
        "podsMetric": [],
    }
    topology = cpu_topology()
    # The ElasticQuota plugin's quotaGroupNamespace (the chart's args), where its built-in quotas go.
    system = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "koordinator-system"}}
    await post_ignoring_conflict(http, "/api/v1/namespaces", system)

    async def node(name: str) -> None:
        await post_ignoring_conflict(
            http,
            NODEMETRICS,
            {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": name}},
        )
        await http.request("PATCH", f"{NODEMETRICS}/{name}/status", body={"status": usage}, content_type=MERGE_PATCH)
        await post_ignoring_conflict(
            http,
            NRTS,
            {
                "apiVersion": "topology.node.k8s.io/v1alpha1",
                "kind": "NodeResourceTopology",
                "metadata": {"name": name, "annotations": {"node.koordinator.sh/cpu-topology": topology}},
                "topologyPolicies": ["None"],
                "zones": [],
            },
        )

    await bounded_each(nodes, node)
    for q in range(QUOTAS):
        await post_ignoring_conflict(
            http,
            f"/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{namespace}/elasticquotas",
            {
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "ElasticQuota",
                "metadata": {"name": f"q-{q}", "namespace": namespace},
                "spec": {"min": {"cpu": "100", "memory": "1000Gi"}, "max": {"cpu": "10000", "memory": "100000Gi"}},
            },
        )


async def prepare(
    http: ApiHttp, n: int, *, namespace: str, delete_pods: Callable[[ApiHttp, str], Awaitable[None]]
) -> None:
    """The backlog of one run: no pods, no Reservations, then ``n // 20`` pending Reservations and ``n``
    pending pods of the mix (``n`` a multiple of 20, so that every gang is whole)."""
    if n % RESERVED_EVERY:
        raise ValueError(f"--pods {n}: the mixed workload needs a multiple of {RESERVED_EVERY}")
    await delete_pods(http, namespace)
    try:
        await http.request("DELETE", RESERVATIONS, params={"labelSelector": "bench=mixed"})
    except ApiError as err:
        if err.status != 504:
            raise
    for _ in range(240):
        left = await http.request_json("GET", RESERVATIONS, params={"labelSelector": "bench=mixed", "limit": "1"})
        if not left.get("items"):
            break
        await asyncio.sleep(0.5)
    else:
        raise RuntimeError("Reservations were not deleted within 120 s")
    reserved = [i for i in range(n) if pod_kind(i) == "reserved"]
    await bounded_each(reserved, lambda i: http.request("POST", RESERVATIONS, body=reservation_obj(i, namespace)))
    path = f"/api/v1/namespaces/{namespace}/pods"
    await bounded_each(list(range(n)), lambda i: http.request("POST", path, body=pod_obj(i, namespace)))


async def observe(http: ApiHttp, namespace: str) -> dict[str, int]:
    """What the run did with the mix, read from the bound pods: LSR pods given a cpuset, gang members
    bound as a gang, pods bound into a Reservation, and pods of each kind bound."""
    doc = await http.request_json("GET", f"/api/v1/namespaces/{namespace}/pods")
    seen = {"lsr_with_cpuset": 0, "gang_bound_as_gang": 0, "bound_in_reservation": 0}
    for pod in doc.get("items") or ():
        if not (pod.get("spec") or {}).get("nodeName"):
            continue
        notes = (pod.get("metadata") or {}).get("annotations") or {}
        kind = pod_kind(int(pod["metadata"]["name"].rsplit("-", 1)[1]))
        seen[f"{kind}_bound"] = seen.get(f"{kind}_bound", 0) + 1
        status = notes.get("scheduling.koordinator.sh/resource-status", "")
        if kind == "lsr" and '"cpuset"' in status:
            seen["lsr_with_cpuset"] += 1
        if kind == "gang" and notes.get("internal.scheduling.koordinator.sh/bind-gang-member-count") == str(GANG_SIZE):
            seen["gang_bound_as_gang"] += 1
        if kind == "reserved" and "scheduling.koordinator.sh/reservation-allocated" in notes:
            seen["bound_in_reservation"] += 1
    return seen
