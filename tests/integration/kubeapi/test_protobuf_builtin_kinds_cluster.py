"""The other built-in kinds the scheduler watches read as protobuf and as JSON give the same objects.

For every kind of ``kubeapi.protowire.BUILTIN_KINDS`` besides Pods and Nodes (which
``test_protobuf_wire_cluster.py`` covers), rich objects are created on a real kube-apiserver, listed
both ways with the parser the scheduler uses for that kind, and the parsed values compared field by
field; one kind of each API group is also watched both ways. A kind added to ``BUILTIN_KINDS`` without
objects here fails the coverage test.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from controlplane import ControlPlane

from koord_scheduler.controllers.api import parse_config_map
from koord_scheduler.plugins.defaultpreemption.pdb import parse_pdb
from koord_scheduler.plugins.deviceshare.templates import parse_config_map as parse_templates_config_map
from koord_scheduler.plugins.dynamicresources import kinds as dra
from koord_scheduler.plugins.interpodaffinity.namespaces import parse_namespace
from koord_scheduler.plugins.podtopologyspread import workloads
from koord_scheduler.plugins.storageinfo import kinds as storage
from koord_scheduler.webhook.kube import parse_namespace_labels, parse_priority_class
from kubeapi import ApiHttp, TokenBucket, load_connection, protowire
from kubeapi.reflector import Reflector, ReflectorOptions, ResourceKind

pytestmark = pytest.mark.integration

JSON_OPTIONS = ReflectorOptions(protobuf=False, page_size=2)
PROTO_OPTIONS = ReflectorOptions(protobuf=True, page_size=2)
TIME = "2026-01-02T03:04:05Z"


@dataclasses.dataclass
class Scope:
    plane: ControlPlane
    run: str
    namespace: str

    def call(self, method: str, path: str, body: Any = None) -> Any:
        result = self.plane.request(method, path, body)
        assert result.status < 300, f"{method} {path}: {result.status} {result.body[:600]!r}"
        return result.json()

    def meta(self, name: str, **extra: Any) -> dict[str, Any]:
        return {
            "name": f"{name}-{self.run}",
            "labels": {"proto-run": self.run, "app": "web"},
            "annotations": {"example.com/note": "x"},
            **extra,
        }


@pytest.fixture
def scope(control_plane: ControlPlane) -> Iterator[Scope]:
    run = uuid.uuid4().hex[:8]
    s = Scope(control_plane, run, f"proto-kinds-{run}")
    s.call(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": s.meta("ns") | {"name": s.namespace}},
    )
    yield s
    control_plane.request("DELETE", f"/api/v1/namespaces/{s.namespace}")
    for path in CLUSTER_SCOPED:
        control_plane.request("DELETE", f"{path}?labelSelector=proto-run%3D{run}")


@pytest.fixture
async def http(control_plane: ControlPlane) -> AsyncIterator[ApiHttp]:
    client = ApiHttp(load_connection(str(control_plane.kubeconfig)), TokenBucket(0, 0))
    yield client
    await client.close()


CLUSTER_SCOPED = [
    "/api/v1/persistentvolumes",
    "/apis/scheduling.k8s.io/v1/priorityclasses",
    "/apis/storage.k8s.io/v1/storageclasses",
    "/apis/storage.k8s.io/v1/csinodes",
    "/apis/storage.k8s.io/v1/csidrivers",
    "/apis/resource.k8s.io/v1/deviceclasses",
    "/apis/resource.k8s.io/v1/resourceslices",
]

TEMPLATE = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}]},
}
SELECTOR = {
    "matchLabels": {"app": "web"},
    "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}],
}
CLAIM_SPEC = {
    "devices": {
        "requests": [
            {
                "name": "gpu",
                "exactly": {
                    "deviceClassName": "gpu.example.com",
                    "allocationMode": "ExactCount",
                    "count": 2,
                    "selectors": [{"cel": {"expression": "device.attributes['gpu.example.com'].model == 'a100'"}}],
                    "tolerations": [{"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}],
                },
            },
            {
                "name": "any",
                "firstAvailable": [
                    {"name": "big", "deviceClassName": "gpu.example.com", "count": 1},
                    {"name": "small", "deviceClassName": "gpu.example.com", "allocationMode": "All"},
                ],
            },
        ],
        "constraints": [{"requests": ["gpu"], "matchAttribute": "gpu.example.com/model"}],
        "config": [{"requests": ["gpu"], "opaque": {"driver": "gpu.example.com", "parameters": {"mode": "shared"}}}],
    }
}


def objects(s: Scope) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Kind -> (collection path, body) of the objects created for it (rich: every field its parser reads
    that the API server accepts without a controller)."""
    ns = f"/api/v1/namespaces/{s.namespace}"
    apps = f"/apis/apps/v1/namespaces/{s.namespace}"
    res = "/apis/resource.k8s.io/v1"
    st = "/apis/storage.k8s.io/v1"
    return {
        "Namespace": [("/api/v1/namespaces", {"metadata": s.meta("other")})],
        "ConfigMap": [
            (f"{ns}/configmaps", {"metadata": s.meta("cm"), "data": {"data.yaml": "a: 1\n", "other": "x"}}),
            (f"{ns}/configmaps", {"metadata": s.meta("bin"), "binaryData": {"blob": "aGVsbG8="}}),
        ],
        "Service": [
            (
                f"{ns}/services",
                {
                    "metadata": s.meta("svc"),
                    "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]},
                },
            ),
            (f"{ns}/services", {"metadata": s.meta("headless"), "spec": {"clusterIP": "None", "ports": [{"port": 1}]}}),
        ],
        "ReplicationController": [
            (
                f"{ns}/replicationcontrollers",
                {"metadata": s.meta("rc"), "spec": {"replicas": 0, "selector": {"app": "web"}, "template": TEMPLATE}},
            )
        ],
        "ReplicaSet": [
            (
                f"{apps}/replicasets",
                {
                    "metadata": s.meta(
                        "rs",
                        ownerReferences=[
                            {
                                "apiVersion": "apps/v1",
                                "kind": "Deployment",
                                "name": "d",
                                "uid": "u-1",
                                "controller": True,
                            }
                        ],
                    ),
                    "spec": {"replicas": 0, "selector": SELECTOR, "template": TEMPLATE},
                },
            )
        ],
        "StatefulSet": [
            (
                f"{apps}/statefulsets",
                {
                    "metadata": s.meta("sts"),
                    "spec": {
                        "replicas": 0,
                        "serviceName": "svc",
                        "selector": {"matchLabels": {"app": "web"}},
                        "template": TEMPLATE,
                        "volumeClaimTemplates": [
                            {
                                "metadata": {"name": "data"},
                                "spec": {
                                    "accessModes": ["ReadWriteOnce"],
                                    "resources": {"requests": {"storage": "1Gi"}},
                                },
                            }
                        ],
                    },
                },
            )
        ],
        "PodDisruptionBudget": [
            (
                f"/apis/policy/v1/namespaces/{s.namespace}/poddisruptionbudgets",
                {"metadata": s.meta("pdb"), "spec": {"minAvailable": 1, "selector": SELECTOR}},
            ),
            (
                f"/apis/policy/v1/namespaces/{s.namespace}/poddisruptionbudgets",
                {"metadata": s.meta("pct"), "spec": {"maxUnavailable": "50%", "selector": {"matchLabels": {"a": "b"}}}},
            ),
        ],
        "PriorityClass": [
            (
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                {"metadata": s.meta("high"), "value": 100000, "preemptionPolicy": "Never", "description": "high"},
            ),
            ("/apis/scheduling.k8s.io/v1/priorityclasses", {"metadata": s.meta("low"), "value": -5}),
        ],
        "PersistentVolumeClaim": [
            (
                f"{ns}/persistentvolumeclaims",
                {
                    "metadata": s.meta("pvc", annotations={"volume.kubernetes.io/selected-node": "n1"}),
                    "spec": {
                        "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                        "resources": {"requests": {"storage": "1500Mi"}},
                        "storageClassName": f"fast-{s.run}",
                        "volumeMode": "Block",
                        "volumeName": f"pv-{s.run}",
                    },
                },
            ),
            (
                f"{ns}/persistentvolumeclaims",
                {
                    "metadata": s.meta("plain"),
                    "spec": {"accessModes": ["ReadWriteOncePod"], "resources": {"requests": {"storage": "1Gi"}}},
                },
            ),
        ],
        "PersistentVolume": [
            (
                "/api/v1/persistentvolumes",
                {
                    "metadata": s.meta("pv"),
                    "spec": {
                        "capacity": {"storage": "5Gi"},
                        "accessModes": ["ReadWriteOnce"],
                        "persistentVolumeReclaimPolicy": "Retain",
                        "storageClassName": f"fast-{s.run}",
                        "volumeMode": "Filesystem",
                        "csi": {"driver": "csi.example.com", "volumeHandle": "h-1", "volumeAttributes": {"a": "b"}},
                        "claimRef": {"namespace": s.namespace, "name": f"pvc-{s.run}", "uid": "u-2"},
                        "nodeAffinity": {
                            "required": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
                                ]
                            }
                        },
                    },
                },
            ),
            (
                "/api/v1/persistentvolumes",
                {
                    "metadata": s.meta("gce"),
                    "spec": {
                        "capacity": {"storage": "10G"},
                        "accessModes": ["ReadOnlyMany"],
                        "gcePersistentDisk": {"pdName": "disk-1", "readOnly": True},
                    },
                },
            ),
        ],
        "StorageClass": [
            (
                f"{st}/storageclasses",
                {
                    "metadata": s.meta("fast"),
                    "provisioner": "csi.example.com",
                    "parameters": {"type": "ssd"},
                    "reclaimPolicy": "Retain",
                    "volumeBindingMode": "WaitForFirstConsumer",
                    "allowVolumeExpansion": True,
                    "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["z1", "z2"]}]}],
                },
            )
        ],
        "CSINode": [
            (
                f"{st}/csinodes",
                {
                    "metadata": s.meta("node"),
                    "spec": {
                        "drivers": [
                            {
                                "name": "csi.example.com",
                                "nodeID": "n1",
                                "topologyKeys": ["zone"],
                                "allocatable": {"count": 16},
                            },
                            {"name": "other.example.com", "nodeID": "n1"},
                        ]
                    },
                },
            )
        ],
        "CSIDriver": [
            (
                f"{st}/csidrivers",
                {
                    "metadata": s.meta("csi.example.com"),
                    "spec": {"attachRequired": False, "storageCapacity": True, "volumeLifecycleModes": ["Persistent"]},
                },
            )
        ],
        "CSIStorageCapacity": [
            (
                f"{st}/namespaces/{s.namespace}/csistoragecapacities",
                {
                    "metadata": s.meta("cap"),
                    "storageClassName": f"fast-{s.run}",
                    "nodeTopology": {"matchLabels": {"zone": "z1"}},
                    "capacity": "100Gi",
                    "maximumVolumeSize": "10Gi",
                },
            )
        ],
        "DeviceClass": [
            (
                f"{res}/deviceclasses",
                {
                    "metadata": s.meta("gpu"),
                    "spec": {
                        "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
                        "config": [{"opaque": {"driver": "gpu.example.com", "parameters": {"shared": True}}}],
                        "extendedResourceName": "example.com/gpu",
                    },
                },
            )
        ],
        "ResourceSlice": [
            (
                f"{res}/resourceslices",
                {
                    "metadata": s.meta("slice"),
                    "spec": {
                        "driver": "gpu.example.com",
                        "pool": {"name": "n1", "generation": 2, "resourceSliceCount": 1},
                        "nodeName": "n1",
                        "devices": [
                            {
                                "name": "gpu-0",
                                "attributes": {
                                    "model": {"string": "a100"},
                                    "index": {"int": 0},
                                    "healthy": {"bool": True},
                                    "driverVersion": {"version": "1.2.3"},
                                },
                                "capacity": {"memory": {"value": "40Gi"}},
                                "taints": [{"key": "maintenance", "value": "soon", "effect": "NoSchedule"}],
                            },
                            {"name": "gpu-1"},
                        ],
                    },
                },
            ),
            (
                f"{res}/resourceslices",
                {
                    "metadata": s.meta("network"),
                    "spec": {
                        "driver": "net.example.com",
                        "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                        "nodeSelector": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
                            ]
                        },
                        "devices": [{"name": "nic-0", "attributes": {"speed": {"int": 100}}}],
                    },
                },
            ),
        ],
        "ResourceClaim": [
            (f"{res}/namespaces/{s.namespace}/resourceclaims", {"metadata": s.meta("claim"), "spec": CLAIM_SPEC}),
            (
                f"{res}/namespaces/{s.namespace}/resourceclaims",
                {
                    "metadata": s.meta("admin"),
                    "spec": {
                        "devices": {
                            "requests": [
                                {
                                    "name": "r",
                                    "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "All"},
                                }
                            ]
                        }
                    },
                },
            ),
        ],
    }


