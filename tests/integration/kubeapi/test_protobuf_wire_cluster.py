"""Pods and Nodes read as protobuf and as JSON from a real kube-apiserver give the same objects.

The same objects (rich ones: affinity, tolerations, spread constraints, sidecars, host ports, volumes,
claims, pod-level resources, resize status, a terminating pod; nodes with taints, images, conditions,
extended resources) are listed and watched both ways, and the parsed results are compared field by
field, for both ways of reading protobuf: through the JSON-shaped dict (``kubeapi.protodict``) and from
the messages directly (``kubeapi.protoparse``, the scheduler's kinds). The API server's own protobuf
errors (a 410 in a watch, a 400 Status) come out as they do with JSON.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from controlplane import ControlPlane

from apis.core.parse import parse_node
from kubeapi import ApiHttp, TokenBucket, load_connection
from kubeapi.core_kinds import NON_TERMINAL_PODS
from kubeapi.http import ApiError
from kubeapi.pod_watch import (
    parse_pod_entry,
    pod_entry_from_message,
    update_pod_entry,
    update_pod_entry_from_message,
)
from kubeapi.protoparse import node_from_message
from kubeapi.reflector import Reflector, ReflectorOptions, ResourceKind

pytestmark = pytest.mark.integration

JSON_OPTIONS = ReflectorOptions(protobuf=False, page_size=3)
PROTO_OPTIONS = ReflectorOptions(protobuf=True, page_size=3)


@dataclasses.dataclass
class Scope:
    plane: ControlPlane
    run: str
    namespace: str

    def call(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json") -> Any:
        result = self.plane.request(method, path, body, content_type=content_type)
        assert result.status < 300, f"{method} {path}: {result.status} {result.body[:400]!r}"
        return result.json()


@pytest.fixture
def scope(control_plane: ControlPlane) -> Iterator[Scope]:
    run = uuid.uuid4().hex[:8]
    s = Scope(control_plane, run, f"proto-{run}")
    s.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": s.namespace}})
    s.call(
        "POST",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": s.namespace},
            "value": 1000,
            "preemptionPolicy": "Never",
        },
    )
    yield s
    control_plane.request("DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{s.namespace}")
    control_plane.request("DELETE", f"/api/v1/namespaces/{s.namespace}")
    control_plane.request("DELETE", f"/api/v1/nodes?labelSelector=proto-run%3D{run}")


@pytest.fixture
async def http(control_plane: ControlPlane) -> AsyncIterator[ApiHttp]:
    client = ApiHttp(load_connection(str(control_plane.kubeconfig)), TokenBucket(0, 0))
    yield client
    await client.close()


WAYS = ["dict", "direct"]
"""How a kind reads protobuf: its JSON parser on the message's dict, or its message parser."""


def node_kind(scope: Scope, way: str = "direct") -> ResourceKind[Any]:
    return ResourceKind(
        "Node",
        "",
        "v1",
        "nodes",
        parse_node,
        label_selector=f"proto-run={scope.run}",
        protobuf=True,
        from_message=node_from_message if way == "direct" else None,
    )


def pod_kind(scope: Scope, way: str = "direct") -> ResourceKind[Any]:
    return ResourceKind(
        "Pod",
        "",
        "v1",
        "pods",
        parse_pod_entry,
        field_selector=NON_TERMINAL_PODS,
        namespace=scope.namespace,
        update=update_pod_entry,
        protobuf=True,
        from_message=pod_entry_from_message if way == "direct" else None,
        update_message=update_pod_entry_from_message if way == "direct" else None,
    )


# ----- the objects -----


