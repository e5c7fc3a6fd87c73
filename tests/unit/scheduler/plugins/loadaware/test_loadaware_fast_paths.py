"""LoadAwareScheduling fast paths agree with the full ones: the plain-Python row rules with the array
rules, the pod sync from the snapshot's change log with a full comparison (a plugin built from scratch),
the estimate memo with estimating afresh, the scores the per-node Filter keeps with Score alone, and
the shared all-pass result is read-only. Every test compares answers, never private state."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from apis.config.loadaware_args import LoadAwareSchedulingArgs
from apis.core.types import Pod
from koord_scheduler.framework import snapshot as snapshot_module
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.loadaware import plugin as loadaware
from koord_scheduler.plugins.loadaware import scoring
from koord_scheduler.plugins.loadaware.incoming import PodEstimator
from koord_scheduler.plugins.loadaware.plugin import LoadAwareScheduling
from tests.builders import make_pod
from tests.unit.scheduler.plugins.loadaware.loadaware_helpers import node_metric
from tests.unit.scheduler.plugins.loadaware.test_loadaware_plugin import Handle, node, setup


@pytest.mark.parametrize(
    ("used", "allocatable", "thresholds", "want"),
    [
        pytest.param([650, 0], [1000, 1], [65, 0], -1, id="exactly-at-threshold-passes"),
        pytest.param([655, 0], [1000, 1], [65, 0], 0, id="half-rounds-up-go-math-round"),
        pytest.param([6549999, 0], [10_000_000, 1], [65, 0], -1, id="just-below-half-passes"),
        pytest.param([999, 5], [1000, 10], [0, 40], 1, id="threshold-0-is-off-next-resource-fails"),
        pytest.param([5000, 50], [0, 100], [10, 60], -1, id="allocatable-0-is-off"),
        pytest.param([1, 0], [3, 1], [33, 0], -1, id="one-third-rounds-to-33"),
        pytest.param([2, 0], [3, 1], [66, 0], 0, id="two-thirds-rounds-to-67"),
        pytest.param([200, 200], [100, 100], [90, 90], 0, id="first-failing-resource-in-order"),
    ],
)
def test_row_first_failure_table(used: list[int], allocatable: list[int], thresholds: list[int], want: int) -> None:
    assert scoring.row_first_failure(used, [0] * len(used), allocatable, thresholds) == want
    half = [u // 2 for u in used]  # the node's usage and the incoming estimate, summed by the rule
    rest = [u - h for u, h in zip(used, half, strict=True)]
    assert scoring.row_first_failure(half, rest, allocatable, thresholds) == want
    failures = scoring.threshold_failures(np.array([used]), np.array([allocatable]), np.array([thresholds]))
    failed, first = scoring.first_failed_resource(failures)
    assert (int(first[0]) if failed[0] else -1) == want
    fused_failure, _ = scoring.row_failure_and_least_used(
        half, half, rest, allocatable, thresholds, weights=[1, 1], dominant_weight=0
    )
    assert fused_failure == want


def test_row_rules_match_array_rules_on_random_rows() -> None:
    """The plain-Python rules (few-nodes path) give the array rules' answers, boundaries included:
    usages are drawn around each threshold's rounding edge."""
    rng = random.Random(3)
    rows, allocs, thresholds = [], [], []
    for _ in range(3000):
        alloc = [rng.choice([0, 1, 3, 7, 1000, 4000, 34359738368]) for _ in range(3)]
        thr = [rng.choice([0, 1, 50, 65, 95, 100]) for _ in range(3)]
        edge = [int(a * (t + rng.choice([-0.5, 0.5, 0.0, 1.0])) / 100) for a, t in zip(alloc, thr, strict=True)]
        used = [max(0, e + rng.randint(-2, 2)) if a else rng.randint(0, 9) for a, e in zip(alloc, edge, strict=True)]
        rows.append(used)
        allocs.append(alloc)
        thresholds.append(thr)
    used_arr, alloc_arr, thr_arr = np.array(rows), np.array(allocs), np.array(thresholds)
    failed, first = scoring.first_failed_resource(scoring.threshold_failures(used_arr, alloc_arr, thr_arr))
    want_failures = [int(f) if ok else -1 for ok, f in zip(failed.tolist(), first.tolist(), strict=True)]
    split = [[rng.randint(0, u) for u in used] for used in rows]  # base part; the rest is the estimate
    extras = [[u - b for u, b in zip(used, base, strict=True)] for used, base in zip(rows, split, strict=True)]
    got_failures = [
        scoring.row_first_failure(b, e, a, t) for b, e, a, t in zip(split, extras, allocs, thresholds, strict=True)
    ]
    assert got_failures == want_failures
    assert -1 in got_failures and any(f >= 0 for f in got_failures)

    weights = np.array([1, 2, 0])
    for dominant in (0, 3):
        want = scoring.combine(scoring.least_used_scores(used_arr, alloc_arr), weights, dominant).tolist()
        got = [
            scoring.row_score(b, e, a, weights.tolist(), dominant_weight=dominant, targets=None)
            for b, e, a in zip(split, extras, allocs, strict=True)
        ]
        assert got == want
        # The fused pass (few-nodes Filter) gives both answers; the score reads its own base.
        fused = [
            scoring.row_failure_and_least_used(b, b, e, a, t, weights=weights.tolist(), dominant_weight=dominant)
            for b, e, a, t in zip(split, extras, allocs, thresholds, strict=True)
        ]
        assert fused == list(zip(want_failures, want, strict=True))
        zero_base = [[0] * 3 for _ in split]
        fused_apart = [
            scoring.row_failure_and_least_used(z, b, e, a, t, weights=weights.tolist(), dominant_weight=dominant)
            for z, b, e, a, t in zip(zero_base, split, extras, allocs, thresholds, strict=True)
        ]
        assert [score for _, score in fused_apart] == want
    weightless = scoring.row_failure_and_least_used([5], [5], [0], [10], [40], weights=[0], dominant_weight=0)
    assert weightless == (0, 0)  # 50% > 40% fails; weights summing to 0 score 0
    targets = np.array([40, 100, 1])
    want_tlp = scoring.combine(scoring.target_utilization_scores(used_arr, alloc_arr, targets), weights, 1).tolist()
    got_tlp = [
        scoring.row_score(b, e, a, [1, 2, 0], dominant_weight=1, targets=[40, 100, 1])
        for b, e, a in zip(split, extras, allocs, strict=True)
    ]
    assert got_tlp == want_tlp


