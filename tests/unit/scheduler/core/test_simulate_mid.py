"""``simulate`` with NodeMetrics that carry ``prodReclaimableMetric``: the node table shows the mid tier
the noderesource controller would write, and koord-mid pods schedule on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from koord_scheduler.app.cli import new_scheduler_command
from tests.builders import make_node, make_pod

MID_CPU, MID_MEMORY = "kubernetes.io/mid-cpu", "kubernetes.io/mid-memory"


def node_metric(name: str, reclaimable: tuple[str, str] | None) -> dict[str, object]:
    from datetime import UTC, datetime

    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # fresh, or LoadAwareScheduling filters the node
    status: dict[str, object] = {
        "updateTime": stamp,
        "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1", "memory": "4Gi"}}},
    }
    if reclaimable is not None:
        status["prodReclaimableMetric"] = {"resource": {"resources": {"cpu": reclaimable[0], "memory": reclaimable[1]}}}
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": name},
        "status": status,
    }


def test_mid_resources_in_the_node_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = [
        make_node("n1").capacity(cpu="8", memory="32Gi", pods=10).obj(),
        make_node("n2").capacity(cpu="8", memory="32Gi", pods=10).obj(),
        node_metric("n1", ("3", "6Gi")),
        node_metric("n2", None),
        make_pod("mid").priority(7000, "koord-mid").req({MID_CPU: "2000", MID_MEMORY: "2Gi"}).obj(),
        make_pod("mid-too-big").priority(7000, "koord-mid").req({MID_CPU: "4000", MID_MEMORY: "1Gi"}).obj(),
    ]
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    assert new_scheduler_command().run(["simulate", "--cluster", str(path), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    pods = {p["name"]: p for p in doc["pods"]}
    assert pods["mid"]["node"] == "n1"
    assert pods["mid-too-big"]["node"] is None and MID_CPU in pods["mid-too-big"]["message"]
    nodes = {n["name"]: n for n in doc["nodes"]}
    # min(reclaimable 3 cores, unused 8 - 1) = 3000 milli; min(6Gi, 28Gi) = 6Gi
    assert (nodes["n1"]["allocatable"][MID_CPU], nodes["n1"]["allocatable"][MID_MEMORY]) == ("3000", "6Gi")
    assert MID_CPU not in nodes["n2"]["allocatable"]  # no prodReclaimableMetric: no mid tier

    assert new_scheduler_command().run(["simulate", "--cluster", str(path)]) == 0
    text = capsys.readouterr().out
    header = next(line for line in text.splitlines() if line.startswith("NODE"))
    assert header.split() == ["NODE", "CPU", "MEMORY", "MID-CPU", "MID-MEMORY", "PODS"]
    row = next(line for line in text.splitlines() if line.startswith("n1 "))
    assert "0 -> 2000 / 3000 (67%)" in row and "0 -> 2Gi / 6Gi (33%)" in row
