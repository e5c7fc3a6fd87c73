"""The in-tree PreBind plugins that annotate the pod (Reservation's ``reservation-allocated``,
NodeNUMAResource's ``resource-status``, DeviceShare's ``device-allocated``) contribute to DefaultPreBind's
merged patch: a pod that all three touch gets exactly one metadata PATCH; without DefaultPreBind each
plugin patches on its own."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis.config import parse_scheduler_config
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from tests.builders import make_node, make_pod
from tests.unit.scheduler.plugins.defaultprebind.test_defaultprebind import CountingCluster
from tests.unit.scheduler.plugins.nodenumaresource.numa_helpers import nrt_object
from tests.unit.scheduler.plugins.reservation.harness import make_reservation

ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
STATUS = "scheduling.koordinator.sh/resource-status"
DEVICE = "scheduling.koordinator.sh/device-allocated"
GPU = {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100", "koordinator.sh/gpu-memory": "16Gi"}


def profile(extra: str = "") -> str:
    return f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
profiles:
- schedulerName: default-scheduler
  plugins:
    preFilter: {{enabled: [{{name: Reservation}}, {{name: NodeNUMAResource}}, {{name: DeviceShare}}]}}
    filter: {{enabled: [{{name: Reservation}}, {{name: NodeNUMAResource}}, {{name: DeviceShare}}]}}
    reserve: {{enabled: [{{name: Reservation}}, {{name: NodeNUMAResource}}, {{name: DeviceShare}}]}}
    preBind:
      enabled: [{{name: Reservation}}, {{name: NodeNUMAResource}}, {{name: DeviceShare}}]{extra}
    bind:
      disabled: [{{name: "*"}}]
      enabled: [{{name: Reservation}}, {{name: DefaultBinder}}]
"""


def device(name: str) -> dict[str, Any]:
    resources = {
        "koordinator.sh/gpu-core": "100",
        "koordinator.sh/gpu-memory-ratio": "100",
        "koordinator.sh/gpu-memory": "16Gi",
    }
    return {
        "metadata": {"name": name},
        "spec": {"devices": [{"type": "gpu", "minor": 0, "health": True, "resources": resources}]},
    }


async def schedule(config: str) -> CountingCluster:
    node = make_node("n1").allocatable({"cpu": "16", "memory": "64Gi", "pods": "110", **GPU}).build()
    pod = (
        make_pod("p")
        .req({"cpu": "4", "memory": "1Gi", "koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"})
        .label("koordinator.sh/qosClass", "LSR")
        .label("app", "web")
        .build()
    )
    reservation = make_reservation("r").req(cpu="1").owner_labels(app="web").available("n1").obj()
    cluster = CountingCluster.from_objects(
        [node],
        [pod],
        {
            "Reservation": [("r", reservation)],
            "NodeResourceTopology": [("n1", nrt_object("n1"))],
            "Device": [("n1", device("n1"))],
        },
    )
    assert isinstance(cluster, CountingCluster)
    cluster.patches = []
    scheduler = build_scheduler(
        parse_scheduler_config(config, source="test"), in_tree_registry(), cluster, clock=lambda: 1.0
    )
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    await scheduler.run_until_idle()
    await scheduler.drain()
    assert cluster.pods["default/p"].node_name == "n1", scheduler.outcomes
    return cluster


async def test_three_contributing_plugins_one_patch() -> None:
    cluster = await schedule(profile())
    ((key, annotations, labels),) = cluster.patches
    assert key == "default/p" and not labels
    assert annotations is not None
    assert set(annotations) >= {ALLOCATED, STATUS, DEVICE}
    assert json.loads(annotations[ALLOCATED] or "")["name"] == "r"
    assert json.loads(annotations[DEVICE] or "")["gpu"][0]["minor"] == 0
    stored = cluster.pods["default/p"].annotations
    assert {ALLOCATED, STATUS, DEVICE} <= set(stored)


@pytest.mark.parametrize("disabled", ["DefaultPreBind", "'*'"])
async def test_without_default_pre_bind_each_plugin_patches(disabled: str) -> None:
    cluster = await schedule(profile(f"\n      disabled: [{{name: {disabled}}}]"))
    written = [set(a or {}) for _, a, _ in cluster.patches]
    assert len(written) == 3, cluster.patches
    assert {ALLOCATED} in written and {DEVICE} in written
    assert any(STATUS in w for w in written)
