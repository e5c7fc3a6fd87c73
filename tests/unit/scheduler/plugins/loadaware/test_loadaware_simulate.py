"""LoadAwareScheduling through the whole scheduler: the burst test and ``simulate`` end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import yaml

from apis.config import parse_scheduler_config
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.app.simulate import run_simulation
from tests.unit.scheduler.plugins.loadaware.loadaware_helpers import NOW, node_metric_obj

REPO = Path(__file__).resolve().parents[5]

# LoadAwareScheduling is the only scorer, so placements show its effect alone.
ONLY_LOADAWARE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    filter: {enabled: [{name: LoadAwareScheduling}]}
    score:
      disabled: [{name: '*'}]
      enabled: [{name: LoadAwareScheduling}]
    reserve: {enabled: [{name: LoadAwareScheduling}]}
"""


def cluster_text(pending: int) -> str:
    items = []
    for name, cpu in (("idle", "3200m"), ("busy-1", "9600m"), ("busy-2", "9600m")):
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name},
                "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
            }
        )
        items.append(node_metric_obj(name, cpu=cpu, memory="16Gi", age=10))
    for i in range(pending):
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"burst-{i}", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m"}}}]},
            }
        )
    return yaml.safe_dump_all(items)


async def test_burst_of_50_pods_spreads_before_the_next_report() -> None:
    """idle reports 10% cpu, busy-* 30%. Without estimates every pod would score idle highest and all
    50 would land there (Koordinator before v1.6, issues #1327/#1908). With them, each placed pod adds
    425m to idle's estimate: after ~15 pods idle looks as busy as the others and the rest spread."""
    config = parse_scheduler_config(ONLY_LOADAWARE, source="test")
    result, _ = await run_simulation(
        None, config, build_registry(use_entry_points=False), now=NOW, cluster_text=cluster_text(50)
    )
    placed = Counter(p.node for p in result.placements)
    assert sum(placed.values()) == 50 and None not in placed
    # Equal estimated usage at the end: 3200 + 425 a = 9600 + 425 b, a + 2b = 50 -> a ~ 26, b ~ 12.
    assert 24 <= placed["idle"] <= 28, placed
    assert 10 <= placed["busy-1"] <= 14 and 10 <= placed["busy-2"] <= 14, placed


def test_simulate_example_file_end_to_end() -> None:
    cmd = [
        str(Path(sys.executable).parent / "koord-scheduler"), "simulate",
        "--cluster", str(REPO / "config/simulate/loadaware-cluster.yaml"),
        "--now", "2026-01-01T00:05:00Z", "-o", "json",
    ]  # fmt: skip
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO).stdout
    doc = json.loads(out)
    placed = Counter(p["node"] for p in doc["pods"])
    assert placed == {"node-cool": 8, "node-bare": 2}
    section = next(v for k, v in doc.items() if k.startswith("Node load (LoadAwareScheduling"))
    report = {row["node"]: row for row in section}
    assert report["node-cool"]["nodeMetric"] == "fresh (30s old)"
    assert report["node-cool"]["cpu estimated"] == "5 (62%)"  # 1600m + 8 x 425m
    assert report["node-hot"]["cpu usage"] == "5600m (70%)"
    assert report["node-stale"]["nodeMetric"] == "expired (600s old)"
    assert report["node-bare"]["nodeMetric"] == "missing"
