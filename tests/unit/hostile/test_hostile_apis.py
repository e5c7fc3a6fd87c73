"""Hostile input at the API boundary: what Kubernetes' validation refuses is refused by the parsers,
with the object and the field named, whatever the caller (informer, simulate, controller)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.core.errors import ParseError, QuantityError
from apis.core.parse import parse_node, parse_pod, parse_resource_list
from apis.core.quantity import MAX_AMOUNT, quantity_nanos, to_amount
from apis.scheduling import parse_reservation
from koord_scheduler.plugins.loadaware.nodemetric import parse_node_metric


def pod(resources: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    containers = [{"name": "c", "image": "i", "resources": resources or {}}]
    return {"metadata": {"name": "web", "namespace": "ns"}, "spec": {"containers": containers, **spec}}


def node(allocatable: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "n1"}, "status": {"allocatable": allocatable}}


@pytest.mark.parametrize(
    ("obj", "want_field", "want_message"),
    [
        pytest.param(
            pod({"requests": {"memory": "-1"}}),
            "spec.containers[0].resources.requests.memory",
            '"-1" must be greater than or equal to 0',
            id="negative-memory-request",
        ),
        pytest.param(
            pod({"limits": {"cpu": "-500m"}}),
            "spec.containers[0].resources.limits.cpu",
            '"-500m" must be greater than or equal to 0',
            id="negative-cpu-limit",
        ),
        pytest.param(
            pod({"requests": {"cpu": "99999999999999999999999"}}),
            "spec.containers[0].resources.requests.cpu",
            'invalid quantity "99999999999999999999999": exceeds the largest quantity (2^63-1 base units)',
            id="cpu-beyond-int64-units",
        ),
        pytest.param(
            pod({"requests": {"cpu": "9223372036854775807"}}),
            "spec.containers[0].resources.requests.cpu",
            '"9223372036854775807" is too large: cpu must fit an int64 in millicores',
            id="cpu-beyond-int64-millicores",
        ),
        pytest.param(
            pod({"requests": {"memory": "100Ei"}}),
            "spec.containers[0].resources.requests.memory",
            'invalid quantity "100Ei": exceeds the largest quantity (2^63-1 base units)',
            id="memory-100Ei-not-clamped",
        ),
        pytest.param(
            pod({"requests": {"memory": 1e400}}),
            "spec.containers[0].resources.requests.memory",
            'invalid quantity "inf": not a finite number',
            id="yaml-float-1e400-is-inf",
        ),
        pytest.param(
            pod(overhead={"memory": "-1Gi"}),
            "spec.overhead.memory",
            '"-1Gi" must be greater than or equal to 0',
            id="negative-overhead",
        ),
        pytest.param(
            {"metadata": {"name": "web", "namespace": "ns"}, "spec": {"containers": []}},
            "spec.containers",
            "required: a pod needs at least one container",
            id="no-containers",
        ),
        pytest.param(
            {"metadata": {"name": "web", "namespace": "ns"}, "spec": {}},
            "spec.containers",
            "required: a pod needs at least one container",
            id="containers-absent",
        ),
    ],
)
def test_pod_values_kubernetes_refuses(obj: dict[str, Any], want_field: str, want_message: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse_pod(obj)
    assert (caught.value.kind, caught.value.name, caught.value.field, caught.value.message) == (
        "Pod",
        "ns/web",
        want_field,
        want_message,
    )


@pytest.mark.parametrize(
    ("allocatable", "want_field"),
    [
        pytest.param({"cpu": "99999999999999999999999"}, "status.allocatable.cpu", id="huge-cpu"),
        pytest.param({"cpu": "1e23"}, "status.allocatable.cpu", id="1e23-cpu"),
        pytest.param({"memory": "-1Gi"}, "status.allocatable.memory", id="negative-memory"),
        pytest.param({"pods": "1e400"}, "status.allocatable.pods", id="1e400-pods"),
    ],
)
def test_node_allocatable_out_of_range(allocatable: dict[str, Any], want_field: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse_node(node(allocatable))
    assert (caught.value.kind, caught.value.name, caught.value.field) == ("Node", "n1", want_field)


def test_largest_values_that_fit_are_kept() -> None:
    got = parse_resource_list({"cpu": "9223372036854775807m", "memory": "9223372036854775807", "pods": "7Ei"})
    assert dict(got) == {"cpu": MAX_AMOUNT, "memory": MAX_AMOUNT, "pods": 7 * 2**60}


@pytest.mark.parametrize(
    ("cpu", "want_field"),
    [
        pytest.param("99999999999999999999999", "status.nodeMetric.nodeUsage.resources.cpu", id="huge-cpu"),
        pytest.param("-400", "status.nodeMetric.nodeUsage.resources.cpu", id="negative-cpu"),
    ],
)
def test_node_metric_usage_out_of_range(cpu: str, want_field: str) -> None:
    obj = {"metadata": {"name": "n1"}, "status": {"nodeMetric": {"nodeUsage": {"resources": {"cpu": cpu}}}}}
    with pytest.raises(ParseError) as caught:
        parse_node_metric(obj)
    assert (caught.value.kind, caught.value.name, caught.value.field) == ("NodeMetric", "n1", want_field)


def reservation(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
        "owners": [{"object": {"name": "p"}}],
    }
    return {"metadata": {"name": "r1", "uid": "u1"}, "spec": {**base, **spec}}


@pytest.mark.parametrize(
    ("spec", "want_invalid"),
    [
        pytest.param({"ttl": "forever"}, 'spec.ttl: invalid duration "forever"', id="ttl-not-a-duration"),
        pytest.param({"ttl": 5}, 'spec.ttl: invalid duration "5"', id="ttl-number"),
        pytest.param({"expires": "tomorrow"}, "spec.expires: invalid RFC 3339 timestamp", id="expires-garbage"),
        pytest.param(
            {"template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1e23"}}}]}}},
            "spec.template.spec.containers[0].resources.requests.cpu: invalid quantity",
            id="template-1e23-cpu",
        ),
        pytest.param(
            {"template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": "-1"}}}]}}},
            "spec.template.spec.containers[0].resources.requests.memory",
            id="template-negative-memory",
        ),
        pytest.param({"template": "a string"}, "spec.template: expected an object, got string", id="template-string"),
        pytest.param({"template": None}, "spec.template is required", id="template-missing"),
    ],
)
def test_reservation_invalid_names_the_field(spec: dict[str, Any], want_invalid: str) -> None:
    record = parse_reservation(reservation(**spec))
    assert want_invalid in record.invalid, record.invalid
    assert not record.is_valid


def test_valid_reservation_stays_valid() -> None:
    assert parse_reservation(reservation(ttl="1h")).invalid == ""


# ----- generated cases -----------------------------------------------------------------------------

_SUFFIXES = st.sampled_from(["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e3", "e30"])


@settings(max_examples=60, deadline=None)
@given(
    digits=st.integers(min_value=0, max_value=10**25),
    suffix=_SUFFIXES,
    negative=st.booleans(),
    resource=st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu"]),
)
def test_any_quantity_is_an_int64_amount_or_a_clear_error(
    digits: int, suffix: str, negative: bool, resource: str
) -> None:
    text = f"{'-' if negative else ''}{digits}{suffix}"
    try:
        amounts = parse_resource_list({resource: text})
    except ParseError as err:
        assert err.field in (resource, f"[{resource}]")
        return
    amount = amounts[resource]
    assert 0 <= amount <= MAX_AMOUNT
    assert amount == to_amount(resource, text)


@settings(max_examples=40, deadline=None)
@given(value=st.one_of(st.integers(), st.floats(), st.text(max_size=12), st.booleans(), st.none()))
def test_quantity_parser_never_raises_anything_but_quantity_error(value: Any) -> None:
    try:
        nanos = quantity_nanos(value)
    except QuantityError:
        return
    assert abs(nanos) <= (2**63 - 1) * 10**9


def test_load_rows_past_int64_saturate_instead_of_raising() -> None:
    # usage at the int64 limit plus a pod's estimate: the sum no longer fits, the row saturates.
    from koord_scheduler.plugins.loadaware.metrics_view import _int64

    got = _int64([[[2**63 - 1 + 425, 7]], [[3, 4]]])
    assert got.tolist() == [[[2**63 - 1, 7]], [[3, 4]]]


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=8)
    | st.sampled_from(["1e400", "-1", "99999999999999999999999", "100Ei", "forever", "2026-01-01T00:00:00Z"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=12,
)
_KEYS = st.sampled_from(
    [
        "spec",
        "status",
        "containers",
        "resources",
        "requests",
        "limits",
        "cpu",
        "memory",
        "allocatable",
        "nodeMetric",
        "nodeUsage",
        "template",
        "ttl",
        "expires",
        "owners",
        "metadata",
        "name",
        "podsMetric",
    ]
)


def _hostile_object(draw: Any) -> dict[str, Any]:
    """A named object whose known fields hold random JSON, nested where the parsers look."""
    obj: dict[str, Any] = {"metadata": {"name": "x", "namespace": "ns"}}
    node: dict[str, Any] = obj
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        key = draw(_KEYS)
        if draw(st.booleans()):
            child: dict[str, Any] = {}
            node[key] = child
            node = child
        else:
            node[key] = draw(_JSON)
    return obj


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_parsers_raise_only_value_errors_on_random_objects(data: st.DataObject) -> None:
    obj = _hostile_object(data.draw)
    for parse in (parse_pod, parse_node, parse_node_metric):
        with contextlib.suppress(ValueError):
            parse(obj)
    if obj["metadata"] == {"name": "x", "namespace": "ns"}:
        assert parse_reservation(obj).name == "x"  # a named Reservation never raises: invalid is set instead
    else:
        with contextlib.suppress(ValueError):
            parse_reservation(obj)
