"""PodTopologySpread PreScore/Score/NormalizeScore: hand-computed rows (after upstream ``scoring_test.go``).

raw = round(Σ cnt * ln(size + 2) + (maxSkew - 1)); normalized = 100 * (max + min - raw) / max.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from apis.config.plugin_args import PodTopologySpreadArgs
from apis.core.types import Node, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.plugins.podtopologyspread import plugin as pts
from koord_scheduler.plugins.podtopologyspread.scoring import go_round, normalize_scores
from tests.builders import make_node, make_pod
from tests.fwtest import make_snapshot, scores

FOO = {"foo": ""}
HOST = "kubernetes.io/hostname"


def node(name: str, **labels: str) -> Node:
    return make_node(name).labels({"node": name, **labels}).build()


def existing(name: str, on: str, labels: Mapping[str, str] = FOO) -> Pod:
    return make_pod(name).labels(labels).node(on).build()


def soft(key: str, max_skew: int = 1) -> Pod:
    return make_pod("p").labels(FOO).spread(max_skew, key, FOO, when_unsatisfiable="ScheduleAnyway").build()


def plugin(args: PodTopologySpreadArgs | None = None) -> pts.PodTopologySpread:
    return pts.from_args(args)


def run(pod: Pod, nodes: Sequence[Node], pods: Sequence[Pod] = (), *, normalize: bool = True) -> dict[str, int]:
    return scores(plugin(), pod, make_snapshot(nodes, pods), normalize=normalize)


FOUR = [node("node-a"), node("node-b"), node("node-c"), node("node-d")]
SPREAD_2_1_0_3 = [
    existing("a1", "node-a"),
    existing("a2", "node-a"),
    existing("b1", "node-b"),
    existing("d1", "node-d"),
    existing("d2", "node-d"),
    existing("d3", "node-d"),
]
ZONED = [
    node("node-a", zone="zone1"),
    node("node-b", zone="zone1"),
    node("node-x", zone="zone2"),
    node("node-y", zone="zone2"),
]


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "want_raw", "want"),
    [
        pytest.param(
            soft("node"),
            FOUR[:2],
            [],
            {"node-a": 0, "node-b": 0},
            {"node-a": 100, "node-b": 100},
            id="no-existing-pods-max-0-all-100",
        ),
        pytest.param(
            # size 4, w = ln 6 = 1.79: raw 3.58->4, 1.79->2, 0, 5.38->5; max 5 min 0.
            soft("node"),
            FOUR,
            SPREAD_2_1_0_3,
            {"node-a": 4, "node-b": 2, "node-c": 0, "node-d": 5},
            {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0},
            id="per-node-key-2-1-0-3",
        ),
        pytest.param(
            # The hostname key counts the node's own pods; size = scored nodes = 4: same numbers.
            soft(HOST),
            FOUR,
            SPREAD_2_1_0_3,
            {"node-a": 4, "node-b": 2, "node-c": 0, "node-d": 5},
            {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0},
            id="hostname-key-2-1-0-3",
        ),
        pytest.param(
            # zone1 3, zone2 1, w = ln 4 = 1.386: 4.16->4, 1.39->1; 100*(4+1-4)/4 = 25, 100*(4+1-1)/4 = 100.
            soft("zone"),
            ZONED,
            [existing("a1", "node-a"), existing("a2", "node-a"), existing("b1", "node-b"), existing("x1", "node-x")],
            {"node-a": 4, "node-b": 4, "node-x": 1, "node-y": 1},
            {"node-a": 25, "node-b": 25, "node-x": 100, "node-y": 100},
            id="zone-3-1",
        ),
        pytest.param(
            # maxSkew 3 adds 2: zone1 1.386 + 2 = 3.39->3, zone2 2; 100*(3+2-3)/3 = 66.
            soft("zone", max_skew=3),
            ZONED,
            [existing("a1", "node-a")],
            {"node-a": 3, "node-b": 3, "node-x": 2, "node-y": 2},
            {"node-a": 66, "node-b": 66, "node-x": 100, "node-y": 100},
            id="max-skew-3-adds-2",
        ),
        pytest.param(
            # node-c has no zone: ignored (0, left out of min/max). zone1 size 1, w = ln 3: 1.10->1.
            soft("zone"),
            [node("node-a", zone="zone1"), node("node-b", zone="zone1"), node("node-c")],
            [existing("a1", "node-a"), existing("c1", "node-c")],
            {"node-a": 1, "node-b": 1, "node-c": 0},
            {"node-a": 100, "node-b": 100, "node-c": 0},
            id="node-missing-key-ignored",
        ),
        pytest.param(
            # Pods of another namespace and non-matching pods do not count.
            soft("node"),
            FOUR[:2],
            [make_pod("o1", "other").labels(FOO).node("node-a").build(), existing("b1", "node-b", {"bar": ""})],
            {"node-a": 0, "node-b": 0},
            {"node-a": 100, "node-b": 100},
            id="other-namespace-and-selector-mismatch-ignored",
        ),
    ],
)
def test_score_table(
    pod: Pod, nodes: list[Node], pods: list[Pod], want_raw: dict[str, int], want: dict[str, int]
) -> None:
    assert run(pod, nodes, pods, normalize=False) == want_raw
    assert run(pod, nodes, pods) == want


def test_system_defaults_for_replicaset_pods() -> None:
    # hostname maxSkew 3 (w = ln 6, 4 scored nodes) and zone maxSkew 5 (values zone1, zone2, "" -> w = ln 5);
    # node-c has no zone label but is not ignored (system defaults do not require every key).
    nodes = [
        make_node("node-a").zone("zone1").build(),
        make_node("node-b").zone("zone1").build(),
        make_node("node-x").zone("zone2").build(),
        make_node("node-c").build(),
    ]

    def rs(name: str, on: str = "") -> Pod:
        b = make_pod(name).label("app", "web").owner("ReplicaSet", "web-1")
        return (b.node(on) if on else b).build()

    pods = [rs("w1", "node-a"), rs("w2", "node-a"), rs("w3", "node-x")]
    # a: 2*1.792+2 + 2*1.609+4 = 12.80->13; b: 2 + 7.22 = 9.22->9; x: 3.79 + 5.61 = 9.40->9; c: 2.
    assert run(rs("w9"), nodes, pods, normalize=False) == {"node-a": 13, "node-b": 9, "node-x": 9, "node-c": 2}
    # max 13, min 2: 100*2/13 = 15, 100*6/13 = 46, 100*13/13 = 100.
    assert run(rs("w9"), nodes, pods) == {"node-a": 15, "node-b": 46, "node-x": 46, "node-c": 100}
    # A bare pod gets no defaults: PreScore Skips.
    snap = make_snapshot(nodes, pods)
    assert plugin().pre_score(CycleState(), make_pod("bare").build(), snap, snap.node_order()).is_skip


def test_list_defaulting_requires_every_key() -> None:
    args = PodTopologySpreadArgs.model_validate(
        {
            "defaultingType": "List",
            "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}],
        }
    )
    nodes = [node("node-a", zone="zone1"), node("node-c")]
    pod = make_pod("w9").label("app", "web").owner("ReplicaSet", "web-1").build()
    got = scores(plugin(args), pod, make_snapshot(nodes, []))
    assert got == {"node-a": 100, "node-c": 0}


def test_go_round_is_half_away_from_zero() -> None:
    assert go_round(np.array([0.5, 1.5, 2.5, 2.4999, 0.49999999999999994])).tolist() == [1, 2, 3, 2, 0]


@pytest.mark.parametrize(
    ("raw", "ignored", "want"),
    [
        pytest.param([0, 0, 0], [False, False, True], [100, 100, 0], id="max-0-all-100-ignored-0"),
        pytest.param([4, 2, 0, 5], [False] * 4, [20, 60, 100, 0], id="min-0-max-5"),
        pytest.param([7, 3], [False, False], [42, 100], id="min-3-max-7-truncates"),
        pytest.param([9, 9], [True, True], [0, 0], id="all-ignored"),
    ],
)
def test_normalize(raw: list[int], ignored: list[bool], want: list[int]) -> None:
    values = np.array(raw, dtype=np.int64)
    normalize_scores(values, np.array(ignored))
    assert values.tolist() == want