STATUS: dict[str, Callable[[Scope], list[tuple[str, dict[str, Any]]]]] = {
    "PodDisruptionBudget": lambda s: [
        (
            f"/apis/policy/v1/namespaces/{s.namespace}/poddisruptionbudgets/pdb-{s.run}/status",
            {
                "disruptionsAllowed": 1,
                "currentHealthy": 3,
                "desiredHealthy": 2,
                "expectedPods": 3,
                "observedGeneration": 1,
                "disruptedPods": {"web-1": TIME},
            },
        )
    ],
    "ResourceClaim": lambda s: [
        (
            f"/apis/resource.k8s.io/v1/namespaces/{s.namespace}/resourceclaims/claim-{s.run}/status",
            {
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"},
                            {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-1"},
                            {"request": "any/big", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-2"},
                        ],
                        "config": [
                            {
                                "source": "FromClaim",
                                "requests": ["gpu"],
                                "opaque": {"driver": "gpu.example.com", "parameters": {"mode": "shared"}},
                            }
                        ],
                    },
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                        ]
                    },
                },
                "reservedFor": [{"resource": "pods", "name": "web-1", "uid": "u-3"}],
            },
        )
    ],
}
"""Status written after creation (kind -> (status path, status)), for the kinds whose parser reads it."""

