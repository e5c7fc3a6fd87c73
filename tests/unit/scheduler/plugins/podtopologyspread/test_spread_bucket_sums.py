"""PodTopologySpread's matching pods per topology value, kept incrementally by the TopologyIndex, against
the sum over every node: identical under random pod adds, removes, replacements and node changes, both
from the index itself and through the plugin (incremental on and off over random clusters and pods)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from apis.core.frozendict import FrozenDict
from apis.core.parse import parse_pod
from apis.core.types import LabelSelector, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.plugins.podtopologyspread import plugin as pts
from koord_scheduler.plugins.topology_index import SpreadSelector, TopologyIndex
from tests.builders import make_node, make_pod
from tests.fwtest import FakeHandle, filter_statuses, make_snapshot

ZONES = ["z1", "z2", "z3"]
APPS = ["web", "db", "cache"]


def random_pod(rng: random.Random, name: str, node: str) -> Pod:
    b = make_pod(name, rng.choice(["default", "other"])).label("app", rng.choice(APPS))
    if rng.random() < 0.4:
        b.spread(rng.randint(1, 2), "zone", {"app": rng.choice(APPS)})
    return parse_pod(b.node(node).obj())


def brute_counts(snap: ClusterSnapshot, matcher: SpreadSelector) -> np.ndarray:
    counts = np.zeros(snap.capacity, dtype=np.int64)
    for pos, info in enumerate(snap.infos):
        if info is not None:
            counts[pos] = sum(1 for p in info.pods.values() if matcher.matches(p))
    return counts


def random_buckets(rng: random.Random, capacity: int, n_buckets: int) -> np.ndarray:
    buckets = np.array([rng.randrange(n_buckets) for _ in range(capacity)], dtype=np.int64)
    buckets.flags.writeable = False
    return buckets


PROBES = [
    make_pod("probe-web").label("app", "web").spread(1, "zone", {"app": "web"}).build(),
    make_pod("probe-db", "other")
    .label("app", "db")
    .spread(1, "zone", {"app": "db"})
    .spread(2, "kubernetes.io/hostname", {"app": "db"})
    .build(),
    make_pod("probe-cache").label("app", "web").spread(1, "zone", {"app": "cache"}).build(),
]


def prefilter_counts(plugin: pts.PodTopologySpread, pod: Pod, snap: ClusterSnapshot) -> list[list[int]]:
    state = CycleState()
    _, status = plugin.pre_filter(state, pod, snap)
    assert status.is_success
    pre = state.get(pts.PRE_FILTER_KEY)
    assert pre is not None
    return [cc.match_num.tolist() for cc in pre.constraints]


@pytest.mark.parametrize("seed", [pytest.param(s, id=f"seed-{s}") for s in (1, 2, 3, 4)])
def test_incremental_bucket_sums_match_the_sum_over_every_node(seed: int) -> None:
    rng = random.Random(seed)
    nodes = []
    for i in range(12):
        b = make_node(f"n{i}")
        if i % 6 != 5:
            b.label("zone", ZONES[i % 3])
        nodes.append(b)
    snap = make_snapshot([b.build() for b in nodes])
    index = TopologyIndex(max_counters=3)  # small: counters (and their sums) are evicted and rebuilt
    matchers = [
        SpreadSelector(ns, LabelSelector(FrozenDict({"app": app}))) for ns in ("default", "other") for app in APPS
    ]
    incremental = pts.new(None, FakeHandle(snap))
    summed = pts.new(None, FakeHandle(snap))
    assert isinstance(incremental, pts.PodTopologySpread) and isinstance(summed, pts.PodTopologySpread)
    summed.incremental_bucket_sums = False
    layouts = [random_buckets(rng, snap.capacity, 4) for _ in range(2)]
    live: dict[str, Pod] = {}
    checked = 0
    for step in range(160):
        op = rng.random()
        if op < 0.55 or not live:
            pod = random_pod(rng, f"p{step}", f"n{rng.randrange(12)}")
            snap.add_pod(pod)
            live[pod.key] = pod
        elif op < 0.8:
            snap.remove_pod(live.pop(rng.choice(sorted(live))))
        elif op < 0.9:
            old = live[rng.choice(sorted(live))]
            new = random_pod(rng, old.name, old.node_name)
            if new.namespace != old.namespace:
                continue
            snap.add_pod(new)  # same key on the same node: replaces
            live[new.key] = new
        elif op < 0.95:
            i = rng.randrange(12)
            snap.upsert_node(nodes[i].label("zone", rng.choice(ZONES)).build())
        else:
            i = rng.randrange(12)
            snap.remove_node(f"n{i}")
            snap.upsert_node(nodes[i].build())
        index.sync(snap)
        if len(layouts[0]) != snap.capacity:
            layouts = [random_buckets(rng, snap.capacity, 4) for _ in range(2)]
        for m in rng.sample(matchers, 2):
            want = brute_counts(snap, m)
            for buckets in layouts:
                got = index.bucket_sums(m, buckets, 4)
                assert got.tolist() == np.bincount(buckets, weights=want, minlength=4).astype(np.int64).tolist()
                got[:] = -1  # the caller's own copy: the index's sums are unaffected
        for probe in PROBES:
            assert prefilter_counts(incremental, probe, snap) == prefilter_counts(summed, probe, snap), step
            assert filter_statuses(incremental, probe, snap) == filter_statuses(summed, probe, snap), step
            checked += 1
    assert checked >= 120 * len(PROBES)  # every step but the skipped namespace changes


def test_bucket_ids_for_other_positions_are_refused() -> None:
    snap = make_snapshot([make_node("n0").label("zone", "z1").build()])
    index = TopologyIndex()
    index.sync(snap)
    matcher = SpreadSelector("default", LabelSelector(FrozenDict({"app": "web"})))
    with pytest.raises(ValueError, match="bucket ids for"):
        index.bucket_sums(matcher, np.zeros(snap.capacity + 3, dtype=np.int64), 2)
