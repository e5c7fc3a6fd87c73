"""NodeAffinity: policy tables, PreFilter (Skip, matchFields node names, conflict), Filter reasons,
added affinity, preferred Score + NormalizeScore, cache invalidation, queueing hints."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from apis.config.plugin_args import NodeAffinityArgs
from apis.core.types import (
    Node,
    NodeSelectorTerm,
    Operator,
    Pod,
    SelectorRequirement,
)
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.framework.types import PreFilterResult, QueueingHint
from koord_scheduler.plugins.nodeaffinity import plugin as nodeaffinity
from koord_scheduler.plugins.nodeaffinity.policy import (
    pre_filter_node_names,
    preferred_score,
    required_mask,
)
from tests.builders import make_node, make_pod
from tests.fwtest import FakeHandle, filter_statuses, make_snapshot, scores

POD_MISMATCH = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) didn't match Pod's node affinity/selector",))
ENFORCED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) didn't match scheduler-enforced node affinity",))
CONFLICT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("pod affinity terms conflict",))
OK = Status()


def names_term(*names: str) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_fields=(SelectorRequirement("metadata.name", Operator.IN, names),))


def label_term(key: str, op: Operator, *values: str) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=(SelectorRequirement(key, op, values),))


def nodes() -> list[Node]:
    return [
        make_node("n1").label("zone", "a").label("cores", "8").build(),
        make_node("n2").label("zone", "b").label("cores", "32").build(),
        make_node("n3").label("zone", "a").label("gpu", "true").build(),
    ]


def plugin(added: dict[str, Any] | None = None) -> nodeaffinity.NodeAffinity:
    args = NodeAffinityArgs.model_validate({"addedAffinity": added}) if added is not None else None
    return nodeaffinity.new(args, FakeHandle(make_snapshot([])))


# ----- policy -----


@pytest.mark.parametrize(
    ("terms", "want"),
    [
        pytest.param((names_term("n1", "n2"),), frozenset({"n1", "n2"}), id="one-term-names"),
        pytest.param((names_term("n1"), names_term("n3")), frozenset({"n1", "n3"}), id="terms-ored-union"),
        pytest.param(
            (NodeSelectorTerm(match_fields=(*names_term("n1", "n2").match_fields, *names_term("n2").match_fields)),),
            frozenset({"n2"}),
            id="requirements-anded-intersection",
        ),
        pytest.param((names_term("n1"), label_term("zone", Operator.IN, "a")), None, id="term-without-names-all"),
        pytest.param(
            (NodeSelectorTerm(match_fields=(SelectorRequirement("metadata.name", Operator.NOT_IN, ("n1",)),)),),
            None,
            id="notin-field-is-not-a-name-list",
        ),
        pytest.param(
            (NodeSelectorTerm(match_fields=(*names_term("n1").match_fields, *names_term("n2").match_fields)),),
            frozenset(),
            id="conflicting-names-empty",
        ),
        pytest.param((), None, id="no-terms"),
    ],
)
def test_pre_filter_node_names(terms: tuple[NodeSelectorTerm, ...], want: frozenset[str] | None) -> None:
    assert pre_filter_node_names(terms) == want


@pytest.mark.parametrize(
    ("node_selector", "terms", "want"),
    [
        pytest.param({"zone": "a"}, None, [True, False, True], id="node-selector"),
        pytest.param({"zone": "a", "gpu": "true"}, None, [False, False, True], id="node-selector-all-labels"),
        pytest.param({}, None, [True, True, True], id="empty-node-selector-matches-all"),
        pytest.param(None, (label_term("zone", Operator.IN, "b"),), [False, True, False], id="in"),
        pytest.param(None, (label_term("zone", Operator.NOT_IN, "b"),), [True, False, True], id="notin"),
        pytest.param(None, (label_term("gpu", Operator.EXISTS),), [False, False, True], id="exists"),
        pytest.param(None, (label_term("gpu", Operator.DOES_NOT_EXIST),), [True, True, False], id="doesnotexist"),
        pytest.param(None, (label_term("cores", Operator.GT, "10"),), [False, True, False], id="gt"),
        pytest.param(None, (label_term("cores", Operator.LT, "10"),), [True, False, False], id="lt"),
        pytest.param(
            None,
            (label_term("zone", Operator.IN, "b"), label_term("gpu", Operator.EXISTS)),
            [False, True, True],
            id="terms-ored",
        ),
        pytest.param(None, (names_term("n2"),), [False, True, False], id="match-fields-name"),
        pytest.param(
            {"zone": "a"},
            (label_term("gpu", Operator.EXISTS),),
            [False, False, True],
            id="selector-and-affinity",
        ),
        pytest.param(None, (), [False, False, False], id="empty-required-terms-match-nothing"),
        pytest.param(None, (NodeSelectorTerm(),), [False, False, False], id="empty-term-matches-nothing"),
    ],
)
def test_required_mask(
    node_selector: dict[str, str] | None, terms: tuple[NodeSelectorTerm, ...] | None, want: list[bool]
) -> None:
    mask = required_mask((node_selector, terms), list(enumerate(nodes())), capacity=4)
    assert mask.tolist() == [*want, False]


def test_preferred_score() -> None:
    masks = [(5, np.array([True, False, True])), (2, np.array([True, True, False]))]
    assert preferred_score(masks, np.array([2, 1, 0], dtype=np.intp)).tolist() == [5, 2, 7]


# ----- PreFilter -----


@pytest.mark.parametrize(
    ("pod", "added", "want_result", "want_status"),
    [
        pytest.param(make_pod("p").build(), None, None, Status(Code.SKIP), id="nothing-to-check-skips"),
        pytest.param(make_pod("p").node_selector(zone="a").build(), None, None, OK, id="node-selector"),
        pytest.param(
            make_pod("p").build(),
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
                }
            },
            None,
            OK,
            id="added-affinity-does-not-skip",
        ),
        pytest.param(
            make_pod("p").build(),
            {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    }
                ]
            },
            None,
            Status(Code.SKIP),
            id="added-preferred-only-skips",
        ),
        pytest.param(
            make_pod("p").node_name_affinity("n1", "n3").build(),
            None,
            PreFilterResult(frozenset({"n1", "n3"})),
            OK,
            id="match-fields-node-names",
        ),
        pytest.param(
            make_pod("p").node_name_affinity("n1").node_name_affinity("n2").build(),
            None,
            None,
            CONFLICT,
            id="pod-affinity-terms-conflict",
        ),
        pytest.param(
            make_pod("p").node_name_affinity("n1").node_affinity("zone", "In", ["a"], term=1).build(),
            None,
            None,
            OK,
            id="term-without-names-means-all-nodes",
        ),
    ],
)
def test_pre_filter(
    pod: Pod, added: dict[str, Any] | None, want_result: PreFilterResult | None, want_status: Status
) -> None:
    assert plugin(added).pre_filter(CycleState(), pod, make_snapshot(nodes())) == (want_result, want_status)


# ----- Filter -----

ZONE_A = {
    "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
    }
}


@pytest.mark.parametrize(
    ("pod", "added", "want"),
    [
        pytest.param(
            make_pod("p").node_selector(zone="a").build(),
            None,
            {"n1": OK, "n2": POD_MISMATCH, "n3": OK},
            id="node-selector",
        ),
        pytest.param(
            make_pod("p").node_affinity("gpu", "Exists").build(),
            None,
            {"n1": POD_MISMATCH, "n2": POD_MISMATCH, "n3": OK},
            id="required-affinity",
        ),
        pytest.param(
            make_pod("p").node_name_affinity("n2").build(),
            None,
            {"n1": POD_MISMATCH, "n2": OK, "n3": POD_MISMATCH},
            id="match-fields-checked-in-filter",
        ),
        pytest.param(make_pod("p").build(), ZONE_A, {"n1": OK, "n2": ENFORCED, "n3": OK}, id="added-affinity"),
        pytest.param(
            make_pod("p").node_affinity("gpu", "Exists").build(),
            ZONE_A,
            {"n1": POD_MISMATCH, "n2": ENFORCED, "n3": OK},
            id="added-reason-first-then-pod",
        ),
    ],
)
def test_filter(pod: Pod, added: dict[str, Any] | None, want: dict[str, Status]) -> None:
    snap = make_snapshot(nodes())
    assert filter_statuses(plugin(added), pod, snap) == want


def test_filter_cache_follows_label_changes() -> None:
    snap = make_snapshot(nodes())
    pl = plugin()
    pod = make_pod("p").node_selector(zone="b").build()
    assert filter_statuses(pl, pod, snap) == {"n1": POD_MISMATCH, "n2": OK, "n3": POD_MISMATCH}
    snap.upsert_node(make_node("n1").label("zone", "b").build())
    snap.upsert_node(make_node("n2").label("zone", "c").build())
    assert filter_statuses(pl, pod, snap) == {"n1": OK, "n2": POD_MISMATCH, "n3": POD_MISMATCH}


# ----- Score -----


@pytest.mark.parametrize(
    ("pod", "added", "want"),
    [
        pytest.param(
            make_pod("p")
            .preferred_node_affinity(10, "zone", "In", ["a"])
            .preferred_node_affinity(30, "gpu", "Exists")
            .build(),
            None,
            {"n1": 25, "n2": 0, "n3": 100},
            id="weights-summed-then-normalized",
        ),
        pytest.param(
            make_pod("p").preferred_node_affinity(0, "zone", "In", ["a"]).build(),
            None,
            {},
            id="weight-zero-ignored-skips",
        ),
        pytest.param(
            make_pod("p").preferred_node_affinity(3, "zone", "In", ["b"]).build(),
            {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}}
                ]
            },
            {"n1": 0, "n2": 100, "n3": 33},
            id="added-preferred-terms-count",
        ),
        pytest.param(make_pod("p").build(), None, {}, id="no-preferred-terms-skips"),
    ],
)
def test_score(pod: Pod, added: dict[str, Any] | None, want: dict[str, int]) -> None:
    snap = make_snapshot(nodes())
    assert scores(plugin(added), pod, snap) == want


def test_raw_score_and_cache_follow_label_changes() -> None:
    snap = make_snapshot(nodes())
    pl = plugin()
    pod = make_pod("p").preferred_node_affinity(10, "zone", "In", ["a"]).build()
    assert scores(pl, pod, snap, normalize=False) == {"n1": 10, "n2": 0, "n3": 10}
    snap.upsert_node(make_node("n2").label("zone", "a").build())
    assert scores(pl, pod, snap, normalize=False) == {"n1": 10, "n2": 10, "n3": 10}


# ----- queueing -----


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, make_node("n").label("zone", "a").build(), QueueingHint.QUEUE, id="matching-node-added"),
        pytest.param(None, make_node("n").label("zone", "b").build(), QueueingHint.SKIP, id="other-node-added"),
        pytest.param(
            make_node("n").label("zone", "b").build(),
            make_node("n").label("zone", "a").build(),
            QueueingHint.QUEUE,
            id="label-now-matches",
        ),
        pytest.param(
            make_node("n").label("zone", "a").build(),
            make_node("n").label("zone", "a").build(),
            QueueingHint.SKIP,
            id="matched-before",
        ),
    ],
)
def test_node_hint(old: Node | None, new: Node, want: QueueingHint) -> None:
    pod = make_pod("p").node_selector(zone="a").build()
    assert plugin().is_schedulable_after_node_change(pod, old, new) == want


def test_node_hint_respects_added_affinity() -> None:
    pod = make_pod("p").build()
    pl = plugin(ZONE_A)
    assert pl.is_schedulable_after_node_change(pod, None, make_node("n").label("zone", "b").build()) == (
        QueueingHint.SKIP
    )
    assert pl.is_schedulable_after_node_change(pod, None, make_node("n").label("zone", "a").build()) == (
        QueueingHint.QUEUE
    )