PARSERS: dict[str, list[Callable[[Any], Any]]] = {
    "Namespace": [parse_namespace, parse_namespace_labels],
    "ConfigMap": [parse_config_map, parse_templates_config_map],
    "Service": [workloads.SERVICE_KIND.parse],
    "ReplicationController": [workloads.REPLICATION_CONTROLLER_KIND.parse],
    "ReplicaSet": [workloads.REPLICA_SET_KIND.parse],
    "StatefulSet": [workloads.STATEFUL_SET_KIND.parse],
    "PodDisruptionBudget": [parse_pdb],
    "PriorityClass": [parse_priority_class],
    "PersistentVolumeClaim": [storage.CLAIM.parse],
    "PersistentVolume": [storage.VOLUME.parse],
    "StorageClass": [storage.STORAGE_CLASS.parse],
    "CSINode": [storage.CSI_NODE.parse],
    "CSIDriver": [storage.CSI_DRIVER.parse],
    "CSIStorageCapacity": [storage.STORAGE_CAPACITY.parse],
    "DeviceClass": [dra.DEVICE_CLASS.parse],
    "ResourceSlice": [dra.RESOURCE_SLICE.parse],
    "ResourceClaim": [dra.RESOURCE_CLAIM.parse],
}
"""Kind -> every parser the scheduler and its controllers read that kind with (and the admission
webhook's, whose own watches stay JSON: they do not follow ``clientConnection``)."""