def make_nodes(scope: Scope) -> None:
    for i in range(4):
        name = f"proto-{scope.run}-n{i}"
        spec: dict[str, Any] = {"unschedulable": i == 3}
        if i % 2:
            spec["taints"] = [
                {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                {"key": "spot", "effect": "PreferNoSchedule"},
            ]
        scope.call(
            "POST",
            "/api/v1/nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {"proto-run": scope.run, "topology.kubernetes.io/zone": f"z{i % 2}"},
                    "annotations": {"node.koordinator.sh/reservation": '{"cpu": "1"}'},
                },
                "spec": spec,
            },
        )
        status: dict[str, Any] = {
            "capacity": {
                "cpu": "8",
                "memory": "32Gi",
                "pods": "110",
                "koordinator.sh/gpu": "200",
                "ephemeral-storage": "100Gi",
            },
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "lastHeartbeatTime": "2026-01-02T03:04:05Z",
                    "lastTransitionTime": "2026-01-02T03:04:05Z",
                },
                {"type": "MemoryPressure", "status": "False"},
            ],
            "images": [
                {"names": ["registry.example/app@sha256:abc", "registry.example/app:1.0"], "sizeBytes": 123456789}
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.35.8",
                "machineID": "m",
                "systemUUID": "s",
                "bootID": "b",
                "kernelVersion": "6",
                "osImage": "linux",
                "containerRuntimeVersion": "containerd://2",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "addresses": [{"type": "InternalIP", "address": f"10.0.0.{i + 1}"}],
        }
        if i != 2:  # node 2 has no allocatable: the parser falls back to capacity
            status["allocatable"] = {"cpu": "7500m", "memory": "30Gi", "pods": "110", "koordinator.sh/gpu": "200"}
        scope.call(
            "PATCH", f"/api/v1/nodes/{name}/status", {"status": status}, content_type="application/merge-patch+json"
        )


def pod_bodies(scope: Scope) -> list[dict[str, Any]]:
    node0 = f"proto-{scope.run}-n0"
    rich_spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "priorityClassName": f"proto-{scope.run}",
        "nodeSelector": {"disk": "ssd"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z0", "z1"]}
                            ],
                            "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["x"]}],
                        }
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 7, "preference": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}}
                ],
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"app": "web"}},
                            "namespaceSelector": {},
                        },
                    }
                ]
            },
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "topologyKey": "topology.kubernetes.io/zone",
                        "namespaces": ["default"],
                        "labelSelector": {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]},
                        "matchLabelKeys": ["pod-template-hash"],
                    }
                ]
            },
        },
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {"operator": "Exists"},
        ],
        "topologySpreadConstraints": [
            {
                "maxSkew": 2,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "minDomains": None,
                "nodeAffinityPolicy": "Ignore",
                "nodeTaintsPolicy": "Honor",
                "matchLabelKeys": ["pod-template-hash"],
            },
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "minDomains": 2,
            },
        ],
        "schedulingGates": [{"name": "example.com/wait"}],
        "initContainers": [
            {"name": "init", "image": "busybox:1", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
            {
                "name": "sidecar",
                "image": "envoy:1",
                "restartPolicy": "Always",
                "ports": [{"containerPort": 9901, "hostPort": 9901}],
                "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}},
            },
        ],
        "containers": [
            {
                "name": "app",
                "image": "registry.example/app:1.0",
                "command": ["/app"],
                "args": ["--x"],
                "env": [{"name": "A", "value": "1"}],
                "ports": [
                    {"containerPort": 80, "hostPort": 8080, "protocol": "TCP", "hostIP": "127.0.0.1"},
                    {"containerPort": 53, "hostPort": 5353, "protocol": "UDP"},
                ],
                "resources": {
                    "requests": {"cpu": "250m", "memory": "256Mi", "koordinator.sh/gpu": "50"},
                    "limits": {"cpu": "1", "memory": "512Mi", "koordinator.sh/gpu": "50"},
                },
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": 80}, "periodSeconds": 5},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            },
            {"name": "helper", "image": "helper:2", "resources": {"claims": [{"name": "gpu"}]}},
        ],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-pvc", "readOnly": True}},
            {"name": "cfg", "configMap": {"name": "cfg"}},
            {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
            {
                "name": "eph",
                "ephemeral": {
                    "volumeClaimTemplate": {
                        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
                    }
                },
            },
        ],
    }
    bodies: list[dict[str, Any]] = [
        {
            "metadata": {
                "name": "rich",
                "labels": {"app": "web", "tier": "front"},
                "annotations": {"scheduling.koordinator.sh/reservation-affinity": '{"name": "r"}'},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": "web-1",
                        "uid": str(uuid.uuid4()),
                        "controller": True,
                    }
                ],
            },
            "spec": rich_spec,
        },
        {
            "metadata": {"name": "bound", "labels": {"app": "web"}},
            "spec": {
                "nodeName": node0,
                "containers": [
                    {
                        "name": "c",
                        "image": "nginx",
                        "resources": {"requests": {"cpu": "500m", "memory": "128Mi"}},
                        "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
                    }
                ],
            },
        },
        {
            "metadata": {"name": "pod-level"},
            "spec": {
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
                "containers": [{"name": "c", "image": "nginx"}],
            },
        },
        {
            "metadata": {"name": "best-effort", "finalizers": ["example.com/hold"]},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        },
    ]
    for body in bodies:
        body.update({"apiVersion": "v1", "kind": "Pod"})
        body["metadata"]["labels"] = {**body["metadata"].get("labels", {}), "proto-run": scope.run}
    return bodies


