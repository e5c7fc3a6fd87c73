"""Binding slots bound the bind requests only: a PreBind that waits on another controller (as VolumeBinding
waits for provisioning) does not hold one, so later pods reach their own PreBind meanwhile."""

from __future__ import annotations

import asyncio

from apis.config import parse_scheduler_config
from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import PreBindPlugin
from koord_scheduler.framework.registry import PluginSpec
from koord_scheduler.framework.status import Status, success
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.scheduler import SchedulerOptions
from tests.builders import make_node, make_pod

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    preBind:
      enabled:
      - name: WaitsForProvisioning
"""


class WaitsForProvisioning:
    """Holds every pod in PreBind until ``released`` is set, recording who got there."""

    name = "WaitsForProvisioning"

    def __init__(self) -> None:
        self.entered: list[str] = []
        self.released = asyncio.Event()

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        self.entered.append(pod.name)
        await self.released.wait()
        return success()


_: type[PreBindPlugin] = WaitsForProvisioning


async def test_pods_waiting_in_prebind_do_not_use_up_the_binding_slots() -> None:
    waiter = WaitsForProvisioning()
    registry = in_tree_registry()

    def factory(args: None, handle: Handle) -> WaitsForProvisioning:
        return waiter

    registry.add(PluginSpec(WaitsForProvisioning.name, factory))
    nodes = [make_node("n1").allocatable(cpu="8", memory="8Gi", pods="110").build()]
    pods = [make_pod(f"p{i}").req(cpu="100m").build() for i in range(3)]
    cluster = MemoryCluster.from_objects(nodes, pods)
    scheduler = build_scheduler(
        parse_scheduler_config(CONFIG),
        registry,
        cluster,
        clock=lambda: 1.0,
        options=SchedulerOptions(max_concurrent_bindings=1),
    )
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    run = asyncio.ensure_future(scheduler.run_until_idle())
    for _ in range(200):
        if len(waiter.entered) == 3:
            break
        await asyncio.sleep(0.01)
    # With one slot held through PreBind, only p0 would be here.
    assert sorted(waiter.entered) == ["p0", "p1", "p2"]
    assert not any(p.node_name for p in cluster.pods.values())
    waiter.released.set()
    await asyncio.wait_for(run, timeout=30)
    assert sorted(p.name for p in cluster.pods.values() if p.node_name) == ["p0", "p1", "p2"]
