"""ElasticQuota through the whole scheduler (in-memory cluster): admission, accounting, preemption."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from apis.config import parse_scheduler_config
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.app.simulate import SimulationResult, run_simulation
from koord_scheduler.scheduler.memory_source import MemoryCluster

NOW = 1_767_225_600.0

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    preFilter: {enabled: [{name: ElasticQuota}]}
    postFilter:
      disabled: [{name: '*'}]
      enabled: [{name: ElasticQuota}]
    reserve: {enabled: [{name: ElasticQuota}]}
  pluginConfig:
  - name: ElasticQuota
    args: {ARGS}
"""


def node(name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}},
    }


def pod(
    name: str,
    cpu: str,
    *,
    quota: str = "",
    node_name: str = "",
    priority: int = 0,
    ns: str = "default",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    all_labels = dict(labels or {})
    if quota:
        all_labels["quota.scheduling.koordinator.sh/name"] = quota
    spec: dict[str, Any] = {
        "priority": priority,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": all_labels},
        "spec": spec,
    }


def eq(
    name: str,
    min_cpu: str,
    max_cpu: str,
    *,
    parent: str = "",
    is_parent: bool = False,
    ns: str = "default",
    lend: bool = True,
) -> dict[str, Any]:
    labels = {}
    if parent:
        labels["quota.scheduling.koordinator.sh/parent"] = parent
    if is_parent:
        labels["quota.scheduling.koordinator.sh/is-parent"] = "true"
    if not lend:
        labels["quota.scheduling.koordinator.sh/allow-lent-resource"] = "false"
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"min": {"cpu": min_cpu}, "max": {"cpu": max_cpu}},
    }


async def simulate(items: list[dict[str, Any]], args: str = "{}") -> SimulationResult:
    config = parse_scheduler_config(CONFIG.replace("{ARGS}", args), source="test")
    result, _ = await run_simulation(
        None, config, build_registry(use_entry_points=False), now=NOW, cluster_text=yaml.safe_dump_all(items)
    )
    return result


def placed(result: SimulationResult) -> dict[str, str]:
    return {p.name: p.node or p.message for p in result.placements}


def quota_rows(result: SimulationResult) -> dict[str, dict[str, str]]:
    return {r["quota"]: r for r in result.extra_sections["ElasticQuotas"]}


async def test_q2_second_pod_exceeds_runtime_with_koordinator_message() -> None:
    result = await simulate(
        [node("n1", "100"), eq("q", "4", "8"), pod("p1", "6", quota="q", node_name="n1"), pod("p2", "4", quota="q")]
    )
    assert placed(result) == {
        "p2": "0/1 nodes are available: Insufficient quotas, quotaName: q, runtime: cpu:8, used: cpu:6, "
        "pod's request: cpu:4, exceedDimensions: [cpu]. "
        "preemption: No victims found on node n1 for preemptor pod p2"
    }
    assert quota_rows(result)["q"]["used"] == "cpu:6 -> cpu:6"


async def test_q1_pod_within_quota_binds_and_used_grows() -> None:
    result = await simulate([node("n1", "100"), eq("q", "4", "8"), pod("p1", "6", quota="q")])
    assert placed(result) == {"p1": "n1"}
    row = quota_rows(result)["q"]
    assert (row["runtime"], row["used"]) == ("cpu:6", "<empty> -> cpu:6")


async def test_borrowing_up_to_max_then_limited_by_sibling_request() -> None:
    items = [node("n1", "10"), eq("a", "5", "10"), eq("b", "5", "10")]
    items += [pod(f"a{i}", "2", quota="a") for i in range(4)]
    result = await simulate(items)
    assert all(n == "n1" for n in placed(result).values()), placed(result)
    assert quota_rows(result)["a"]["used"] == "<empty> -> cpu:8"


async def test_used_never_above_max() -> None:
    items = [node("n1", "100"), eq("a", "0", "3")] + [pod(f"a{i}", "1", quota="a") for i in range(5)]
    result = await simulate(items)
    bound = [n for n, where in placed(result).items() if where == "n1"]
    assert len(bound) == 3
    assert quota_rows(result)["a"]["used"] == "<empty> -> cpu:3"


