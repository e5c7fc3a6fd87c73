"""Gang declaration and parameters (Koordinator apis/extension/coscheduling.go precedence and defaults;
bad present values are errors in pykoord)."""

from __future__ import annotations

import pytest

from apis.scheduling import podgroup as pg
from apis.scheduling.podgroup import PodGroupRecord, parse_pod_group
from koord_scheduler.plugins.coscheduling.gang_cache import gang_valid_for_permit
from koord_scheduler.plugins.coscheduling.spec import (
    GangRef,
    GangSpec,
    GangSpecError,
    SpecDefaults,
    gang_ref,
    group_id,
    parse_groups,
    parse_waiting_time,
    spec_from_pod,
    spec_from_pod_group,
)
from tests.builders import make_pod

DEFAULTS = SpecDefaults(wait_seconds=600.0, match_policy="once-satisfied")
ANN = "gang.scheduling.koordinator.sh/"


@pytest.mark.parametrize(
    ("labels", "annotations", "want"),
    [
        pytest.param({}, {}, None, id="not-a-gang"),
        pytest.param({}, {ANN + "name": "g"}, GangRef("default/g", "g", False), id="annotation"),
        pytest.param(
            {pg.LABEL_LIGHTWEIGHT_NAME: "lw"},
            {ANN + "name": "g"},
            GangRef("default/lw", "lw", False),
            id="lightweight-label-wins-over-annotation",
        ),
        pytest.param(
            {pg.LABEL_POD_GROUP: "pg1", pg.LABEL_LIGHTWEIGHT_NAME: "lw"},
            {ANN + "name": "g"},
            GangRef("default/pg1", "pg1", True),
            id="podgroup-label-wins",
        ),
    ],
)
def test_gang_ref_precedence(labels: dict[str, str], annotations: dict[str, str], want: GangRef | None) -> None:
    builder = make_pod("p").labels(labels)
    for k, v in annotations.items():
        builder = builder.annotation(k, v)
    assert gang_ref(builder.build()) == want


def pod_with(annotations: dict[str, str], labels: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    builder = make_pod("p").labels(labels or {}).annotation(ANN + "name", "g")
    for k, v in annotations.items():
        builder = builder.annotation(ANN + k, v)
    return builder.build()


@pytest.mark.parametrize(
    ("annotations", "labels", "want"),
    [
        pytest.param(
            {"min-available": "3"},
            None,
            GangSpec(3, 3, "Strict", "once-satisfied", 600.0, ("default/g",)),
            id="defaults",
        ),
        pytest.param(
            {
                "min-available": "2",
                "total-number": "4",
                "mode": "NonStrict",
                "waiting-time": "30s",
                "match-policy": "waiting-and-running",
                "groups": '["default/b","default/g"]',
            },
            None,
            GangSpec(2, 4, "NonStrict", "waiting-and-running", 30.0, ("default/b", "default/g")),
            id="all-set",
        ),
        pytest.param(
            {"min-available": "3", "total-number": "0"},
            None,
            GangSpec(3, 3, "Strict", "once-satisfied", 600.0, ("default/g",)),
            id="total-zero-means-min",
        ),
        pytest.param(
            {"min-available": "5"},
            {pg.LABEL_LIGHTWEIGHT_MIN_AVAILABLE: "2"},
            GangSpec(2, 2, "Strict", "once-satisfied", 600.0, ("default/g",)),
            id="lightweight-min-label-wins",
        ),
        pytest.param(
            {"min-available": "2", "waiting-time": "30m"},
            None,
            GangSpec(2, 2, "Strict", "once-satisfied", 900.0, ("default/g",)),
            id="wait-capped-at-15m",
        ),
        pytest.param(
            {"min-available": "2", "groups": '["default/a"]'},
            None,
            GangSpec(2, 2, "Strict", "once-satisfied", 600.0, ("default/a", "default/g")),
            id="self-always-in-group",
        ),
        pytest.param(
            {"min-available": "2"},
            {pg.KEY_LIGHTWEIGHT_MATCH_POLICY: "only-waiting"},
            GangSpec(2, 2, "Strict", "only-waiting", 600.0, ("default/g",)),
            id="lightweight-match-policy",
        ),
    ],
)
def test_spec_from_pod(annotations: dict[str, str], labels: dict[str, str] | None, want: GangSpec) -> None:
    pod = pod_with(annotations, labels)
    ref = gang_ref(pod)
    assert ref is not None
    assert spec_from_pod(pod, ref, DEFAULTS) == want


@pytest.mark.parametrize(
    ("annotations", "want_in_message"),
    [
        pytest.param({}, "has no gang.scheduling.koordinator.sh/min-available", id="min-missing"),
        pytest.param({"min-available": "x"}, "min-available: not an integer: 'x'", id="min-not-int"),
        pytest.param({"min-available": "0"}, "min-available: must be at least 1", id="min-zero"),
        pytest.param(
            {"min-available": "5", "total-number": "3"},
            "min-available 5 is above gang.scheduling.koordinator.sh/total-number 3",
            id="min-above-total",
        ),
        pytest.param(
            {"min-available": "2", "waiting-time": "abc"},
            'waiting-time: time: invalid duration "abc"',
            id="waiting-time-unparsable",
        ),
        pytest.param({"min-available": "2", "waiting-time": "0s"}, "waiting-time: must be positive", id="wait-zero"),
        pytest.param({"min-available": "2", "groups": "[a,b"}, "groups: not JSON", id="groups-not-json"),
        pytest.param(
            {"min-available": "2", "groups": '{"a":1}'}, "want a JSON array of gang ids", id="groups-not-array"
        ),
        pytest.param({"min-available": "2", "groups": '["nonamespace"]'}, "is not namespace/name", id="groups-bad-id"),
        pytest.param({"min-available": "2", "mode": "Loose"}, "mode: unsupported value 'Loose'", id="bad-mode"),
        pytest.param(
            {"min-available": "2", "match-policy": "any"},
            "match-policy: unsupported value 'any'",
            id="bad-match-policy",
        ),
    ],
)
def test_bad_values_are_errors_naming_the_key(annotations: dict[str, str], want_in_message: str) -> None:
    pod = pod_with(annotations)
    ref = gang_ref(pod)
    assert ref is not None
    with pytest.raises(GangSpecError) as info:
        spec_from_pod(pod, ref, DEFAULTS)
    assert want_in_message in str(info.value)


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        pytest.param(
            {"metadata": {"name": "pg", "namespace": "ns"}, "spec": {"minMember": 3}},
            GangSpec(3, 3, "Strict", "once-satisfied", 600.0, ("ns/pg",)),
            id="min-member",
        ),
        pytest.param(
            {
                "metadata": {"name": "pg", "namespace": "ns", "annotations": {ANN + "mode": "NonStrict"}},
                "spec": {"minMember": 2, "scheduleTimeoutSeconds": 30},
            },
            GangSpec(2, 2, "NonStrict", "once-satisfied", 30.0, ("ns/pg",)),
            id="timeout-and-mode-annotation",
        ),
        pytest.param(
            {"metadata": {"name": "pg", "namespace": "ns"}, "spec": {"minMember": 2, "scheduleTimeoutSeconds": 0}},
            GangSpec(2, 2, "Strict", "once-satisfied", 600.0, ("ns/pg",)),
            id="zero-timeout-means-default",
        ),
    ],
)
def test_spec_from_pod_group(raw: dict[str, object], want: GangSpec) -> None:
    record = parse_pod_group(raw)
    assert spec_from_pod_group(record, GangRef(record.key, record.name, True), DEFAULTS) == want


