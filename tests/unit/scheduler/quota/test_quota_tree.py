"""Quota-tree accounting and incremental runtime (Koordinator's group quota manager)."""

from __future__ import annotations

import random

import pytest

from apis.scheduling.elasticquota import DEFAULT_QUOTA, ROOT_QUOTA, QuotaRecord
from koord_scheduler.quota.tree import PodEntry, QuotaTree
from koord_scheduler.quota.validation import validate_tree
from tests.unit.scheduler.plugins.elasticquota.quota_helpers import quota

GPU = "nvidia.com/gpu"


def build(records: list[QuotaRecord], total: dict[str, int], *, scale_min: bool = True) -> QuotaTree:
    valid, problems = validate_tree(records)
    assert problems == []
    tree = QuotaTree(scale_min=scale_min, builtin_max={DEFAULT_QUOTA: {"cpu": 10**12, GPU: 10**12}})
    tree.set_quotas(valid.values())
    tree.set_total(total)
    return tree


def pending(tree: QuotaTree, key: str, q: str, amount: int, resource: str = GPU) -> None:
    tree.upsert_pod(key, PodEntry(q, {resource: amount}, assigned=False))


def test_koordinator_example_c_hierarchy_and_non_lender() -> None:
    tree = build(
        [
            quota("P", min={GPU: 60}, max={GPU: 100}, is_parent=True),
            quota("P1", min={GPU: 40}, max={GPU: 60}, parent="P"),
            quota("P2", min={GPU: 20}, max={GPU: 40}, parent="P", lend=False),
            quota("Q", min={GPU: 40}, max={GPU: 100}),
        ],
        {GPU: 100},
    )
    pending(tree, "p1", "P1", 70)
    pending(tree, "q1", "Q", 50)
    assert tree.node("P1").limited == {GPU: 60}
    assert tree.node("P2").request == {GPU: 20}
    assert tree.node("P").child_request == {GPU: 80}
    got = {name: tree.runtime(name)[GPU] for name in ("P", "P1", "P2", "Q")}
    assert got == {"P": 60, "P1": 40, "P2": 20, "Q": 40}


def test_koordinator_example_a_through_tree_with_shared_weight() -> None:
    spec = [("A", 20, 10, 60), ("B", 30, 50, 40), ("C", 20, 45, 50), ("D", 10, 70, 100)]
    tree = build([quota(n, min={GPU: m}, max={GPU: 100}, weight={GPU: w}) for n, m, _, w in spec], {GPU: 100})
    for name, _, request, _ in spec:
        pending(tree, f"pod-{name}", name, request)
    assert {n: tree.runtime(n)[GPU] for n, *_ in spec} == {"A": 10, "B": 36, "C": 28, "D": 26}


@pytest.mark.parametrize(
    ("scale_min", "want"),
    [pytest.param(True, {"A": 48, "B": 32}, id="R3-scaled"), pytest.param(False, {"A": 60, "B": 40}, id="R3-unscaled")],
)
def test_min_scale_when_mins_exceed_cluster(scale_min: bool, want: dict[str, int]) -> None:
    tree = build(
        [
            quota("A", min={GPU: 60}, max={GPU: 100}, weight={GPU: 1}),
            quota("B", min={GPU: 40}, max={GPU: 100}, weight={GPU: 1}),
        ],
        {GPU: 80},
        scale_min=scale_min,
    )
    pending(tree, "a", "A", 70)
    pending(tree, "b", "B", 50)
    assert {n: tree.runtime(n)[GPU] for n in want} == want


def test_q1_q2_runtime_follows_request_up_to_max() -> None:
    tree = build([quota("q", min={"cpu": 4}, max={"cpu": 8})], {"cpu": 100_000})
    tree.upsert_pod("p1", PodEntry("q", {"cpu": 6000}, assigned=True))
    assert tree.runtime("q") == {"cpu": 6000}
    assert tree.node("q").used == {"cpu": 6000}
    pending(tree, "p2", "q", 4000, "cpu")
    assert tree.node("q").request == {"cpu": 10_000}
    assert tree.runtime("q") == {"cpu": 8000}


