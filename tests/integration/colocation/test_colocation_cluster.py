"""The colocation loop on the real API server: the chart's slo-controller-config → NodeSLOs and batch
resources → a BE pod scheduled on batch-cpu; config edits, an invalid key, and degrade on stale
NodeMetrics. koord-scheduler runs as a subprocess with the colocation controllers on and the
ConfigMap in the test's own namespace (``--config-namespace``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

from apis.core.quantity import value

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
CRDS = [REPO / "deploy" / "crds" / f"slo.koordinator.sh_{plural}.yaml" for plural in ("nodemetrics", "nodeslos")]
CHART_CONFIG = REPO / "tests/fixtures/koordinator/chart-v1.8.0/slo-controller-config.yaml"
SLO = "/apis/slo.koordinator.sh/v1alpha1"
BATCH_CPU, BATCH_MEMORY = "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"
GI = 1024**3


def install_crds(plane: Any) -> None:
    for crd in CRDS:
        doc = next(d for d in yaml.safe_load_all(crd.read_text()) if d)
        result = plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
        assert result.status in (201, 409), result.body[:300]
    for plural in ("nodemetrics", "nodeslos"):
        wait_until(lambda p=plural: plane.request("GET", f"{SLO}/{p}").status == 200, timeout=30, what=f"{plural}")


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    install_crds(control_plane)
    s = Scope.create(control_plane, "coloc")
    yield s
    for node in s.nodes:
        for plural in ("nodemetrics", "nodeslos"):
            control_plane.request("DELETE", f"{SLO}/{plural}/{node}")
    s.cleanup()


def chart_data() -> dict[str, str]:
    text = CHART_CONFIG.read_text().replace("{{ .Values.installation.namespace }}", "x")
    data: dict[str, str] = yaml.safe_load(text)["data"]
    return data


def apply_config(scope: Scope, data: dict[str, str]) -> None:
    path = f"/api/v1/namespaces/{scope.namespace}/configmaps"
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "slo-controller-config"}, "data": data}
    if scope.plane.request("GET", f"{path}/slo-controller-config").status == 404:
        scope.ok("POST", path, body)
    else:
        scope.ok("PUT", f"{path}/slo-controller-config", body)


def report(scope: Scope, node: str, *, age: float = 0.0) -> None:
    """NodeMetric status as the koordlet writes it: system usage 500m / 2Gi, ``age`` seconds old."""
    if scope.plane.request("GET", f"{SLO}/nodemetrics/{node}").status == 404:
        body = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": node}}
        result = scope.plane.request("POST", f"{SLO}/nodemetrics", body)
        assert result.status in (201, 409), result.body[:300]
    stamp = (datetime.now(UTC) - timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%SZ")
    usage = {"resources": {"cpu": "500m", "memory": "2Gi"}}
    status = {"status": {"updateTime": stamp, "nodeMetric": {"nodeUsage": usage, "systemUsage": usage}}}
    result = scope.plane.request(
        "PATCH", f"{SLO}/nodemetrics/{node}/status", status, content_type="application/merge-patch+json"
    )
    assert result.status == 200, result.body[:300]


def batch(scope: Scope, node: str) -> tuple[int | None, int | None]:
    """The node's batch-cpu (milli-cores) and batch-memory (bytes); capacity and allocatable must agree."""
    status = scope.ok("GET", f"/api/v1/nodes/{node}")["status"]
    alloc, cap = status["allocatable"], status["capacity"]
    assert alloc.get(BATCH_CPU) == cap.get(BATCH_CPU) and alloc.get(BATCH_MEMORY) == cap.get(BATCH_MEMORY)
    return tuple(None if alloc.get(r) is None else value(alloc[r]) for r in (BATCH_CPU, BATCH_MEMORY))  # type: ignore[return-value]


def node_slo(scope: Scope, node: str) -> dict[str, Any] | None:
    result = scope.plane.request("GET", f"{SLO}/nodeslos/{node}")
    return result.json()["spec"] if result.status == 200 else None


