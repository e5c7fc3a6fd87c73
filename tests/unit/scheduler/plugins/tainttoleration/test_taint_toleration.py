"""TaintToleration: policy tables, Filter reason/code, Score + reverse NormalizeScore (hand-computed rows),
caches following taint changes, queueing hints."""

from __future__ import annotations

import numpy as np
import pytest

from apis.core.types import Node, ObjectMeta, Pod, Taint, TaintEffect, Toleration
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.framework.types import QueueingHint
from koord_scheduler.plugins.tainttoleration import plugin as tainttoleration
from koord_scheduler.plugins.tainttoleration.policy import (
    HARD_EFFECTS,
    PREFER_EFFECTS,
    count_untolerated_prefer_no_schedule,
    group_by_taints,
    prefer_no_schedule_tolerations,
    tolerated_flags,
    untolerated_counts,
)
from tests.fwtest import FakeHandle, filter_statuses, make_snapshot, scores

REJECTED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) had untolerated taint(s)",))

NO_SCHEDULE = TaintEffect.NO_SCHEDULE
NO_EXECUTE = TaintEffect.NO_EXECUTE
PREFER = TaintEffect.PREFER_NO_SCHEDULE

GPU = Taint("gpu", NO_SCHEDULE, "true")
DRAIN = Taint("drain", NO_EXECUTE)
SPOT = Taint("spot", PREFER)
OLD = Taint("old", PREFER)


def node(name: str, *taints: Taint) -> Node:
    return Node(ObjectMeta(name), taints=taints)


def pod(*tolerations: Toleration) -> Pod:
    return Pod(ObjectMeta("p", "default", uid="p"), tolerations=tolerations)


def tol(key: str, effect: TaintEffect | None = None, value: str = "", operator: str = "Equal") -> Toleration:
    return Toleration(key, operator, value, effect)


# ----- policy -----


@pytest.mark.parametrize(
    ("groups_in", "tolerations", "want"),
    [
        pytest.param({(GPU,): [1, 3]}, (), [False, True, False, True], id="untolerated-noschedule"),
        pytest.param({(GPU,): [1]}, (tol("gpu", NO_SCHEDULE, "true"),), [False] * 4, id="tolerated-equal"),
        pytest.param(
            {(GPU,): [1]},
            (tol("gpu", NO_SCHEDULE, "false"),),
            [False, True, False, False],
            id="value-differs",
        ),
        pytest.param({(GPU,): [1]}, (tol("gpu", operator="Exists"),), [False] * 4, id="exists-any-value-any-effect"),
        pytest.param(
            {(GPU, DRAIN): [2]},
            (tol("gpu", operator="Exists"),),
            [False, False, True, False],
            id="second-taint-noexecute-untolerated",
        ),
        pytest.param({(DRAIN,): [0]}, (tol("", operator="Exists"),), [False] * 4, id="empty-key-exists-tolerates-all"),
    ],
)
def test_tolerated_flags(
    groups_in: dict[tuple[Taint, ...], list[int]], tolerations: tuple[Toleration, ...], want: list[bool]
) -> None:
    groups = {k: np.array(v, dtype=np.intp) for k, v in groups_in.items()}
    assert tolerated_flags(groups, tolerations, capacity=4).tolist() == [not w for w in want]


@pytest.mark.parametrize(
    ("taints", "tolerations", "want"),
    [
        pytest.param((SPOT, OLD), (), 2, id="two-untolerated"),
        pytest.param((SPOT, OLD), (tol("spot", PREFER),), 1, id="one-tolerated"),
        pytest.param((SPOT, GPU), (), 1, id="noschedule-not-counted"),
        pytest.param((SPOT,), (tol("spot", operator="Exists"),), 0, id="empty-effect-toleration"),
    ],
)
def test_count_untolerated_prefer_no_schedule(
    taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...], want: int
) -> None:
    assert count_untolerated_prefer_no_schedule(taints, tolerations) == want


def test_prefer_no_schedule_tolerations_keeps_prefer_and_empty_effect() -> None:
    keep = (tol("a", PREFER), tol("b"))
    assert prefer_no_schedule_tolerations((tol("x", NO_SCHEDULE), *keep, tol("y", NO_EXECUTE))) == keep


def test_group_by_taints_and_counts() -> None:
    nodes = [(0, (SPOT,)), (1, (SPOT, GPU)), (2, ()), (3, (SPOT,))]
    prefer = group_by_taints(nodes, PREFER_EFFECTS)
    assert {k: v.tolist() for k, v in prefer.items()} == {(SPOT,): [0, 1, 3]}
    assert {k: v.tolist() for k, v in group_by_taints(nodes, HARD_EFFECTS).items()} == {(GPU,): [1]}
    assert untolerated_counts(prefer, (), capacity=5).tolist() == [1, 1, 0, 1, 0]


