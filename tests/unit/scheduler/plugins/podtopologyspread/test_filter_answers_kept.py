"""PodTopologySpread's kept Filter answers (per reason table over the read-only node order) equal a
fresh plugin's answers after random binds, unbinds and node changes."""

from __future__ import annotations

import random

import numpy as np
import pytest

from apis.core.types import Node, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.plugins.podtopologyspread import plugin as pts
from tests.builders import make_node, make_pod

ZONES = ("z0", "z1", "z2")
GROUPS = ("a", "b")


def _node(i: int, zone: str, *, keyed: bool = True) -> Node:
    b = make_node(f"n{i}").capacity(cpu="8", memory="16Gi", pods=50)
    if keyed:
        b.label("zone", zone)
    return b.build()


def _spread_pod(name: str, group: str, *, node: str = "", skew: int = 1) -> Pod:
    b = make_pod(name).label("app", group).spread(skew, "zone", {"app": group})
    if node:
        b.node(node)
    return b.build()


def _answer(p: pts.PodTopologySpread, pod: Pod, snap: ClusterSnapshot) -> tuple[list[bool], list[int]]:
    """(passed, reason id of each failing node, -1 for passing ones) over the snapshot's node order."""
    state = CycleState()
    _, status = p.pre_filter(state, pod, snap)
    assert status.is_success
    result = p.filter_nodes(state, pod, snap, snap.node_order())
    assert result.reason_ids is not None
    passed = result.passed.tolist()
    return passed, [-1 if ok else int(r) for ok, r in zip(passed, result.reason_ids.tolist(), strict=True)]


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_kept_answers_equal_a_fresh_plugin_after_random_changes(seed: int) -> None:
    rng = random.Random(seed)
    snap = ClusterSnapshot()
    for i in range(12):
        snap.upsert_node(_node(i, ZONES[i % 3]))
    kept = pts.PodTopologySpread()
    bound: list[Pod] = []
    reused = 0
    for step in range(150):
        action = rng.random()
        if action < 0.55 or not bound:
            pod = _spread_pod(f"b{step}", rng.choice(GROUPS), node=f"n{rng.randrange(12)}")
            snap.add_pod(pod)
            bound.append(pod)
        elif action < 0.8:
            snap.remove_pod(bound.pop(rng.randrange(len(bound))))
        elif action < 0.9:
            i = rng.randrange(12)
            snap.upsert_node(_node(i, rng.choice(ZONES), keyed=rng.random() < 0.9))
        else:
            i = 12 + step
            snap.upsert_node(_node(i, rng.choice(ZONES)))
        incoming = _spread_pod(f"p{step}", rng.choice(GROUPS), skew=rng.choice([1, 1, 2]))
        before = len(kept._answers)
        want = _answer(pts.PodTopologySpread(), incoming, snap)
        got = _answer(kept, incoming, snap)
        assert got == want, f"step {step}"
        again = _answer(kept, incoming, snap)
        assert again == want, f"step {step}, asked twice"
        reused += len(kept._answers) == before
    assert reused > 0, "the sequence must reuse kept answers"
    assert len(kept._answers) <= pts.MAX_FILTER_ANSWERS


def test_a_kept_answer_is_read_only_and_shared_only_over_the_same_arrays() -> None:
    snap = ClusterSnapshot()
    for i in range(6):
        snap.upsert_node(_node(i, ZONES[i % 3]))
    snap.add_pod(_spread_pod("e", "a", node="n0"))
    p = pts.PodTopologySpread()
    pod = _spread_pod("p", "a")
    state = CycleState()
    p.pre_filter(state, pod, snap)
    order = snap.node_order()
    first = p.filter_nodes(state, pod, snap, order)
    assert p.filter_nodes(state, pod, snap, order) is first
    assert not first.passed.flags.writeable
    assert first.passed.tolist() == [False, True, True, False, True, True]
    writable = np.array(order)  # a writable copy: answered afresh, not kept
    other = p.filter_nodes(state, pod, snap, writable)
    assert other is not first and other.passed.tolist() == first.passed.tolist()
