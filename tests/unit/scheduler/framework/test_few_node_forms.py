"""A plugin with both the batch and the per-node form: the runtime asks the per-node form for the few
nodes a cached cycle recomputes, and decisions match a framework without the cache."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable

import numpy as np
import pytest

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.runtime import Framework
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, NodeInfo, Positions
from koord_scheduler.framework.status import Status, success, unschedulable
from koord_scheduler.framework.types import NodeFilterResult
from tests.builders import make_node, make_pod
from tests.fwtest import FakeHandle, make_snapshot

TOO_MANY = unschedulable("too many pods")


class BothForms:
    """Fits while the node holds fewer than 3 pods; scores ``10 * pods + position % 7``."""

    name = "BothForms"

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def sign_pod(self, pod: Pod) -> Hashable:
        return "same"

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        self.calls["filter_nodes"] += len(positions)
        return NodeFilterResult.from_mask(snapshot.pod_count[positions] < 3, TOO_MANY)

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        self.calls["filter"] += 1
        return TOO_MANY if len(node_info.pods) >= 3 else success()

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        self.calls["score_nodes"] += len(positions)
        return np.asarray(snapshot.pod_count[positions] * 10 + positions % 7, dtype=np.int64)

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        self.calls["score"] += 1
        return len(node_info.pods) * 10 + node_info.position % 7

    def score_extensions(self) -> None:
        return None


def framework(snap: ClusterSnapshot, plugin: BothForms, *, node_cache: bool) -> Framework:
    fwk = Framework("test", FakeHandle(snap), node_cache=node_cache)
    fwk.install({plugin.name: plugin}, {"filter": [plugin.name], "score": [plugin.name]}, {plugin.name: 2})
    return fwk


def cycle(fwk: Framework, snap: ClusterSnapshot) -> tuple[list[int], list[int], dict[str, Status]]:
    state = CycleState()
    diagnosis = Diagnosis()
    pod = make_pod("p").build()
    feasible = fwk.run_filter_plugins(state, pod, snap.node_order(), diagnosis)
    totals = fwk.run_score_plugins(state, pod, feasible)
    return feasible.tolist(), totals.tolist(), diagnosis.node_statuses(snap)


def test_changed_nodes_go_through_the_per_node_form_with_the_same_answers() -> None:
    snap = make_snapshot([make_node(f"n{i}").build() for i in range(20)])
    cached_plugin, plain_plugin = BothForms(), BothForms()
    cached = framework(snap, cached_plugin, node_cache=True)
    plain = framework(snap, plain_plugin, node_cache=False)
    assert cycle(cached, snap) == cycle(plain, snap)
    assert (cached_plugin.calls["filter_nodes"], cached_plugin.calls["filter"]) == (20, 0), "a cold cache: batch"
    for i in range(4):
        cached_plugin.calls.clear()
        snap.add_pod(make_pod(f"x{i}").node("n5").build())
        want = cycle(plain, snap)
        assert cycle(cached, snap) == want
        assert cached_plugin.calls == Counter({"filter": 1, "score": 1}), f"round {i}"
    feasible, _, statuses = want
    assert snap.positions["n5"] not in feasible and statuses == {"n5": TOO_MANY.with_plugin("BothForms")}


def test_a_pass_with_failures_is_reused_until_an_answer_changes() -> None:
    """With full nodes, the gathered feasible positions and failure chunk of the last pass are reused
    while the cached answers are unchanged; a node whose answer changes is reflected at once."""
    snap = make_snapshot([make_node(f"n{i}").build() for i in range(6)])
    for i in range(3):
        snap.add_pod(make_pod(f"full-{i}").node("n1").build())
    plugin = BothForms()
    fwk = framework(snap, plugin, node_cache=True)
    pod = make_pod("p").build()

    def filter_pass() -> tuple[np.ndarray, Diagnosis]:
        diagnosis = Diagnosis()
        return fwk.run_filter_plugins(CycleState(), pod, snap.node_order(), diagnosis), diagnosis

    first, d1 = filter_pass()
    assert "n1" not in {snap.info(p).name for p in first.tolist()}
    snap.add_pod(make_pod("one").node("n0").build())  # n0 recomputed, still fits
    second, d2 = filter_pass()
    assert second is first, "unchanged answers: the gathered positions are reused"
    assert not second.flags.writeable, "a reused array must not be modified by a caller"
    assert d2.node_statuses(snap) == d1.node_statuses(snap) == {"n1": TOO_MANY.with_plugin("BothForms")}

    for i in range(2):
        snap.add_pod(make_pod(f"more-{i}").node("n0").build())  # n0 now holds 3 pods
    third, d3 = filter_pass()
    assert sorted(snap.info(p).name for p in third.tolist()) == ["n2", "n3", "n4", "n5"]
    assert set(d3.node_statuses(snap)) == {"n0", "n1"}


def test_all_pass_is_shared_per_node_count_and_read_only() -> None:
    three = NodeFilterResult.all_pass(3)
    assert NodeFilterResult.all_pass(3) is three
    assert three.every_node_passed and three.passed.tolist() == [True, True, True]
    assert NodeFilterResult.all_pass(4).passed.tolist() == [True] * 4
    with pytest.raises(ValueError, match="read-only"):
        three.passed[0] = False


def test_the_runtime_alone_picks_the_form_by_node_count_in_uncached_passes_too() -> None:
    """A dry run on one node (preemption) asks the per-node form; many nodes go to the batch form."""
    snap = make_snapshot([make_node(f"n{i}").build() for i in range(20)])
    plugin = BothForms()
    fwk = framework(snap, plugin, node_cache=False)
    pod = make_pod("p").build()
    one = np.array([snap.positions["n3"]], dtype=np.intp)
    assert fwk.filter_nodes_uncached(CycleState(), pod, one, Diagnosis()).tolist() == one.tolist()
    assert plugin.calls == Counter({"filter": 1})
    plugin.calls.clear()
    fwk.filter_nodes_uncached(CycleState(), pod, snap.node_order(), Diagnosis())
    assert plugin.calls == Counter({"filter_nodes": 20})


def test_per_node_filter_wrapper_answers_as_the_batch_form() -> None:
    """The lean wrapper over ``filter``: the shared all-pass result when nothing fails, else the same
    mask as the batch form, one status entry per distinct status object, each node's own status."""
    from koord_scheduler.framework.per_node_filter import PerNodeFilter

    other = unschedulable("other reason")

    class TwoReasons(BothForms):
        def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
            status = super().filter(state, pod, node_info)
            return other if not status.is_success and node_info.position % 2 else status

    snap = make_snapshot(
        [make_node(f"n{i}").build() for i in range(6)],
        [make_pod(f"p{i}-{j}").node(f"n{i}").build() for i in (1, 2, 4) for j in range(3)],
    )
    plugin = TwoReasons()
    wrapper = PerNodeFilter(plugin)
    pod = make_pod("p").build()
    free = np.array([0, 3, 5], dtype=np.intp)
    result = wrapper.filter_nodes(CycleState(), pod, snap, free)
    assert result is NodeFilterResult.all_pass(3) and result.every_node_passed
    positions = snap.node_order()
    result = wrapper.filter_nodes(CycleState(), pod, snap, positions)
    batch = plugin.filter_nodes(CycleState(), pod, snap, positions)
    assert result.passed.tolist() == batch.passed.tolist() == [p not in (1, 2, 4) for p in positions.tolist()]
    assert len(result.statuses) == 2 and not result.every_node_passed
    for i, pos in enumerate(positions.tolist()):
        if not result.passed[i]:
            assert result.status_of(i) is (other if pos % 2 else TOO_MANY)


def test_per_node_score_wrapper_answers_as_the_batch_form() -> None:
    from koord_scheduler.framework.score_phase import PerNodeScore

    snap = make_snapshot(
        [make_node(f"n{i}").build() for i in range(9)],
        [make_pod(f"p{i}").node(f"n{i % 4}").build() for i in range(7)],
    )
    plugin = BothForms()
    wrapper = PerNodeScore(plugin)
    pod = make_pod("p").build()
    positions = snap.node_order()
    want = plugin.score_nodes(CycleState(), pod, snap, positions).tolist()
    got = wrapper.score_nodes(CycleState(), pod, snap, positions)
    assert got.dtype == np.int64 and got.tolist() == want
    assert wrapper.score_list(CycleState(), pod, snap, positions) == want
