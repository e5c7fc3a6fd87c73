"""The ``scheduling.koordinator.sh/exact-match-reservation`` annotation: the rule (Koordinator
``ExactMatchReservation``) as a table, its parsing, and owner pods through the whole scheduler."""

from __future__ import annotations

import json

import pytest

from apis.scheduling import ANNOTATION_RESERVATION_ALLOCATED
from koord_scheduler.plugins.reservation.matching import exact_match, parse_exact_match, pod_intent
from tests.builders import PodBuilder, make_node, make_pod
from tests.unit.scheduler.plugins.reservation.harness import make_reservation, run
from tests.unit.scheduler.plugins.reservation.test_reservation_postfilter import PROFILE_WITH_POSTFILTER

EXACT = "scheduling.koordinator.sh/exact-match-reservation"
GPU = "nvidia.com/gpu"
ORDER = "scheduling.koordinator.sh/reservation-order"


@pytest.mark.parametrize(
    ("requests", "allocatable", "names", "want"),
    [
        pytest.param({"cpu": 2000}, {"cpu": 2000}, (), True, id="no-names"),
        pytest.param({"cpu": 2000}, {"cpu": 2000}, ("cpu",), True, id="equal"),
        pytest.param({"cpu": 1000}, {"cpu": 2000}, ("cpu",), False, id="smaller-request"),
        pytest.param({"cpu": 3000}, {"cpu": 2000}, ("cpu",), False, id="larger-request"),
        pytest.param({"cpu": 2000, "memory": 1}, {"cpu": 2000, "memory": 2}, ("cpu",), True, id="unlisted-differs"),
        pytest.param({"cpu": 2000}, {"cpu": 2000, GPU: 1}, (GPU,), False, id="only-reservation-has-it"),
        pytest.param({"cpu": 2000, GPU: 1}, {"cpu": 2000}, (GPU,), False, id="only-pod-has-it"),
        pytest.param({"cpu": 2000}, {"cpu": 2000}, (GPU,), True, id="neither-has-it"),
        pytest.param({"cpu": 1000}, {"cpu": 2000}, (GPU, "cpu"), False, id="neither-then-differs"),
        pytest.param({"cpu": 2000, GPU: 2}, {"cpu": 2000, GPU: 2}, ("cpu", GPU), True, id="two-equal"),
    ],
)
def test_exact_match_rule(
    requests: dict[str, int], allocatable: dict[str, int], names: tuple[str, ...], want: bool
) -> None:
    assert exact_match(requests, allocatable, names) is want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param('{"resourceNames": ["cpu", "memory"]}', ("cpu", "memory"), id="two"),
        pytest.param("{}", (), id="empty-object"),
        pytest.param('{"resourceNames": null}', (), id="null-names"),
        pytest.param("not json", "not JSON", id="not-json"),
        pytest.param('["cpu"]', "must be a JSON object", id="list"),
        pytest.param('{"resourceNames": "cpu"}', "resourceNames must be a list", id="string-names"),
        pytest.param('{"resourceNames": [1]}', "resourceNames must be a list", id="number-name"),
    ],
)
def test_parse_exact_match(text: str, want: tuple[str, ...] | str) -> None:
    if isinstance(want, tuple):
        assert parse_exact_match(text) == want
        return
    with pytest.raises(ValueError, match=want):
        parse_exact_match(text)


def test_unreadable_annotation_is_an_error_naming_it() -> None:
    intent = pod_intent(make_pod("w").annotation(EXACT, "{bad").build())
    assert intent.error.startswith(f"invalid annotation {EXACT}: not JSON"), intent.error


def nodes() -> list:
    return [make_node(n).capacity(cpu="4", memory="16Gi", pods=110).build() for n in ("n1", "n2")]


def exact_pod(name: str, cpu: str) -> PodBuilder:
    return make_pod(name).req(cpu=cpu).label("app", "web").annotation(EXACT, json.dumps({"resourceNames": ["cpu"]}))


def allocated_name(r, pod: str) -> str | None:
    text = r.cluster.pods[f"default/{pod}"].annotations.get(ANNOTATION_RESERVATION_ALLOCATED)
    return json.loads(text)["name"] if text else None


async def test_owner_uses_only_the_reservation_of_exactly_its_size() -> None:
    """On one node "two" is preferred by its order label, so only exact matching sends the pod to "one"."""
    r = await run(
        nodes(),
        [
            make_reservation("two").req(cpu="2").owner_labels(app="web").label(ORDER, "1").available("n1"),
            make_reservation("one").req(cpu="1").owner_labels(app="web").available("n1"),
        ],
        [exact_pod("w", "1").build()],
    )
    assert (r.node_of("w"), allocated_name(r, "w")) == ("n1", "one")


async def test_owner_with_no_exact_reservation_runs_outside_reservations() -> None:
    r = await run(
        nodes(),
        [make_reservation("two").req(cpu="2").owner_labels(app="web").available("n1")],
        [exact_pod("w", "1").build()],
    )
    assert r.node_of("w") != "" and allocated_name(r, "w") is None


async def test_failure_message_counts_not_exact_matched_reservations() -> None:
    r = await run(
        nodes(),
        [make_reservation("two").req(cpu="2").owner_labels(app="web").available("n1")],
        [exact_pod("w", "8").build()],
        profile=PROFILE_WITH_POSTFILTER,
    )
    message = r.scheduler.outcomes["default/w"].message
    assert "1 Reservation(s) is not exact matched, 1 Reservation(s) matched owner total" in message, message


async def test_unreadable_annotation_fails_the_pod_with_the_reason() -> None:
    r = await run(
        nodes(),
        [make_reservation("two").req(cpu="2").owner_labels(app="web").available("n1")],
        [make_pod("w").req(cpu="1").label("app", "web").annotation(EXACT, "{bad").build()],
    )
    assert r.node_of("w") == ""
    assert f"invalid annotation {EXACT}" in r.scheduler.outcomes["default/w"].message
