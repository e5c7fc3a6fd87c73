"""podAssignCache rules (Koordinator pod_assign_cache.go): which pods are still estimated, and the sums."""

from __future__ import annotations

from typing import Any

import pytest

from koord_scheduler.plugins.loadaware.assign_cache import AssignCache, AssignedPod
from tests.unit.scheduler.plugins.loadaware.loadaware_helpers import NOW, node_metric

GI = 1024**3
EST = (850, GI)  # 1 cpu / ~1.4Gi request, already estimated


def cache_with(pod: AssignedPod, **metric: Any) -> AssignCache:
    cache = AssignCache(("cpu", "memory"))
    cache.assign("n1", pod)
    cache.set_metric(node_metric("n1", cpu="2", memory="8Gi", **metric))
    return cache


@pytest.mark.parametrize(
    ("timestamp", "pods", "want_delta"),
    [
        pytest.param(NOW, [], [850, GI], id="not-in-podsMetric-full-estimate"),
        pytest.param(None, [], [850, GI], id="unknown-time-not-reported-full-estimate"),
        pytest.param(
            NOW - 1000, [("ns/p", "300m", "256Mi", "koord-prod")], [0, 0], id="reported-long-ago-not-estimated"
        ),
        pytest.param(None, [("ns/p", "300m", "256Mi", "koord-prod")], [0, 0], id="unknown-time-reported-not-estimated"),
        pytest.param(
            NOW - 60,
            [("ns/p", "300m", "256Mi", "koord-prod")],
            [550, GI - 256 * 1024**2],
            id="assigned-within-report-interval-estimate-minus-usage",
        ),
        pytest.param(
            NOW - 60, [("ns/p", "900m", "2Gi", "koord-prod")], [0, 0], id="usage-above-estimate-delta-clamped-at-zero"
        ),
    ],
)
def test_node_delta(timestamp: float | None, pods: list[tuple[str, str, str, str]], want_delta: list[int]) -> None:
    # The metric was reported 30 s before NOW with a 60 s interval: pods assigned after NOW - 90 s are still
    # estimated even when reported.
    cache = cache_with(AssignedPod("ns/p", EST, prod=True, timestamp=timestamp), pods=pods)
    load = cache.get("n1")
    assert load is not None
    assert load.node_delta == want_delta
    assert load.node_estimated == list(EST)


def test_deadline_forces_estimation() -> None:
    pod = AssignedPod("ns/p", EST, prod=False, timestamp=NOW - 1000, deadline=NOW)
    cache = cache_with(pod, pods=[("ns/p", "300m", "256Mi", "koord-batch")])
    assert cache.get("n1").node_delta == [550, GI - 256 * 1024**2]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("pod_prod", "reported_priority", "want_prod_usage", "want_prod_delta"),
    [
        pytest.param(True, "koord-prod", [300, 256 * 1024**2], [0, 0], id="prod-reported-prod-counts-usage"),
        pytest.param(True, "koord-batch", [0, 0], [850, GI], id="prod-reported-non-prod-full-estimate"),
        pytest.param(False, "koord-prod", [0, 0], [0, 0], id="non-prod-pod-not-in-prod-sums"),
    ],
)
def test_prod_sums(
    pod_prod: bool, reported_priority: str, want_prod_usage: list[int], want_prod_delta: list[int]
) -> None:
    pod = AssignedPod("ns/p", EST, prod=pod_prod, timestamp=NOW - 1000)
    cache = cache_with(pod, pods=[("ns/p", "300m", "256Mi", reported_priority)])
    load = cache.get("n1")
    assert load is not None
    assert (load.prod_usage, load.prod_delta) == (want_prod_usage, want_prod_delta)


def test_new_report_clears_delta_and_unassign_reverts() -> None:
    cache = AssignCache(("cpu", "memory"))
    cache.set_metric(node_metric("n1", cpu="2", memory="8Gi", age=30))
    cache.assign("n1", AssignedPod("ns/p", EST, prod=False, timestamp=NOW))
    assert cache.get("n1").node_delta == [850, GI]  # type: ignore[union-attr]
    # A report 2 intervals later that includes the pod: no longer estimated.
    later = node_metric("n1", cpu="3", memory="9Gi", age=-120, pods=[("ns/p", "1", "1Gi", "koord-batch")])
    cache.set_metric(later)
    load = cache.get("n1")
    assert (load.node_delta, load.node_usage) == ([0, 0], [3000, 9 * GI])  # type: ignore[union-attr]
    assert cache.unassign("n1", "ns/p")
    assert (load.node_delta, load.node_estimated) == ([0, 0], [0, 0])  # type: ignore[union-attr]
    assert not cache.unassign("n1", "ns/p")


def test_node_entry_dropped_when_empty() -> None:
    cache = AssignCache(("cpu", "memory"))
    cache.assign("n1", AssignedPod("ns/p", EST, prod=False, timestamp=NOW))
    cache.unassign("n1", "ns/p")
    assert cache.get("n1") is None and len(cache) == 0


def _sums(cache: AssignCache, name: str) -> tuple[object, ...]:
    load = cache.get(name)
    if load is None:
        return ()
    return (
        sorted(load.pods),
        load.node_usage,
        load.node_delta,
        load.prod_usage,
        load.prod_delta,
        load.node_estimated,
        sorted(load.delta_pods),
    )


def test_incremental_sums_equal_a_rebuild_over_random_steps() -> None:
    """Reserve's path (assign_unreported), assign, unassign, new reports and deleted metrics in random order:
    after every step the sums equal those of a cache built from scratch from the same pods and metric.
    Pods missing from podsMetric keep no contribution record, so removal has to recover theirs."""
    import random

    rng = random.Random(11)
    keys = [f"ns/p{i}" for i in range(8)]
    cache = AssignCache(("cpu", "memory"), prod_usage_include_sys=True)
    metric: Any = None
    pods: dict[str, AssignedPod] = {}
    for step in range(400):
        action = rng.choice(["reserve", "assign", "unassign", "unassign", "report", "delete-metric"])
        key = rng.choice(keys)
        estimate = (rng.randint(0, 2000), rng.randint(0, 4) * GI)
        prod = rng.random() < 0.5
        pod = AssignedPod(key, estimate, prod, rng.choice([None, NOW - 30, NOW - 500]))
        load = cache.get("n1")
        if action == "reserve" and load is not None and load.metric is not None and key not in load.pods:
            if key not in load.metric.pods:
                cache.assign_unreported(load, pod)
                pods[key] = pod
        elif action == "assign":
            cache.assign("n1", pod)
            pods[key] = pod
        elif action == "unassign":
            assert cache.unassign("n1", key) == (pods.pop(key, None) is not None)
        elif action == "report":
            reported = [
                (k, f"{rng.randint(0, 1500)}m", f"{rng.randint(0, 3)}Gi", rng.choice(["koord-prod", "koord-batch"]))
                for k in rng.sample(keys, rng.randint(0, 4))
            ]
            metric = node_metric("n1", cpu=f"{rng.randint(1, 8)}", memory="8Gi", age=rng.choice([0, 90]), pods=reported)
            cache.set_metric(metric)
        elif action == "delete-metric":
            cache.delete_metric("n1")
            metric = None
        rebuilt = AssignCache(("cpu", "memory"), prod_usage_include_sys=True)
        for p in pods.values():
            rebuilt.assign("n1", p)
        if metric is not None and cache.get("n1") is not None and cache.get("n1").metric is not None:  # type: ignore[union-attr]
            rebuilt.set_metric(metric)
        assert _sums(cache, "n1") == _sums(rebuilt, "n1"), step