def make_pods(scope: Scope) -> None:
    base = f"/api/v1/namespaces/{scope.namespace}/pods"
    for body in pod_bodies(scope):
        scope.call("POST", base, body)
    # Status as the kubelet and the scheduler would have written it.
    scope.call(
        "PATCH",
        f"{base}/bound/status",
        {
            "status": {
                "phase": "Running",
                "qosClass": "Burstable",
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z"},
                    {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-02T03:05:06Z"},
                    {"type": "PodResizePending", "status": "True", "reason": "Deferred"},
                ],
                "containerStatuses": [
                    {
                        "name": "c",
                        "image": "nginx",
                        "imageID": "",
                        "ready": True,
                        "restartCount": 3,
                        "allocatedResources": {"cpu": "400m", "memory": "128Mi"},
                        "resources": {"requests": {"cpu": "400m", "memory": "128Mi"}},
                        "state": {"running": {"startedAt": "2026-01-02T03:04:06Z"}},
                    }
                ],
                "hostIP": "10.0.0.1",
                "podIP": "10.244.0.5",
                "startTime": "2026-01-02T03:04:05Z",
            }
        },
        content_type="application/merge-patch+json",
    )
    scope.call(
        "PATCH",
        f"{base}/rich/status",
        {
            "status": {
                "nominatedNodeName": f"proto-{scope.run}-n1",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/4 nodes are available",
                        "lastTransitionTime": "2026-01-02T03:04:05Z",
                    }
                ],
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "rich-gpu-abc"}],
            }
        },
        content_type="application/merge-patch+json",
    )
    # A terminating pod: deletionTimestamp set, held by its finalizer.
    scope.call("DELETE", f"{base}/best-effort")


# ----- comparison -----


def differences(want: Any, got: Any, path: str = "") -> list[str]:
    """Field-by-field differences of two parsed values (dataclasses compared per field, recursively)."""
    if dataclasses.is_dataclass(want) and type(want) is type(got):
        out: list[str] = []
        for f in dataclasses.fields(want):
            if f.name == "fingerprint":  # the bytes of what was decoded, not a parsed field
                continue
            out += differences(getattr(want, f.name), getattr(got, f.name), f"{path}.{f.name}")
        return out
    return [] if want == got else [f"{path}: JSON {want!r} != protobuf {got!r}"]


async def list_both(http: ApiHttp, kind: ResourceKind[Any]) -> tuple[dict[str, Any], dict[str, Any], str]:
    by_json = Reflector(http, kind, lambda *_: None, options=JSON_OPTIONS)
    by_proto = Reflector(http, kind, lambda *_: None, options=PROTO_OPTIONS)
    assert by_proto.protobuf and not by_json.protobuf
    items_json, _ = await by_json.list_all()
    items_proto, rv = await by_proto.list_all()
    by_json.replace(items_json, "")
    by_proto.replace(items_proto, rv)
    return ({k: e.value for k, e in by_json.store.items()}, {k: e.value for k, e in by_proto.store.items()}, rv)


def assert_same(json_values: dict[str, Any], proto_values: dict[str, Any]) -> None:
    assert sorted(json_values) == sorted(proto_values)
    problems = [f"{key}{d}" for key in sorted(json_values) for d in differences(json_values[key], proto_values[key])]
    assert not problems, "\n".join(problems)


# ----- tests -----


@pytest.mark.parametrize("way", WAYS)
async def test_nodes_listed_as_protobuf_parse_as_from_json(scope: Scope, http: ApiHttp, way: str) -> None:
    make_nodes(scope)

    json_nodes, proto_nodes, rv = await list_both(http, node_kind(scope, way))

    assert len(proto_nodes) == 4 and rv
    assert_same(json_nodes, proto_nodes)
    n1 = proto_nodes[f"proto-{scope.run}-n1"]
    assert n1.allocatable["cpu"] == 7500 and len(n1.taints) == 2 and n1.conditions["Ready"] == "True"
    assert proto_nodes[f"proto-{scope.run}-n2"].allocatable["cpu"] == 8000  # capacity, for want of allocatable


