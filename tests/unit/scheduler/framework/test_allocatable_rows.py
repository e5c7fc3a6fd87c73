"""ClusterSnapshot.allocatable_rows: the gathered allocatable rows that NodeResourcesFit and
BalancedAllocation share while scoring the same changed nodes equal a gather from scratch after random
binds, unbinds and node changes, and the two plugins' batch Score equals their per-node form."""

from __future__ import annotations

import random

import numpy as np
import pytest

from apis.core.types import Node, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.snapshot import ClusterSnapshot, Positions
from koord_scheduler.plugins.balancedallocation import plugin as balanced_plugin
from koord_scheduler.plugins.balancedallocation.scoring import balanced_allocation
from koord_scheduler.plugins.noderesources import plugin as fit_plugin
from koord_scheduler.plugins.resource_scoring import least_allocated, most_allocated
from tests.builders import make_node, make_pod
from tests.fwtest import FakeHandle

GPU = "nvidia.com/gpu"


def _read_only(values: list[int]) -> Positions:
    array = np.array(values, dtype=np.intp)
    array.flags.writeable = False
    return array


def _node(rng: random.Random, name: str) -> Node:
    builder = make_node(name)
    extra = {GPU: rng.choice([0, 2, 8])} if rng.random() < 0.3 else {}
    return builder.capacity(extra, cpu=str(rng.choice([0, 2, 4, 16])), memory=f"{rng.choice([0, 4, 32])}Gi").build()


@pytest.mark.parametrize("seed", range(6))
def test_shared_rows_equal_a_fresh_gather_after_random_changes(seed: int) -> None:
    rng = random.Random(seed)
    snap = ClusterSnapshot(initial_capacity=4)
    names = [f"n{i}" for i in range(12)]
    for name in names:
        snap.upsert_node(_node(rng, name))
    bound: list[Pod] = []
    handle = FakeHandle(snap)
    fit = fit_plugin.new(None, handle)
    balanced = balanced_plugin.new(None, handle)
    previous: Positions | None = None
    for step in range(150):
        action = rng.random()
        if action < 0.4:
            builder = make_pod(f"p{step}").req(cpu=f"{rng.choice([0, 100, 900])}m", memory="1Gi")
            built = builder.node(rng.choice(names)).build()
            snap.add_pod(built)
            bound.append(built)
        elif action < 0.6 and bound:
            snap.remove_pod(bound.pop(rng.randrange(len(bound))))
        elif action < 0.8:
            snap.upsert_node(_node(rng, rng.choice(names)))
        elif action < 0.9:
            gone = rng.choice(names)
            if gone in snap.positions:
                snap.remove_node(gone)
        else:
            snap.upsert_node(_node(rng, rng.choice(names)))
        live = snap.node_order()
        if not len(live):
            continue
        if previous is not None:
            # The array kept from an earlier step, asked again after this step's change.
            rows, positive = snap.allocatable_rows(previous, slice(0, 2))
            fresh = snap.allocatable[np.array(previous)][:, 0:2]
            assert rows.tolist() == fresh.tolist() and positive == bool(fresh.min() > 0)
        picked = _read_only(sorted(rng.sample(live.tolist(), min(len(live), rng.randint(1, 8)))))
        previous = picked
        for columns in ([0, 1], [1, 0], slice(0, 2)):
            rows, positive = snap.allocatable_rows(picked, columns)
            again, positive_again = snap.allocatable_rows(picked, columns)
            fresh = snap.allocatable[np.array(picked)][:, columns]
            assert rows.tolist() == fresh.tolist()
            assert positive == bool(fresh.min() > 0)
            assert again is rows and positive_again == positive  # kept while nothing changed
            assert not rows.flags.writeable
        # Both plugins' batch Score over the shared rows equals their per-node form on each node.
        pod = make_pod("incoming").req(cpu=f"{rng.choice([100, 500])}m", memory="2Gi").build()
        state = CycleState()
        fit.pre_score(state, pod, snap, live)
        balanced.pre_score(state, pod, snap, live)
        fit_batch = fit.score_nodes(state, pod, snap, picked).tolist()
        balanced_batch = balanced.score_nodes(state, pod, snap, picked).tolist()
        infos = [snap.info(p) for p in picked.tolist()]
        assert fit_batch == [fit.score(state, pod, info) for info in infos]
        assert balanced_batch == [balanced.score(state, pod, info) for info in infos]


def test_a_change_or_a_writable_array_is_not_answered_from_the_kept_rows() -> None:
    snap = ClusterSnapshot()
    a = snap.upsert_node(make_node("a").capacity(cpu="4", memory="8Gi").build())
    snap.upsert_node(make_node("b").capacity(cpu="2", memory="4Gi").build())
    picked = _read_only([a])
    first, _ = snap.allocatable_rows(picked, slice(0, 2))
    snap.upsert_node(make_node("a").capacity(cpu="8", memory="8Gi").build())
    second, _ = snap.allocatable_rows(picked, slice(0, 2))
    assert second is not first and second[0, 0] == 8000
    snap.upsert_node(make_node("c").capacity({GPU: 1}, cpu="1").build())  # a new column: a new array
    third, positive = snap.allocatable_rows(picked, [0, 1, snap.column(GPU) or 0])
    assert third.tolist() == [[8000, 8 * 1024**3, 0]] and not positive
    writable = np.array([a], dtype=np.intp)
    rows, _ = snap.allocatable_rows(writable, slice(0, 2))
    writable[0] = snap.positions["b"]
    rows_b, _ = snap.allocatable_rows(writable, slice(0, 2))
    assert rows_b is not rows and rows_b[0, 0] == 2000


@pytest.mark.parametrize("seed", range(4))
def test_the_known_positive_flag_gives_the_same_scores(seed: int) -> None:
    rng = np.random.default_rng(seed)
    allocatable = rng.integers(0, 3, size=(20, 3)) * rng.integers(1, 10**6, size=(20, 3))
    requested = rng.integers(0, 10**6, size=(20, 3))
    weights = np.array([1, 2, 1], dtype=np.int64)
    flag = bool(allocatable.min() > 0)
    for scorer in (least_allocated, most_allocated):
        assert scorer(requested, allocatable, weights, all_positive=flag).tolist() == (
            scorer(requested, allocatable, weights).tolist()
        )
    assert balanced_allocation(requested, allocatable, all_positive=flag).tolist() == (
        balanced_allocation(requested, allocatable).tolist()
    )
    positive = allocatable + 1
    assert balanced_allocation(requested, positive, all_positive=True).tolist() == (
        balanced_allocation(requested, positive).tolist()
    )
