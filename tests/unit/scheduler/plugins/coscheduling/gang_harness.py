"""Cluster files with gangs for the simulator, and a runner returning placements and the cluster."""

from __future__ import annotations

import json
from dataclasses import dataclass

from apis.config import parse_scheduler_config
from koord_scheduler.app.simulate import SimulationResult, run_simulation
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.memory_source import MemoryCluster

NOW = 1_800_000_000.0
ANN = "gang.scheduling.koordinator.sh/"

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
"""


def node(name: str, cpu: str = "4") -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}},
        }
    )


def pod(
    name: str,
    *,
    cpu: str = "4",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    gates: tuple[str, ...] = (),
    node_name: str = "",
    namespace: str = "default",
) -> str:
    spec: dict[str, object] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if node_name:
        spec["nodeName"] = node_name
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "annotations": annotations or {},
                "labels": labels or {},
            },
            "spec": spec,
        }
    )


def gang_pod(name: str, gang: str, min_available: int | None, cpu: str = "4", **extra: str) -> str:
    annotations = {ANN + "name": gang}
    if min_available is not None:
        annotations[ANN + "min-available"] = str(min_available)
    annotations.update({ANN + k.replace("_", "-"): v for k, v in extra.items()})
    return pod(name, cpu=cpu, annotations=annotations)


def pod_group(name: str, min_member: int, *, timeout: int = 0, annotations: dict[str, str] | None = None) -> str:
    spec: dict[str, int] = {"minMember": min_member}
    if timeout:
        spec["scheduleTimeoutSeconds"] = timeout
    return json.dumps(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
            "spec": spec,
        }
    )


@dataclass
class Run:
    result: SimulationResult
    cluster: MemoryCluster

    @property
    def placements(self) -> dict[str, tuple[str | None, str]]:
        return {p.name: (p.node, p.message) for p in self.result.placements}

    def bound(self) -> set[str]:
        return {p.name for p in self.result.placements if p.node}

    def events(self, reason: str) -> dict[str, str]:
        return {e.object_key: e.message for e in self.cluster.events if e.reason == reason}


async def simulate(*objects: str, config: str = CONFIG) -> Run:
    text = "\n---\n".join(objects)
    result, scheduler = await run_simulation(
        None, parse_scheduler_config(config), in_tree_registry(), now=NOW, cluster_text=text
    )
    cluster = scheduler.source
    assert isinstance(cluster, MemoryCluster)
    return Run(result, cluster)
