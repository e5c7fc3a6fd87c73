"""Reservation test helpers: a Reservation builder and a whole in-memory scheduler with Reservation on."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Self

from apis.config import parse_scheduler_config
from apis.core.types import Node, Pod
from apis.scheduling import ReservationRecord, parse_reservation
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.plugins.reservation.plugin import Reservation
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.scheduler import Scheduler

NOW = 1_800_000_000.0

PROFILE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
profiles:
- schedulerName: default-scheduler
  plugins:
    preFilter: {enabled: [{name: Reservation}]}
    filter: {enabled: [{name: Reservation}]}
    preScore: {enabled: [{name: Reservation}]}
    score: {enabled: [{name: Reservation, weight: 5000}]}
    reserve: {enabled: [{name: Reservation}]}
    preBind: {enabled: [{name: Reservation}]}
    bind:
      disabled: [{name: "*"}]
      enabled: [{name: Reservation}, {name: DefaultBinder}]
"""


class ReservationBuilder:
    """``make_reservation("r").req(cpu="2").owner_labels(app="web").node("n1").available("n1").obj()``."""

    def __init__(self, name: str) -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Reservation",
            "metadata": {"name": name, "uid": f"uid-{name}"},
            "spec": {
                "template": {
                    "metadata": {"namespace": "default"},
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {}}}]},
                },
                "owners": [],
                "ttl": "1h",
            },
        }

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)

    def build(self) -> ReservationRecord:
        return parse_reservation(self.obj())

    def req(self, **amounts: str) -> Self:
        self._obj["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"].update(
            {k.replace("_", "-"): v for k, v in amounts.items()}
        )
        return self

    def host_port(self, port: int) -> Self:
        self._obj["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port}]
        return self

    def owner(self, owner: Mapping[str, Any]) -> Self:
        self._obj["spec"]["owners"].append(dict(owner))
        return self

    def owner_labels(self, **labels: str) -> Self:
        return self.owner({"labelSelector": {"matchLabels": labels}})

    def owner_pod(self, name: str, namespace: str = "default") -> Self:
        return self.owner({"object": {"name": name, "namespace": namespace}})

    def label(self, key: str, value: str) -> Self:
        self._obj["metadata"].setdefault("labels", {})[key] = value
        return self

    def node(self, name: str) -> Self:
        self._obj["spec"]["template"]["spec"]["nodeName"] = name
        return self

    def spec(self, **fields: Any) -> Self:
        self._obj["spec"].update(fields)
        return self

    def available(self, node: str, allocatable: Mapping[str, str] | None = None) -> Self:
        reqs = self._obj["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
        self._obj["status"] = {"phase": "Available", "nodeName": node, "allocatable": dict(allocatable or reqs)}
        return self

    def status(self, **fields: Any) -> Self:
        self._obj.setdefault("status", {}).update(fields)
        return self


def make_reservation(name: str) -> ReservationBuilder:
    return ReservationBuilder(name)


@dataclass
class Run:
    scheduler: Scheduler
    cluster: MemoryCluster
    plugin: Reservation

    def node_of(self, pod_name: str, namespace: str = "default") -> str:
        pod = self.cluster.pods[f"{namespace}/{pod_name}"]
        return pod.node_name

    def reservation(self, name: str) -> ReservationRecord:
        return parse_reservation(self.cluster.objects["Reservation"][name])

    def requested_cpu(self, node: str) -> int:
        snap = self.scheduler.cache.snapshot
        return int(snap.requested[snap.positions[node], 0])


async def run(
    nodes: Iterable[Node],
    reservations: Iterable[ReservationBuilder | Mapping[str, Any]],
    pods: Iterable[Pod] = (),
    *,
    profile: str = PROFILE,
) -> Run:
    raws = [r.obj() if isinstance(r, ReservationBuilder) else dict(r) for r in reservations]
    cluster = MemoryCluster.from_objects(
        list(nodes), list(pods), {"Reservation": [(r["metadata"]["name"], r) for r in raws]}
    )
    config = parse_scheduler_config(profile, source="test")
    scheduler = build_scheduler(config, build_registry(use_entry_points=False), cluster, clock=lambda: NOW)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    await scheduler.run_until_idle()
    plugin = scheduler.profiles["default-scheduler"].plugins["Reservation"]
    assert isinstance(plugin, Reservation)
    await plugin.drain()
    await scheduler.run_until_idle()
    return Run(scheduler, cluster, plugin)
