"""The Pod reflector's parse step: the cheap update for a bind echo, and the full parse for anything else."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from apis.core.errors import ParseError
from kubeapi.pod_watch import (
    PodScheduledCondition,
    fingerprint,
    parse_pod_entry,
    update_pod_entry,
)
from tests.builders import make_pod

Json = dict[str, Any]


def pending() -> Json:
    obj = make_pod("p").req(cpu="500m", memory="1Gi").label("app", "web").toleration("k", "v").obj()
    obj["metadata"]["resourceVersion"] = "10"
    obj["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    return obj


def bind_echo(obj: Json) -> None:
    """What the pods/binding subresource changes."""
    obj["metadata"]["resourceVersion"] = "11"
    obj["metadata"]["managedFields"].append({"manager": "koord-scheduler", "subresource": "status"})
    obj["spec"]["nodeName"] = "n1"
    obj["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    ]


def and_then(*steps: Callable[[Json], None]) -> Callable[[Json], None]:
    def apply(obj: Json) -> None:
        for step in steps:
            step(obj)

    return apply


def set_label(obj: Json) -> None:
    obj["metadata"]["labels"]["app"] = "api"


def add_toleration(obj: Json) -> None:
    obj["spec"]["tolerations"].append({"key": "x", "operator": "Exists"})


def nominate(obj: Json) -> None:
    obj["status"]["nominatedNodeName"] = "n2"


def reorder_spec(obj: Json) -> None:
    obj["spec"] = dict(reversed(list(obj["spec"].items())))


def as_watched(obj: Json) -> None:
    """A list's items carry no ``apiVersion``/``kind``; the same pod in a watch event does."""
    obj["apiVersion"], obj["kind"] = "v1", "Pod"


def as_listed(obj: Json) -> None:
    obj.pop("apiVersion", None)
    obj.pop("kind", None)


def fail_scheduling(obj: Json) -> None:
    obj["metadata"]["resourceVersion"] = "12"
    obj["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available"}
    ]


@pytest.mark.parametrize(
    ("change", "want_reused"),
    [
        pytest.param(bind_echo, True, id="bind-echo-reuses-the-parsed-pod"),
        pytest.param(fail_scheduling, True, id="condition-only-change-reuses-the-parsed-pod"),
        pytest.param(and_then(bind_echo, set_label), False, id="bind-echo-with-a-label-change-parses-again"),
        pytest.param(and_then(bind_echo, add_toleration), False, id="bind-echo-with-a-spec-change-parses-again"),
        pytest.param(nominate, False, id="status-change-other-than-conditions-parses-again"),
        pytest.param(and_then(reorder_spec, bind_echo), False, id="different-key-order-parses-again"),
    ],
)
def test_update_gives_what_a_full_parse_gives(change: Callable[[Json], None], want_reused: bool) -> None:
    before = pending()
    previous = parse_pod_entry(before)
    after = copy.deepcopy(before)
    change(after)

    got = update_pod_entry(after, previous)

    want = parse_pod_entry(after)
    assert (got.pod, got.condition, got.fingerprint) == (want.pod, want.condition, want.fingerprint)
    # The reused pod shares the previous pod's parsed parts; a fresh parse builds new ones.
    assert (got.pod.tolerations is previous.pod.tolerations) == want_reused


def test_bind_echo_of_a_listed_pod_reuses_the_parsed_pod() -> None:
    before = pending()
    as_listed(before)  # the start-up backlog comes from a list
    previous = parse_pod_entry(before)
    after = copy.deepcopy(before)
    as_watched(after)
    bind_echo(after)

    got = update_pod_entry(after, previous)

    assert got.pod == parse_pod_entry(after).pod
    assert got.pod.tolerations is previous.pod.tolerations, "the echo must not parse the pod again"


def test_bind_echo_sets_node_version_and_conditions() -> None:
    before = pending()
    after = copy.deepcopy(before)
    bind_echo(after)

    got = update_pod_entry(after, parse_pod_entry(before))

    assert (got.pod.node_name, got.pod.meta.resource_version, dict(got.pod.conditions)) == (
        "n1",
        "11",
        {"PodScheduled": "True"},
    )
    assert got.condition == PodScheduledCondition("True", "", "")
    assert got.fingerprint == b"", "bound pods keep no fingerprint"


def test_a_bound_previous_version_is_parsed_again() -> None:
    before = pending()
    bind_echo(before)
    previous = parse_pod_entry(before)
    after = copy.deepcopy(before)
    after["metadata"]["resourceVersion"] = "20"

    got = update_pod_entry(after, previous)

    assert got.pod == parse_pod_entry(after).pod
    assert got.pod.tolerations is not previous.pod.tolerations


@pytest.mark.parametrize(
    ("field", "value", "want_path"),
    [
        pytest.param("nodeName", 7, "spec.nodeName", id="node-name-not-a-string"),
        pytest.param("conditions", [{"status": "True"}], "status.conditions[0].type", id="condition-without-type"),
        pytest.param("conditions", "True", "status.conditions", id="conditions-not-a-list"),
    ],
)
def test_malformed_volatile_fields_are_reported_by_the_full_parse(field: str, value: Any, want_path: str) -> None:
    before = pending()
    previous = parse_pod_entry(before)
    after = copy.deepcopy(before)
    (after["spec"] if field == "nodeName" else after["status"])[field] = value

    with pytest.raises(ParseError) as caught:
        update_pod_entry(after, previous)

    assert want_path in str(caught.value)


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param({"metadata": [], "spec": {}}, id="metadata-not-an-object"),
        pytest.param({"metadata": {}, "spec": None}, id="spec-missing"),
        pytest.param({"metadata": {}, "spec": {}, "status": "Pending"}, id="status-not-an-object"),
    ],
)
def test_no_fingerprint_for_objects_not_shaped_like_a_pod(obj: Json) -> None:
    assert fingerprint(obj) == b""


def test_fingerprint_ignores_only_the_volatile_fields() -> None:
    before = pending()
    echoed = copy.deepcopy(before)
    bind_echo(echoed)
    relabelled = copy.deepcopy(before)
    set_label(relabelled)

    assert fingerprint(echoed) == fingerprint(before)
    assert fingerprint(relabelled) != fingerprint(before)
