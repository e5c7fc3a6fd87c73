"""The answers kept across pods over read-only node sets (PodTopologySpread's Filter answers, the filter
chain's repeated rejections, the score phase's normalised passes) never change a decision: the same
placements and messages with every one of them off, through binds, deletions and more pods."""

from __future__ import annotations

import random
from collections import OrderedDict
from typing import Any

import pytest

from apis.config import KubeSchedulerConfiguration, parse_scheduler_config
from apis.core.types import Node, Pod
from koord_scheduler.framework import filter_phase, score_phase
from koord_scheduler.plugins.podtopologyspread import plugin as pts
from tests.builders import make_node, make_pod
from tests.unit.scheduler.core.test_node_cache_equivalence import WEIGHTED, _place_recording


def roomy_mixed_cluster(seed: int) -> tuple[list[Node], list[Pod], list[Pod]]:
    """48 nodes of four sizes over three zones (three without a zone), room for every pod, and 400 pods
    and 100 more of 16 request shapes in random order, a third spread over zones in four groups: every
    node passes the signed plugins, so the spread pods see the same node order each time."""
    rng = random.Random(seed)
    sizes = [("8", "16Gi"), ("16", "32Gi"), ("32", "64Gi"), ("64", "128Gi")]
    nodes = []
    for i in range(48):
        cpu, memory = sizes[i % 4]
        b = make_node(f"n{i}").capacity(cpu=cpu, memory=memory, pods=110)
        if i < 45:
            b.zone(f"z{i % 3}")
        nodes.append(b.build())
    shapes = [(cpu, mem) for cpu in ("100m", "250m", "500m", "1") for mem in ("256Mi", "512Mi", "1Gi", "2Gi")]
    pods = []
    for i in range(500):
        cpu, mem = rng.choice(shapes)
        pb = make_pod(f"p{i}").req(cpu=cpu, memory=mem)
        if rng.random() < 1 / 3:
            group = f"g{rng.randrange(4)}"
            pb.label("app", group).spread(1, "topology.kubernetes.io/zone", {"app": group})
        pods.append(pb.build())
    return nodes, pods[:400], pods[400:]


def _keep_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every kept answer off: each is computed afresh, as before they were kept."""
    monkeypatch.setattr(filter_phase, "_read_only_result", lambda result, alive: False)
    monkeypatch.setattr(pts, "MAX_FILTER_ANSWERS", 0)
    monkeypatch.setattr(score_phase, "MAX_NORMALIZED", 0)


@pytest.mark.parametrize("seed", [21, 22])
@pytest.mark.parametrize("weighted", [False, True], ids=["default-weights", "score-weights"])
async def test_kept_answers_on_and_off_decide_the_same(
    seed: int, weighted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    nodes, pods, more = roomy_mixed_cluster(seed)
    config = parse_scheduler_config(WEIGHTED, source="test") if weighted else KubeSchedulerConfiguration()
    hits: list[object] = []

    class Counting(OrderedDict[Any, Any]):
        def move_to_end(self, key: Any, last: bool = True) -> None:
            hits.append(key)  # the filter chain's kept rejection was found again
            super().move_to_end(key, last)

    with monkeypatch.context() as m:
        m.setattr(filter_phase, "OrderedDict", Counting)
        kept, _ = await _place_recording(nodes, pods, more, node_cache=True, config=config)
    assert hits, "the workload must reuse kept rejections"
    with monkeypatch.context() as m:
        _keep_nothing(m)
        fresh, _ = await _place_recording(nodes, pods, more, node_cache=True, config=config)
    assert kept == fresh
    assert sum(1 for node, _ in kept.values() if node) == len(kept)
