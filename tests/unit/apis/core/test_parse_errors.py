"""Malformed input gives a ParseError naming the kind, the object and the exact field path."""

import pickle
from typing import Any

import pytest

from apis.core.errors import ParseError
from apis.core.parse import (
    parse_affinity,
    parse_label_selector,
    parse_node,
    parse_object_meta,
    parse_pod,
    parse_tolerations,
)


def pod(spec: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    spec = {"containers": [container()], **spec} if spec is not None and "containers" not in spec else spec
    obj: dict[str, Any] = {"metadata": {"name": "web-1", "namespace": "default"}, "spec": spec or {}}
    obj.update(top)
    return obj


def container(**fields: Any) -> dict[str, Any]:
    return {"name": "c", "image": "i", **fields}


@pytest.mark.parametrize(
    ("obj", "want_field", "want_message"),
    [
        pytest.param(
            pod({"containers": [container(resources={"requests": {"cpu": "12x"}})]}),
            "spec.containers[0].resources.requests.cpu",
            'invalid quantity "12x": unknown suffix "x"',
            id="bad-quantity",
        ),
        pytest.param(
            pod({"containers": [container(), container(resources={"limits": {"nvidia.com/gpu": "one"}})]}),
            "spec.containers[1].resources.limits[nvidia.com/gpu]",
            'invalid quantity "one": expected a number, optionally signed, before the suffix',
            id="bad-extended-quantity-bracketed-key",
        ),
        pytest.param(
            pod({"initContainers": [container(resources={"requests": []})]}),
            "spec.initContainers[0].resources.requests",
            "expected an object, got array",
            id="requests-not-a-map",
        ),
        pytest.param(
            pod({"overhead": {"cpu": True}}),
            "spec.overhead.cpu",
            'invalid quantity "true": expected a string or a number',
            id="overhead-bool",
        ),
        pytest.param(
            pod({"resources": {"requests": {"memory": "1Q"}}}),
            "spec.resources.requests.memory",
            'invalid quantity "1Q": unknown suffix "Q"',
            id="pod-level-resources",
        ),
        pytest.param(pod({"priority": "high"}), "spec.priority", "expected an integer, got string", id="priority"),
        pytest.param(pod({"priority": 1.5}), "spec.priority", "expected an integer, got number", id="priority-float"),
        pytest.param(pod({"containers": "c"}), "spec.containers", "expected an array, got string", id="containers"),
        pytest.param(pod({"containers": ["c"]}), "spec.containers[0]", "expected an object, got string", id="item"),
        pytest.param(
            pod({"containers": [container(ports=[{"hostPort": "80"}])]}),
            "spec.containers[0].ports[0].hostPort",
            "expected an integer, got string",
            id="host-port",
        ),
        pytest.param(
            pod({"nodeSelector": {"disk": 1}}),
            "spec.nodeSelector.disk",
            "expected a string, got number",
            id="node-selector-value",
        ),
        pytest.param(
            {"metadata": {"name": "web-1", "labels": ["a"]}},
            "metadata.labels",
            "expected an object, got array",
            id="labels-not-a-map",
        ),
        pytest.param(
            {"metadata": {"name": "web-1", "labels": {"app.kubernetes.io/name": None}}},
            "metadata.labels[app.kubernetes.io/name]",
            "expected a string, got null",
            id="label-value",
        ),
        pytest.param(
            {"metadata": {"name": "web-1", "creationTimestamp": "yesterday"}},
            "metadata.creationTimestamp",
            'invalid RFC 3339 timestamp "yesterday"',
            id="timestamp",
        ),
        pytest.param(
            {"metadata": {"name": "web-1", "ownerReferences": [{"controller": "yes"}]}},
            "metadata.ownerReferences[0].controller",
            "expected a boolean, got string",
            id="owner-ref",
        ),
        pytest.param(
            pod({"tolerations": [{"key": "k"}, {"effect": "NoScheduled"}]}),
            "spec.tolerations[1].effect",
            'unknown taint effect "NoScheduled"',
            id="toleration-effect",
        ),
        pytest.param(
            pod({"tolerations": [{"operator": "In"}]}),
            "spec.tolerations[0].operator",
            'unknown toleration operator "In"',
            id="toleration-operator",
        ),
        pytest.param(
            pod(
                {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {},
                                    {"matchExpressions": [{"key": "a", "operator": "Equals"}]},
                                ]
                            }
                        }
                    }
                }
            ),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[1].matchExpressions[0].operator",
            'unknown operator "Equals"',
            id="node-affinity-operator",
        ),
        pytest.param(
            pod(
                {
                    "affinity": {
                        "podAntiAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {"weight": 1, "podAffinityTerm": {"labelSelector": {"matchLabels": {"a": 1}}}}
                            ]
                        }
                    }
                }
            ),
            "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
            ".podAffinityTerm.labelSelector.matchLabels.a",
            "expected a string, got number",
            id="pod-anti-affinity-selector",
        ),
        pytest.param(
            pod({"topologySpreadConstraints": [{"maxSkew": 1}]}),
            "spec.topologySpreadConstraints[0].topologyKey",
            "required",
            id="spread-topology-key",
        ),
        pytest.param(
            pod({"volumes": [{"name": "v", "persistentVolumeClaim": {}}]}),
            "spec.volumes[0].persistentVolumeClaim.claimName",
            "required",
            id="pvc-claim-name",
        ),
        pytest.param(
            pod({"schedulingGates": [{"name": ""}]}),
            "spec.schedulingGates[0].name",
            "required",
            id="gate-name",
        ),
        pytest.param(
            pod(status={"conditions": [{"status": "True"}]}),
            "status.conditions[0].type",
            "required",
            id="condition",
        ),
        pytest.param(pod(status={"phase": 1}), "status.phase", "expected a string, got number", id="phase"),
        pytest.param(pod(spec=None, status=[]), "status", "expected an object, got array", id="status-not-a-map"),
    ],
)
def test_pod_parse_errors(obj: dict[str, Any], want_field: str, want_message: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse_pod(obj)
    assert (caught.value.kind, caught.value.name, caught.value.field, caught.value.message) == (
        "Pod",
        "default/web-1",
        want_field,
        want_message,
    )


def test_error_string_names_everything() -> None:
    obj = pod({"containers": [container(resources={"requests": {"cpu": "12x"}})]})
    with pytest.raises(ParseError) as caught:
        parse_pod(obj)
    want = 'Pod default/web-1: spec.containers[0].resources.requests.cpu: invalid quantity "12x": unknown suffix "x"'
    assert str(caught.value) == want
    assert isinstance(caught.value, ValueError)
    assert str(pickle.loads(pickle.dumps(caught.value))) == want


@pytest.mark.parametrize(
    ("obj", "want"),
    [
        pytest.param("not an object", "Pod <unnamed>: expected an object, got string", id="not-an-object"),
        pytest.param({"metadata": "x"}, "Pod <unnamed>: metadata: expected an object, got string", id="bad-meta"),
        pytest.param(
            {"metadata": {"name": "p", "namespace": "team-a"}, "spec": {"priority": None, "nodeName": 3}},
            "Pod team-a/p: spec.nodeName: expected a string, got number",
            id="namespace-in-name",
        ),
    ],
)
def test_malformed_objects(obj: Any, want: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse_pod(obj)
    assert str(caught.value) == want


@pytest.mark.parametrize(
    ("obj", "want"),
    [
        pytest.param(
            {"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "k"}]}},
            "Node n1: spec.taints[0].effect: required",
            id="taint-effect",
        ),
        pytest.param(
            {"metadata": {"name": "n1"}, "spec": {"unschedulable": "true"}},
            "Node n1: spec.unschedulable: expected a boolean, got string",
            id="unschedulable",
        ),
        pytest.param(
            {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4 cores"}}},
            'Node n1: status.allocatable.cpu: invalid quantity "4 cores": unknown suffix " cores"',
            id="allocatable",
        ),
        pytest.param(
            {"metadata": {"name": "n1"}, "status": {"images": [{"names": "nginx"}]}},
            "Node n1: status.images[0].names: expected an array, got string",
            id="images",
        ),
    ],
)
def test_node_parse_errors(obj: dict[str, Any], want: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse_node(obj)
    assert str(caught.value) == want


def test_fragment_errors_are_relative_and_relocatable() -> None:
    with pytest.raises(ParseError) as caught:
        parse_tolerations([{"effect": "Never"}])
    err = caught.value
    assert (err.kind, err.name, err.field) == ("", "", "[0].effect")
    placed = err.under("spec.template.spec.tolerations").for_object("Reservation", "r1")
    assert str(placed) == 'Reservation r1: spec.template.spec.tolerations[0].effect: unknown taint effect "Never"'


@pytest.mark.parametrize(
    ("parse", "raw", "want_field"),
    [
        pytest.param(
            parse_label_selector,
            {"matchExpressions": [{"key": "a"}]},
            "matchExpressions[0].operator",
            id="selector",
        ),
        pytest.param(parse_affinity, {"podAffinity": []}, "podAffinity", id="affinity"),
        pytest.param(parse_label_selector, "app=web", "", id="selector-string"),
    ],
)
def test_fragment_parsers(parse: Any, raw: Any, want_field: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse(raw)
    assert caught.value.field == want_field


def test_parse_object_meta_names_kind() -> None:
    with pytest.raises(ParseError) as caught:
        parse_object_meta({"metadata": {"name": "r", "generation": "1"}}, "Reservation")
    assert str(caught.value) == "Reservation r: metadata.generation: expected an integer, got string"
    meta = parse_object_meta({"metadata": {"name": "r"}}, "Reservation", default_namespace="default")
    assert (meta.name, meta.namespace) == ("r", "default")
