"""``reservationSelectorIndex``: the white-list index's candidate nodes (Koordinator
``FilterByReservationSelector``) as a table, and owner pods through the whole scheduler."""

from __future__ import annotations

import json
from typing import Any

import pytest
from prometheus_client import generate_latest

from apis.config.reservation_args import ReservationSelectorIndex
from apis.scheduling import ANNOTATION_RESERVATION_AFFINITY, ANNOTATION_RESERVATION_ALLOCATED
from koord_scheduler.plugins.reservation.selector_index import SelectorIndex, candidate_nodes
from tests.builders import make_node, make_pod
from tests.unit.scheduler.plugins.reservation.harness import PROFILE, make_reservation, run

INDEX = SelectorIndex(prefixes=("team.example.com/", "team"), keys=frozenset({"tenant"}))
PLACED = [
    ({"tenant": "a"}, "n1"),
    ({"tenant": "b"}, "n2"),
    ({"team.example.com/x": "1"}, "n2"),
    ({"team.example.com/y": "1"}, "n3"),
    ({"teamwork": "1", "tenant": "a"}, "n4"),
    ({"tenant": "a"}, ""),
]


@pytest.mark.parametrize(
    ("selector", "want"),
    [
        pytest.param({}, None, id="empty-selector-miss"),
        pytest.param({"zone": "z1"}, None, id="not-white-listed-miss"),
        pytest.param({"tenant": "a"}, {"n1", "n4"}, id="exact-key-value"),
        pytest.param({"tenant": "c"}, set(), id="exact-key-no-such-value"),
        pytest.param({"team.example.com/z": "9"}, {"n2", "n3"}, id="prefix-ignores-value"),
        pytest.param({"teamwork": "x"}, {"n4"}, id="second-prefix"),
        pytest.param({"tenant": "b", "team.example.com/q": "1"}, {"n2"}, id="smallest-bucket"),
        pytest.param({"tenant": "c", "team.example.com/q": "1"}, set(), id="an-empty-bucket-wins"),
        pytest.param({"tenant": "a", "zone": "z1"}, {"n1", "n4"}, id="unlisted-keys-ignored"),
    ],
)
def test_candidate_nodes(selector: dict[str, str], want: set[str] | None) -> None:
    got = candidate_nodes(INDEX, selector, PLACED)
    assert (None if got is None else set(got)) == want


def test_first_matching_prefix_owns_the_key() -> None:
    """A label key under two prefixes is indexed under the first configured one only."""
    index = SelectorIndex(prefixes=("a/", "a/b/"), keys=frozenset())
    assert candidate_nodes(index, {"a/b/c": "1"}, [({"a/b/c": "1"}, "n1")]) == {"n1"}
    index = SelectorIndex(prefixes=("a/b/", "a/"), keys=frozenset())
    assert candidate_nodes(index, {"a/x": "1"}, [({"a/b/c": "1"}, "n1")]) == set()


@pytest.mark.parametrize(
    ("args", "want"),
    [
        pytest.param(ReservationSelectorIndex(), None, id="disabled"),
        pytest.param(ReservationSelectorIndex(enabled=True, keys=(" ", "")), None, id="only-blanks"),
        pytest.param(
            ReservationSelectorIndex(enabled=True, key_prefixes=(" p/", "p/", "q/"), keys=(" k ",)),
            SelectorIndex(("p/", "q/"), frozenset({"k"})),
            id="trimmed-and-deduplicated",
        ),
    ],
)
def test_from_args(args: ReservationSelectorIndex, want: SelectorIndex | None) -> None:
    assert SelectorIndex.from_args(args) == want


def profile(index: bool) -> str:
    if not index:
        return PROFILE
    return (
        PROFILE
        + """  pluginConfig:
  - name: Reservation
    args: {reservationSelectorIndex: {enabled: true, keys: [tenant]}}
"""
    )


def nodes() -> list[Any]:
    plain = make_node("n1").capacity(cpu="4", memory="16Gi", pods=110).build()
    labelled = make_node("n2").capacity(cpu="4", memory="16Gi", pods=110).label("tenant", "a").build()
    return [plain, labelled]


def owner() -> Any:
    affinity = json.dumps({"reservationSelector": {"tenant": "a"}})
    return make_pod("w").req(cpu="2").label("app", "web").annotation(ANNOTATION_RESERVATION_AFFINITY, affinity)


@pytest.mark.parametrize("index", [False, True], ids=["no-index", "index"])
async def test_index_leaves_out_reservations_matching_only_through_node_labels(index: bool) -> None:
    """ "via-node" has no tenant label; its node has. Without the index the selector sees reservation
    labels over node labels and the pod uses it; with ``tenant`` white-listed no reservation carries the
    label, so the pod (which requires a reservation) finds none, as in Koordinator."""
    r = await run(
        nodes(),
        [make_reservation("via-node").req(cpu="2").owner_labels(app="web").available("n2")],
        [owner().build()],
        profile=profile(index),
    )
    text = r.cluster.pods["default/w"].annotations.get(ANNOTATION_RESERVATION_ALLOCATED)
    if index:
        assert text is None and r.node_of("w") == ""
        assert "no reservations match reservation affinity" in r.scheduler.outcomes["default/w"].message
    else:
        assert text is not None and json.loads(text)["name"] == "via-node"
    metrics = generate_latest(r.scheduler.metrics.registry).decode()
    hits = 'scheduler_reservation_selector_index_query_total{result="hit"}' in metrics
    assert hits is index


async def test_index_narrows_to_the_labelled_reservation() -> None:
    r = await run(
        nodes(),
        [
            make_reservation("labelled").req(cpu="2").owner_labels(app="web").label("tenant", "a").available("n1"),
            make_reservation("other").req(cpu="2").owner_labels(app="web").label("tenant", "b").available("n2"),
        ],
        [owner().build()],
        profile=profile(True),
    )
    text = r.cluster.pods["default/w"].annotations.get(ANNOTATION_RESERVATION_ALLOCATED)
    assert text is not None and json.loads(text)["name"] == "labelled"
    metrics = generate_latest(r.scheduler.metrics.registry).decode()
    assert "scheduler_reservation_selector_index_candidates_count_count 1.0" in metrics
