"""``koord-scheduler simulate`` with NodeResourceTopology objects in the cluster file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[5]


def test_simulate_reports_the_cpuset_of_each_bound_pod() -> None:
    cmd = [
        str(Path(sys.executable).parent / "koord-scheduler"), "simulate",
        "--cluster", str(REPO / "config/simulate/numa-cluster.yaml"),
        "--config", str(REPO / "config/simulate/numa-scheduler-config.yaml"),
        "-o", "json",
    ]  # fmt: skip
    doc = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO).stdout)
    placed = {f"{p['namespace']}/{p['name']}": p["node"] for p in doc["pods"]}
    assert placed["default/lsr-a"] == placed["default/lse-b"] == placed["default/lsr-c"] == "numa-1"
    section = next(v for k, v in doc.items() if k.startswith("Bound cpusets"))
    assert {row["pod"]: row["cpuset"] for row in section} == {
        "default/lsr-a": "0-1,8-9",
        "default/lse-b": "4-5,12-13",
        "default/lsr-c": "2-3",
    }