async def test_q4_same_quota_lower_priority_victim_is_preempted() -> None:
    items = [
        node("n1", "8"),
        eq("q", "4", "4"),
        pod("low", "4", quota="q", node_name="n1", priority=10),
        pod("high", "4", quota="q", priority=100),
    ]
    result = await simulate(items)
    assert placed(result) == {"high": "n1"}


async def test_q4_other_quota_pods_are_no_victims() -> None:
    items = [
        node("n1", "4"),
        eq("q", "4", "4"),
        eq("other", "0", "4"),
        pod("low", "4", quota="other", node_name="n1", priority=10),
        pod("high", "4", quota="q", priority=100),
    ]
    result = await simulate(items, "{reclaimBorrowedQuota: false}")
    assert placed(result)["high"].endswith("preemption: No victims found on node n1 for preemptor pod high")


async def test_q7_enable_check_parent_quota() -> None:
    items = [
        node("n1", "100"),
        eq("P", "10", "10", is_parent=True),
        eq("C1", "5", "10", parent="P"),
        eq("C2", "5", "10", parent="P"),
        pod("c1", "6", quota="C1", node_name="n1"),
        pod("c2", "3", quota="C2", node_name="n1"),
        pod("new", "2", quota="C2"),
    ]
    off = await simulate(items)
    assert placed(off) == {"new": "n1"}
    on = await simulate(items, "{enableCheckParentQuota: true}")
    assert (
        "Insufficient quotas, quotaNameTopo: [P C2], runtime: cpu:10, used: cpu:9, pod's request: cpu:2, "
        "exceedDimensions: [cpu]" in placed(on)["new"]
    )


async def test_namespace_quota_and_default_quota_mapping() -> None:
    items = [
        node("n1", "100"),
        eq("team-a", "0", "1", ns="team-a"),
        pod("in-ns", "2", ns="team-a"),
        pod("elsewhere", "2", ns="other"),
    ]
    result = await simulate(items)
    assert "quotaName: team-a" in placed(result)["in-ns"]
    assert placed(result)["elsewhere"] == "n1"
    assert quota_rows(result)["koordinator-default-quota"]["used"] == "<empty> -> cpu:2"


async def test_invalid_tree_is_reported_and_skipped() -> None:
    items = [node("n1", "100"), eq("bad", "4", "2"), pod("p", "1", quota="bad")]
    result = await simulate(items)
    assert placed(result) == {"p": "n1"}
    assert quota_rows(result)["bad"]["used"] == "skipped: spec.min.cpu (4) is above spec.max.cpu (2)"


async def test_lender_reclaims_borrowed_quota_from_the_borrower() -> None:
    """B borrows A's idle min (4 pods x 2 cpu on a 10-cpu node); A's pods arrive: B is above its runtime,
    so its pods are evicted one at a time, least important first, until A gets its min."""
    items = [
        node("n1", "10"),
        eq("P", "10", "10", is_parent=True),
        eq("A", "6", "10", parent="P"),
        eq("B", "4", "10", parent="P"),
    ]
    items += [pod(f"b{i}", "2", quota="B", node_name="n1", priority=i) for i in range(4)]
    items += [pod(f"a{i}", "2", quota="A") for i in range(3)]
    result = await simulate(items)
    assert placed(result) == {"a0": "n1", "a1": "n1", "a2": "n1"}
    rows = quota_rows(result)
    assert (rows["A"]["used"], rows["B"]["used"]) == ("<empty> -> cpu:6", "cpu:8 -> cpu:4")
    assert (rows["A"]["runtime"], rows["B"]["runtime"]) == ("cpu:6", "cpu:4")


async def test_koordinator_rule_without_reclaim_leaves_the_lender_pending() -> None:
    items = [node("n1", "10"), eq("A", "6", "10"), eq("B", "4", "10")]
    items += [pod(f"b{i}", "2", quota="B", node_name="n1") for i in range(5)]
    items += [pod("a0", "2", quota="A")]
    result = await simulate(items, "{reclaimBorrowedQuota: false}")
    assert placed(result)["a0"].endswith("preemption: No victims found on node n1 for preemptor pod a0")


