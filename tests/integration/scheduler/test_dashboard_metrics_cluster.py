"""Every metric a panel of the chart's koord-scheduler dashboard queries is on the ``/metrics`` of the
koord-scheduler binary, run as the chart runs it (its profile from deploy/, leader election, every
controller) against the real API server."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kubesched import REPO, SchedulerProcess, Scope, scheduler_config, wait_until

from tests.dashboards import dashboard, exprs, metric_names, offered

pytestmark = pytest.mark.integration

CONFIGMAP = REPO / "deploy" / "koord-scheduler" / "configmap.yaml"


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    s = Scope.create(control_plane, "dash")
    yield s
    s.cleanup()


def chart_config(scope: Scope) -> dict[str, Any]:
    """deploy/'s KubeSchedulerConfiguration with this scope's scheduler name and Lease."""
    configmap = next(d for d in yaml.safe_load_all(CONFIGMAP.read_text()) if d and d["kind"] == "ConfigMap")
    config: dict[str, Any] = yaml.safe_load(configmap["data"]["koord-scheduler-config"])
    ours = scheduler_config(scope, leader_elect=True)
    config["leaderElection"] = ours["leaderElection"]
    config["clientConnection"] = ours["clientConnection"]
    config["profiles"][0]["schedulerName"] = scope.scheduler_name
    return config


def test_every_scheduler_panel_metric_is_on_the_binarys_metrics(scope: Scope, tmp_path: Path) -> None:
    proc = SchedulerProcess.start(
        scope.plane, chart_config(scope), tmp_path, extra_args=(f"--config-namespace={scope.namespace}",)
    )
    try:
        wait_until(
            lambda: proc.metric("leader_election_master_status", name=scope.scheduler_name) == 1.0,
            timeout=30,
            what="the Lease",
        )
        status, page = proc.get("/metrics")
        assert status == 200
        wanted = {n for e in exprs(dashboard("koord-scheduler.json")) for n in metric_names(e)}
        assert wanted - offered(page) == set()
    finally:
        proc.kill()