KINDS = sorted(PARSERS)


def resource_kind(s: Scope, kind: str, parser: Callable[[Any], Any]) -> ResourceKind[Any]:
    group, version, plural, _ = protowire.BUILTIN_KINDS[kind]
    return ResourceKind(kind, group, version, plural, parser, label_selector=f"proto-run={s.run}", protobuf=True)


def create(s: Scope, kind: str) -> int:
    made = objects(s)[kind]
    group, version, _, _ = protowire.BUILTIN_KINDS[kind]
    for path, body in made:
        s.call("POST", path, {"apiVersion": f"{group}/{version}" if group else version, "kind": kind, **body})
    for path, status in STATUS.get(kind, lambda _: [])(s):
        current = s.call("GET", path)
        s.call("PUT", path, current | {"status": status})
    return len(made)


def differences(want: Any, got: Any, path: str = "") -> list[str]:
    """Field-by-field differences of two parsed values (dataclasses compared per field, recursively)."""
    if dataclasses.is_dataclass(want) and type(want) is type(got):
        out: list[str] = []
        for f in dataclasses.fields(want):
            out += differences(getattr(want, f.name), getattr(got, f.name), f"{path}.{f.name}")
        return out
    return [] if want == got else [f"{path}: JSON {want!r} != protobuf {got!r}"]


