"""The chart's Grafana dashboards: off by default, a ConfigMap with the sidecar's label when on, valid
dashboards, and every metric a panel queries on koordlet's ``/metrics`` (koord-scheduler's are checked
against the binary on a real API server: tests/integration/scheduler/test_dashboard_metrics_cluster.py)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.dashboards import DASHBOARDS, dashboard, exprs, metric_names, offered
from tests.helmchart import CHART, find, helm, objects, template

KOORDLET = Path(sys.executable).parent / "koordlet"


def test_off_by_default() -> None:
    assert not [d for d in objects(template()) if d["metadata"]["name"] == "pykoord-grafana-dashboards"]


def test_on_a_configmap_with_the_sidecar_label_holds_both_dashboards() -> None:
    docs = objects(
        template("--set", "grafanaDashboards.enabled=true", "--set", "grafanaDashboards.namespace=monitoring")
    )
    config_map = find(docs, "ConfigMap", "pykoord-grafana-dashboards")
    assert config_map["metadata"]["namespace"] == "monitoring"
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["pykoord-koord-scheduler.json"]) == dashboard("koord-scheduler.json")
    assert json.loads(config_map["data"]["pykoord-koordlet.json"]) == dashboard("koordlet.json")
    result = helm("lint", "--strict", str(CHART), "--set", "grafanaDashboards.enabled=true")
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("name", ["koord-scheduler.json", "koordlet.json"])
def test_dashboards_are_well_formed(name: str) -> None:
    board = dashboard(name)
    assert board["uid"] and board["title"].startswith("pykoord / ")
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        assert panel["targets"], panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        for target in panel["targets"]:
            assert metric_names(target["expr"]), target["expr"]
    assert {v["name"] for v in board["templating"]["list"]} == {"datasource"}


def test_the_scheduler_dashboard_covers_what_operators_ask() -> None:
    queried = set().union(*(metric_names(e) for e in exprs(dashboard("koord-scheduler.json"))))
    assert {
        "scheduler_schedule_attempts_total",  # throughput
        "scheduler_framework_extension_point_duration_seconds_bucket",  # latency by extension point
        "scheduler_pending_pods",  # queue depth
        "scheduler_unschedulable_pods",  # pending reasons
        "koord_scheduler_colocation_writes_total",  # controller writes
        "scheduler_scheduling_timeout_total",  # slow attempts
    } <= queried
    koordlet = set().union(*(metric_names(e) for e in exprs(dashboard("koordlet.json"))))
    assert {"koordlet_pod_eviction_total", "koordlet_be_suppress_cpu_cores", "koordlet_feature_gate_active"} <= koordlet


@pytest.mark.parametrize(
    ("expr", "want"),
    [
        pytest.param('sum by (result) (rate(a_total{x="y"}[5m]))', {"a_total"}, id="grouping-and-matchers"),
        pytest.param("histogram_quantile(0.99, sum by (le, p) (rate(h_bucket[5m])))", {"h_bucket"}, id="quantile"),
        pytest.param("100 * used / total", {"used", "total"}, id="binary"),
        pytest.param('topk(10, g{label="a b (c)"})', {"g"}, id="string-with-parentheses"),
    ],
)
def test_metric_names(expr: str, want: set[str]) -> None:
    assert metric_names(expr) == want


def test_every_koordlet_panel_metric_is_on_koordlets_metrics() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    gates = ",".join(f"{k}={str(v).lower()}" for k, v in values["koordlet"]["featureGates"].items())
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    agent = subprocess.Popen(
        [
            str(KOORDLET),
            "--node-name",
            "demo",
            "--standalone",
            "--duration",
            "20",
            "--metrics-port",
            str(port),
            "--metrics-host",
            "127.0.0.1",
            "--feature-gates",
            gates,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        page = ""
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
                    page = resp.read().decode()
                break
            except OSError:
                time.sleep(0.2)
        assert page, "koordlet served no /metrics"
    finally:
        agent.terminate()
        agent.wait(10)
    missing = {n for e in exprs(dashboard("koordlet.json")) for n in metric_names(e)} - offered(page)
    assert missing == set()


def test_the_dashboard_files_are_in_the_chart() -> None:
    assert {p.name for p in DASHBOARDS.glob("*.json")} == {"koord-scheduler.json", "koordlet.json"}