@pytest.mark.parametrize("way", WAYS)
async def test_pods_listed_as_protobuf_parse_as_from_json(scope: Scope, http: ApiHttp, way: str) -> None:
    make_nodes(scope)
    make_pods(scope)

    json_pods, proto_pods, _ = await list_both(http, pod_kind(scope, way))

    assert len(proto_pods) == 4
    assert_same(json_pods, proto_pods)
    ns = scope.namespace
    rich = proto_pods[f"{ns}/rich"].pod
    assert rich.priority == 1000 and rich.preemption_policy == "Never" and rich.affinity is not None
    assert len(rich.topology_spread_constraints) == 2 and rich.host_ports and rich.scheduling_gates
    assert rich.resource_claims and rich.resource_claim_statuses and rich.pvc_names
    assert proto_pods[f"{ns}/bound"].pod.conditions["PodResizePending"] == "True"
    assert proto_pods[f"{ns}/bound"].pod.restart_count == 3
    assert proto_pods[f"{ns}/bound"].condition is not None
    assert proto_pods[f"{ns}/best-effort"].pod.meta.deletion_timestamp is not None
    assert proto_pods[f"{ns}/pod-level"].pod.requests["cpu"] == 1000


async def test_watches_as_protobuf_deliver_what_json_watches_deliver(scope: Scope, http: ApiHttp) -> None:
    make_nodes(scope)
    make_pods(scope)
    seen: dict[str, list[tuple[str, str, Any]]] = {"json": [], "proto": [], "proto-dict": []}

    def recorder(name: str) -> Any:
        return lambda event, old, new: seen[name].append((event.value, (new or old).pod.key, new))

    reflectors = {
        name: Reflector(http, pod_kind(scope, way), recorder(name), options=options)
        for name, way, options in (
            ("json", "direct", JSON_OPTIONS),
            ("proto", "direct", PROTO_OPTIONS),
            ("proto-dict", "dict", PROTO_OPTIONS),
        )
    }
    tasks = [asyncio.create_task(r.run()) for r in reflectors.values()]
    try:
        await _until(
            lambda: all(len(s) == 4 for s in seen.values()), lambda: {n: [e[:2] for e in s] for n, s in seen.items()}
        )
        base = f"/api/v1/namespaces/{scope.namespace}/pods"
        scope.call(
            "PATCH",
            f"{base}/rich",
            {"metadata": {"labels": {"tier": "back"}}},
            content_type="application/merge-patch+json",
        )
        scope.call(
            "POST",
            f"{base}/pod-level/binding",
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": "pod-level"},
                "target": {"kind": "Node", "name": f"proto-{scope.run}-n0"},
            },
        )
        scope.call("DELETE", f"{base}/bound?gracePeriodSeconds=0")
        await _until(
            lambda: all(s[-1][0] == "DELETED" for s in seen.values()),
            lambda: {n: [e[:2] for e in s] for n, s in seen.items()},
        )
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert [e[:2] for e in seen["json"]][4:] == [e[:2] for e in seen["proto"]][4:]
    assert [e[:2] for e in seen["proto-dict"]][4:] == [e[:2] for e in seen["proto"]][4:]
    # (a deletion with no grace period is a MODIFIED, setting deletionTimestamp, then the DELETED)
    assert [e[0] for e in seen["proto"][4:]] == ["MODIFIED", "MODIFIED", "MODIFIED", "DELETED"]
    assert_same({str(i): e[2] for i, e in enumerate(seen["json"])}, {str(i): e[2] for i, e in enumerate(seen["proto"])})
    as_dicts = {str(i): e[2] for i, e in enumerate(seen["proto-dict"])}
    assert_same({str(i): e[2] for i, e in enumerate(seen["json"])}, as_dicts)
    assert reflectors["proto"].store.keys() == reflectors["json"].store.keys()
    assert seen["proto"][4][2].pod.meta.labels["tier"] == "back"
    assert seen["proto"][5][2].pod.node_name == f"proto-{scope.run}-n0"


async def test_an_error_answered_as_protobuf_reads_as_its_status(scope: Scope, http: ApiHttp) -> None:
    bad = ResourceKind(
        "Pod",
        "",
        "v1",
        "pods",
        parse_pod_entry,
        field_selector="spec.noSuchField=1",
        namespace=scope.namespace,
        protobuf=True,
    )
    reflector = Reflector(http, bad, lambda *_: None, options=PROTO_OPTIONS)

    with pytest.raises(ApiError) as caught:
        await reflector.list_all()

    assert caught.value.status == 400 and caught.value.reason == "BadRequest"
    assert "spec.noSuchField" in caught.value.message and "\x00" not in caught.value.message


async def _until(condition: Any, state: Any, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out: {state()}"
        await asyncio.sleep(0.05)
