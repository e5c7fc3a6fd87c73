"""The ``descheduler`` controller: a descheduling round every ``deschedulingInterval``, on the leader.

It reads the scheduler's Node and Pod watches plus NodeMetrics and PodMigrationJobs, plans a round
(:class:`~.round.Descheduler`) and creates one PodMigrationJob per planned migration, which the
``migration`` controller carries out. With ``dryRun`` it logs the plan instead. An interval of 0 runs one
round (Koordinator's koord-descheduler then exits; here the controller then idles). A pod that an
unfinished job already moves is never planned again.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from apis.core.types import Node, Pod
from apis.scheduling.migration import KIND as JOB_KIND
from apis.scheduling.migration import PodMigrationJobRecord
from apis.slo.nodemetric_record import NodeMetricRecord
from koord_scheduler.controllers.waits import stopped_within
from koord_scheduler.descheduler.lownodeload.plugin import ClusterView
from koord_scheduler.descheduler.round import Descheduler, RoundPlan, describe, job_for
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.types import EventType

log = logging.getLogger(__name__)

NODE_METRIC: Final = "NodeMetric"


class JobCreator(Protocol):
    async def create_job(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """POST the PodMigrationJob; the stored object."""
        ...


class DeschedulerController:
    def __init__(
        self,
        descheduler: Descheduler,
        api: JobCreator,
        *,
        interval: float,
        ready: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.descheduler = descheduler
        self.api = api
        self.interval = interval
        self.ready = ready
        self.clock = clock
        self.nodes: dict[str, Node] = {}
        self.pods: dict[str, Pod] = {}
        self.metrics: dict[str, NodeMetricRecord] = {}
        self.jobs: dict[str, PodMigrationJobRecord] = {}
        self.rounds = 0
        self.created = 0

    # ----- informer events -----

    def on_node(self, event: EventType, old: Node | None, new: Node | None) -> None:
        if new is None:
            if old is not None:
                self.nodes.pop(old.name, None)
            return
        self.nodes[new.name] = new

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        if new is None:
            if old is not None:
                self.pods.pop(old.key, None)
            return
        self.pods[new.key] = new

    def on_object(self, kind: str, event: EventType, old: Any, new: Any) -> None:
        if kind == NODE_METRIC:
            if new is None:
                if old is not None:
                    self.metrics.pop(old.name, None)
            else:
                self.metrics[new.name] = new
        elif kind == JOB_KIND:
            if new is None:
                if old is not None:
                    self.jobs.pop(old.name, None)
            else:
                self.jobs[new.name] = new

    # ----- one round -----

    def migrating(self) -> set[str]:
        return {f"{j.pod_namespace}/{j.pod_name}" for j in self.jobs.values() if not j.finished}

    def plan(self) -> RoundPlan:
        now = self.clock()
        by_node: dict[str, list[Pod]] = {}
        for pod in self.pods.values():
            if pod.node_name:
                by_node.setdefault(pod.node_name, []).append(pod)
        view = ClusterView(sorted(self.nodes.values(), key=lambda n: n.name), by_node, self.metrics, now)
        return self.descheduler.plan(view, migrating=self.migrating())

    async def run_once(self) -> RoundPlan:
        """Plan a round and create its jobs (or log them with ``dryRun``)."""
        plan = self.plan()
        self.rounds += 1
        if self.descheduler.dry_run:
            for line in describe(plan):
                log.info("descheduler (dryRun): %s", line)
            return plan
        for note in plan.notes:
            log.debug("descheduler: %s", note)
        for migration in plan.migrations:
            body = job_for(migration, self.descheduler.migration_args, name=str(uuid.uuid4()))
            try:
                await self.api.create_job(body)
            except ClusterError as exc:
                log.warning("descheduler: creating the PodMigrationJob for %s failed: %s", migration.key, exc)
                continue
            self.created += 1
            log.info("descheduler: migrate %s from %s: %s", migration.key, migration.node, migration.reason)
        return plan

    async def run(self, stop: asyncio.Event) -> None:
        """A round every interval until ``stop`` is set; call only while holding the leader Lease."""
        log.info(
            "descheduler controller running (interval %.0fs%s)",
            self.interval,
            ", dryRun" if self.descheduler.dry_run else "",
        )
        waited = 0
        while not self.ready():
            if waited % 30 == 0:
                log.warning(
                    "descheduler waiting for NodeMetrics and PodMigrationJobs to be listed (CRDs installed? RBAC?)"
                )
            if await stopped_within(stop, 1.0):
                return
            waited += 1
        while not stop.is_set():
            await self.run_once()
            if self.interval <= 0:
                await stop.wait()
                return
            if await stopped_within(stop, self.interval):
                return