async def test_simulate_example_files() -> None:
    """config/simulate/elasticquota-{config,cluster}.yaml give what their header comment says."""
    from pathlib import Path

    from apis.config import load_scheduler_config

    repo = Path(__file__).resolve().parents[5]
    config = load_scheduler_config(repo / "config" / "simulate" / "elasticquota-config.yaml")
    result, _ = await run_simulation(
        repo / "config" / "simulate" / "elasticquota-cluster.yaml",
        config,
        build_registry(use_entry_points=False),
        now=NOW,
    )
    got = placed(result)
    assert {k: v for k, v in got.items() if k != "too-big"} == {f"research-{i}": "node-1" for i in range(3)}
    assert (
        "Insufficient quotas, quotaName: capped, runtime: cpu:0, used: <empty>, pod's request: cpu:2" in got["too-big"]
    )
    rows = quota_rows(result)
    assert (rows["web"]["used"], rows["research"]["used"]) == ("cpu:8 -> cpu:4", "<empty> -> cpu:6")


def test_events_requeue_on_pod_deletion_and_quota_changes() -> None:
    from apis.config.elasticquota_args import ElasticQuotaArgs
    from apis.core.parse import parse_pod
    from koord_scheduler.framework.types import ActionType, ClusterEvent, EventResource, QueueingHint
    from koord_scheduler.plugins.elasticquota.plugin import ElasticQuota

    class Handle:
        snapshot = None
        cluster = None

    def registered(args: ElasticQuotaArgs) -> list[Any]:
        return list(ElasticQuota(args, Handle()).events_to_register())  # type: ignore[arg-type]

    events = registered(ElasticQuotaArgs())
    assert [e.event for e in events] == [
        ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE),
        ClusterEvent(EventResource.ELASTIC_QUOTA, ActionType.ADD | ActionType.UPDATE | ActionType.DELETE),
        ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
    ]
    assert all(e.hint is None for e in events)
    hint = registered(ElasticQuotaArgs(enable_queue_hint=True))[0].hint
    assert hint is not None
    waiting = parse_pod(pod("w", "1"))
    assert hint(waiting, parse_pod(pod("gone", "2", node_name="n1")), None) == QueueingHint.QUEUE
    no_cpu = {**pod("gone", "1", node_name="n1")}
    no_cpu["spec"] = {**no_cpu["spec"], "containers": [{"name": "c", "image": "x"}]}
    assert hint(waiting, parse_pod(no_cpu), None) == QueueingHint.SKIP


async def test_quota_preemption_waits_for_victims_terminating_on_the_nominated_node() -> None:
    # "low" is being deleted after an earlier preemption (DisruptionTarget): the preemptor nominated to
    # its node must not preempt again (upstream podEligibleToPreemptOthers).
    low = pod("low", "4", quota="q", node_name="n1", priority=10)
    low["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    low["status"] = {"conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]}
    high = pod("high", "4", quota="q", priority=100)
    high["status"] = {"nominatedNodeName": "n1"}
    other = pod("other", "4", quota="q", node_name="n2", priority=10)
    result = await simulate([node("n1", "4"), node("n2", "4"), eq("q", "8", "8"), low, other, high])
    assert placed(result)["high"].endswith("preemption: not eligible due to a terminating pod on the nominated node.")


async def test_quota_preemption_marks_the_victim_before_deleting_it(monkeypatch: pytest.MonkeyPatch) -> None:
    items = [
        node("n1", "8"),
        eq("q", "4", "4"),
        pod("low", "4", quota="q", node_name="n1", priority=10),
        pod("high", "4", quota="q", priority=100),
    ]
    marked: list[tuple[str, Any]] = []
    original = MemoryCluster.patch_object_status

    async def recording(self: MemoryCluster, kind: Any, name: str, patch: Any, *, namespace: str = "") -> Any:
        marked.append((name, patch["status"]["conditions"][0]))
        return await original(self, kind, name, patch, namespace=namespace)

    monkeypatch.setattr(MemoryCluster, "patch_object_status", recording)
    config = parse_scheduler_config(CONFIG.replace("{ARGS}", "{}"), source="test")
    result, scheduler = await run_simulation(
        None, config, build_registry(use_entry_points=False), now=NOW, cluster_text=yaml.safe_dump_all(items)
    )
    assert placed(result) == {"high": "n1"}
    assert [(name, c["type"], c["reason"]) for name, c in marked] == [
        ("low", "DisruptionTarget", "PreemptionByScheduler")
    ]
    cluster = scheduler.source
    assert isinstance(cluster, MemoryCluster)
    assert [(e.object_key, e.message) for e in cluster.events if e.reason == "Preempted"] == [
        ("default/low", "Preempted by pod default/high on node n1 (quota preemption)")
    ]