def test_q7_parent_runtime_and_used_propagate() -> None:
    tree = build(
        [
            quota("P", min={"cpu": 10}, max={"cpu": 10}, is_parent=True),
            quota("C1", min={"cpu": 5}, max={"cpu": 10}, parent="P"),
            quota("C2", min={"cpu": 5}, max={"cpu": 10}, parent="P"),
        ],
        {"cpu": 100_000},
    )
    tree.upsert_pod("c1", PodEntry("C1", {"cpu": 6000}, assigned=True))
    tree.upsert_pod("c2", PodEntry("C2", {"cpu": 3000}, assigned=True))
    pending(tree, "new", "C2", 2000, "cpu")
    assert tree.runtime("P") == {"cpu": 10_000}
    assert (tree.runtime("C1"), tree.runtime("C2")) == ({"cpu": 5000}, {"cpu": 5000})
    assert tree.node("P").used == {"cpu": 9000}


def test_borrowing_then_lender_arrives_shrinks_borrower() -> None:
    tree = build(
        [quota("lender", min={"cpu": 6}, max={"cpu": 10}), quota("borrower", min={"cpu": 4}, max={"cpu": 10})],
        {"cpu": 10_000},
    )
    pending(tree, "b", "borrower", 9000, "cpu")
    assert tree.runtime("borrower") == {"cpu": 9000}
    pending(tree, "l", "lender", 6000, "cpu")
    assert tree.runtime("borrower") == {"cpu": 4000}
    assert tree.runtime("lender") == {"cpu": 6000}


def test_no_lending_holds_min_for_idle_quota() -> None:
    tree = build(
        [quota("hold", min={"cpu": 6}, max={"cpu": 10}, lend=False), quota("other", min={"cpu": 4}, max={"cpu": 10})],
        {"cpu": 10_000},
    )
    pending(tree, "o", "other", 9000, "cpu")
    assert tree.runtime("other") == {"cpu": 4000}
    assert tree.runtime("hold") == {"cpu": 6000}


def test_default_quota_used_leaves_the_tree_budget() -> None:
    tree = QuotaTree(builtin_max={DEFAULT_QUOTA: {"cpu": 1 << 40}})
    tree.set_quotas([quota("q", min={"cpu": 0}, max={"cpu": 10})])
    tree.set_total({"cpu": 10_000})
    tree.upsert_pod("d", PodEntry("ghost", {"cpu": 4000}, assigned=True))
    assert tree.pod("d") == PodEntry(DEFAULT_QUOTA, {"cpu": 4000}, assigned=True)
    pending(tree, "p", "q", 10_000, "cpu")
    assert tree.runtime("q") == {"cpu": 6000}
    assert tree.runtime(DEFAULT_QUOTA) == {"cpu": 1 << 40}


def test_request_masked_to_max_keys_and_removal_restores() -> None:
    tree = build([quota("q", min={"cpu": 1}, max={"cpu": 8})], {"cpu": 8000, "memory": 1 << 30})
    tree.upsert_pod("p", PodEntry("q", {"cpu": 2000, "memory": 100}, assigned=True))
    assert tree.node("q").used == {"cpu": 2000}
    tree.remove_pod("p")
    assert (tree.node("q").used, tree.node("q").request, tree.node(ROOT_QUOTA).used) == ({}, {}, {})


def _random_tree(rng: random.Random) -> list[QuotaRecord]:
    records = []
    for i in range(rng.randint(1, 4)):
        parent_min = rng.randint(0, 40)
        records.append(
            quota(f"p{i}", min={"cpu": parent_min}, max={"cpu": parent_min + rng.randint(0, 60)}, is_parent=True)
        )
        left = parent_min
        for j in range(rng.randint(0, 4)):
            child_min = rng.randint(0, left)
            left -= child_min
            records.append(
                quota(
                    f"p{i}c{j}",
                    min={"cpu": child_min},
                    max={"cpu": child_min + rng.randint(0, 50)},
                    parent=f"p{i}",
                    lend=rng.random() < 0.7,
                    weight={"cpu": rng.randint(0, 5)} if rng.random() < 0.3 else None,
                )
            )
    return records


