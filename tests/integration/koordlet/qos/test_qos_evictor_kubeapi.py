"""koordlet's evictor path against the real API server: ``PodEvictor`` over ``KubeEvictionAPI`` on an
``ApiLoop`` from ``kubeapi.load_connection``, as the agent wires it. A PodDisruptionBudget refuses the
eviction (429, answered at once, an ``evictPodFail`` Event), then, the budget gone, the same pod is evicted
(an ``evictPodSuccess`` Event, the counter); a stale UID is a 409 and counts as gone."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from test_koordlet_nodemetric import wait_until

from apis.extension import PriorityClass, QoSClass
from apis.extension.qos import KubeQOSClass
from koordlet.qosmanager.evictor import EvictionOutcome, KubeEvictionAPI, PodEvictor
from koordlet.statesinformer import PodMeta
from koordlet.statesinformer.apiloop import ApiLoop
from kubeapi.connection import load_connection

pytestmark = pytest.mark.integration


@pytest.fixture
def api_loop(control_plane: Any) -> Iterator[ApiLoop]:
    loop = ApiLoop(load_connection(str(control_plane.kubeconfig)))
    yield loop
    loop.stop()


def get(control_plane: Any, path: str) -> Any:
    result = control_plane.request("GET", path)
    return json.loads(result.body) if result.status == 200 else None


def running_pod(control_plane: Any, node: str, name: str, labels: dict[str, str]) -> str:
    """A BE pod bound to the kwok node ``node``, once kwok reports it Running; its UID."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"koordinator.sh/qosClass": "BE", **labels}},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]},
    }
    assert control_plane.request("POST", "/api/v1/namespaces/default/pods", pod).status == 201
    path = f"/api/v1/namespaces/default/pods/{name}"
    found = wait_until(
        lambda: (obj := get(control_plane, path)) and obj["status"].get("phase") == "Running" and obj,
        timeout=60,
        what=f"pod {name} Running",
    )
    return str(found["metadata"]["uid"])


def meta(name: str, uid: str) -> PodMeta:
    return PodMeta(
        uid=uid,
        namespace="default",
        name=name,
        kube_qos=KubeQOSClass.BEST_EFFORT,
        qos=QoSClass.BE,
        priority_class=PriorityClass.BATCH,
        priority=None,
        cgroup_dir=f"kubepods/besteffort/pod{uid}",
        labels={"koordinator.sh/qosClass": "BE"},
    )


def event_reasons(control_plane: Any, name: str) -> list[tuple[str, str]]:
    found = get(control_plane, f"/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D{name}")
    return sorted((e["reason"], e["message"]) for e in (found or {}).get("items", []))


def test_eviction_refused_by_a_pdb_then_allowed(control_plane: Any, api_loop: ApiLoop) -> None:
    node = f"evk-{uuid.uuid4().hex[:6]}"
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"}},
    }
    assert control_plane.request("POST", "/api/v1/nodes", body).status == 201
    labels = {"app": f"{node}-protected"}
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": f"{node}-pdb", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
    }
    assert control_plane.request("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", pdb).status == 201
    name = f"{node}-be"
    uid = running_pod(control_plane, node, name, labels)
    registry = CollectorRegistry()
    evictor = PodEvictor(KubeEvictionAPI(api_loop, node), node_name=node, metrics_registry=registry)

    # The API server answers a PDB refusal with 429: one request, not retried as throttling would be
    # (every attempt passes the loop's token bucket, so counting its acquisitions counts the attempts).
    attempts: list[str] = []
    acquire = api_loop.http.limiter.acquire

    async def counting() -> None:
        attempts.append("request")
        await acquire()

    api_loop.http.limiter.acquire = counting  # type: ignore[method-assign]
    assert evictor.evict(meta(name, uid), "BEMemoryEvict", "memory") is EvictionOutcome.BLOCKED
    assert len(attempts) == 2  # the eviction once, then its evictPodFail Event
    assert not evictor.recently_evicted(uid)
    refused = wait_until(lambda: event_reasons(control_plane, name), timeout=20, what="evictPodFail event")
    assert [r for r, _ in refused] == ["evictPodFail"] and "HTTP 429" in refused[0][1], refused
    assert get(control_plane, f"/api/v1/namespaces/default/pods/{name}") is not None

    path = f"/apis/policy/v1/namespaces/default/poddisruptionbudgets/{node}-pdb"
    assert control_plane.request("DELETE", path).status == 200
    # A stale UID under the same name (checked once no budget is in the way): the precondition fails (409),
    # the pod counts as gone, and no Event is written.
    assert evictor.evict(meta(name, str(uuid.uuid4())), "BEMemoryEvict", "memory") is EvictionOutcome.GONE
    assert evictor.evict(meta(name, uid), "BEMemoryEvict", "memory") is EvictionOutcome.EVICTED
    assert evictor.recently_evicted(uid)
    wait_until(
        lambda: (
            (obj := get(control_plane, f"/api/v1/namespaces/default/pods/{name}")) is None
            or obj["metadata"].get("deletionTimestamp")
        ),
        timeout=60,
        what="the evicted pod deleted",
    )
    reasons = wait_until(
        lambda: (got := event_reasons(control_plane, name)) and len(got) == 2 and got,
        timeout=20,
        what="evictPodSuccess event",
    )
    assert [r for r, _ in reasons] == ["evictPodFail", "evictPodSuccess"], reasons
    sample = registry.get_sample_value("koordlet_pod_eviction_total", {"node": node, "reason": "BEMemoryEvict"})
    assert sample == 1.0
    control_plane.request("DELETE", f"/api/v1/nodes/{node}")
