"""Several quota trees (``tree-id``), each with its own runtime (Koordinator's multi-quota-tree)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from apis.config import parse_scheduler_config
from apis.scheduling.elasticquota import DEFAULT_QUOTA, QuotaRecord, parse_elastic_quota
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.app.simulate import run_simulation
from koord_scheduler.quota.forest import QuotaForest, tree_ids
from koord_scheduler.quota.tree import PodEntry
from koord_scheduler.quota.validation import validate_tree
from tests.unit.scheduler.plugins.elasticquota.test_elasticquota_plugin import CONFIG, NOW, node, placed, pod

P = "quota.scheduling.koordinator.sh/"


def eq_obj(
    name: str,
    *,
    min_cpu: int = 0,
    max_cpu: int = 100,
    parent: str = "",
    is_parent: bool = False,
    tree: str = "",
    total_cpu: int | None = None,
    ignore_default: bool = False,
) -> dict[str, Any]:
    labels = {P + "parent": parent, P + "is-parent": "true" if is_parent else "false"}
    annotations: dict[str, str] = {}
    if tree:
        labels[P + "tree-id"] = tree
    if total_cpu is not None:
        labels[P + "is-root"] = "true"
        annotations[P + "total-resource"] = json.dumps({"cpu": str(total_cpu)})
    if ignore_default:
        labels[P + "ignore-default-tree"] = "true"
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": "default", "labels": labels, "annotations": annotations},
        "spec": {"min": {"cpu": str(min_cpu)}, "max": {"cpu": str(max_cpu)}},
    }


def forest(objs: list[dict[str, Any]], cluster_cpu: int) -> QuotaForest:
    valid, problems = validate_tree(parse_elastic_quota(o) for o in objs)
    assert problems == []
    out = QuotaForest(builtin_max={DEFAULT_QUOTA: {"cpu": 10**9}})
    out.set_quotas(valid.values())
    out.set_total({"cpu": cluster_cpu * 1000})
    return out


def two_trees(*, ignore_default: bool = False) -> list[dict[str, Any]]:
    return [
        eq_obj("a", min_cpu=4),
        eq_obj("t1-root", min_cpu=4, is_parent=True, tree="t1", total_cpu=10, ignore_default=ignore_default),
        eq_obj("t1-a", min_cpu=2, parent="t1-root", tree="t1"),
        eq_obj("t1-b", min_cpu=2, parent="t1-root"),  # no tree-id: its parent's tree
    ]


def ask(f: QuotaForest, key: str, quota: str, cpu: int, *, assigned: bool = False) -> None:
    f.upsert_pod(key, PodEntry(quota, {"cpu": cpu * 1000}, assigned))


@pytest.mark.parametrize(
    ("ignore_default", "default_budget"),
    [
        pytest.param(False, 20, id="tree-total-taken-off-the-default-tree"),
        pytest.param(True, 30, id="ignore-default-tree-keeps-the-default-budget"),
    ],
)
def test_each_tree_splits_its_own_budget(ignore_default: bool, default_budget: int) -> None:
    f = forest(two_trees(ignore_default=ignore_default), cluster_cpu=30)
    assert (f.tree_id("a"), f.tree_id("t1-a"), f.tree_id("t1-b"), f.tree_id(DEFAULT_QUOTA)) == ("", "t1", "t1", "")
    ask(f, "p1", "a", 50)
    ask(f, "p2", "t1-a", 50)
    assert f.runtime("a") == {"cpu": default_budget * 1000}
    assert f.runtime("t1-root") == {"cpu": 10_000}
    ask(f, "p3", "t1-b", 50)  # a sibling in t1 asks: t1's 10 are split, the default tree does not move
    assert f.runtime("t1-a") == {"cpu": 5000} and f.runtime("t1-b") == {"cpu": 5000}
    assert f.runtime("a") == {"cpu": default_budget * 1000}


def test_default_quota_pods_use_the_default_tree_only() -> None:
    f = forest(two_trees(), cluster_cpu=30)
    ask(f, "p1", "a", 50)
    ask(f, "p2", "t1-a", 50)
    ask(f, "d1", DEFAULT_QUOTA, 5, assigned=True)
    assert f.runtime("a") == {"cpu": 15_000}, "30 - 10 (tree t1) - 5 (default quota used)"
    assert f.runtime("t1-a") == {"cpu": 10_000}
    assert f.node(DEFAULT_QUOTA).used == {"cpu": 5000}


def test_a_tree_without_a_total_has_an_empty_budget() -> None:
    objs = [eq_obj("t2-root", is_parent=True, tree="t2"), eq_obj("t2-a", parent="t2-root", tree="t2")]
    f = forest(objs, cluster_cpu=30)
    ask(f, "p", "t2-a", 1)
    assert f.runtime("t2-a") == {"cpu": 0}


def test_pods_follow_their_quota_into_another_tree_and_version_only_grows() -> None:
    f = forest(two_trees(), cluster_cpu=30)
    ask(f, "p", "t1-b", 3, assigned=True)
    assert f.node("t1-root").used == {"cpu": 3000}
    before = f.version
    moved = [parse_elastic_quota(o) for o in two_trees()]
    moved[3] = parse_elastic_quota({**two_trees()[3], "metadata": {**two_trees()[3]["metadata"], "labels": {}}})
    valid, problems = validate_tree(moved)
    assert problems == []
    f.set_quotas(valid.values())
    assert f.version > before
    assert f.tree_id("t1-b") == "", "t1-b now hangs under the root of the default tree"
    assert f.node("t1-b").used == {"cpu": 3000} and f.node("t1-root").used == {}
    assert f.pod("p") == PodEntry("t1-b", {"cpu": 3000}, True)
    assert f.remove_pod("p") is not None and f.node("t1-b").used == {}


def records(objs: list[dict[str, Any]]) -> dict[str, QuotaRecord]:
    return {o["metadata"]["name"]: parse_elastic_quota(o) for o in objs}


def test_tree_ids_inherit_and_a_different_tree_id_than_the_parent_is_refused() -> None:
    objs = [*two_trees(), eq_obj("t2-c", parent="t1-root", tree="t2")]
    assert tree_ids(records(objs))["t1-b"] == "t1"
    valid, problems = validate_tree(parse_elastic_quota(o) for o in objs)
    assert "t2-c" not in valid
    assert [p.message for p in problems] == ["tree id 't2' is different from that of parent quota t1-root ('t1')"]


async def test_admission_in_each_tree_through_the_scheduler() -> None:
    items: list[dict[str, Any]] = [node("n1", "30"), *two_trees()]
    items += [pod(f"a{i}", "3", quota="a") for i in range(7)]
    items += [pod(f"t{i}", "3", quota="t1-a") for i in range(4)]
    config = parse_scheduler_config(CONFIG.replace("{ARGS}", "{}"), source="test")
    result, _ = await run_simulation(
        None, config, build_registry(use_entry_points=False), now=NOW, cluster_text=yaml.safe_dump_all(items)
    )
    outcome = placed(result)
    assert sum(1 for k, v in outcome.items() if k.startswith("a") and v == "n1") == 6, outcome  # 20 cpu
    assert sum(1 for k, v in outcome.items() if k.startswith("t") and v == "n1") == 3, outcome  # 10 cpu
    rejected = [v for k, v in outcome.items() if k.startswith("t") and v != "n1"]
    assert len(rejected) == 1 and "quotaName: t1-a, runtime: cpu:10, used: cpu:9" in rejected[0]
