"""InterPodAffinity reads the bound pods into its index at warm-up, not in the first cycle."""

from __future__ import annotations

from apis.config import KubeSchedulerConfiguration
from koord_scheduler.plugins.interpodaffinity.plugin import InterPodAffinity
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from tests.builders import make_node, make_pod


async def test_warm_up_syncs_the_index_with_the_bound_pods() -> None:
    nodes = [make_node(f"n{i}").capacity(cpu="4", memory="8Gi", pods=20).build() for i in range(4)]
    bound = [make_pod(f"p{i}").req(cpu="100m").node(f"n{i % 4}").build() for i in range(8)]
    cluster = MemoryCluster.from_objects(nodes, bound)
    scheduler = build_scheduler(KubeSchedulerConfiguration(), in_tree_registry(), cluster, clock=lambda: 1.0)
    await cluster.start(scheduler)
    fwk = scheduler.profiles["default-scheduler"]
    plugin = fwk.plugins["InterPodAffinity"]
    assert isinstance(plugin, InterPodAffinity)
    index = plugin._index  # the plugin's own index, only read here
    assert index.capacity == 0, "nothing reads the pods before warm-up"
    scheduler.warm_up()
    snapshot = fwk.snapshot
    assert index.capacity == snapshot.capacity > 0
