"""Host applications on the real API server: ``host-application-config`` → NodeSLO ``hostApplications``
(an ``extensions`` entry written into the NodeSLO survives), and the koordlet's ``hostApplicationMetric``
of a koord-prod application lowers batch-cpu."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

from tests.integration.colocation.test_colocation_cluster import SLO, apply_config, batch, chart_data, node_slo, scope

pytestmark = pytest.mark.integration
__all__ = ["scope"]
GI = 1024**3
NGINX = {
    "name": "nginx",
    "priority": "koord-prod",
    "qos": "LS",
    "cgroupPath": {"base": "CgroupRoot", "parentDir": "host-latency-sensitive/", "relativePath": "nginx/"},
}


def test_host_applications(scope: Scope, tmp_path: Path) -> None:
    node = scope.add_node("a", cpu="10", memory="40Gi")
    scope.ok(
        "POST",
        f"{SLO}/nodemetrics",
        {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": node}},
    )
    from datetime import UTC, datetime

    usage = {"resources": {"cpu": "500m", "memory": "2Gi"}}
    status = {
        "status": {
            "updateTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "nodeMetric": {"nodeUsage": usage, "systemUsage": usage},
            "hostApplicationMetric": [
                {
                    "name": "nginx",
                    "priority": "koord-prod",
                    "qos": "LS",
                    "usage": {"resources": {"cpu": "1500m", "memory": "4Gi"}},
                }
            ],
        }
    }
    result = scope.plane.request(
        "PATCH", f"{SLO}/nodemetrics/{node}/status", status, content_type="application/merge-patch+json"
    )
    assert result.status == 200, result.body[:300]
    data = chart_data()
    data["host-application-config"] = json.dumps({"applications": [NGINX]})
    apply_config(scope, data)
    proc = SchedulerProcess.start(
        scope.plane, scheduler_config(scope), tmp_path, extra_args=[f"--config-namespace={scope.namespace}"]
    )
    try:
        wait_until(
            lambda: (node_slo(scope, node) or {}).get("hostApplications") == [NGINX],
            timeout=30,
            what="NodeSLO hostApplications",
        )
        assert node_slo(scope, node)["extensions"] == {"Object": {}}  # type: ignore[index]
        # system 500m + prod host app 1500m: 10000 - 4000 - 2000 = 4000; 40Gi - 14Gi - (2 + 4)Gi = 20Gi
        wait_until(lambda: batch(scope, node) == (4000, 20 * GI), timeout=30, what="batch minus the host app")

        # a third party's extension in the NodeSLO survives the next rendering
        patch = [{"op": "replace", "path": "/spec/extensions", "value": {"Object": {"vendor": {"on": True}}}}]
        result = scope.plane.request(
            "PATCH", f"{SLO}/nodeslos/{node}", patch, content_type="application/json-patch+json"
        )
        assert result.status == 200, result.body[:300]
        data["host-application-config"] = json.dumps({"applications": []})
        apply_config(scope, data)
        wait_until(
            lambda: "hostApplications" not in (node_slo(scope, node) or {"hostApplications": 1}),
            timeout=30,
            what="hostApplications removed",
        )
        assert node_slo(scope, node)["extensions"] == {"Object": {"vendor": {"on": True}}}  # type: ignore[index]
        assert proc.terminate() == 0
    finally:
        if proc.alive:
            proc.kill()
