"""The score phase's folded fast path (cached weighted sums of signed plugins) agrees with the plain path."""

from __future__ import annotations

import random
from collections.abc import Hashable

import numpy as np
import pytest

from apis.core.types import Pod
from koord_scheduler.framework.capabilities import score_entry
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.errors import PluginCycleError
from koord_scheduler.framework.node_cache import NodeResultCache
from koord_scheduler.framework.score_phase import ScorePhase, ScorePluginEntry
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, Positions
from koord_scheduler.framework.status import Status, skip, success
from tests.builders import make_node, make_pod
from tests.fwtest import make_snapshot


class RowScore:
    """Score from the node's row: ``(pod_count * factor + position) % 101``; answers depend on the pod's
    cpu request only when ``signed``. ``broken`` maps a node name to a raw score to return instead,
    or to ``None`` to raise."""

    def __init__(self, name: str, factor: int, *, signed: bool = True) -> None:
        self.name = name
        self.factor = factor
        self.broken: dict[str, int | None] = {}
        self.calls = 0
        if not signed:
            self.sign_pod = None  # type: ignore[assignment]

    def sign_pod(self, pod: Pod) -> Hashable:
        return pod.requests.get("cpu", 0)

    def pre_score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> Status:
        return skip() if pod.labels.get("skip") == self.name else success()

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        self.calls += 1
        out = (snapshot.pod_count[positions] * self.factor + positions) % 101
        for i, pos in enumerate(positions.tolist()):
            name = snapshot.info(pos).name
            if name in self.broken:
                bad = self.broken[name]
                if bad is None:
                    raise RuntimeError(f"cannot score {name}")
                out[i] = bad
        return np.asarray(out, dtype=np.int64)

    def score_extensions(self) -> None:
        return None


