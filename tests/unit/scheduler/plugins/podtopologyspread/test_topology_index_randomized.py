"""The incremental TopologyIndex against from-scratch computation, under random pod adds, removes,
updates (labels, terminating) and node changes; and long-lived plugins against fresh ones."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from apis.core.frozendict import FrozenDict
from apis.core.parse import parse_pod
from apis.core.types import LabelSelector, Pod
from koord_scheduler.framework import snapshot as snapshot_module
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.plugins.interpodaffinity import plugin as ipa
from koord_scheduler.plugins.podtopologyspread import plugin as pts
from koord_scheduler.plugins.topology_index import (
    SpreadSelector,
    TermGroup,
    TermKind,
    TopologyIndex,
    pod_term_groups,
)
from tests.builders import make_node, make_pod
from tests.fwtest import FakeHandle, filter_statuses, make_snapshot, scores

ZONES = ["z1", "z2", "z3"]
APPS = ["web", "db", "cache"]


def random_pod(rng: random.Random, name: str, node: str) -> Pod:
    b = make_pod(name, rng.choice(["default", "other"])).label("app", rng.choice(APPS))
    if rng.random() < 0.3:
        b.pod_affinity(rng.choice(["zone", "kubernetes.io/hostname"]), {"app": rng.choice(APPS)}, anti=True)
    if rng.random() < 0.2:
        b.pod_affinity("zone", {"app": rng.choice(APPS)}, weight=rng.randint(1, 10), anti=rng.random() < 0.5)
    if rng.random() < 0.1:
        b.pod_affinity("zone", {"app": rng.choice(APPS)})
    obj = b.node(node).obj()
    if rng.random() < 0.1:
        obj["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return parse_pod(obj)


def brute_counts(snap: ClusterSnapshot, matcher: SpreadSelector) -> np.ndarray:
    counts = np.zeros(snap.capacity, dtype=np.int64)
    for pos, info in enumerate(snap.infos):
        if info is not None:
            counts[pos] = sum(1 for p in info.pods.values() if matcher.matches(p))
    return counts


def brute_groups(snap: ClusterSnapshot) -> dict[TermGroup, list[int]]:
    groups: dict[TermGroup, Counter[int]] = {}
    for pos, info in enumerate(snap.infos):
        if info is None:
            continue
        for p in info.pods.values():
            for g in pod_term_groups(p):
                groups.setdefault(g, Counter())[pos] += 1
    return {g: [c[i] for i in range(snap.capacity)] for g, c in groups.items()}


PROBES = [
    make_pod("probe-spread").label("app", "web").spread(1, "zone", {"app": "web"}).build(),
    make_pod("probe-soft")
    .label("app", "db")
    .spread(2, "zone", {"app": "db"}, when_unsatisfiable="ScheduleAnyway")
    .spread(1, "kubernetes.io/hostname", {"app": "db"}, when_unsatisfiable="ScheduleAnyway")
    .build(),
    make_pod("probe-anti")
    .label("app", "web")
    .pod_affinity("kubernetes.io/hostname", {"app": "web"}, anti=True)
    .build(),
    make_pod("probe-aff")
    .label("app", "cache")
    .pod_affinity("zone", {"app": "db"})
    .pod_affinity("zone", {"app": "web"}, weight=5)
    .build(),
    make_pod("probe-plain").label("app", "db").build(),
]


@pytest.mark.parametrize(
    ("seed", "sync_every"),
    [
        pytest.param(1, 1, id="seed-1"),
        pytest.param(2, 1, id="seed-2"),
        pytest.param(3, 1, id="seed-3"),
        pytest.param(4, 1, id="seed-4"),
        pytest.param(5, 7, id="change-log-outrun-between-syncs"),
    ],
)
def test_incremental_matches_from_scratch(seed: int, sync_every: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """After each sync the counts equal a from-scratch count. The index diffs the nodes the snapshot's
    change log lists; with a short log and syncs several changes apart it compares every node instead."""
    if sync_every > 1:
        monkeypatch.setattr(snapshot_module, "_MAX_CHANGE_LOG", 4)
    rng = random.Random(seed)
    nodes = []
    for i in range(10):
        b = make_node(f"n{i}")
        if i % 5 != 4:
            b.label("zone", ZONES[i % 3])
        nodes.append(b)
    snap = make_snapshot([b.build() for b in nodes])
    index = TopologyIndex(max_counters=4)
    matchers = [
        SpreadSelector(ns, LabelSelector(FrozenDict({"app": app}))) for ns in ("default", "other") for app in APPS
    ]
    spread_plugin = pts.new(None, FakeHandle(snap))
    affinity_plugin = ipa.new(None, FakeHandle(snap))
    live: dict[str, Pod] = {}
    for step in range(150):
        op = rng.random()
        if op < 0.5 or not live:
            name = f"p{step}"
            pod = random_pod(rng, name, f"n{rng.randrange(10)}")
            snap.add_pod(pod)
            live[pod.key] = pod
        elif op < 0.7:
            old = live.pop(rng.choice(sorted(live)))
            snap.remove_pod(old)
        elif op < 0.8:
            # The bind echo: the same pod, the server's bookkeeping changed, swapped in place.
            old = live[rng.choice(sorted(live))]
            echo = replace(old, meta=replace(old.meta, resource_version=str(step)))
            snap.swap_pod(old, echo)
            live[echo.key] = echo
        elif op < 0.9:
            old = live[rng.choice(sorted(live))]
            new = random_pod(rng, old.name, old.node_name)
            if new.namespace != old.namespace:
                continue
            snap.add_pod(new)  # same key on the same node: replaces
            live[new.key] = new
        elif op < 0.95:
            i = rng.randrange(10)
            snap.upsert_node(nodes[i].label("zone", rng.choice(ZONES)).build())
        else:
            i = rng.randrange(10)
            snap.remove_node(f"n{i}")
            snap.upsert_node(nodes[i].build())
        if step % sync_every:
            continue
        index.sync(snap)
        for m in rng.sample(matchers, 3):
            assert index.pod_counts(m).tolist() == brute_counts(snap, m).tolist(), (step, m)
        want_groups = brute_groups(snap)
        got_groups = {g: c.tolist() for g, c in index.term_groups.items()}
        assert got_groups == want_groups, step
        assert index.required_anti_affinity_pods == sum(
            sum(c) for g, c in want_groups.items() if g.kind == TermKind.REQUIRED_ANTI_AFFINITY
        )
        if step % 10 == 0:
            fresh_spread = pts.new(None, FakeHandle(snap))
            fresh_affinity = ipa.new(None, FakeHandle(snap))
            for probe in PROBES:
                for old_plugin, new_plugin in ((spread_plugin, fresh_spread), (affinity_plugin, fresh_affinity)):
                    assert filter_statuses(old_plugin, probe, snap) == filter_statuses(new_plugin, probe, snap)
                    assert scores(old_plugin, probe, snap, CycleState()) == scores(new_plugin, probe, snap)