def _pods_by_node(plugin: LoadAwareScheduling, handle: Handle, names: list[str]) -> dict[str, list[str]]:
    """The pods the plugin counts on each node, after the cycle's step."""
    plugin.prepare_cycle(handle.snapshot)
    loads = {n: plugin.cache.get(n) for n in names}
    return {n: sorted(load.pods) if load is not None else [] for n, load in loads.items()}


def _rebuilt(handle: Handle, metrics: list[object]) -> LoadAwareScheduling:
    """A plugin built from scratch on the same snapshot, after its first sync (which compares every
    position)."""
    fresh = loadaware.new(LoadAwareSchedulingArgs(), Handle(handle.snapshot))
    for m in metrics:
        fresh.on_node_metric(EventType.ADDED, None, m)  # type: ignore[arg-type]
    fresh.prepare_cycle(handle.snapshot)
    return fresh


def test_pod_sync_from_change_log_matches_full_compare() -> None:
    """Pods placed by this scheduler (assume + Reserve), unreserved, bound by others and deleted, in
    random order: after every step the plugin, which compares only the positions the snapshot touched,
    knows the same pods per node, and answers Filter/Score the same, as a plugin that compares them all."""
    rng = random.Random(5)
    names = [f"n{i}" for i in range(12)]
    metrics = [node_metric(n, cpu=f"{rng.randint(0, 6000)}m", memory=f"{rng.randint(1, 20)}Gi") for n in names]
    plugin, handle = setup([node(n) for n in names], metrics)
    snap = handle.snapshot
    incoming = make_pod("in").req(cpu="1", memory="2Gi").build()
    on_nodes: dict[str, Pod] = {}
    reserved: dict[str, tuple[Pod, str]] = {}
    most = [0, 0]
    for step in range(120):
        action = rng.choice(["reserve", "reserve", "unreserve", "others-add", "others-remove"])
        target = rng.choice(names)
        if action == "reserve":
            pod = make_pod(f"r{step}").req(cpu="700m", memory="1Gi").build()
            snap.add_pod(make_pod(f"r{step}").req(cpu="700m", memory="1Gi").node(target).build())  # the assume
            assert plugin.reserve(CycleState(), pod, target).is_success
            reserved[pod.key] = (pod, target)
        elif action == "unreserve" and reserved:
            key = rng.choice(sorted(reserved))
            pod, target = reserved.pop(key)
            plugin.unreserve(CycleState(), pod, target)
            snap.remove_pod(make_pod(pod.name).req(cpu="700m", memory="1Gi").node(target).build())
        elif action == "others-add":
            bound = make_pod(f"o{step}").req(cpu="500m").node(target).build()
            snap.add_pod(bound)
            on_nodes[bound.key] = bound
        elif action == "others-remove" and on_nodes:
            snap.remove_pod(on_nodes.pop(rng.choice(sorted(on_nodes))))
        most = [max(most[0], len(reserved)), max(most[1], len(on_nodes))]
        plugin.prepare_cycle(snap)  # the runtime's first call of a cycle
        fresh = _rebuilt(handle, metrics)
        assert _pods_by_node(plugin, handle, names) == _pods_by_node(fresh, handle, names), step
        order = snap.node_order()
        got = plugin.filter_nodes(CycleState(), incoming, snap, order).passed.tolist()
        assert got == fresh.filter_nodes(CycleState(), incoming, snap, order).passed.tolist(), step
        got_scores = plugin.score_nodes(CycleState(), incoming, snap, order).tolist()
        assert got_scores == fresh.score_nodes(CycleState(), incoming, snap, order).tolist(), step
    assert min(most) >= 3  # both kinds of pods piled up on the nodes at some point