def test_pod_group_bad_field_is_kept_with_reason() -> None:
    record = parse_pod_group({"metadata": {"name": "pg", "namespace": "ns"}, "spec": {"minMember": "three"}})
    assert record == PodGroupRecord(
        namespace="ns", name="pg", invalid="PodGroup ns/pg: spec.minMember: must be an integer, got 'three'"
    )
    with pytest.raises(GangSpecError, match=r"spec\.minMember"):
        spec_from_pod_group(record, GangRef("ns/pg", "pg", True), DEFAULTS)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("30s", 30.0, id="seconds"),
        pytest.param("10m", 600.0, id="minutes"),
        pytest.param("1m30s", 90.0, id="compound"),
    ],
)
def test_parse_waiting_time(text: str, want: float) -> None:
    assert parse_waiting_time(text) == want


def test_parse_groups_and_group_id() -> None:
    assert parse_groups("", "ns/a") == ("ns/a",)
    assert parse_groups('["ns/b", "ns/a"]', "ns/a") == ("ns/a", "ns/b")
    assert group_id(["ns/b", "ns/a"]) == "ns/a,ns/b"


@pytest.mark.parametrize(
    ("policy", "counts", "want"),
    [
        pytest.param("only-waiting", (3, 2, 5, True), False, id="only-waiting-ignores-bound-and-once"),
        pytest.param("only-waiting", (3, 3, 0, False), True, id="only-waiting-enough"),
        pytest.param("waiting-and-running", (3, 1, 2, False), True, id="waiting-plus-bound"),
        pytest.param("waiting-and-running", (3, 1, 1, True), False, id="waiting-plus-bound-short"),
        pytest.param("once-satisfied", (3, 1, 0, True), True, id="once-satisfied-group"),
        pytest.param("once-satisfied", (3, 2, 2, False), False, id="once-satisfied-not-yet"),
        pytest.param("once-satisfied", (3, 3, 0, False), True, id="once-satisfied-enough-waiting"),
    ],
)
def test_gang_valid_for_permit(policy: str, counts: tuple[int, int, int, bool], want: bool) -> None:
    """``counts``: min-available, waiting, bound, group once-satisfied."""
    min_member, waiting, bound, once = counts
    assert gang_valid_for_permit(policy, min_member, waiting, bound, once) is want