class ReverseNormalized(RowScore):
    """A signed plugin with NormalizeScore: never folded."""

    def score_extensions(self) -> ReverseNormalized:  # type: ignore[override]
        return self

    def normalize_score(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        np.subtract(100, scores, out=scores)
        return success()


class ScoresOnlyNormalized(ReverseNormalized):
    """NormalizeScore that reads only the scores (declared): the runtime may reuse its result."""

    normalize_reads_only_scores = True

    def __init__(self, name: str, factor: int) -> None:
        super().__init__(name, factor)
        self.normalized = 0

    def score_extensions(self) -> ScoresOnlyNormalized:  # type: ignore[override]
        return self

    def normalize_score(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        self.normalized += 1
        np.subtract(100, scores // 2, out=scores)
        return success()


def entries(plugins: list[RowScore], weights: list[int]) -> list[ScorePluginEntry]:
    return [score_entry(p, w) for p, w in zip(plugins, weights, strict=True)]


def make_plugins() -> list[RowScore]:
    return [
        RowScore("A", 3),
        RowScore("B", 7),
        ReverseNormalized("N", 5),
        RowScore("U", 11, signed=False),
        RowScore("C", 13),
        ScoresOnlyNormalized("S", 17),
    ]


def phases(plugins: list[RowScore], weights: list[int]) -> tuple[ScorePhase, ScorePhase, NodeResultCache]:
    cache = NodeResultCache()
    fast = ScorePhase(plugins, entries(plugins, weights), cache, None)
    plain = ScorePhase(plugins, entries(plugins, weights), None, None)
    return fast, plain, cache


def run(phase: ScorePhase, pod: Pod, snap: ClusterSnapshot, positions: Positions) -> IntArray | str:
    """Totals, or the error status text when the phase aborts."""
    try:
        return phase.run(CycleState(), pod, snap, positions)
    except PluginCycleError as err:
        return str(err.status)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_folded_sums_agree_with_plain_scoring_on_a_changing_cluster(seed: int) -> None:
    rng = random.Random(seed)
    snap = make_snapshot([make_node(f"n{i}").capacity(cpu="8", pods=50).build() for i in range(30)])
    plugins = make_plugins()
    fast, plain, cache = phases(plugins, [1, 2, 3, 1, 5, 2])
    next_node = 30
    for step in range(120):
        change = rng.random()
        names = [snap.info(p).name for p in snap.node_order().tolist()]
        if change < 0.5:
            snap.add_pod(make_pod(f"p{step}").req(cpu="100m").node(rng.choice(names)).build())
        elif change < 0.6 and len(names) > 5:
            snap.remove_node(rng.choice(names))
        elif change < 0.7:
            snap.upsert_node(make_node(f"n{next_node}").capacity(cpu="8", pods=50).build())
            next_node += 1
        order = snap.node_order().tolist()
        positions = np.array(rng.sample(order, rng.randint(1, len(order))), dtype=np.intp)
        if rng.random() < 0.5:
            positions = snap.node_order()  # the shared read-only order: normalised scores may be reused
        b = make_pod(f"q{step}").req(cpu=rng.choice(["100m", "200m"]))
        if rng.random() < 0.2:
            b.label("skip", rng.choice(["A", "B", "N", "U", "C", "S"]))
        pod = b.build()
        want = run(plain, pod, snap, positions)
        got = run(fast, pod, snap, positions)
        assert isinstance(got, np.ndarray) and isinstance(want, np.ndarray)
        assert got.tolist() == want.tolist(), f"step {step}"
    assert cache.hits > 0, "the fast path must have been taken"


def test_each_folded_plugin_rescores_only_changed_nodes() -> None:
    snap = make_snapshot([make_node(f"n{i}").build() for i in range(20)])
    plugins = make_plugins()
    fast, _, _ = phases(plugins, [1, 1, 1, 1, 1, 1])
    pod = make_pod("p").req(cpu="1").build()
    positions = snap.node_order()
    fast.run(CycleState(), pod, snap, positions)
    snap.add_pod(make_pod("x").node("n3").build())
    recomputed: list[int] = []
    original = plugins[0].score_nodes

    def spy(state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        recomputed.extend(positions.tolist())
        return original(state, pod, snapshot, positions)

    plugins[0].score_nodes = spy  # type: ignore[method-assign]
    fast.run(CycleState(), pod, snap, positions)
    assert recomputed == [snap.positions["n3"]]


@pytest.mark.parametrize(
    ("broken_plugin", "broken_value", "in_positions"),
    [
        pytest.param("B", 101, True, id="out-of-range-on-a-scored-node-is-an-error"),
        pytest.param("B", -1, False, id="out-of-range-on-an-unscored-node-is-ignored"),
        pytest.param("C", None, True, id="raising-folded-plugin-is-an-error"),
        pytest.param("N", 500, True, id="out-of-range-after-normalize"),
        pytest.param("S", 500, True, id="out-of-range-after-a-reusable-normalize"),
    ],
)
def test_failures_are_reported_as_on_the_plain_path(
    broken_plugin: str, broken_value: int | None, in_positions: bool
) -> None:
    snap = make_snapshot([make_node(f"n{i}").build() for i in range(10)])
    plugins = make_plugins()
    fast, plain, _ = phases(plugins, [1, 2, 1, 1, 1, 1])
    pod = make_pod("p").req(cpu="1").build()
    everything = snap.node_order()
    fast.run(CycleState(), pod, snap, everything)  # warm the cache, then break a node
    next(p for p in plugins if p.name == broken_plugin).broken["n4"] = broken_value
    snap.touch(snap.positions["n4"])
    scored = everything if in_positions else everything[everything != snap.positions["n4"]]
    want = run(plain, pod, snap, scored)
    got = run(fast, pod, snap, scored)
    if isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray) and got.tolist() == want.tolist()
    else:
        assert got == want
        assert broken_plugin in want
    # Once the node is fixed the fast path serves it again.
    next(p for p in plugins if p.name == broken_plugin).broken.clear()
    snap.touch(snap.positions["n4"])
    fixed_want, fixed_got = run(plain, pod, snap, everything), run(fast, pod, snap, everything)
    assert isinstance(fixed_got, np.ndarray) and isinstance(fixed_want, np.ndarray)
    assert fixed_got.tolist() == fixed_want.tolist()


def test_unhashable_signatures_are_scored_without_the_cache() -> None:
    snap = make_snapshot([make_node(f"n{i}").build() for i in range(5)])
    plugin = RowScore("A", 3)
    plugin.sign_pod = lambda pod: {"not": "hashable"}  # type: ignore[method-assign, assignment, return-value]
    cache = NodeResultCache()
    fast = ScorePhase([plugin], entries([plugin], [2]), cache, None)
    plain = ScorePhase([plugin], entries([plugin], [2]), None, None)
    pod = make_pod("p").build()
    positions = snap.node_order()
    want = plain.run(CycleState(), pod, snap, positions)
    assert fast.run(CycleState(), pod, snap, positions).tolist() == want.tolist()
    assert fast.run(CycleState(), pod, snap, positions).tolist() == want.tolist()
    assert cache.hits == 0


def test_normalized_scores_are_reused_while_raw_scores_and_nodes_are_unchanged() -> None:
    snap = make_snapshot([make_node(f"n{i}").build() for i in range(12)])
    plugin = ScoresOnlyNormalized("S", 17)
    plain_plugin = ScoresOnlyNormalized("S", 17)
    fast = ScorePhase([plugin], entries([plugin], [3]), NodeResultCache(), None)
    plain = ScorePhase([plain_plugin], entries([plain_plugin], [3]), None, None)
    pod = make_pod("p").req(cpu="1").build()
    order = snap.node_order()
    first = fast.run(CycleState(), pod, snap, order).tolist()
    assert first == plain.run(CycleState(), pod, snap, order).tolist()
    assert plugin.normalized == 1
    snap.touch(snap.positions["n2"])  # rescored, same raw score
    assert fast.run(CycleState(), pod, snap, order).tolist() == first
    assert plugin.normalized == 1, "same raw scores over the same nodes: normalised once"
    snap.add_pod(make_pod("x").node("n5").build())  # n5's raw score changes
    moved = fast.run(CycleState(), pod, snap, order).tolist()
    assert plugin.normalized == 2
    assert moved == plain.run(CycleState(), pod, snap, order).tolist() != first
    subset = order[order != snap.positions["n0"]]  # a writeable array of other nodes: never reused
    fast.run(CycleState(), pod, snap, subset)
    fast.run(CycleState(), pod, snap, subset)
    assert plugin.normalized == 4
