"""``scheduler_unschedulable_pods{plugin,profile}``: pending pods per rejecting plugin (kube-scheduler's
metric), including pods held at PreEnqueue, and back to 0 once they schedule."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from apis.config import parse_scheduler_config
from apis.core.parse import parse_node, parse_pod
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.source import EventType

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins" / "coscheduling"))
from gang_harness import CONFIG, NOW, gang_pod, node, pod


async def test_pending_pods_are_counted_per_rejecting_plugin() -> None:
    pods = [pod("big", cpu="64"), gang_pod("g0", "g", 2)]  # NodeResourcesFit; Coscheduling holds g0
    cluster = MemoryCluster.from_objects([parse_node(json.loads(node("n0")))], [parse_pod(json.loads(p)) for p in pods])
    scheduler = build_scheduler(parse_scheduler_config(CONFIG), in_tree_registry(), cluster, clock=lambda: NOW)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    await scheduler.run_until_idle()
    scheduler._update_gauges()
    registry = scheduler.metrics.registry

    def value(plugin: str) -> float | None:
        labels = {"plugin": plugin, "profile": "default-scheduler"}
        return registry.get_sample_value("scheduler_unschedulable_pods", labels)

    assert value("NodeResourcesFit") == 1.0
    assert value("Coscheduling") == 1.0
    scheduler.on_pod(EventType.DELETED, cluster.pods["default/big"], None)
    scheduler._update_gauges()
    assert value("NodeResourcesFit") == 0.0, "a series drops to 0 when no pod is left for the plugin"
