"""JSON nested 20,000 levels deep where a user may write JSON (annotations, ConfigMap values): refused with
a clear ``ValueError`` naming the object and the annotation, never a ``RecursionError``; and API objects
nested past orjson's limit decoded one object at a time (:mod:`apis.core.boundedjson`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from apis.colocation import resolve_profile
from apis.colocation.profile import ProfileError
from apis.configuration import parse_slo_config
from apis.core import boundedjson
from apis.core.boundedjson import UndecodableObject, decode_document
from apis.extension.device import decode_device_allocations
from apis.extension.numa import resource_status_of
from apis.scheduling import parse_reservation, parse_reservation_affinity
from apis.scheduling.elasticquota import ANNOTATION_NAMESPACES, ANNOTATION_SHARED_WEIGHT, parse_elastic_quota
from koord_scheduler.plugins.coscheduling.spec import parse_groups
from koord_scheduler.plugins.nodenumaresource.nrt import parse_node_resource_topology

DEEP = "[" * 20_000 + "]" * 20_000
"""A valid JSON document (an array in an array in ...) 20,000 levels deep: 40 KB, well under the API
server's 256 KiB limit for all annotations of an object."""


def quota(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": "q", "namespace": "ns", "annotations": annotations},
        "spec": {"max": {"cpu": "1"}, "min": {"cpu": "1"}},
    }


def nrt(annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "n1", "annotations": annotations}, "zones": []}


@pytest.mark.parametrize(
    ("parse", "want"),
    [
        pytest.param(
            lambda: parse_elastic_quota(quota({ANNOTATION_NAMESPACES: DEEP})),
            "ElasticQuota ns/q: metadata.annotations[quota.scheduling.koordinator.sh/namespaces]",
            id="quota-namespaces",
        ),
        pytest.param(
            lambda: parse_node_resource_topology(nrt({"kubelet.koordinator.sh/cpu-manager-policy": DEEP})),
            "NodeResourceTopology n1: annotation kubelet.koordinator.sh/cpu-manager-policy is not valid "
            "JSON: nested deeper than 64 levels",
            id="nrt-kubelet-policy",
        ),
        pytest.param(
            lambda: parse_node_resource_topology(nrt({"node.koordinator.sh/pod-cpu-allocs": DEEP})),
            "annotation node.koordinator.sh/pod-cpu-allocs is not valid JSON: nested deeper than 64 levels",
            id="nrt-pod-cpu-allocs",
        ),
        pytest.param(
            lambda: resource_status_of({"scheduling.koordinator.sh/resource-status": DEEP}, "pod ns/p"),
            "pod ns/p: annotation scheduling.koordinator.sh/resource-status is not valid JSON: nested "
            "deeper than 64 levels",
            id="pod-resource-status",
        ),
        pytest.param(
            lambda: parse_reservation_affinity(DEEP), "nested deeper than 64 levels", id="reservation-affinity"
        ),
        pytest.param(
            lambda: decode_device_allocations(DEEP),
            "annotation scheduling.koordinator.sh/device-allocated: not JSON: nested deeper than 64 levels",
            id="device-allocated",
        ),
        pytest.param(lambda: parse_groups(DEEP, "ns/g"), "nested deeper than 64 levels", id="gang-groups"),
    ],
)
def test_deep_json_in_an_annotation_is_a_clear_value_error(parse: Callable[[], Any], want: str) -> None:
    with pytest.raises(ValueError, match="nested deeper than 64 levels") as info:
        parse()
    assert want in str(info.value)


def test_an_ignored_annotation_nested_deep_is_ignored() -> None:
    # Koordinator ignores a shared-weight it cannot read (the quota's max is its weight).
    record = parse_elastic_quota(quota({ANNOTATION_SHARED_WEIGHT: DEEP}))
    assert record.name == "q"


def test_deep_json_in_the_slo_config_map_is_one_refused_key() -> None:
    config, problems = parse_slo_config({"colocation-config": DEEP, "resource-threshold-config": DEEP}, None)
    assert sorted(p.key for p in problems) == ["colocation-config", "resource-threshold-config"]
    assert all("nested deeper than 64 levels" in p.message for p in problems), problems
    assert config == parse_slo_config({}, None)[0]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param('{"a": [1, {"b": "[[[[[[[[["}]}', {"a": [1, {"b": "[[[[[[[[["}]}, id="brackets-in-strings"),
        pytest.param('"\\"[[["', '"[[[', id="escaped-quote"),
        pytest.param("[" * 64 + "]" * 64, json.loads("[" * 64 + "]" * 64), id="exactly-the-bound"),
    ],
)
def test_loads_is_json_loads_within_the_bound(text: str, want: Any) -> None:
    assert boundedjson.loads(text) == want


