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
from koord_scheduler.controllers.loop import ReconcileLoop
from koord_scheduler.descheduler.lownodeload.plugin import ClusterView
from koord_scheduler.descheduler.round import Descheduler, RoundPlan, describe, job_for
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.types import EventType

log = logging.getLogger(__name__)

NODE_METRIC: Final = "NodeMetric"
DESCHEDULER: Final = "descheduler"
_NEVER: Final = float("inf")
IDLE_SECONDS: Final = 60.0
"""With interval 0 (one round only), how often the loop looks again for nothing to do."""


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
        self.loop = ReconcileLoop(
            DESCHEDULER,
            waiting_for="NodeMetrics and PodMigrationJobs",
            idle_seconds=interval if interval > 0 else IDLE_SECONDS,
        )
        self._next_round: float | None = None
        """When the next round is due on ``loop.clock`` (None: at once; infinity: never)."""

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
        """A round every interval until ``stop`` is set; call only while holding the leader Lease. On the
        hosted controllers' :class:`~koord_scheduler.controllers.loop.ReconcileLoop`: nothing before
        ``ready()``, the first round at once, the next ones when :meth:`due` says (events do not start a
        round); a round that raises is logged and counted by the loop, and the next one runs on time."""
        log.info(
            "descheduler controller running (interval %.0fs%s)",
            self.interval,
            ", dryRun" if self.descheduler.dry_run else "",
        )
        self._next_round = None
        await self.loop.run(stop, ready=self.ready, reconcile=self._pass, pending=lambda: False, due=self.due)

    def due(self) -> float | None:
        """When (on the loop's clock) the next round runs; None after the only round of interval 0."""
        return None if self._next_round is None or self._next_round == _NEVER else self._next_round

    async def _pass(self, full: bool) -> None:
        now = self.loop.clock()
        if self._next_round is not None and now < self._next_round:
            return  # woken early (the loop's idle wait): not yet time
        self._next_round = now + self.interval if self.interval > 0 else _NEVER
        await self.run_once()