@pytest.mark.parametrize("check_parent", [False, True], ids=["leaf-only", "check-parent"])
@pytest.mark.parametrize("seed", range(3))
def test_random_pod_churn_keeps_invariants(seed: int, check_parent: bool) -> None:
    """Pod arrivals/assignments/deletions on random trees (10,000 over the seeds of one mode): runtime
    within max, children within parent, an admitted pod never pushes used above runtime, used within max
    (at every quota when parents are checked too, as ``enableCheckParentQuota`` does), and the
    incremental runtime equals a fresh rebuild."""
    rng = random.Random(seed)
    records = _random_tree(rng)
    tree = build(records, {"cpu": rng.randint(20, 150) * 1000})
    leaves = [r.name for r in records if not r.is_parent]
    if not leaves:
        return
    steps = 10_000 // 3 + 1
    live: list[str] = []
    for step in range(steps):
        roll = rng.random()
        if roll < 0.5 or not live:
            key = f"pod-{step}"
            q = rng.choice([*leaves, "ghost"])  # "ghost": no such quota, so the default quota
            request = {"cpu": rng.randint(1, 8) * 500}
            tree.upsert_pod(key, PodEntry(q, request, assigned=False))
            entry = tree.pod(key)
            assert entry is not None
            node = tree.node(entry.quota)
            path = node.path_from_root()[1:] if check_parent else [node]
            limits = [(n, {k: tree.runtime(n.name)[k] for k in n.max}) for n in path]
            if all(n.used.get(k, 0) + request.get(k, 0) <= cap for n, limit in limits for k, cap in limit.items()):
                tree.set_assigned(key, True)
                assert all(n.used.get(k, 0) <= cap for n, limit in limits for k, cap in limit.items())
            live.append(key)
        else:
            tree.remove_pod(live.pop(rng.randrange(len(live))))
        if step % 97 == 0:
            _check_invariants(tree, records, used_within_max_everywhere=check_parent)


def _check_invariants(tree: QuotaTree, records: list[QuotaRecord], *, used_within_max_everywhere: bool) -> None:
    tree.refresh_all()
    for name, node in tree.nodes.items():
        if node.builtin:
            continue
        for k, cap in node.max.items():
            assert node.runtime.get(k, 0) <= cap, name
            if not node.children or used_within_max_everywhere:
                assert node.used.get(k, 0) <= cap, name
        if node.children:
            for k in tree.keys:
                assert sum(c.runtime.get(k, 0) for c in node.children) <= node.runtime.get(k, 0), name
    fresh = QuotaTree(builtin_max={DEFAULT_QUOTA: {"cpu": 10**12, GPU: 10**12}})
    fresh.set_quotas(validate_tree(records)[0].values())
    fresh.set_total(tree._total)
    for key, entry in tree.pods().items():
        fresh.upsert_pod(key, entry)
    fresh.refresh_all()
    assert {n: x.runtime for n, x in fresh.nodes.items()} == {n: x.runtime for n, x in tree.nodes.items()}


def test_koordinator_design_doc_min_guarantee_runtimes() -> None:
    """The design doc's min-guarantee story: at t0 only A asks (100, runtime 100); at t1 B asks too and
    both runtimes are 50, so A is above its runtime by 50 (what preemption or revoking reclaims)."""
    tree = build([quota(n, min={GPU: 50}, max={GPU: 100}) for n in ("A", "B")], {GPU: 100})
    tree.upsert_pod("a", PodEntry("A", {GPU: 100}, assigned=True))
    assert tree.runtime("A") == {GPU: 100}
    pending(tree, "b", "B", 50)
    assert (tree.runtime("A"), tree.runtime("B")) == ({GPU: 50}, {GPU: 50})
    assert tree.node("A").used == {GPU: 100}


def test_version_moves_with_what_runtime_depends_on_and_not_with_used() -> None:
    tree = build([quota("a", min={GPU: 4}, max={GPU: 10}), quota("b", min={GPU: 4}, max={GPU: 10})], {GPU: 10})
    start = tree.version
    pending(tree, "p1", "a", 8)
    after_request = tree.version
    assert after_request > start
    assert tree.runtime("a")[GPU] == 8
    tree.set_assigned("p1", True)  # used of a normal quota: runtime unchanged, version too
    assert tree.version == after_request
    pending(tree, "p2", "b", 6)  # a sibling asks: a's runtime shrinks, so the version must move
    assert tree.version > after_request
    assert tree.runtime("a")[GPU] == 5  # min 4 + half of the 2 left
    before_default = tree.version
    tree.upsert_pod("d1", PodEntry(DEFAULT_QUOTA, {GPU: 2}, assigned=True))  # taken off the root budget
    assert tree.version > before_default
    tree.set_total({GPU: 10})
    same_total = tree.version
    tree.set_total({GPU: 20})
    assert tree.version > same_total
