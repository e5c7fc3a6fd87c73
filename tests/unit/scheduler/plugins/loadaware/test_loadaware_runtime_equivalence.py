"""LoadAwareScheduling inside the scheduler: with the runtime's per-node result cache on, the few nodes
that changed each cycle go through the plugin's per-node Filter and Score; with it off, every node goes
through the batch forms. Both must place every pod on the same node with the same messages."""

from __future__ import annotations

import random
from typing import Any

import pytest

from apis.config import parse_scheduler_config
from apis.core.types import Node, Pod
from koord_scheduler.plugins.loadaware.plugin import LoadAwareScheduling
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from tests.builders import make_node, make_pod
from tests.unit.scheduler.plugins.loadaware.loadaware_helpers import NOW, node_metric_obj

PROFILE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled: [{name: LoadAwareScheduling}]
  pluginConfig:
  - name: LoadAwareScheduling
    args: %s
"""


def random_cluster(seed: int) -> tuple[list[Node], list[Pod], list[tuple[str, dict[str, Any]]]]:
    rng = random.Random(seed)
    nodes = [make_node(f"n{i}").capacity(cpu="4", memory="16Gi", pods=30).build() for i in range(24)]
    metrics = []
    for i in range(20):  # n20..n23: no NodeMetric
        cpu = f"{rng.randint(200, 2600)}m"
        age = rng.choice([20, 20, 20, 400, None])  # some expired
        metrics.append((f"n{i}", node_metric_obj(f"n{i}", cpu=cpu, memory=f"{rng.randint(1, 14)}Gi", age=age)))
    pods = []
    for i in range(150):
        cpu, mem = rng.choice([("200m", "512Mi"), ("500m", "1Gi"), ("1", "2Gi")])
        pods.append(make_pod(f"p{i}").req(cpu=cpu, memory=mem).priority(rng.choice([0, 5500, 9500])).build())
    return nodes, pods, metrics


async def place(seed: int, args: str, *, node_cache: bool) -> dict[str, tuple[str, str]]:
    nodes, pods, metrics = random_cluster(seed)
    cluster = MemoryCluster.from_objects(nodes, pods, {"NodeMetric": metrics})
    config = parse_scheduler_config(PROFILE % args, source="test")
    scheduler = build_scheduler(config, in_tree_registry(), cluster, clock=lambda: NOW, node_cache=node_cache)
    plugin = scheduler.profiles["default-scheduler"].plugins["LoadAwareScheduling"]
    assert isinstance(plugin, LoadAwareScheduling)
    per_node_calls = [0]
    per_node_filter = plugin.filter

    def counted(*args: Any) -> Any:
        per_node_calls[0] += 1
        return per_node_filter(*args)

    plugin.filter = counted  # type: ignore[method-assign]
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    await scheduler.run_until_idle()
    assert (per_node_calls[0] > 0) is node_cache, "the cached runtime asks the per-node form, the plain one never"
    for other in scheduler.profiles["default-scheduler"].plugins.values():
        drain = getattr(other, "drain", None)
        if callable(drain):
            await drain()
    cache = scheduler.profiles["default-scheduler"].node_cache
    if node_cache:
        assert cache is not None and cache.hits > 0, "the workload must reuse cached answers"
    return {
        key: (pod.node_name, scheduler.outcomes[key].message if key in scheduler.outcomes else "")
        for key, pod in cluster.pods.items()
    }


@pytest.mark.parametrize(
    "args",
    [
        pytest.param("{}", id="defaults"),
        pytest.param(
            '{"scoringStrategy": {"type": "TargetUtilization", "targetUtilization": {"cpu": 50, "memory": 60}}}',
            id="target-utilization",
        ),
        pytest.param('{"filterExpiredNodeMetrics": false, "prodUsageThresholds": {"cpu": 45}}', id="prod-stale"),
    ],
)
@pytest.mark.parametrize("seed", [1, 2])
async def test_per_node_and_batch_forms_place_alike(seed: int, args: str) -> None:
    with_cache = await place(seed, args, node_cache=True)
    without = await place(seed, args, node_cache=False)
    assert with_cache == without
    placed = [node for node, _ in with_cache.values() if node]
    assert 0 < len(placed) < len(with_cache), "the workload must exercise both placement and failure"