@pytest.mark.parametrize(
    ("text", "want_pos"),
    [
        pytest.param("[" * 65 + "]" * 65, 64, id="one-past"),
        pytest.param('{"k": "]]]]", "v": ' + "[" * 70 + "]" * 70 + "}", 19 + 63, id="after-a-string"),
        pytest.param('["é", ' + "[" * 65 + "]" * 65 + "]", 6 + 63, id="offset-in-characters"),
    ],
)
def test_loads_refuses_past_the_bound_where_it_gets_too_deep(text: str, want_pos: int) -> None:
    with pytest.raises(json.JSONDecodeError) as info:
        boundedjson.loads(text)
    assert info.value.msg == "nested deeper than 64 levels"
    assert info.value.pos == want_pos


def nested_item(name: str, depth: int) -> bytes:
    """A list item nested ``depth`` levels (itself included), with managedFields that mirror it."""
    inner = '{"a":' * (depth - 3) + "1" + "}" * (depth - 3)
    meta = f'"name":"{name}","namespace":"ns","uid":"u-{name}","resourceVersion":"7"'
    return (
        '{"apiVersion":"x.io/v1","kind":"Widget","metadata":{'
        + meta
        + ',"managedFields":[{"fieldsV1":'
        + inner
        + '}]},"spec":{"template":'
        + inner
        + "}}"
    ).encode()


def test_a_list_with_one_deep_item_decodes_the_others_and_names_the_deep_field() -> None:
    items = [nested_item("ok-1", 5), nested_item("deep", 1100), nested_item("ok-2", 5)]
    envelope = b'{"kind":"WidgetList","metadata":{"resourceVersion":"9","continue":"c"},"items":['
    data = envelope + b",".join(items) + b"]}"
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(data)

    doc = decode_document(data, container="items")

    assert doc["metadata"] == {"resourceVersion": "9", "continue": "c"}
    assert [item["metadata"]["name"] for item in doc["items"]] == ["ok-1", "deep", "ok-2"]
    deep = doc["items"][1]
    assert isinstance(deep, UndecodableObject)
    assert dict(deep) == {
        "apiVersion": "x.io/v1",
        "kind": "Widget",
        "metadata": {"name": "deep", "namespace": "ns", "uid": "u-deep", "resourceVersion": "7"},
    }
    assert deep.error == "spec.template.a.a.a.a…: nested deeper than 1024 levels"
    assert doc["items"][0] == orjson.loads(items[0])


def test_a_watch_event_with_a_deep_object_keeps_its_type_and_metadata() -> None:
    data = b'{"type":"MODIFIED","object":' + nested_item("deep", 2000) + b"}"
    event = decode_document(data, container="object")
    assert event["type"] == "MODIFIED"
    assert isinstance(event["object"], UndecodableObject)
    assert event["object"]["metadata"]["name"] == "deep"


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b'{"items":[{"a":1}', id="truncated"),
        pytest.param(b"not json", id="not-json"),
        pytest.param(b'{"items":[' + b"[" * 2000 + b"]" * 1999 + b"]}", id="unbalanced-deep-item"),
    ],
)
def test_a_document_that_is_not_json_is_still_a_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_document(data, container="items")


def nested_value(depth: int) -> Any:
    """A decoded value nested ``depth`` levels (built without recursion)."""
    value: Any = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_a_reservation_template_nested_deeper_than_100_levels_is_invalid_naming_the_field() -> None:
    template = {"metadata": {}, "spec": {"containers": [{"name": "c"}]}, "x": nested_value(1000)}
    record = parse_reservation(
        {"metadata": {"name": "r"}, "spec": {"template": template, "owners": [{"object": {"name": "p"}}]}}
    )
    assert record.invalid == "invalid Reservation: spec.template: nested deeper than 100 levels"


def test_a_colocation_profile_patch_nested_deeper_than_100_levels_is_refused() -> None:
    profile = {
        "metadata": {"name": "c"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "patch": {"x": nested_value(1000)}},
    }
    with pytest.raises(ProfileError) as info:
        resolve_profile(profile)
    assert str(info.value) == "ClusterColocationProfile 'c': spec.patch: nested deeper than 100 levels"


@pytest.mark.parametrize(("depth", "want"), [(1, False), (100, False), (101, True), (5000, True)])
def test_exceeds_depth_counts_containers(depth: int, want: bool) -> None:
    assert boundedjson.exceeds_depth(nested_value(depth), 100) is want
    assert boundedjson.exceeds_depth([nested_value(depth)], 101) is want