# ----- Filter -----


@pytest.mark.parametrize(
    ("incoming", "want"),
    [
        pytest.param(
            pod(),
            {"plain": Status(), "gpu": REJECTED, "drain": REJECTED, "spot": Status()},
            id="untolerated-rejected-unresolvable",
        ),
        pytest.param(
            pod(tol("gpu", NO_SCHEDULE, "true")),
            {"plain": Status(), "gpu": Status(), "drain": REJECTED, "spot": Status()},
            id="tolerates-gpu",
        ),
        pytest.param(
            pod(tol("", operator="Exists")),
            {"plain": Status(), "gpu": Status(), "drain": Status(), "spot": Status()},
            id="tolerates-all",
        ),
    ],
)
def test_filter(incoming: Pod, want: dict[str, Status]) -> None:
    snap = make_snapshot([node("plain"), node("gpu", GPU), node("drain", DRAIN), node("spot", SPOT)])
    assert filter_statuses(tainttoleration.new(None, FakeHandle(snap)), incoming, snap) == want


def test_filter_cache_follows_taint_changes() -> None:
    snap = make_snapshot([node("a"), node("b")])
    plugin = tainttoleration.TaintToleration()
    assert filter_statuses(plugin, pod(), snap) == {"a": Status(), "b": Status()}
    snap.upsert_node(node("b", GPU))
    assert filter_statuses(plugin, pod(), snap) == {"a": Status(), "b": REJECTED}
    snap.upsert_node(node("b"))
    assert filter_statuses(plugin, pod(), snap) == {"a": Status(), "b": Status()}


# ----- Score -----


@pytest.mark.parametrize(
    ("nodes", "incoming", "want"),
    [
        pytest.param(
            [node("a"), node("b", SPOT), node("c", SPOT, OLD)],
            pod(),
            {"a": 100, "b": 50, "c": 0},
            id="row8-counts-0-1-2",
        ),
        pytest.param(
            [node("a"), node("b", SPOT), node("c", SPOT, OLD, Taint("x", PREFER))],
            pod(),
            {"a": 100, "b": 67, "c": 0},
            id="row9-counts-0-1-3",
        ),
        pytest.param([node("a"), node("b")], pod(), {"a": 100, "b": 100}, id="row10-no-prefer-taints"),
        pytest.param(
            [node("a"), node("b", SPOT)],
            pod(tol("spot", PREFER)),
            {"a": 100, "b": 100},
            id="tolerated-prefer-taint",
        ),
        pytest.param(
            [node("a"), node("b", SPOT)],
            pod(tol("spot", NO_SCHEDULE)),
            {"a": 100, "b": 0},
            id="noschedule-toleration-ignored-for-score",
        ),
        pytest.param([node("a", GPU), node("b", SPOT)], pod(), {"a": 100, "b": 0}, id="noschedule-taint-not-counted"),
    ],
)
def test_score(nodes: list[Node], incoming: Pod, want: dict[str, int]) -> None:
    snap = make_snapshot(nodes)
    assert scores(tainttoleration.new(None, FakeHandle(snap)), incoming, snap) == want


def test_raw_score_counts() -> None:
    snap = make_snapshot([node("a"), node("b", SPOT), node("c", SPOT, OLD)])
    got = scores(tainttoleration.TaintToleration(), pod(), snap, normalize=False)
    assert got == {"a": 0, "b": 1, "c": 2}


def test_score_cache_follows_taint_changes() -> None:
    snap = make_snapshot([node("a"), node("b", SPOT)])
    plugin = tainttoleration.TaintToleration()
    assert scores(plugin, pod(), snap) == {"a": 100, "b": 0}
    snap.upsert_node(node("b"))
    snap.upsert_node(node("a", SPOT))
    assert scores(plugin, pod(), snap) == {"a": 0, "b": 100}


# ----- queueing -----


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(node("a", GPU), node("a"), QueueingHint.QUEUE, id="taint-removed"),
        pytest.param(None, node("a"), QueueingHint.QUEUE, id="untainted-node-added"),
        pytest.param(None, node("a", GPU), QueueingHint.SKIP, id="tainted-node-added"),
        pytest.param(node("a"), node("a", SPOT), QueueingHint.SKIP, id="was-already-tolerated"),
    ],
)
def test_node_hint(old: Node | None, new: Node, want: QueueingHint) -> None:
    assert tainttoleration.is_schedulable_after_node_change(pod(), old, new) == want


def test_pod_toleration_hint() -> None:
    other = Pod(ObjectMeta("q", "default", uid="q"))
    assert tainttoleration.is_schedulable_after_pod_toleration_change(pod(), pod(), pod()) == QueueingHint.QUEUE
    assert tainttoleration.is_schedulable_after_pod_toleration_change(pod(), other, other) == QueueingHint.SKIP
