"""Mid-tier resources on the real API server: the chart's slo-controller-config plus
``colocation-config.midCPUThresholdPercent`` gives ``kubernetes.io/mid-{cpu,memory}`` on every node whose
koordlet reports a ``prodReclaimableMetric``; a koord-mid pod (the chart's PriorityClass) schedules on
mid-cpu, one asking for more than any node has does not, and mid resources go with a stale NodeMetric."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

from apis.core.quantity import value
from tests.integration.colocation.test_colocation_cluster import SLO, apply_config, chart_data, scope

pytestmark = pytest.mark.integration
__all__ = ["scope"]

REPO = Path(__file__).resolve().parents[3]
MID_PRIORITY = REPO / "tests/fixtures/koordinator/chart-v1.8.0/priority_koord-mid.yaml"
MID_CPU, MID_MEMORY = "kubernetes.io/mid-cpu", "kubernetes.io/mid-memory"
GI = 1024**3


def report(scope: Scope, node: str, *, reclaimable: tuple[str, str], age: float = 0.0) -> None:
    """NodeMetric status as the koordlet writes it: usage 500m / 2Gi and the predictor's reclaimable."""
    if scope.plane.request("GET", f"{SLO}/nodemetrics/{node}").status == 404:
        body = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": node}}
        result = scope.plane.request("POST", f"{SLO}/nodemetrics", body)
        assert result.status in (201, 409), result.body[:300]
    stamp = (datetime.now(UTC) - timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%SZ")
    usage = {"resources": {"cpu": "500m", "memory": "2Gi"}}
    status = {
        "status": {
            "updateTime": stamp,
            "nodeMetric": {"nodeUsage": usage, "systemUsage": usage},
            "prodReclaimableMetric": {"resource": {"resources": {"cpu": reclaimable[0], "memory": reclaimable[1]}}},
        }
    }
    result = scope.plane.request(
        "PATCH", f"{SLO}/nodemetrics/{node}/status", status, content_type="application/merge-patch+json"
    )
    assert result.status == 200, result.body[:300]


def mid(scope: Scope, node: str) -> tuple[int | None, int | None]:
    """The node's mid-cpu (millicores) and mid-memory (bytes); capacity and allocatable must agree."""
    status = scope.ok("GET", f"/api/v1/nodes/{node}")["status"]
    alloc, cap = status["allocatable"], status["capacity"]
    assert alloc.get(MID_CPU) == cap.get(MID_CPU) and alloc.get(MID_MEMORY) == cap.get(MID_MEMORY)
    return tuple(None if alloc.get(r) is None else value(alloc[r]) for r in (MID_CPU, MID_MEMORY))  # type: ignore[return-value]


def mid_pod(scope: Scope, name: str, *, mid_cpu: str) -> dict[str, Any]:
    """A pod as the colocation webhook leaves a koord-mid pod: mid-cpu in millicores, mid-memory."""
    body = scope.pod_body(name)
    body["spec"]["priorityClassName"] = "koord-mid"
    resources = {MID_CPU: mid_cpu, MID_MEMORY: "1Gi"}
    body["spec"]["containers"][0]["resources"] = {"requests": resources, "limits": resources}
    return body


def test_mid_tier_end_to_end(scope: Scope, tmp_path: Path) -> None:
    priority_class = yaml.safe_load(MID_PRIORITY.read_text())
    result = scope.plane.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", priority_class)
    assert result.status in (201, 409), result.body[:300]
    reporting = [scope.add_node(n, cpu="10", memory="40Gi") for n in ("a", "b")]
    silent = scope.add_node("c", cpu="10", memory="40Gi")
    for node in reporting:
        report(scope, node, reclaimable=("8", "10Gi"))
    data = chart_data()
    data["colocation-config"] = json.dumps({**json.loads(data["colocation-config"]), "midCPUThresholdPercent": 50})
    apply_config(scope, data)
    proc = SchedulerProcess.start(
        scope.plane, scheduler_config(scope), tmp_path, extra_args=[f"--config-namespace={scope.namespace}"]
    )
    try:
        # cpu: min(min(reclaimable 8000, unused 10000 - 500), 50 % of 10000) = 5000 milli;
        # memory: min(reclaimable 10Gi, unused 38Gi), threshold 100 % = 10Gi.
        want = (5000, 10 * GI)
        wait_until(lambda: all(mid(scope, n) == want for n in reporting), timeout=30, what="mid resources")
        assert mid(scope, silent) == (None, None)  # no report from its koordlet: nothing to reclaim

        scope.add_pods([mid_pod(scope, "mid", mid_cpu="3000"), mid_pod(scope, "too-big", mid_cpu="6000")])
        scope.wait_all_bound(1, timeout=30)
        placed = scope.pod("mid")
        assert placed["spec"]["nodeName"] in reporting and placed["spec"]["priority"] == 7000
        wait_until(lambda: bool(scope.events(reason="FailedScheduling")), timeout=20, what="too-big fails")
        assert not scope.pod("too-big")["spec"].get("nodeName")
        assert MID_CPU in scope.events(reason="FailedScheduling")[0]["note"]

        # The predictor reclaims more: mid follows (past resourceDiffThreshold), up to the 50 % cap.
        for node in reporting:
            report(scope, node, reclaimable=("4", "20Gi"))
        wait_until(
            lambda: all(mid(scope, n) == (4000, 20 * GI) for n in reporting),
            timeout=30,
            what="mid resources follow the prediction",
        )

        # Degrade: a NodeMetric older than degradeTimeMinutes takes the mid resources away.
        data["colocation-config"] = json.dumps({"enable": True, "degradeTimeMinutes": 1})
        apply_config(scope, data)
        stale, fresh = reporting
        report(scope, fresh, reclaimable=("4", "20Gi"))
        report(scope, stale, reclaimable=("4", "20Gi"), age=50)
        wait_until(lambda: mid(scope, stale) == (None, None), timeout=30, what="stale node's mid withdrawn")
        assert mid(scope, fresh) == (4000, 20 * GI)
        assert proc.terminate() == 0
    finally:
        if proc.alive:
            proc.kill()
