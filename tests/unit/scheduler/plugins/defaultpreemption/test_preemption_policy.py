"""Hand-computed tables for DefaultPreemption's pure decisions (kube-scheduler v1.35 rules)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from apis.core.parse import parse_pod
from apis.core.types import LabelSelector, Pod
from apis.scheduling import ANNOTATION_RESERVE_POD
from koord_scheduler.framework.status import Code, Status, unresolvable, unschedulable
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.defaultpreemption import policy
from koord_scheduler.plugins.defaultpreemption.pdb import BudgetStore, parse_pdb
from koord_scheduler.plugins.defaultpreemption.policy import Candidate, DisruptionBudget
from tests.builders import make_pod

NOW = 1_800_000_000.0
"""2027: later than every creation timestamp below."""
T0 = "2024-01-01T00:00:00Z"
T1 = "2024-01-01T00:01:00Z"
T2 = "2024-01-01T00:02:00Z"


def pod(
    name: str,
    prio: int = 0,
    *,
    created: str | None = None,
    labels: dict[str, str] | None = None,
    namespace: str = "default",
) -> Pod:
    b = make_pod(name, namespace).priority(prio)
    if created:
        b.created(created)
    for k, v in (labels or {}).items():
        b.label(k, v)
    return b.build()


def budget(
    allowed: int,
    labels: dict[str, str] | None,
    *,
    namespace: str = "default",
    name: str = "pdb",
    disrupted: frozenset[str] = frozenset(),
) -> DisruptionBudget:
    selector = None if labels is None else LabelSelector(match_labels=labels)
    return DisruptionBudget(namespace, name, selector, allowed, disrupted)


# ----- numCandidates -----


@pytest.mark.parametrize(
    ("nodes", "pct", "absolute", "want"),
    [
        pytest.param(5, 10, 100, 5, id="capped-at-node-count"),
        pytest.param(1000, 10, 100, 100, id="absolute-floor-1000-nodes"),
        pytest.param(5000, 10, 100, 500, id="percentage-5000-nodes"),
        pytest.param(1000, 0, 5, 5, id="percentage-zero-uses-absolute"),
        pytest.param(1000, 50, 0, 500, id="absolute-zero-uses-percentage"),
        pytest.param(10, 35, 0, 3, id="truncates-like-go-int32"),
    ],
)
def test_num_candidates(nodes: int, pct: int, absolute: int, want: int) -> None:
    assert policy.num_candidates(nodes, pct, absolute) == want


# ----- eligibility of victims -----


@pytest.mark.parametrize(
    ("victim", "want"),
    [
        pytest.param(pod("v", 5), True, id="lower-priority-is-preemptible"),
        pytest.param(pod("v", 10), False, id="equal-priority-is-not"),
        pytest.param(pod("v", 11), False, id="higher-priority-is-not"),
        pytest.param(
            make_pod("r").priority(1).annotation(ANNOTATION_RESERVE_POD, "true").build(),
            False,
            id="reserve-pod-never-preempted-even-with-low-priority",
        ),
    ],
)
def test_is_preemptible(victim: Pod, want: bool) -> None:
    assert policy.is_preemptible(victim, pod("p", 10)) is want


def test_importance_orders_priority_then_earlier_start() -> None:
    pods = [pod("late", 5, created=T2), pod("low", 1, created=T0), pod("early", 5, created=T0), pod("new", 5)]
    ordered = sorted(pods, key=lambda p: policy.importance_key(p, NOW))
    assert [p.name for p in ordered] == ["early", "late", "new", "low"], "no start time counts as now"


# ----- PDB split -----


@pytest.mark.parametrize(
    ("pods", "budgets", "want_violating"),
    [
        pytest.param([pod("a", labels={"app": "web"})], [], [], id="no-budgets"),
        pytest.param([pod("a")], [budget(0, {"app": "web"})], [], id="pod-without-labels-matches-nothing"),
        pytest.param([pod("a", labels={"app": "web"})], [budget(0, {"app": "web"})], ["a"], id="zero-allowed-violates"),
        pytest.param(
            [pod("a", labels={"app": "web"}), pod("b", labels={"app": "web"})],
            [budget(1, {"app": "web"})],
            ["b"],
            id="allowed-consumed-in-order",
        ),
        pytest.param(
            [pod("a", labels={"app": "web"})], [budget(0, {"app": "web"}, namespace="other")], [], id="other-namespace"
        ),
        pytest.param([pod("a", labels={"app": "web"})], [budget(0, {})], [], id="empty-selector-matches-nothing"),
        pytest.param([pod("a", labels={"app": "web"})], [budget(0, None)], [], id="nil-selector-matches-nothing"),
        pytest.param(
            [pod("a", labels={"app": "web"})],
            [budget(0, {"app": "web"}, disrupted=frozenset({"a"}))],
            [],
            id="already-disrupted-pod-costs-nothing",
        ),
        pytest.param(
            [pod("a", labels={"app": "web", "tier": "1"})],
            [budget(1, {"app": "web"}, name="x"), budget(0, {"tier": "1"}, name="y")],
            ["a"],
            id="any-matching-budget-violated",
        ),
    ],
)
def test_split_by_pdb(pods: list[Pod], budgets: list[DisruptionBudget], want_violating: list[str]) -> None:
    violating, non_violating = policy.split_by_pdb(pods, budgets)
    assert [p.name for p in violating] == want_violating
    assert [p.name for p in non_violating] == [p.name for p in pods if p.name not in want_violating]


# ----- reprieve -----


def capacity_model(free: int, sizes: dict[str, int], need: int) -> Callable[[str], bool]:
    """A node with ``free`` cpu once every candidate is off; putting one back keeps it if ``need`` still fits."""
    used = {"v": 0}

    def fits_with(name: str) -> bool:
        if free - used["v"] - sizes[name] >= need:
            used["v"] += sizes[name]
            return True
        return False

    return fits_with


@pytest.mark.parametrize(
    ("violating", "non_violating", "sizes", "free", "need", "want_victims", "want_violations"),
    [
        pytest.param(
            [],
            ["p4", "p3", "p2", "p1"],
            {"p4": 1, "p3": 1, "p2": 1, "p1": 1},
            4,
            2,
            ["p2", "p1"],
            0,
            id="most-important-reprieved-first",
        ),
        pytest.param(
            [],
            ["big", "small"],
            {"big": 3, "small": 1},
            4,
            1,
            ["small"],
            0,
            id="greedy-not-optimal-big-kept-small-evicted",
        ),
        pytest.param(["pdb"], ["x"], {"pdb": 1, "x": 1}, 2, 1, ["x"], 0, id="pdb-violating-reprieved-first"),
        pytest.param(["pdb"], ["x"], {"pdb": 1, "x": 1}, 2, 2, ["pdb", "x"], 1, id="violation-counted-when-evicted"),
        pytest.param([], ["a"], {"a": 1}, 4, 1, [], 0, id="everything-reprieved"),
    ],
)
def test_reprieve(  # noqa: PLR0917 (pytest passes parameters positionally)
    violating: list[str],
    non_violating: list[str],
    sizes: dict[str, int],
    free: int,
    need: int,
    want_victims: list[str],
    want_violations: int,
) -> None:
    victims, violations = policy.reprieve(violating, non_violating, capacity_model(free, sizes, need))
    assert (victims, violations) == (want_victims, want_violations)


def test_victims_resorted_only_when_both_groups_contributed() -> None:
    a, b = pod("a", 5, created=T0), pod("b", 9, created=T0)
    assert policy.order_victims([a, b], both_groups=True, now=NOW) == [b, a]
    assert policy.order_victims([a, b], both_groups=False, now=NOW) == [a, b]


# ----- node choice -----


def cand(node: str, *victims: Pod, pdb: int = 0) -> Candidate:
    return Candidate(node, tuple(victims), pdb)


@pytest.mark.parametrize(
    ("candidates", "want"),
    [
        pytest.param([cand("n1", pod("a", 1), pdb=1), cand("n2", pod("b", 5))], "n2", id="1-fewest-pdb-violations"),
        pytest.param(
            [cand("n1", pod("a", 5)), cand("n2", pod("b", 3), pod("c", 3))], "n2", id="2-lowest-highest-victim-priority"
        ),
        pytest.param(
            [cand("n1", pod("a", 3), pod("b", 3)), cand("n2", pod("c", 3), pod("d", 1))],
            "n2",
            id="3-smallest-priority-sum",
        ),
        pytest.param(
            [cand("n1", pod("a", -5), pod("b", -5)), cand("n2", pod("c", -5))],
            "n2",
            id="3-sum-offset-by-maxint32-so-negative-priorities-count",
        ),
        pytest.param(
            [cand("n1", pod("a", 3, created=T0)), cand("n2", pod("b", 3, created=T1))],
            "n2",
            id="5-latest-start-of-highest-priority-victims",
        ),
        pytest.param(
            [
                cand("n1", pod("a", 3, created=T2), pod("b", 1, created=T0)),
                cand("n2", pod("c", 3, created=T1), pod("d", 1, created=T2)),
            ],
            "n1",
            id="5-only-highest-priority-victims-count",
        ),
        pytest.param(
            [cand("n1", pod("a", 3, created=T0)), cand("n2", pod("b", 3, created=T0))],
            "n1",
            id="6-first-candidate-on-full-tie",
        ),
    ],
)
def test_pick_one_node(candidates: list[Candidate], want: str) -> None:
    best = policy.pick_one_node(candidates, NOW)
    assert best is not None and best.node_name == want


def test_pick_one_node_empty() -> None:
    assert policy.pick_one_node([], NOW) is None


# ----- messages -----


@pytest.mark.parametrize(
    ("num_nodes", "statuses", "want"),
    [
        pytest.param(
            1,
            [unresolvable(policy.NO_VICTIMS)],
            "0/1 nodes are available: 1 No preemption victims found for incoming pod.",
            id="single-node-no-victims",
        ),
        pytest.param(
            3, [], "0/3 nodes are available: 3 Preemption is not helpful for scheduling.", id="no-potential-nodes"
        ),
        pytest.param(
            12,
            [unschedulable("Insufficient cpu"), unresolvable(policy.NO_VICTIMS)],
            "0/12 nodes are available: 1 Insufficient cpu, 1 No preemption victims found for incoming pod, "
            "10 Preemption is not helpful for scheduling.",
            id="histogram-sorted-as-strings",
        ),
    ],
)
def test_fit_error_message(num_nodes: int, statuses: list[Status], want: str) -> None:
    assert policy.fit_error_message(num_nodes, statuses, policy.NOT_HELPFUL) == want


def test_potential_nodes_are_the_unschedulable_ones_in_node_order() -> None:
    statuses = {"a": unschedulable("x"), "b": unresolvable("y"), "c": Status(Code.UNSCHEDULABLE, ("z",))}
    assert policy.potential_nodes(statuses, ["c", "b", "a", "d"]) == ["c", "a"]


# ----- PodDisruptionBudget parsing -----


def test_parse_pdb_and_store() -> None:
    raw = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "prod"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 1},
        "status": {"disruptionsAllowed": 2, "disruptedPods": {"web-0": "2024-01-01T00:00:00Z"}},
    }
    want = DisruptionBudget("prod", "web", LabelSelector(match_labels={"app": "web"}), 2, frozenset({"web-0"}))
    assert parse_pdb(raw) == want
    store = BudgetStore()
    store.on_event(EventType.ADDED, None, want)
    assert store.list() == [want]
    store.on_event(EventType.DELETED, want, None)
    assert store.list() == []


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param({"metadata": {"name": "x"}, "status": {"disruptionsAllowed": "1"}}, id="allowed-not-int"),
        pytest.param({"metadata": {"name": "x"}, "spec": []}, id="spec-not-object"),
    ],
)
def test_parse_pdb_rejects_malformed(raw: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="PodDisruptionBudget"):
        parse_pdb(raw)


def _with_generation(builder: Any, generation: int) -> Pod:
    raw = builder.obj()
    raw["metadata"]["generation"] = generation
    return parse_pod(raw)


DISRUPTION_MESSAGE = "default-scheduler: preempting to accommodate a higher priority pod"
"""Upstream's ``"%s: preempting to accommodate a higher priority pod"`` with the preemptor's schedulerName."""


@pytest.mark.parametrize(
    ("victim", "want"),
    [
        pytest.param(
            make_pod("v").build(),
            {
                "status": {
                    "conditions": [
                        {
                            "type": "DisruptionTarget",
                            "status": "True",
                            "reason": "PreemptionByScheduler",
                            "message": DISRUPTION_MESSAGE,
                            "lastTransitionTime": "2027-01-15T08:00:00Z",
                        },
                    ]
                }
            },
            id="no-conditions-no-generation",
        ),
        pytest.param(
            _with_generation(make_pod("v").condition("PodScheduled").condition("Ready", "False"), 3),
            {
                "status": {
                    "conditions": [
                        {
                            "type": "DisruptionTarget",
                            "status": "True",
                            "reason": "PreemptionByScheduler",
                            "message": DISRUPTION_MESSAGE,
                            "lastTransitionTime": "2027-01-15T08:00:00Z",
                            "observedGeneration": 3,
                        },
                    ]
                }
            },
            id="only-the-new-condition-observed-generation-ga",
        ),
        pytest.param(
            make_pod("v").condition("DisruptionTarget", "False").condition("Ready").build(),
            {
                "status": {
                    "conditions": [
                        {
                            "type": "DisruptionTarget",
                            "status": "True",
                            "reason": "PreemptionByScheduler",
                            "message": DISRUPTION_MESSAGE,
                            "lastTransitionTime": "2027-01-15T08:00:00Z",
                        },
                    ]
                }
            },
            id="false-condition-replaced",
        ),
        pytest.param(
            make_pod("v").condition("DisruptionTarget").build(), None, id="already-a-disruption-target-no-patch"
        ),
    ],
)
def test_disruption_target_patch(victim: Pod, want: dict[str, Any] | None) -> None:
    preemptor = make_pod("high").priority(100).build()
    assert policy.disruption_target_patch(victim, preemptor, 1_800_000_000.0) == want


@pytest.mark.parametrize(
    ("wanted", "examined", "found", "want"),
    [
        pytest.param(100, 0, 0, 100, id="first-batch-is-wanted"),
        pytest.param(3, 0, 0, 16, id="first-batch-at-least-16"),
        pytest.param(100, 100, 50, 100, id="half-found-50-more-at-that-rate-capped"),
        pytest.param(100, 100, 90, 23, id="10-more-at-90pct-is-12-plus-quarter-plus-8"),
        pytest.param(100, 100, 99, 16, id="floor-16"),
        pytest.param(100, 100, 0, 100, id="nothing-found-yet-full-batch"),
    ],
)
def test_batch_size(wanted: int, examined: int, found: int, want: int) -> None:
    assert policy.batch_size(wanted, examined=examined, found=found) == want