def test_reserve_without_assume_is_dropped_at_the_next_pod_change_as_by_a_full_compare() -> None:
    """Reserve on a node whose pod count the snapshot did not move (no assume; Reserve still counts it):
    the next pod change anywhere reconciles that node, as the full comparison always did."""
    plugin, handle = setup([node("n1"), node("n2")], [node_metric("n1", cpu="1", memory="1Gi")])
    pod = make_pod("p").req(cpu="1").build()
    plugin.prepare_cycle(handle.snapshot)
    assert plugin.reserve(CycleState(), pod, "n1").is_success
    plugin.prepare_cycle(handle.snapshot)
    load = plugin.cache.get("n1")
    assert load is not None and sorted(load.pods) == ["default/p"]
    handle.snapshot.add_pod(make_pod("other").node("n2").build())  # a pod change elsewhere
    plugin.prepare_cycle(handle.snapshot)
    load = plugin.cache.get("n1")
    assert load is not None and sorted(load.pods) == []


def test_pod_sync_compares_every_position_when_the_change_log_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the snapshot's pod log no longer reaches back to the last sync, a pod bound by others in
    the meantime is still found (full comparison)."""
    monkeypatch.setattr(snapshot_module, "_MAX_CHANGE_LOG", 16)
    plugin, handle = setup([node("n1"), node("n2")], [node_metric("n1", cpu="1", memory="1Gi")])
    snap = handle.snapshot
    plugin.prepare_cycle(snap)
    since = snap.pods_generation
    snap.add_pod(make_pod("bound").req(cpu="2").node("n1").build())
    churn = make_pod("churn").node("n2").build()
    for _ in range(20):  # more pod changes than the (shortened) log keeps
        snap.add_pod(churn)
        snap.remove_pod(churn)
    assert snap.pods_changed_since(since) is None
    plugin.prepare_cycle(snap)
    load = plugin.cache.get("n1")
    assert load is not None and sorted(load.pods) == ["default/bound"]


def test_pod_sync_after_touches_without_pod_changes_finds_the_bound_pod() -> None:
    """Rows touched for other reasons (a NodeMetric, a node update) beside a pod bound by others: the
    sync finds exactly that pod, and answers as a plugin that compares every position."""
    metrics = [node_metric("n1", cpu="1", memory="1Gi"), node_metric("n2", cpu="3", memory="1Gi")]
    plugin, handle = setup([node("n1"), node("n2")], metrics)
    snap = handle.snapshot
    pod = make_pod("p").req(cpu="1").build()
    plugin.prepare_cycle(snap)
    snap.add_pod(make_pod("bound").req(cpu="2").node("n2").build())
    for _ in range(5):
        snap.touch(snap.positions["n1"])
    plugin.prepare_cycle(snap)
    assert _pods_by_node(plugin, handle, ["n1", "n2"]) == {"n1": [], "n2": ["default/bound"]}
    fresh = _rebuilt(handle, metrics)
    order = snap.node_order()
    assert plugin.score_nodes(CycleState(), pod, snap, order).tolist() == (
        fresh.score_nodes(CycleState(), pod, snap, order).tolist()
    )


def test_sign_pod_after_prepare_cycle_is_a_query() -> None:
    """Once the cycle is prepared, sign_pod, Filter and Score change nothing the runtime's node cache
    reads (the snapshot version stays) and read the rows as prepared; the next prepare_cycle (the
    runtime's first call of every cycle) picks up what changed in between."""
    plugin, handle = setup([node("n1"), node("n2")], [node_metric("n1", cpu="1", memory="1Gi")])
    snap = handle.snapshot
    pod = make_pod("p").req(cpu="1").build()
    plugin.prepare_cycle(snap)
    version = snap.version
    plugin.sign_pod(pod)
    plugin.filter(CycleState(), pod, snap.info(snap.positions["n1"]))
    plugin.score_nodes(CycleState(), pod, snap, snap.node_order())
    assert snap.version == version
    snap.add_pod(make_pod("bound").req(cpu="2").node("n1").build())
    plugin.sign_pod(pod)
    load = plugin.cache.get("n1")
    assert load is not None and sorted(load.pods) == [], "queries do not sync"
    plugin.prepare_cycle(snap)
    load = plugin.cache.get("n1")
    assert load is not None and sorted(load.pods) == ["default/bound"]


def test_prepare_cycle_refuses_another_snapshot() -> None:
    plugin, _ = setup([node("n1")], [])
    _, other = setup([node("n1")], [])
    with pytest.raises(ValueError, match="prepare_cycle got another snapshot"):
        plugin.prepare_cycle(other.snapshot)


def test_all_pass_result_is_shared_and_read_only() -> None:
    """Nodes without a NodeMetric all pass: the shared result, which no caller can change."""
    plugin, handle = setup([node("n1"), node("n2")], [])
    snap = handle.snapshot
    order = snap.node_order()
    first = plugin.filter_nodes(CycleState(), make_pod("a").build(), snap, order)
    second = plugin.filter_nodes(CycleState(), make_pod("b").build(), snap, order)
    assert first is second and first.passed.tolist() == [True, True]
    with pytest.raises(ValueError, match="read-only"):
        first.passed[0] = False


@pytest.mark.parametrize(
    ("args", "in_place"),
    [
        pytest.param({}, True, id="defaults-add-in-place"),
        pytest.param({"prodUsageThresholds": {"cpu": 60}}, False, id="prod-thresholds-rewrite"),
        pytest.param({"scoreAccordingProdUsage": True}, False, id="prod-scoring-rewrite"),
        pytest.param(
            {
                "aggregated": {
                    "usageThresholds": {"cpu": 70},
                    "usageAggregationType": "p95",
                    "usageAggregatedDuration": "5m",
                }
            },
            False,
            id="aggregated-filter-rewrite",
        ),
    ],
)
def test_reserve_rows_equal_a_full_rewrite(args: dict[str, object], in_place: bool) -> None:
    """Reserve adds a new pod's estimate to the row in place only when every view reads one base; the
    rows (plain records and, after a flush, the arrays) equal those of a plugin that rewrote them all."""
    names = ["n0", "n1", "n2"]
    running = make_pod("db", "ns").req(cpu="1").priority(9500).node("n1").created("2020-01-01T00:00:00Z").build()
    metrics = [
        node_metric(
            n,
            cpu=f"{1 + i}",
            memory=f"{4 + i}Gi",
            pods=[("ns/db", "1", "1Gi", "koord-prod")] if n == "n1" else [],
            aggregated={"5m0s": {"p95": {"cpu": "3", "memory": "9Gi"}}},
        )
        for i, n in enumerate(names)
    ]
    plugin, handle = setup([node(n) for n in names], metrics, [running], args=args)
    snap = handle.snapshot
    added: list[bool] = []
    original = plugin.view.add_to_base
    plugin.view.add_to_base = lambda pos, amount: (r := original(pos, amount), added.append(r))[0]  # type: ignore[method-assign]
    for i in range(9):
        pod = make_pod(f"r{i}").req(cpu="300m", memory="1Gi").priority(9500 if i % 2 else 5500).build()
        target = names[i % 3]
        plugin.prepare_cycle(snap)
        snap.add_pod(replace(pod, node_name=target))  # the assume
        assert plugin.reserve(CycleState(), pod, target).is_success
    assert added and all(added) is in_place
    fresh = loadaware.new(LoadAwareSchedulingArgs.model_validate(args), Handle(snap))
    for m in metrics:
        fresh.on_node_metric(EventType.ADDED, None, m)
    fresh.prepare_cycle(snap)  # its first sync finds the reserved pods on the nodes
    plugin.prepare_cycle(snap)
    positions = [snap.positions[n] for n in names]
    assert [plugin.view.records[p] for p in positions] == [fresh.view.records[p] for p in positions]
    plugin.view.flush()
    fresh.view.flush()
    for array in ("filter_base", "score_base", "filter_thresholds", "filter_on", "has_info"):
        assert np.array_equal(getattr(plugin.view, array), getattr(fresh.view, array)), array


def test_first_sync_finds_running_pods_and_later_pods_are_found() -> None:
    running = make_pod("db", "ns").req(cpu="1").node("n1").build()
    names = ["n1", "n2", "n3"]
    plugin, handle = setup([node(n) for n in names], [node_metric(n, cpu="1", memory="1Gi") for n in names], [running])
    snap = handle.snapshot
    plugin.prepare_cycle(snap)
    assert _pods_by_node(plugin, handle, names) == {"n1": ["ns/db"], "n2": [], "n3": []}
    snap.add_pod(make_pod("late").req(cpu="1").node("n2").build())
    plugin.prepare_cycle(snap)
    assert _pods_by_node(plugin, handle, names) == {"n1": ["ns/db"], "n2": ["default/late"], "n3": []}


@pytest.mark.parametrize(
    ("change", "want_reused"),
    [
        pytest.param({"node_name": "n1"}, True, id="assumed-copy-reuses-the-estimate"),
        pytest.param({"requests": make_pod("q").req(cpu="3").build().requests}, False, id="other-requests-re-estimate"),
        pytest.param({"priority": 9500}, False, id="other-priority-re-estimate"),
        pytest.param({"meta": make_pod("other").build().meta}, False, id="other-metadata-re-estimate"),
    ],
)
def test_estimate_of_a_copy_of_the_last_pod(change: dict[str, object], want_reused: bool) -> None:
    """Reserve gets the assumed copy of the pod Filter saw: its estimate is the last one; a copy that
    differs in a field the estimate reads is estimated afresh (as an estimator that never saw the
    original does)."""
    plugin, _ = setup([node("n1")], [node_metric("n1", cpu="1", memory="1Gi")])
    estimator = PodEstimator(plugin.resources, plugin.args.estimated_scaling_factors, windows=plugin.windows)
    pod = make_pod("p").req(cpu="1", memory="1Gi").build()
    first = estimator.estimate(pod)
    copy = replace(pod, **change)  # type: ignore[arg-type]
    got = estimator.estimate(copy)
    want = PodEstimator(plugin.resources, plugin.args.estimated_scaling_factors, windows=plugin.windows).estimate(copy)
    assert got.sign == want.sign
    if want_reused:
        assert got is first


def test_warm_up_does_the_first_sync_and_answers_stay_the_same() -> None:
    running = make_pod("db", "ns").req(cpu="1").node("n1").build()
    names = ["n1", "n2", "n3"]
    metrics = [node_metric(n, cpu=f"{i + 1}", memory="1Gi") for i, n in enumerate(names)]
    warm, handle = setup([node(n) for n in names], metrics, [running])
    cold, cold_handle = setup([node(n) for n in names], metrics, [running])
    warm.warm_up()
    positions = [handle.snapshot.positions[n] for n in names]
    assert warm.view.has_metric[positions].tolist() == [True] * 3, "rows are in the arrays"
    pod = make_pod("p").req(cpu="1").build()
    assert warm.sign_pod(pod) == cold.sign_pod(pod)
    want = {"n1": ["ns/db"], "n2": [], "n3": []}
    assert _pods_by_node(warm, handle, names) == _pods_by_node(cold, cold_handle, names) == want
    order, cold_order = handle.snapshot.node_order(), cold_handle.snapshot.node_order()
    assert (
        warm.score_nodes(CycleState(), pod, handle.snapshot, order).tolist()
        == cold.score_nodes(CycleState(), pod, cold_handle.snapshot, cold_order).tolist()
    )


def test_score_after_per_node_filter_equals_a_score_alone() -> None:
    """The per-node Filter keeps each node's score for this cycle's per-node Score: the same as Score
    computes alone (fresh, expired, without nodeMetric, over threshold), and not after the snapshot moved."""
    rng = random.Random(7)
    names = [f"n{i}" for i in range(6)]
    metrics = [
        node_metric("n0", cpu="1", memory="2Gi"),
        node_metric("n1", cpu="3900m", memory="30Gi"),  # over the cpu threshold with the pod
        node_metric("n2", cpu="1", memory="2Gi", age=500),  # expired
        node_metric("n3", cpu="2", memory="8Gi", with_status_metric=False),
        node_metric("n4", cpu="500m", memory="1Gi"),
    ]  # n5: no NodeMetric
    plugin, handle = setup([node(n) for n in names], metrics)
    alone, alone_handle = setup([node(n) for n in names], metrics)
    snap = handle.snapshot
    for step in range(20):
        pod = make_pod(f"p{step}").req(cpu=f"{rng.randint(1, 9) * 100}m", memory="1Gi").build()
        plugin.prepare_cycle(snap)
        alone.prepare_cycle(alone_handle.snapshot)
        positions = rng.sample(range(len(names)), rng.randint(1, len(names)))
        state = CycleState()
        for pos in positions:
            plugin.filter(state, pod, snap.info(pos))
        got = [plugin.score(state, pod, snap.info(pos)) for pos in positions]
        want = [alone.score(CycleState(), pod, alone_handle.snapshot.info(pos)) for pos in positions]
        assert got == want, step
        assert got == [plugin.score(state, pod, snap.info(pos)) for pos in positions], step  # asked again
        target = names[rng.randrange(len(names))]
        for p, h in ((plugin, handle), (alone, alone_handle)):
            h.snapshot.add_pod(replace(pod, node_name=target))  # the assume
            p.reserve(CycleState(), pod, target)
    # A snapshot change between Filter and Score: Score computes afresh.
    pod = make_pod("late").req(cpu="500m", memory="1Gi").build()
    n0 = snap.info(snap.positions["n0"])
    plugin.filter(CycleState(), pod, n0)
    before = plugin.score(CycleState(), pod, n0)
    plugin.filter(CycleState(), pod, n0)
    snap.add_pod(make_pod("other").req(cpu="2").node("n0").build())
    plugin.reserve(CycleState(), make_pod("other").req(cpu="2").node("n0").build(), "n0")
    after = plugin.score(CycleState(), pod, n0)
    assert after < before, "the reserved pod's estimate counts, not the score kept from before it"
