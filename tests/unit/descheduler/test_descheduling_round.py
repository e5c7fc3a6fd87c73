"""One descheduling round: the example cluster and configuration, the eviction limits, dry runs, the
what-if command and the PodMigrationJob a planned migration becomes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apis.config.descheduler import MigrationControllerArgs, load_descheduler_config, parse_descheduler_config
from apis.core.types import Pod
from apis.scheduling.migration import parse_pod_migration_job
from apis.slo.nodemetric_record import parse_node_metric
from koord_scheduler.app.cluster_file import load_cluster_file
from koord_scheduler.app.deschedule import deschedule_main
from koord_scheduler.descheduler.lownodeload.plugin import ClusterView
from koord_scheduler.descheduler.round import Descheduler, PlannedMigration, job_for

REPO = Path(__file__).resolve().parents[3]
CLUSTER = REPO / "config" / "simulate" / "descheduling-cluster.yaml"
CONFIG = REPO / "config" / "descheduler" / "descheduler-config.yaml"
NOW = 1767227401.0  # just after the NodeMetrics' updateTime


def _view() -> ClusterView:
    cluster = load_cluster_file(CLUSTER, {"NodeMetric": parse_node_metric})
    assert cluster.problems == []
    metrics = {r.name: r for r in (parse_node_metric(raw) for _, raw in cluster.objects["NodeMetric"])}
    pods: dict[str, list[Pod]] = {}
    for pod in cluster.pods:
        pods.setdefault(pod.node_name, []).append(pod)
    return ClusterView(sorted(cluster.nodes, key=lambda n: n.name), pods, metrics, NOW)


def _descheduler(extra: str = "") -> Descheduler:
    text = CONFIG.read_text() + extra
    config, args = parse_descheduler_config(text)
    return Descheduler(config, args, clock=lambda: NOW)


def test_example_round_moves_one_pod_from_each_hot_node() -> None:
    plan = _descheduler().plan(_view())
    assert [(m.key, m.node) for m in plan.migrations] == [("default/web-3", "node-a"), ("default/api-0", "node-b")]
    assert plan.migrations[0].reason == "node is overutilized, node cpu usage(87.50%)>threshold(75.00%)"


def test_pods_already_migrating_are_left_alone() -> None:
    plan = _descheduler().plan(_view(), migrating={"default/web-3"})
    assert [m.key for m in plan.migrations] == ["default/web-2", "default/api-0"]


def _with_migration_args(extra: str) -> Descheduler:
    text = CONFIG.read_text().replace("      evictBurst: 1\n", "      evictBurst: 1\n" + extra)
    config, args = parse_descheduler_config(text)
    return Descheduler(config, args, clock=lambda: NOW)


@pytest.mark.parametrize(
    ("extra", "api_planned"),
    [
        ("", True),  # 3 replicas, 1 may be unavailable
        ("      maxUnavailablePerWorkload: 3\n", False),  # all of api's 3 replicas: the arbitration refuses
        ("      maxUnavailablePerWorkload: 3\n      skipCheckExpectedReplicas: true\n", True),
        ("      maxUnavailablePerWorkload: 3\n      skipEvictionGates: [ExpectedReplicas]\n", True),
    ],
)
def test_a_workload_the_arbitration_would_refuse_is_not_planned(extra: str, api_planned: bool) -> None:
    """Koordinator's MigrationController Filter (filterExpectedReplicas) keeps such pods out of the plan."""
    keys = [m.key for m in _with_migration_args(extra).plan(_view()).migrations]
    assert ("default/api-0" in keys) is api_planned, keys
    assert "default/web-3" in keys  # 4 replicas, 3 may be unavailable: not all of them


def test_total_limit_cuts_the_plan() -> None:
    plan = _descheduler("maxNoOfPodsToEvictTotal: 1\n").plan(_view())
    assert [m.key for m in plan.migrations] == ["default/web-3"]
    assert any("maxNoOfPodsToEvictTotal (1) reached" in n for n in plan.notes)


def test_plugin_dry_run_plans_nothing_and_says_so() -> None:
    text = CONFIG.read_text().replace("      useDeviationThresholds: false", "      dryRun: true")
    config, args = parse_descheduler_config(text)
    plan = Descheduler(config, args, clock=lambda: NOW).plan(_view())
    assert plan.migrations == ()
    assert any("dryRun: would migrate default/web-3 from node-a" in n for n in plan.notes)


def test_default_anomaly_condition_waits_for_more_than_five_rounds() -> None:
    text = CONFIG.read_text().replace("      anomalyCondition:\n        consecutiveAbnormalities: 1\n", "")
    config, args = parse_descheduler_config(text)
    descheduler = Descheduler(config, args, clock=lambda: NOW)
    view = _view()
    rounds = [len(descheduler.plan(view).migrations) for _ in range(6)]
    assert rounds == [0, 0, 0, 0, 0, 2]


def test_job_for_a_planned_migration() -> None:
    migration = PlannedMigration(
        "default", "web-3", "node-a", "node-d", "node is overutilized", "LowNodeLoad", "koord-descheduler"
    )
    body = job_for(migration, MigrationControllerArgs(), name="j1")
    job = parse_pod_migration_job(body)
    assert (job.pod_namespace, job.pod_name, job.mode, job.ttl_seconds) == (
        "default",
        "web-3",
        "ReservationFirst",
        300.0,
    )
    assert job.annotations == {
        "koordinator.sh/evict-trigger": "LowNodeLoad",
        "koordinator.sh/evict-reason": "node is overutilized",
    }


def test_what_if_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert deschedule_main(["--cluster", str(CLUSTER), "--config", str(CONFIG), "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(m["pod"], m["node"], m["target"]) for m in out["migrations"]] == [
        ("default/web-3", "node-a", "node-d"),
        ("default/api-0", "node-b", "node-d"),
    ]


def test_what_if_refuses_a_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(CONFIG.read_text().replace("lowThresholds:", "lowThreshold:"))
    assert deschedule_main(["--cluster", str(CLUSTER), "--config", str(bad)]) == 2
    assert "profiles[0].pluginConfig[1].args.lowThreshold: Unknown field" in capsys.readouterr().err


def test_config_file_loads() -> None:
    config, _ = load_descheduler_config(CONFIG)
    assert config.descheduling_interval == 60.0
