"""LoadAwareScheduling against the real API server: NodeMetrics with status for 3 nodes; the
koord-scheduler binary keeps pods off the hot node, and sends new pods there once its NodeMetric shows
it cool (and the others hot)."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
CRD = REPO / "deploy" / "crds" / "slo.koordinator.sh_nodemetrics.yaml"
NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
PLUGINS = {"multiPoint": {"enabled": [{"name": "LoadAwareScheduling", "weight": 10}]}}


def install_crd(plane: Any) -> None:
    docs = [d for d in yaml.safe_load_all(CRD.read_text()) if d]
    result = plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", docs[0])
    assert result.status in (201, 409), result.body[:300]
    wait_until(lambda: plane.request("GET", NODEMETRICS).status == 200, timeout=30, what="NodeMetric CRD served")


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    install_crd(control_plane)
    s = Scope.create(control_plane, "load")
    yield s
    for node in s.nodes:
        control_plane.request("DELETE", f"{NODEMETRICS}/{node}")
    s.cleanup()


def report(scope: Scope, node: str, *, cpu: str) -> None:
    """Write the NodeMetric (created if absent) with status as the koordlet would: fresh, with usage."""
    if scope.plane.request("GET", f"{NODEMETRICS}/{node}").status == 404:
        scope.ok(
            "POST",
            NODEMETRICS,
            {
                "apiVersion": "slo.koordinator.sh/v1alpha1",
                "kind": "NodeMetric",
                "metadata": {"name": node},
                "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
            },
        )
    status = {
        "status": {
            "updateTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": cpu, "memory": "1Gi"}}},
        }
    }
    result = scope.plane.request(
        "PATCH", f"{NODEMETRICS}/{node}/status", status, content_type="application/merge-patch+json"
    )
    assert result.status == 200, result.body[:300]


def placements(scope: Scope, prefix: str) -> Counter[str]:
    return Counter(p["spec"].get("nodeName", "") for p in scope.pods() if p["metadata"]["name"].startswith(prefix))


def test_pods_avoid_the_hot_node_until_it_cools(scope: Scope, tmp_path: Path) -> None:
    cool_a, cool_b, hot = (scope.add_node(n, cpu="8", memory="16Gi") for n in ("a", "b", "hot"))
    for node, cpu in ((cool_a, "1"), (cool_b, "1"), (hot, "7")):  # hot: 87.5% > 65% cpu threshold
        report(scope, node, cpu=cpu)
    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = PLUGINS
    proc = SchedulerProcess.start(scope.plane, config, tmp_path)
    try:
        scope.add_pods(scope.pod_body(f"first-{i}", cpu="500m") for i in range(6))
        scope.wait_all_bound(6, timeout=60)
        first = placements(scope, "first-")
        assert hot not in first, first
        assert set(first) == {cool_a, cool_b}, first  # spread by load, not piled on one

        # The koordlets report again: the hot node has cooled down, the other two are now busy.
        for node, cpu in ((hot, "200m"), (cool_a, "7"), (cool_b, "7")):
            report(scope, node, cpu=cpu)
        time.sleep(2)  # let the watch deliver the updates
        scope.add_pods(scope.pod_body(f"second-{i}", cpu="500m") for i in range(3))
        scope.wait_all_bound(9, timeout=60)
        assert placements(scope, "second-") == {hot: 3}
    except AssertionError:
        print(proc.log_tail())
        raise
    finally:
        if proc.alive:
            proc.kill()
