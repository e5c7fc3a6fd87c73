"""NUMA-level batch resources on the real API server: the noderesource controller writes each zone's
``kubernetes.io/batch-cpu`` / ``batch-memory`` into the node's NodeResourceTopology (conditional on its
resourceVersion) beside the node-level values, and follows a new report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

from apis.core.quantity import value
from tests.integration.colocation.test_colocation_cluster import apply_config, batch, chart_data, report, scope
from tests.integration.colocation.test_cpu_normalization import NRT, install_nrt

pytestmark = pytest.mark.integration
__all__ = ["scope"]
GI = 1024**3


def zone(name: str) -> dict[str, Any]:
    resources = [
        {"name": n, "capacity": v, "allocatable": v, "available": v} for n, v in (("cpu", "5"), ("memory", "20Gi"))
    ]
    return {"name": name, "type": "Node", "resources": resources}


def zone_batch(scope: Scope, node: str) -> dict[str, tuple[int, int]]:
    obj = scope.ok("GET", f"{NRT}/{node}")
    out: dict[str, tuple[int, int]] = {}
    for z in obj.get("zones") or []:
        amounts = {r["name"]: value(r["allocatable"]) for r in z.get("resources") or []}
        if "kubernetes.io/batch-cpu" in amounts:
            out[z["name"]] = (amounts["kubernetes.io/batch-cpu"], amounts["kubernetes.io/batch-memory"])
    return out


def test_zone_batch_resources(scope: Scope, tmp_path: Path) -> None:
    install_nrt(scope.plane)
    node = scope.add_node("a", cpu="10", memory="40Gi")
    body = {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {"name": node},
        "topologyPolicies": ["None"],
        "zones": [zone("node-0"), zone("node-1")],
    }
    scope.ok("POST", NRT, body)
    report(scope, node)  # system usage 500m / 2Gi
    apply_config(scope, chart_data())
    proc = SchedulerProcess.start(
        scope.plane, scheduler_config(scope), tmp_path, extra_args=[f"--config-namespace={scope.namespace}"]
    )
    try:
        # per zone: 5000 - 2000 (40 %) - 250 = 2750 milli; 20Gi - 7Gi (35 %) - 1Gi = 12Gi
        want = {"node-0": (2750, 12 * GI), "node-1": (2750, 12 * GI)}
        wait_until(lambda: zone_batch(scope, node) == want, timeout=30, what=f"zone batch {want}")
        assert batch(scope, node) == (5500, 24 * GI)
        assert proc.terminate() == 0
    finally:
        if proc.alive:
            proc.kill()
        scope.plane.request("DELETE", f"{NRT}/{node}")
