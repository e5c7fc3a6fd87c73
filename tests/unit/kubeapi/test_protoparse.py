"""kubeapi.protoparse: a Pod or Node decoded from protobuf gives, field by field, the object its JSON gives.

Each object of the corpus is parsed three ways: its JSON by :mod:`apis.core.parse`, the protobuf message
the API server would send for it through the JSON-shaped dict (:mod:`kubeapi.protodict`), and the same
message directly (:mod:`kubeapi.protoparse`). Objects the JSON path refuses must be refused with the same
error, naming the object and field.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from typing import Any

import pytest
from protobuild import from_json

from apis.core.errors import ParseError
from apis.core.frozendict import FrozenDict
from apis.core.parse import parse_node, parse_pod
from apis.core.types import Node, ObjectMeta, Pod, TaintEffect
from kubeapi import protodict, protoparse
from kubeapi.pod_watch import (
    parse_pod_entry,
    pod_entry_from_message,
    update_pod_entry,
    update_pod_entry_from_message,
)
from kubeapi.protogen import core_v1_pb2

Json = dict[str, Any]

TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0},
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"operator": "Exists"},
]
AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]},
            ]
        },
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}}
        ],
    },
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone", "namespaces": ["x"]}
        ]
    },
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 10,
                "podAffinityTerm": {
                    "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
                    "namespaceSelector": {},
                    "topologyKey": "kubernetes.io/hostname",
                    "matchLabelKeys": ["pod-template-hash"],
                },
            }
        ]
    },
}


def base_pod(name: str = "p") -> Json:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "resourceVersion": "41",
            "generation": 3,
            "creationTimestamp": "2026-01-02T03:04:05Z",
            "labels": {"app": "web", "pod-template-hash": "abc"},
            "annotations": {"scheduling.koordinator.sh/reservation-affinity": '{"name": "r"}'},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u1", "controller": True},
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "u2"},
            ],
            "managedFields": [{"manager": "kubectl", "operation": "Update"}],
        },
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "nginx:1",
                    "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"memory": "1Gi"}},
                }
            ]
        },
        "status": {"phase": "Pending"},
    }


def variant(**changes: Any) -> Json:
    """``base_pod`` with ``changes`` (``spec__x`` sets ``spec.x``, ``status__x``, ``metadata__x``)."""
    pod = copy.deepcopy(base_pod())
    for path, value in changes.items():
        section, key = path.split("__")
        if value is None:
            pod[section].pop(key, None)
        else:
            pod[section][key] = value
    return pod


CONTAINER_STATUS = {"name": "app", "image": "nginx:1", "imageID": "", "ready": True, "restartCount": 2}
SIDECAR = {
    "name": "proxy",
    "image": "envoy",
    "restartPolicy": "Always",
    "resources": {"requests": {"cpu": "0.1"}},
    "ports": [{"containerPort": 15000, "hostPort": 15000}],
}

PODS: dict[str, Json] = {
    "plain": base_pod(),
    "bare": {"metadata": {"name": "bare"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
    "quantities": variant(
        spec__containers=[
            {
                "name": "a",
                "image": "i",
                "resources": {
                    "requests": {"cpu": "1.5", "memory": "1e9", "ephemeral-storage": "2G", "example.com/dev": "3"},
                    "limits": {"cpu": "2000m", "memory": "1Gi", "hugepages-2Mi": "4Mi", "nvidia.com/gpu": "1"},
                },
            },
            {
                "name": "b",
                "image": "j",
                "resources": {"requests": {"cpu": "100u", "memory": "1.5Ki"}, "limits": {"memory": "2Mi"}},
            },
            {"name": "c", "image": "k", "resources": {"limits": {"cpu": "1n", "memory": "1k", "pods": "1E"}}},
            {"name": "d", "image": "k", "resources": {"requests": {"memory": "1Pi", "cpu": "0.001"}}},
        ]
    ),
    "bound, running, restarted": variant(
        spec__nodeName="n1",
        status__phase="Running",
        status__qosClass="Burstable",
        status__containerStatuses=[CONTAINER_STATUS],
        status__initContainerStatuses=[{**CONTAINER_STATUS, "name": "init", "restartCount": 1}],
        status__conditions=[
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-02T03:04:06Z"},
            {"type": "Ready", "status": "False", "reason": "x", "message": "y"},
        ],
    ),
    "scheduling fields": variant(
        spec__schedulerName="koord-scheduler",
        spec__priority=1000,
        spec__priorityClassName="high",
        spec__preemptionPolicy="Never",
        spec__nodeSelector={"zone": "a", "disk": "ssd"},
        spec__affinity=AFFINITY,
        spec__tolerations=TOLERATIONS,
        spec__schedulingGates=[{"name": "wait"}, {"name": "quota"}],
        status__nominatedNodeName="n3",
    ),
    "spread constraints": variant(
        spec__topologySpreadConstraints=[
            {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "minDomains": 3,
                "nodeAffinityPolicy": "Ignore",
                "nodeTaintsPolicy": "Honor",
                "matchLabelKeys": ["pod-template-hash"],
            },
        ]
    ),
    "sidecars, init containers, host ports, overhead": variant(
        spec__initContainers=[
            {"name": "init", "image": "busybox", "resources": {"requests": {"cpu": "2", "memory": "10Mi"}}},
            SIDECAR,
        ],
        spec__containers=[
            {
                "name": "app",
                "image": "nginx",
                "ports": [
                    {"containerPort": 80, "hostPort": 8080, "protocol": "UDP", "hostIP": "10.0.0.1"},
                    {"containerPort": 81},
                ],
            }
        ],
        spec__overhead={"cpu": "10m", "memory": "5Mi"},
    ),
    "pod-level resources": variant(spec__resources={"limits": {"cpu": "2", "memory": "2Gi"}}),
    "resize in progress": variant(
        spec__nodeName="n1",
        spec__initContainers=[SIDECAR],
        status__containerStatuses=[
            {
                **CONTAINER_STATUS,
                "resources": {"requests": {"cpu": "500m"}, "limits": {"memory": "2Gi"}},
                "allocatedResources": {"cpu": "750m", "memory": "64Mi"},
            }
        ],
        status__initContainerStatuses=[
            {**CONTAINER_STATUS, "name": "proxy", "resources": {"requests": {"cpu": "300m"}}}
        ],
    ),
    "resize infeasible": variant(
        spec__nodeName="n1",
        status__containerStatuses=[{**CONTAINER_STATUS, "resources": {"requests": {"cpu": "100m"}}}],
        status__conditions=[{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}],
    ),
    "host path": variant(spec__volumes=[{"name": "logs", "hostPath": {"path": "/var/log", "type": "Directory"}}]),
    "volumes": variant(
        spec__volumes=[
            {"name": "data", "persistentVolumeClaim": {"claimName": "pvc-1", "readOnly": True}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
            {"name": "cfg", "configMap": {"name": "settings"}},
            {"name": "tmp", "emptyDir": {}},
            {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
            {"name": "disk", "gcePersistentDisk": {"pdName": "pd-1"}},
            {"name": "ceph", "rbd": {"monitors": ["m1", "m2"], "image": "img", "readOnly": True}},
            {"name": "iscsi", "iscsi": {"targetPortal": "t:3260", "iqn": "iqn.x", "lun": 0}},
        ]
    ),
    "resource claims": variant(
        spec__resourceClaims=[
            {"name": "gpu", "resourceClaimName": "c1"},
            {"name": "t", "resourceClaimTemplateName": "tpl"},
        ],
        spec__containers=[
            {"name": "app", "image": "i", "resources": {"claims": [{"name": "gpu"}, {"name": "t", "request": "r"}]}}
        ],
        status__resourceClaimStatuses=[{"name": "t", "resourceClaimName": "p-t-abcde"}, {"name": "gpu"}],
    ),
    "terminating": variant(
        metadata__deletionTimestamp="2026-01-02T04:00:00Z",
        metadata__namespace=None,
        status__phase="Running",
    ),
    "deprecated device names": variant(
        spec__containers=[{"name": "a", "image": "i", "resources": {"limits": {"kubernetes.io/gpu": "100"}}}]
    ),
}

REFUSED: dict[str, Json] = {
    "negative request": variant(spec__containers=[{"name": "a", "resources": {"requests": {"cpu": "-1"}}}]),
    "bad quantity": variant(spec__containers=[{"name": "a", "resources": {"limits": {"memory": "1Qi"}}}]),
    "huge cpu": variant(spec__containers=[{"name": "a", "resources": {"requests": {"cpu": "1E"}}}]),
    "no containers": variant(spec__containers=[]),
    "no name": {"metadata": {"namespace": "ns"}, "spec": {"containers": [{"name": "a"}]}},
    "unknown toleration effect": variant(spec__tolerations=[{"key": "k", "effect": "Sometimes"}]),
    "unknown toleration operator": variant(spec__tolerations=[{"key": "k", "operator": "Maybe"}]),
    "gate without a name": variant(spec__schedulingGates=[{"name": ""}]),
    "spread without a key": variant(spec__topologySpreadConstraints=[{"maxSkew": 1}]),
    "condition without a type": variant(status__conditions=[{"status": "True"}]),
    "negative restarts": variant(status__containerStatuses=[{**CONTAINER_STATUS, "restartCount": -1}]),
    "bad affinity": variant(
        spec__affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Near"}]}]
                }
            }
        }
    ),
    "undeclared claim": variant(
        spec__containers=[{"name": "app", "image": "i", "resources": {"claims": [{"name": "nope"}]}}]
    ),
    "claim without a source": variant(spec__resourceClaims=[{"name": "gpu"}]),
}

NODES: dict[str, Json] = {
    "plain": {
        "metadata": {"name": "n1", "uid": "u", "resourceVersion": "9", "labels": {"zone": "a"}},
        "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    },
    "rich": {
        "metadata": {
            "name": "n2",
            "labels": {"zone": "b"},
            "annotations": {"node.koordinator.sh/reservation": '{"cpu": "1"}'},
            "creationTimestamp": "2026-01-02T03:04:05Z",
        },
        "spec": {
            "unschedulable": True,
            "taints": [
                {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                {"key": "spot", "effect": "PreferNoSchedule", "timeAdded": "2026-01-02T03:04:05Z"},
            ],
        },
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "koordinator.sh/gpu": "200", "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": "7500m", "memory": "31Gi", "koordinator.sh/gpu": "200"},
            "conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-02T03:04:05Z"},
                {"type": "MemoryPressure", "status": "False"},
            ],
            "images": [{"names": ["registry/app@sha256:abc", "registry/app:1"], "sizeBytes": 123456789}],
            "nodeInfo": {"kubeletVersion": "v1.35.0"},
            "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}],
        },
    },
}

REFUSED_NODES: dict[str, Json] = {
    "taint without an effect": {"metadata": {"name": "n"}, "spec": {"taints": [{"key": "k"}]}},
    "taint with an unknown effect": {"metadata": {"name": "n"}, "spec": {"taints": [{"key": "k", "effect": "X"}]}},
    "negative capacity": {"metadata": {"name": "n"}, "status": {"capacity": {"memory": "-1"}}},
    "condition without a type": {"metadata": {"name": "n"}, "status": {"conditions": [{"status": "True"}]}},
}


def pod_message(doc: Json) -> Any:
    return from_json(core_v1_pb2.Pod(), doc)


def node_message(doc: Json) -> Any:
    return from_json(core_v1_pb2.Node(), doc)


def differences(want: Any, got: Any, path: str = "") -> list[str]:
    """Field-by-field differences of two parsed objects (dataclasses compared field by field)."""
    if dataclasses.is_dataclass(want) and dataclasses.is_dataclass(got):
        out: list[str] = []
        for f in dataclasses.fields(want):
            out += differences(getattr(want, f.name), getattr(got, f.name), f"{path}.{f.name}")
        return out
    if isinstance(want, tuple) and isinstance(got, tuple) and len(want) == len(got):
        return [d for i, (w, g) in enumerate(zip(want, got, strict=True)) for d in differences(w, g, f"{path}[{i}]")]
    return [] if want == got and type(want) is type(got) else [f"{path}: {want!r} != {got!r}"]


REFERRED = {"deprecated device names"}
"""Valid pods the direct path leaves to the JSON path."""


def no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(doc: Any) -> Any:
        raise AssertionError("the direct path referred a valid object to the JSON path")

    monkeypatch.setattr(protoparse, "parse_pod", fail)
    monkeypatch.setattr(protoparse, "parse_node", fail)


@pytest.mark.parametrize("name", list(PODS))
def test_a_pod_parses_the_same_from_json_from_the_dict_and_directly(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = PODS[name]
    message = pod_message(doc)
    want = parse_pod(doc)
    from_dict = parse_pod(protodict.to_json(message))
    if name not in REFERRED:
        no_fallback(monkeypatch)

    direct = protoparse.pod_from_message(message)

    assert differences(want, from_dict) == []
    assert differences(want, direct) == []
    assert want == direct


@pytest.mark.parametrize("name", list(NODES))
def test_a_node_parses_the_same_from_json_from_the_dict_and_directly(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = NODES[name]
    message = node_message(doc)
    want = parse_node(doc)
    from_dict = parse_node(protodict.to_json(message))
    no_fallback(monkeypatch)

    direct = protoparse.node_from_message(message)

    assert differences(want, from_dict) == []
    assert differences(want, direct) == []


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_pod_json_refuses_is_refused_with_the_same_error(name: str) -> None:
    doc = REFUSED[name]
    with pytest.raises(ParseError) as from_json_error:
        parse_pod(doc)
    with pytest.raises(ParseError) as direct_error:
        protoparse.pod_from_message(pod_message(doc))

    assert str(direct_error.value) == str(from_json_error.value)
    assert "Pod" in str(direct_error.value)


@pytest.mark.parametrize("name", list(REFUSED_NODES))
def test_a_node_json_refuses_is_refused_with_the_same_error(name: str) -> None:
    doc = REFUSED_NODES[name]
    with pytest.raises(ParseError) as from_json_error:
        parse_node(doc)
    with pytest.raises(ParseError) as direct_error:
        protoparse.node_from_message(node_message(doc))

    assert str(direct_error.value) == str(from_json_error.value)


def test_the_zero_time_and_an_unset_time_read_as_absent_and_fractions_are_dropped() -> None:
    message = pod_message(base_pod())
    message.metadata.creationTimestamp.nanos = 999_000_000  # JSON's metav1.Time has no fraction
    message.metadata.deletionTimestamp.SetInParent()  # the zero time: JSON null

    pod = protoparse.pod_from_message(message)

    assert pod.meta.creation_timestamp == parse_pod(base_pod()).meta.creation_timestamp
    assert pod.meta.deletion_timestamp is None


def test_a_bind_echo_reuses_the_pending_pod_and_anything_else_parses_again() -> None:
    pending = base_pod()
    bound = variant(
        spec__nodeName="n1", status__conditions=[{"type": "PodScheduled", "status": "True", "reason": "Bound"}]
    )
    bound["metadata"]["resourceVersion"] = "42"
    bound["metadata"]["managedFields"] = [{"manager": "koord-scheduler", "operation": "Update"}]
    relabelled = copy.deepcopy(bound)
    relabelled["metadata"]["labels"]["app"] = "db"

    first = pod_entry_from_message(pod_message(pending))
    echo = update_pod_entry_from_message(pod_message(bound), first)
    changed = update_pod_entry_from_message(pod_message(relabelled), first)

    assert first.fingerprint and first == dataclasses.replace(parse_pod_entry(pending), fingerprint=first.fingerprint)
    json_echo = update_pod_entry(bound, parse_pod_entry(pending))
    assert echo.pod == json_echo.pod and echo.condition == json_echo.condition
    # (requests are interned, so equal in any case: the annotations, which are not, tell a parse)
    assert echo.pod.meta.annotations is first.pod.meta.annotations  # reused, not parsed again
    assert echo.pod.node_name == "n1" and echo.pod.meta.resource_version == "42" and not echo.fingerprint
    assert changed.pod.labels["app"] == "db" and changed.pod.meta.annotations is not first.pod.meta.annotations


@pytest.mark.parametrize(
    ("cls", "builder"),
    [(Pod, protoparse._pod), (Node, protoparse._node), (ObjectMeta, protoparse.object_meta)],
)
def test_the_direct_parser_sets_every_field_of_the_types(cls: Any, builder: Any) -> None:
    """A field added to the core types (which the JSON parser fills) must be filled here too."""
    source = inspect.getsource(builder)
    missing = [f.name for f in dataclasses.fields(cls) if f.init and f"{f.name}=" not in source]
    assert not missing, f"{cls.__name__} fields the direct parser does not set: {missing}"


def plain_values(value: Any, path: str = "") -> list[str]:
    """Paths in a parsed object whose value is not a plain Python value (a protobuf container would keep
    the decoded list page's whole arena alive for as long as the object lives)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [p for f in dataclasses.fields(value) for p in plain_values(getattr(value, f.name), f"{path}.{f.name}")]
    if isinstance(value, tuple):
        return [p for i, v in enumerate(value) for p in plain_values(v, f"{path}[{i}]")]
    if isinstance(value, FrozenDict):
        return [p for k, v in value.items() for p in [*plain_values(k, f"{path} key"), *plain_values(v, f"{path}.{k}")]]
    return [] if isinstance(value, (str, int, float, TaintEffect)) or value is None else [f"{path}: {type(value)}"]


def test_parsed_objects_hold_only_plain_python_values() -> None:
    parsed: list[Any] = [protoparse.pod_from_message(pod_message(doc)) for doc in PODS.values()]
    parsed += [protoparse.node_from_message(node_message(doc)) for doc in NODES.values()]

    assert [p for obj in parsed for p in plain_values(obj)] == []


# ----- interning -----


def test_equal_values_are_shared_between_pods_and_nodes_and_cannot_be_changed_through_one() -> None:
    bound = {
        **variant(status__conditions=[{"type": "Ready", "status": "True"}], status__phase="Running"),
        "spec": {**base_pod()["spec"], "nodeName": "node-1"},
    }
    first = protoparse.pod_from_message(pod_message(bound))
    second = protoparse.pod_from_message(pod_message({**bound, "metadata": {**bound["metadata"], "name": "q"}}))
    assert first == dataclasses.replace(second, meta=first.meta)  # equal values...
    for field in ("requests", "limits", "images", "conditions", "node_name"):
        assert getattr(first, field) is getattr(second, field), field  # ...held once
    assert first.meta.namespace is second.meta.namespace
    assert first.requests == {"cpu": 250, "memory": 64 * 1024 * 1024}
    with pytest.raises(TypeError):
        first.requests["cpu"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        first.conditions.update({"Ready": "False"})  # type: ignore[attr-defined]
    assert second.requests["cpu"] == 250 and second.conditions == {"Ready": "True"}

    other = variant(spec__containers=[{"name": "app", "image": "nginx:2", "resources": {"requests": {"cpu": "1"}}}])
    third = protoparse.pod_from_message(pod_message(other))
    assert third.requests["cpu"] == 1000
    assert third.requests is not first.requests and third.images == ("nginx:2",)

    node_doc = NODES["rich"]
    n1 = protoparse.node_from_message(node_message(node_doc))
    n2 = protoparse.node_from_message(node_message({**node_doc, "metadata": {"name": "other"}}))
    assert n1.images and all(a is b for a, b in zip(n1.images, n2.images, strict=True))
    assert n1.allocatable is n2.allocatable


def test_the_interning_tables_stop_growing_at_their_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protoparse, "INTERN_LIMIT", 0)
    monkeypatch.setattr(protoparse, "_AMOUNTS", {})
    a = protoparse.pod_from_message(pod_message(base_pod()))
    b = protoparse.pod_from_message(pod_message(base_pod("b")))
    assert a.requests == b.requests and a.requests is not b.requests
    assert protoparse._AMOUNTS == {}