def be_pod(scope: Scope, name: str, *, batch_cpu: str) -> dict[str, Any]:
    body = scope.pod_body(name)
    body["metadata"]["labels"] = {"koordinator.sh/qosClass": "BE"}
    resources = {BATCH_CPU: batch_cpu, BATCH_MEMORY: "1Gi"}
    body["spec"]["containers"][0]["resources"] = {"requests": resources, "limits": resources}
    return body


def test_colocation_loop(scope: Scope, tmp_path: Path) -> None:
    nodes = [scope.add_node(n, cpu="10", memory="40Gi") for n in ("a", "b")]
    for node in nodes:
        report(scope, node)
    apply_config(scope, chart_data())
    proc = SchedulerProcess.start(
        scope.plane, scheduler_config(scope), tmp_path, extra_args=[f"--config-namespace={scope.namespace}"]
    )
    try:
        # 10 cores - 40% margin - 500m system = 5500m; 40Gi - 14Gi - 2Gi = 24Gi (usage policy, defaults).
        want = (5500, 24 * GI)
        wait_until(lambda: all(batch(scope, n) == want for n in nodes), timeout=30, what="batch resources")
        wait_until(lambda: all(node_slo(scope, n) is not None for n in nodes), timeout=30, what="NodeSLOs")
        spec = node_slo(scope, nodes[0])
        assert spec is not None
        assert spec["resourceUsedThresholdWithBE"] == {
            "enable": True,
            "cpuSuppressThresholdPercent": 65,
            "cpuSuppressPolicy": "cpuset",
            "memoryEvictThresholdPercent": 70,
            "cpuEvictPolicy": "evictByRealLimit",
        }
        metric_spec = scope.ok("GET", f"{SLO}/nodemetrics/{nodes[0]}")["spec"]
        assert metric_spec["metricCollectPolicy"]["reportIntervalSeconds"] == 60

        # A BE pod on batch-cpu schedules; one asking for more than any node's batch-cpu does not.
        scope.add_pods([be_pod(scope, "be", batch_cpu="1000"), be_pod(scope, "too-big", batch_cpu="6000")])
        scope.wait_all_bound(1, timeout=30)
        assert scope.pod("be")["spec"]["nodeName"] in nodes
        wait_until(lambda: bool(scope.events(reason="FailedScheduling")), timeout=20, what="too-big fails")
        assert not scope.pod("too-big")["spec"].get("nodeName")
        assert "kubernetes.io/batch-cpu" in scope.events(reason="FailedScheduling")[0]["note"]

        # resource-threshold-config changes: every NodeSLO follows.
        data = chart_data()
        data["resource-threshold-config"] = json.dumps(
            {"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 50}}
        )
        apply_config(scope, data)
        wait_until(
            lambda: all(
                (node_slo(scope, n) or {}).get("resourceUsedThresholdWithBE", {}).get("cpuSuppressThresholdPercent")
                == 50
                for n in nodes
            ),
            timeout=30,
            what="NodeSLOs at 50%",
        )

        # An invalid key keeps its last value and raises an Event; a valid change beside it applies.
        data["resource-threshold-config"] = json.dumps({"clusterStrategy": {"cpuSuppressThresholdPercent": 150}})
        data["cpu-burst-config"] = json.dumps({"clusterStrategy": {"policy": "auto"}})
        apply_config(scope, data)
        wait_until(
            lambda: all((node_slo(scope, n) or {}).get("cpuBurstStrategy", {}).get("policy") == "auto" for n in nodes),
            timeout=30,
            what="cpu-burst-config applied",
        )
        for n in nodes:
            assert node_slo(scope, n)["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 50  # type: ignore[index]
        wait_until(lambda: bool(scope.events(reason="SLOCfgUnmarshalFailed")), timeout=20, what="config Event")
        event = scope.events(reason="SLOCfgUnmarshalFailed")[0]
        assert (event["type"], event["regarding"]["kind"], event["regarding"]["name"]) == (
            "Warning",
            "ConfigMap",
            "slo-controller-config",
        )
        assert "resource-threshold-config: clusterStrategy.cpuSuppressThresholdPercent: 150" in event["note"]
        assert proc.metric("koord_scheduler_slo_config_invalid_total", key="resource-threshold-config") >= 1

        # Degrade: with degradeTimeMinutes 1, a NodeMetric 50 s old loses its batch resources ~10 s later;
        # the node whose koordlet keeps reporting keeps them.
        data["colocation-config"] = json.dumps({"enable": True, "degradeTimeMinutes": 1})
        apply_config(scope, data)
        stale, fresh = nodes
        report(scope, fresh)
        report(scope, stale, age=50)
        wait_until(lambda: batch(scope, stale) == (None, None), timeout=30, what="stale node's batch withdrawn")
        assert batch(scope, fresh) == want
        # The koordlet comes back: batch resources return.
        report(scope, stale)
        wait_until(lambda: batch(scope, stale) == want, timeout=30, what="batch resources back")
        assert proc.terminate() == 0
    finally:
        if proc.alive:
            proc.kill()


def test_controllers_only_without_config_map(scope: Scope, tmp_path: Path) -> None:
    """``--scheduling=false``: no pod is scheduled, the controllers still work. Without the ConfigMap,
    missing NodeSLOs get Koordinator's defaults and a hand-written one is left alone, until the
    ConfigMap appears."""
    nodes = [scope.add_node(n, cpu="10", memory="40Gi") for n in ("a", "b")]
    plain, hand_written = nodes
    custom = {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 42}}
    scope.ok(
        "POST",
        f"{SLO}/nodeslos",
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeSLO",
            "metadata": {"name": hand_written},
            "spec": custom,
        },
    )
    report(scope, plain)
    scope.plane.request("DELETE", f"{SLO}/nodemetrics/{hand_written}")
    scope.add_pods([scope.pod_body("waits")])
    proc = SchedulerProcess.start(
        scope.plane,
        scheduler_config(scope),
        tmp_path,
        extra_args=["--scheduling=false", f"--config-namespace={scope.namespace}"],
    )
    try:
        wait_until(lambda: node_slo(scope, plain) is not None, timeout=30, what="default NodeSLO")
        assert node_slo(scope, plain)["resourceUsedThresholdWithBE"]["enable"] is False  # type: ignore[index]
        wait_until(
            lambda: scope.plane.request("GET", f"{SLO}/nodemetrics/{hand_written}").status == 200,
            timeout=30,
            what="NodeMetric created by the nodemetric controller",
        )
        created = scope.ok("GET", f"{SLO}/nodemetrics/{hand_written}")
        assert created["spec"]["metricCollectPolicy"] == {
            "aggregateDurationSeconds": 300,
            "reportIntervalSeconds": 60,
            "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
            "nodeMemoryCollectPolicy": "usageWithoutPageCache",
        }
        assert node_slo(scope, hand_written) == custom
        assert batch(scope, plain) == (None, None)  # colocation is off by default
        assert not scope.pod("waits")["spec"].get("nodeName")
        assert (
            proc.metric("koord_scheduler_colocation_writes_total", controller="nodemetric", verb="POST", result="ok")
            >= 1
        )

        apply_config(scope, chart_data())
        wait_until(
            lambda: (
                (node_slo(scope, hand_written) or {})
                .get("resourceUsedThresholdWithBE", {})
                .get("cpuSuppressThresholdPercent")
                == 65
            ),
            timeout=30,
            what="NodeSLO follows the ConfigMap",
        )
        wait_until(lambda: batch(scope, plain) == (5500, 24 * GI), timeout=30, what="batch resources")
        assert not scope.pod("waits")["spec"].get("nodeName")
        assert proc.terminate() == 0
    finally:
        if proc.alive:
            proc.kill()
