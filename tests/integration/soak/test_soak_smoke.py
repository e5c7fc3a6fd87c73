"""bench/soak.py in small (about a minute): pod churn over the test run's kwok nodes with NodeMetrics
updating, one hostile NodeMetric, one leader kill and one API-server restart; every invariant holds."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.integration

BENCH = Path(__file__).resolve().parents[3] / "bench"


def load_soak() -> ModuleType:
    if "soak" not in sys.modules:
        spec = importlib.util.spec_from_file_location("soak", BENCH / "soak.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["soak"] = module
        spec.loader.exec_module(module)
    return sys.modules["soak"]


def test_short_soak_keeps_every_invariant(control_plane: Any, tmp_path: Path) -> None:
    soak = load_soak()
    nodes = [
        n["metadata"]["name"]
        for n in control_plane.request("GET", "/api/v1/nodes?labelSelector=type%3Dkwok").json()["items"]
        if n["metadata"]["name"].startswith("kwok-node-")
    ]
    assert nodes, "the test run has no kwok nodes"
    # A short lease, so the killed leader's successor takes over within seconds.
    options = soak.SoakOptions(
        minutes=0.35, rate=3, lifetime=6, chaos_every=6, metric_every=3, rss_every=3, drain=40, lease=("6s", "4s", "1s")
    )
    report = soak.run_soak(control_plane, nodes, tmp_path, options)

    assert report.violations() == []
    kinds = [action.split()[0] for _, action in report.chaos]
    assert kinds[:3] == ["hostile", "kill-leader", "restart-apiserver"], report.chaos
    assert "nodemetric-overflow" in report.chaos[0][1]
    assert "no leader found" not in report.chaos[1][1]
    assert report.created >= 30 and report.bound == report.created, (report.created, report.bound)
    assert report.deleted > 0
    # Both replicas were sampled, and the one started after the kill too.
    assert {"a1", "b1"} <= {name for _, name, _, _ in report.rss}
    assert len({name for _, name, _, _ in report.rss}) >= 3
    assert report.latency_ms["max"] < 60_000
    # Everything the soak made is gone again.
    namespace = control_plane.request("GET", f"/api/v1/namespaces/{report.namespace}")
    assert namespace.status == 404 or namespace.json()["status"].get("phase") == "Terminating"