def versions(reflector: Reflector) -> dict[str, str]:
    """Each stored object's resourceVersion, by key."""
    return {k: e.resource_version for k, e in reflector.store.items()}


def test_every_builtin_kind_but_pods_and_nodes_is_covered() -> None:
    assert set(KINDS) == set(protowire.BUILTIN_KINDS) - {"Pod", "Node"}


@pytest.mark.parametrize("kind", KINDS)
async def test_a_kind_listed_as_protobuf_parses_as_from_json(scope: Scope, http: ApiHttp, kind: str) -> None:
    count = create(scope, kind)
    if kind == "Namespace":
        count += 1  # the scope's own namespace carries the label too

    for parser in PARSERS[kind]:
        rk = resource_kind(scope, kind, parser)
        by_json = Reflector(http, rk, lambda *_: None, options=JSON_OPTIONS)
        by_proto = Reflector(http, rk, lambda *_: None, options=PROTO_OPTIONS)
        assert by_proto.protobuf and not by_json.protobuf
        # kube-controller-manager may change an object between the two lists (its ResourceClaim controller
        # drops a reservedFor entry whose pod does not exist): list both again until they read the same
        # versions, so the comparison is of one state.
        for _ in range(20):
            items_json, _ = await by_json.list_all()
            items_proto, _ = await by_proto.list_all()
            assert all(type(i) is protowire.ProtoObject for i in items_proto)
            by_json.replace(items_json, "")
            by_proto.replace(items_proto, "")
            json_values = {k: e.value for k, e in by_json.store.items()}
            proto_values = {k: e.value for k, e in by_proto.store.items()}
            if versions(by_json) == versions(by_proto):
                break
            await asyncio.sleep(0.25)
        assert len(json_values) == count, (parser, sorted(json_values))
        assert sorted(json_values) == sorted(proto_values)
        problems = [f"{k}{d}" for k in sorted(json_values) for d in differences(json_values[k], proto_values[k])]
        assert not problems, f"{kind} by {parser.__qualname__}:\n" + "\n".join(problems)


@pytest.mark.parametrize("kind", ["ReplicaSet", "PodDisruptionBudget", "CSINode", "ResourceClaim", "PriorityClass"])
async def test_a_kind_watched_as_protobuf_delivers_what_json_delivers(scope: Scope, http: ApiHttp, kind: str) -> None:
    seen: dict[str, list[tuple[str, Any]]] = {"json": [], "proto": []}
    parser = PARSERS[kind][0]

    def recorder(name: str) -> Callable[[Any, Any, Any], None]:
        return lambda event, old, new: seen[name].append((event.value, new))

    reflectors = {
        name: Reflector(http, resource_kind(scope, kind, parser), recorder(name), options=options)
        for name, options in (("json", JSON_OPTIONS), ("proto", PROTO_OPTIONS))
    }
    for r in reflectors.values():
        items, rv = await r.list_all()
        r.replace(items, rv)  # then run() watches from rv
    tasks = [asyncio.create_task(r.run()) for r in reflectors.values()]
    try:
        await asyncio.sleep(0.5)  # the watches are open
        created = create(scope, kind)
        deadline = asyncio.get_running_loop().time() + 30
        while not all(len(s) >= created for s in seen.values()):
            assert asyncio.get_running_loop().time() < deadline, seen
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # a status write's MODIFIED, if any
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    assert [e for e, _ in seen["json"]] == [e for e, _ in seen["proto"]]
    problems = [d for (_, a), (_, b) in zip(seen["json"], seen["proto"], strict=True) for d in differences(a, b)]
    assert not problems, "\n".join(problems)
