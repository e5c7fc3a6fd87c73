"""InterPodAffinity: Filter reasons and order, symmetry, namespaces/namespaceSelector, matchLabelKeys,
Score/NormalizeScore hand-computed rows (after upstream ``filtering_test.go`` / ``scoring_test.go``),
args, and PreFilterExtensions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from apis.config.plugin_args import InterPodAffinityArgs
from apis.core.parse import parse_pod
from apis.core.types import Node, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.plugins.interpodaffinity import plugin as ipa
from tests.builders import PodBuilder, make_node, make_pod
from tests.fwtest import FakeHandle, filter_statuses, make_snapshot, scores

OK = Status()
AFFINITY = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ipa.ERR_REASON_AFFINITY_RULES_NOT_MATCH,))
ANTI = Status(Code.UNSCHEDULABLE, (ipa.ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,))
EXISTING = Status(Code.UNSCHEDULABLE, (ipa.ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,))
FOO = {"foo": "bar"}

# n1, n2 share region r1 (zones z11, z12); n3 is region r2; n4 has no region/zone labels.
NODES = [
    make_node("n1").labels({"region": "r1", "zone": "z11"}).build(),
    make_node("n2").labels({"region": "r1", "zone": "z12"}).build(),
    make_node("n3").labels({"region": "r2", "zone": "z21"}).build(),
    make_node("n4").build(),
]


def plugin(namespace_labels: Any = None, **args: Any) -> ipa.InterPodAffinity:
    p = ipa.new(InterPodAffinityArgs.model_validate(args) if args else None, FakeHandle(make_snapshot([])))
    if namespace_labels is not None:
        p._namespace_labels = namespace_labels
    return p


def on(builder: PodBuilder, node: str) -> Pod:
    return builder.node(node).build()


def edit_terms(builder: PodBuilder, **fields: Any) -> Pod:
    """Set extra fields (namespaceSelector, matchLabelKeys...) on every pod (anti-)affinity term."""
    obj = builder.obj()
    for kind in ("podAffinity", "podAntiAffinity"):
        section = obj["spec"].get("affinity", {}).get(kind, {})
        for term in section.get("requiredDuringSchedulingIgnoredDuringExecution", []):
            term.update(fields)
        for weighted in section.get("preferredDuringSchedulingIgnoredDuringExecution", []):
            weighted["podAffinityTerm"].update(fields)
    return parse_pod(obj)


def run(
    pod: Pod, pods: Sequence[Pod], nodes: Sequence[Node] = NODES, p: ipa.InterPodAffinity | None = None
) -> dict[str, Status]:
    return filter_statuses(p or plugin(), pod, make_snapshot(nodes, pods))


@pytest.mark.parametrize(
    ("pod", "pods", "want"),
    [
        pytest.param(
            make_pod("p").build(),
            [on(make_pod("e").labels(FOO), "n1")],
            {"n1": OK, "n2": OK, "n3": OK, "n4": OK},
            id="no-terms-skip",
        ),
        pytest.param(
            make_pod("p").pod_affinity("region", FOO).build(),
            [on(make_pod("e").labels(FOO), "n1")],
            {"n1": OK, "n2": OK, "n3": AFFINITY, "n4": AFFINITY},
            id="affinity-same-region-passes-other-region-and-unlabelled-fail",
        ),
        pytest.param(
            make_pod("p").pod_affinity("region", FOO).build(),
            [on(make_pod("e", "other").labels(FOO), "n1")],
            {"n1": AFFINITY, "n2": AFFINITY, "n3": AFFINITY, "n4": AFFINITY},
            id="affinity-pod-in-other-namespace-does-not-match",
        ),
        pytest.param(
            # No pod matches anywhere and the pod matches its own term: passes where the key exists.
            make_pod("p").labels(FOO).pod_affinity("region", FOO).build(),
            [],
            {"n1": OK, "n2": OK, "n3": OK, "n4": AFFINITY},
            id="affinity-first-pod-of-self-affine-group",
        ),
        pytest.param(
            make_pod("p").pod_affinity("region", FOO).build(),
            [],
            {"n1": AFFINITY, "n2": AFFINITY, "n3": AFFINITY, "n4": AFFINITY},
            id="affinity-no-match-and-not-self-matching",
        ),
        pytest.param(
            # Two terms: an existing pod must match both.
            make_pod("p").pod_affinity("region", FOO).pod_affinity("zone", {"app": "db"}).build(),
            [on(make_pod("e1").labels(FOO), "n1"), on(make_pod("e2").labels({"app": "db"}), "n1")],
            {"n1": AFFINITY, "n2": AFFINITY, "n3": AFFINITY, "n4": AFFINITY},
            id="affinity-terms-must-be-matched-by-one-pod",
        ),
        pytest.param(
            make_pod("p").pod_affinity("region", FOO).pod_affinity("zone", {"app": "db"}).build(),
            [on(make_pod("e1").labels({**FOO, "app": "db"}), "n1")],
            {"n1": OK, "n2": AFFINITY, "n3": AFFINITY, "n4": AFFINITY},
            id="affinity-two-terms-region-and-zone",
        ),
        pytest.param(
            make_pod("p").pod_affinity("zone", FOO, anti=True).build(),
            [on(make_pod("e").labels(FOO), "n1")],
            {"n1": ANTI, "n2": OK, "n3": OK, "n4": OK},
            id="anti-affinity-same-zone-fails",
        ),
        pytest.param(
            make_pod("p").pod_affinity("region", FOO, anti=True).build(),
            [on(make_pod("e").labels(FOO), "n1")],
            {"n1": ANTI, "n2": ANTI, "n3": OK, "n4": OK},
            id="anti-affinity-region-fails-whole-region",
        ),
        pytest.param(
            make_pod("p").labels({"app": "web"}).build(),
            [on(make_pod("e").pod_affinity("region", {"app": "web"}, anti=True), "n1")],
            {"n1": EXISTING, "n2": EXISTING, "n3": OK, "n4": OK},
            id="existing-anti-affinity-symmetry",
        ),
        pytest.param(
            make_pod("p", "other").labels({"app": "web"}).build(),
            [on(make_pod("e").pod_affinity("region", {"app": "web"}, anti=True), "n1")],
            {"n1": OK, "n2": OK, "n3": OK, "n4": OK},
            id="existing-anti-affinity-other-namespace-skip",
        ),
        pytest.param(
            # Order: affinity (unresolvable) before anti-affinity before existing anti-affinity.
            make_pod("p")
            .labels({"app": "web"})
            .pod_affinity("region", FOO)
            .pod_affinity("zone", {"app": "db"}, anti=True)
            .build(),
            [
                on(make_pod("e1").labels(FOO), "n1"),
                on(make_pod("e2").labels({"app": "db"}), "n2"),
                on(make_pod("e3").pod_affinity("zone", {"app": "web"}, anti=True), "n3"),
            ],
            {"n1": OK, "n2": ANTI, "n3": AFFINITY, "n4": AFFINITY},
            id="reason-order",
        ),
    ],
)
def test_filter_table(pod: Pod, pods: list[Pod], want: dict[str, Status]) -> None:
    assert run(pod, pods) == want


def test_existing_anti_affinity_reason_when_own_rules_pass() -> None:
    pod = make_pod("p").labels({"app": "web"}).pod_affinity("region", FOO).build()
    pods = [
        on(make_pod("e1").labels(FOO), "n1"),
        on(make_pod("e2").pod_affinity("zone", {"app": "web"}, anti=True), "n2"),
    ]
    assert run(pod, pods) == {"n1": OK, "n2": EXISTING, "n3": AFFINITY, "n4": AFFINITY}


def test_skip_when_nothing_to_check() -> None:
    snap = make_snapshot(NODES, [on(make_pod("e").pod_affinity("region", {"app": "db"}, anti=True), "n1")])
    # An existing anti-affinity pod that does not match the incoming pod: still Skip.
    _, status = plugin().pre_filter(CycleState(), make_pod("p").labels({"app": "web"}).build(), snap)
    assert status.code == Code.SKIP


@pytest.mark.parametrize(
    ("fields", "namespace_labels", "want_n1"),
    [
        pytest.param({}, None, AFFINITY, id="default-own-namespace-only"),
        pytest.param({"namespaces": ["other"]}, None, OK, id="namespaces-list"),
        pytest.param({"namespaceSelector": {}}, None, OK, id="empty-namespace-selector-matches-all"),
        pytest.param(
            {"namespaceSelector": {"matchLabels": {"team": "a"}}},
            None,
            AFFINITY,
            id="namespace-selector-unknown-namespace-labels-no-match",
        ),
        pytest.param(
            {"namespaceSelector": {"matchLabels": {"team": "a"}}},
            lambda ns: {"team": "a"} if ns == "other" else None,
            OK,
            id="namespace-selector-with-lister",
        ),
    ],
)
def test_namespaces(fields: dict[str, Any], namespace_labels: Any, want_n1: Status) -> None:
    pod = edit_terms(make_pod("p").pod_affinity("region", FOO), **fields)
    got = run(pod, [on(make_pod("e", "other").labels(FOO), "n1")], p=plugin(namespace_labels))
    assert got["n1"] == want_n1


def test_match_label_keys_merge() -> None:
    # Anti-affinity per revision: only the pod with the same rev repels.
    pods = [on(make_pod("e1").labels({**FOO, "rev": "1"}), "n1"), on(make_pod("e3").labels({**FOO, "rev": "2"}), "n3")]
    pod = edit_terms(make_pod("p").labels({"rev": "2"}).pod_affinity("region", FOO, anti=True), matchLabelKeys=["rev"])
    assert run(pod, pods) == {"n1": OK, "n2": OK, "n3": ANTI, "n4": OK}
    pod = edit_terms(
        make_pod("p").labels({"rev": "2"}).pod_affinity("region", FOO, anti=True), mismatchLabelKeys=["rev"]
    )
    assert run(pod, pods) == {"n1": ANTI, "n2": ANTI, "n3": OK, "n4": OK}


# ----- Score -----


@pytest.mark.parametrize(
    ("pod", "pods", "args", "want"),
    [
        pytest.param(
            make_pod("p").pod_affinity("region", FOO, weight=5).build(),
            [on(make_pod("e").labels(FOO), "n1")],
            {},
            {"n1": 100, "n2": 100, "n3": 0, "n4": 0},
            id="preferred-affinity-region-r1-plus-5",
        ),
        pytest.param(
            make_pod("p").pod_affinity("region", FOO, anti=True, weight=5).build(),
            [on(make_pod("e").labels(FOO), "n1")],
            {},
            {"n1": 0, "n2": 0, "n3": 100, "n4": 100},
            id="preferred-anti-affinity-region-r1-minus-5",
        ),
        pytest.param(
            # z11 +8, r1 -2: n1 6, n2 -2, n3 0, n4 0; min -2, max 6: n3 = int(100 * 2 / 8) = 25.
            make_pod("p").pod_affinity("zone", FOO, weight=8).pod_affinity("region", FOO, anti=True, weight=2).build(),
            [on(make_pod("e").labels(FOO), "n1")],
            {},
            {"n1": 100, "n2": 0, "n3": 25, "n4": 25},
            id="mixed-weights-min-max",
        ),
        pytest.param(
            # hardPodAffinityWeight 1: existing required affinity matching the incoming pod, r1 +1.
            make_pod("p").labels({"app": "web"}).build(),
            [on(make_pod("e").pod_affinity("region", {"app": "web"}), "n1")],
            {},
            {"n1": 100, "n2": 100, "n3": 0, "n4": 0},
            id="existing-required-affinity-hard-weight",
        ),
        pytest.param(
            make_pod("p").labels({"app": "web"}).build(),
            [on(make_pod("e").pod_affinity("region", {"app": "web"}, weight=3, anti=True), "n1")],
            {},
            {"n1": 0, "n2": 0, "n3": 100, "n4": 100},
            id="existing-preferred-anti-affinity-symmetry",
        ),
        pytest.param(
            # Existing preferred affinity +4 on r1 and the incoming pod's own preferred anti -1 on z21:
            # n1 4, n2 4, n3 -1, n4 0: n4 = int(100 * 1 / 5) = 20.
            make_pod("p").labels({"app": "web"}).pod_affinity("zone", {"app": "db"}, anti=True, weight=1).build(),
            [
                on(make_pod("e").pod_affinity("region", {"app": "web"}, weight=4), "n1"),
                on(make_pod("d").label("app", "db"), "n3"),
            ],
            {},
            {"n1": 100, "n2": 100, "n3": 0, "n4": 20},
            id="existing-preferred-plus-own-anti",
        ),
    ],
)
def test_score_table(pod: Pod, pods: list[Pod], args: dict[str, Any], want: dict[str, int]) -> None:
    assert scores(plugin(**args), pod, make_snapshot(NODES, pods)) == want


def test_raw_scores() -> None:
    pod = make_pod("p").pod_affinity("zone", FOO, weight=8).pod_affinity("region", FOO, anti=True, weight=2).build()
    snap = make_snapshot(NODES, [on(make_pod("e").labels(FOO), "n1")])
    assert scores(plugin(), pod, snap, normalize=False) == {"n1": 6, "n2": -2, "n3": 0, "n4": 0}


@pytest.mark.parametrize(
    ("args", "pod", "want_skip"),
    [
        pytest.param(
            {"hardPodAffinityWeight": 0},
            make_pod("p").labels({"app": "web"}).build(),
            False,
            id="hard-weight-0-existing-preferred-still-scores",
        ),
        pytest.param(
            {"ignorePreferredTermsOfExistingPods": True},
            make_pod("p").labels({"app": "web"}).build(),
            True,
            id="ignore-existing-preferred-without-own-terms-skips",
        ),
        pytest.param(
            {"ignorePreferredTermsOfExistingPods": True},
            make_pod("p").labels({"app": "web"}).pod_affinity("zone", FOO, weight=1).build(),
            False,
            id="ignore-existing-preferred-with-own-terms-still-scores",
        ),
        pytest.param({}, make_pod("p").labels({"app": "other"}).build(), True, id="no-matching-terms-skip"),
    ],
)
def test_pre_score_skip(args: dict[str, Any], pod: Pod, want_skip: bool) -> None:
    pods = [
        on(make_pod("e").pod_affinity("region", {"app": "web"}), "n1"),
        on(make_pod("f").pod_affinity("region", {"app": "web"}, weight=3), "n1"),
    ]
    snap = make_snapshot(NODES, pods)
    status = plugin(**args).pre_score(CycleState(), pod, snap, snap.node_order())
    assert status.is_skip == want_skip


def test_hard_weight_0_ignores_existing_required_affinity() -> None:
    snap = make_snapshot(NODES, [on(make_pod("e").pod_affinity("region", {"app": "web"}), "n1")])
    pod = make_pod("p").labels({"app": "web"}).build()
    assert plugin(hardPodAffinityWeight=0).pre_score(CycleState(), pod, snap, snap.node_order()).is_skip
    assert scores(plugin(hardPodAffinityWeight=7), pod, snap, normalize=False) == {"n1": 7, "n2": 7, "n3": 0, "n4": 0}


def test_ignore_existing_preferred_still_counts_them_when_pod_has_terms() -> None:
    # Upstream only uses the flag to Skip; with own terms the existing preferred term (+3 on r1) counts.
    pod = make_pod("p").labels({"app": "web"}).pod_affinity("zone", {"x": "y"}, weight=1).build()
    snap = make_snapshot(NODES, [on(make_pod("f").pod_affinity("region", {"app": "web"}, weight=3), "n1")])
    got = scores(plugin(ignorePreferredTermsOfExistingPods=True), pod, snap, normalize=False)
    assert got == {"n1": 3, "n2": 3, "n3": 0, "n4": 0}


# ----- PreFilterExtensions -----


def test_add_and_remove_pod() -> None:
    p = plugin()
    snap = make_snapshot(NODES, [])
    pod = make_pod("p").labels({"app": "web"}).pod_affinity("zone", FOO, anti=True).build()
    state = CycleState()
    _, status = p.pre_filter(state, pod, snap)
    assert status.is_success
    clone = state.clone()
    ext = p.pre_filter_extensions()
    n1 = snap.node_info("n1")
    n3 = snap.node_info("n3")
    assert n1 is not None and n3 is not None
    ext.add_pod(clone, pod, on(make_pod("e").labels(FOO), "n1"), n1)
    # An added pod whose own anti-affinity matches the incoming pod blocks its region (symmetry).
    ext.add_pod(clone, pod, on(make_pod("f").pod_affinity("region", {"app": "web"}, anti=True), "n3"), n3)
    positions = snap.node_order()
    names = [snap.info(int(i)).name for i in positions]

    def statuses(s: CycleState) -> dict[str, int]:
        result = p.filter_nodes(s, pod, snap, positions)
        return {n: (0 if result.passed[i] else int(result.reason_ids[i])) for i, n in enumerate(names)}  # type: ignore[index]

    assert statuses(clone) == {"n1": 2, "n2": 0, "n3": 3, "n4": 0}
    assert statuses(state) == {"n1": 0, "n2": 0, "n3": 0, "n4": 0}
    ext.remove_pod(clone, pod, on(make_pod("e").labels(FOO), "n1"), n1)
    assert statuses(clone) == {"n1": 0, "n2": 0, "n3": 3, "n4": 0}
