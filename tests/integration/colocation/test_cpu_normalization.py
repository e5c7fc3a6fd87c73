"""CPU normalization and resource amplification on the real API server: the koordlet's ``cpu-basic-info``
on the NodeResourceTopology and ``cpu-normalization-config`` give the node's ``cpu-normalization-ratio``
annotation (batch-cpu scaled by it) and ``resource-amplification-ratio``; editing the ConfigMap changes
them at once, and switching normalization off writes ``1.00``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

from apis.core.quantity import value
from tests.integration.colocation.test_colocation_cluster import apply_config, chart_data, report, scope

pytestmark = pytest.mark.integration
__all__ = ["scope"]

REPO = Path(__file__).resolve().parents[3]
NRT_CRD = REPO / "deploy/crds/topology.node.k8s.io_noderesourcetopologies.yaml"
NRT = "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies"
MODEL = "Intel(R) Xeon(R) Platinum XXX CPU @ 2.50GHz"
RATIO = "node.koordinator.sh/cpu-normalization-ratio"
AMPLIFICATION = "node.koordinator.sh/resource-amplification-ratio"


def install_nrt(plane: Any) -> None:
    doc = next(d for d in yaml.safe_load_all(NRT_CRD.read_text()) if d)
    result = plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
    assert result.status in (201, 409), result.body[:300]
    wait_until(lambda: plane.request("GET", NRT).status == 200, timeout=30, what="NRT CRD")


def publish_basic_info(scope: Scope, node: str) -> None:
    """The NodeResourceTopology as the koordlet publishes it (only the annotation matters here)."""
    info = json.dumps({"cpuModel": MODEL, "hyperThreadEnabled": True, "turboEnabled": True})
    body = {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {"name": node, "annotations": {"node.koordinator.sh/cpu-basic-info": info}},
        "topologyPolicies": ["None"],
        "zones": [],
    }
    result = scope.plane.request("POST", NRT, body)
    assert result.status in (201, 409), result.body[:300]


def normalization(ratio: float, *, enable: bool = True) -> str:
    return json.dumps(
        {
            "enable": enable,
            "ratioModel": {
                MODEL: {
                    "baseRatio": 1.0,
                    "hyperThreadEnabledRatio": 1.0,
                    "turboEnabledRatio": 1.0,
                    "hyperThreadTurboEnabledRatio": ratio,
                }
            },
        }
    )


def node_state(scope: Scope, node: str) -> tuple[str | None, str | None, int | None]:
    obj = scope.ok("GET", f"/api/v1/nodes/{node}")
    annotations = obj["metadata"].get("annotations") or {}
    batch_cpu = obj["status"]["allocatable"].get("kubernetes.io/batch-cpu")
    return annotations.get(RATIO), annotations.get(AMPLIFICATION), None if batch_cpu is None else value(batch_cpu)


def test_cpu_normalization_follows_the_config(scope: Scope, tmp_path: Path) -> None:
    install_nrt(scope.plane)
    node = scope.add_node("a", cpu="10", memory="40Gi")
    report(scope, node)
    publish_basic_info(scope, node)
    data = chart_data()
    data["cpu-normalization-config"] = normalization(1.2)
    data["resource-amplification-config"] = json.dumps({"enable": True, "resourceAmplificationRatio": {"memory": 1.5}})
    apply_config(scope, data)
    proc = SchedulerProcess.start(
        scope.plane, scheduler_config(scope), tmp_path, extra_args=[f"--config-namespace={scope.namespace}"]
    )
    try:
        # batch-cpu 10000 - 4000 - 500 = 5500, times 1.2
        want = ("1.20", '{"cpu":1.20,"memory":1.50}', 6600)
        wait_until(lambda: node_state(scope, node) == want, timeout=30, what=f"ratio annotations {want}")

        data["cpu-normalization-config"] = normalization(1.5)
        apply_config(scope, data)
        want = ("1.50", '{"cpu":1.50,"memory":1.50}', 8250)
        wait_until(lambda: node_state(scope, node) == want, timeout=15, what=f"edited ratio {want}")

        data["cpu-normalization-config"] = normalization(1.5, enable=False)
        apply_config(scope, data)
        want = ("1.00", '{"memory":1.50}', 5500)
        wait_until(lambda: node_state(scope, node) == want, timeout=15, what=f"normalization off {want}")
        assert proc.terminate() == 0
    finally:
        if proc.alive:
            proc.kill()
        scope.plane.request("DELETE", f"{NRT}/{node}")
