"""The ``podgroup`` controller: keeps each PodGroup's ``status`` true to its pods (Koordinator
``coscheduling/controller/podgroup.go``), on the leader only.

It reads the scheduler's Pod watch and a PodGroup watch. Events mark a PodGroup dirty; :meth:`run`
decides (:func:`decide_status`, pure) and writes changed statuses with a JSON merge PATCH of the object
itself (the upstream CRD has no status subresource).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from apis.core.types import Node, Pod
from apis.scheduling import podgroup as pg
from apis.scheduling.podgroup import PodGroupRecord, PodGroupStatusRecord
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.controllers.containment import Containment, permanent
from koord_scheduler.scheduler.controllers.loop import CallLater, ReconcileLoop
from koord_scheduler.scheduler.controllers.workers import run_with_workers
from koord_scheduler.scheduler.object_errors import ObjectErrors

log = logging.getLogger(__name__)

STALE_SCHEDULED_SECONDS = 48 * 3600.0
"""A group scheduled with nothing running for this long after creation is left alone (as upstream)."""


def decide_status(group: PodGroupRecord, pods: Iterable[Pod], *, now: float) -> PodGroupStatusRecord:
    """The status ``group`` should have, given its pods. Koordinator's rules, later ones winning:
    no phase → Pending; Pending → PreScheduling once it has minMember pods (``occupiedBy`` = the first
    pod's owners); otherwise no pods → Pending, else Scheduling while fewer than minMember are bound
    (``scheduleStartTime`` set once), Scheduled, Running (running + succeeded ≥ min), Failed (a failure
    and failed + running + succeeded ≥ min), Finished (succeeded ≥ min)."""
    current = group.status
    members = sorted(pods, key=lambda p: p.key)
    minimum = group.min_member
    if current.phase in (pg.PHASE_FINISHED, pg.PHASE_FAILED):
        return current
    if not current.phase:
        return _with(current, phase=pg.PHASE_PENDING)
    if current.phase == pg.PHASE_PENDING:
        if minimum > 0 and len(members) >= minimum:
            owners = sorted(f"{p.namespace}/{o.name}" for p in members[:1] for o in p.meta.owner_references)
            return _with(current, phase=pg.PHASE_PRE_SCHEDULING, occupied_by=",".join(owners))
        return current
    if not members:
        return _with(current, phase=pg.PHASE_PENDING)
    running = sum(p.phase == "Running" for p in members)
    succeeded = sum(p.phase == "Succeeded" for p in members)
    failed = sum(p.phase == "Failed" for p in members)
    scheduled = sum(bool(p.node_name) for p in members)
    start = current.schedule_start_time
    if scheduled < minimum:
        phase = pg.PHASE_SCHEDULING
        start = start or _rfc3339(now)
    else:
        phase = pg.PHASE_SCHEDULED
        if running + succeeded >= minimum:
            phase = pg.PHASE_RUNNING
    if failed > 0 and failed + running + succeeded >= minimum:
        phase = pg.PHASE_FAILED
    if minimum > 0 and succeeded >= minimum:
        phase = pg.PHASE_FINISHED
    return _with(
        current,
        phase=phase,
        scheduled=scheduled,
        running=running,
        succeeded=succeeded,
        failed=failed,
        schedule_start_time=start,
    )


def _with(status: PodGroupStatusRecord, **changes: Any) -> PodGroupStatusRecord:
    return dataclasses.replace(status, **changes)


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class PodGroupApi(Protocol):
    async def patch_pod_group(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        """JSON merge PATCH of the PodGroup object; raises ``ClusterError`` on failure."""
        ...


class PodGroupController:
    """See the module docstring. Event methods run on the event-loop thread (the informers' handlers)."""

    def __init__(
        self,
        api: PodGroupApi,
        *,
        clock: Callable[[], float] = time.time,
        retry_seconds: float = 5.0,
        workers: int = 1,
        object_errors: ObjectErrors | None = None,
        call_later: CallLater | None = None,
    ) -> None:
        """``call_later(seconds, fn)`` schedules a retry (default: the running loop's; tests pass a fake)."""
        self.api = api
        self.contained = Containment("podgroup", object_errors)
        self.workers = max(1, workers)
        """PodGroups written at the same time (Coscheduling's ``controllerWorkers``)."""
        self.clock = clock
        self.retry_seconds = retry_seconds
        self.call_later = call_later
        self.groups: dict[str, PodGroupRecord] = {}
        self.pods: dict[str, dict[str, Pod]] = {}
        """PodGroup key -> pod key -> pod (pods labelled ``pod-group.scheduling.sigs.k8s.io``)."""
        self.dirty: set[str] = set()
        self.writes = 0
        self.loop = ReconcileLoop("podgroup", waiting_for="PodGroups")

    # ----- informer events -----

    def on_node(self, event: EventType, old: Node | None, new: Node | None) -> None:
        return None

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        old_key = _group_key(old)
        new_key = _group_key(new) if event != EventType.DELETED else ""
        if old is not None and old_key and old_key != new_key:
            self.pods.get(old_key, {}).pop(old.key, None)
            self._mark(old_key)
        if new is not None and new_key:
            self.pods.setdefault(new_key, {})[new.key] = new
            self._mark(new_key)

    def on_object(self, kind: str, event: EventType, old: Any, new: Any) -> None:
        if kind != pg.KIND:
            return
        record: PodGroupRecord = new if new is not None else old
        if event == EventType.DELETED:
            self.groups.pop(record.key, None)
            self.dirty.discard(record.key)
            return
        self.groups[record.key] = record
        self._mark(record.key)

    def _mark(self, key: str) -> None:
        if key in self.groups or key in self.pods:
            self.dirty.add(key)
            self.loop.wake()

    # ----- reconcile -----

    def decisions(self) -> list[tuple[PodGroupRecord, PodGroupStatusRecord]]:
        """(group, wanted status) for every dirty group whose status should change; clears the dirty set."""
        out = []
        now = self.clock()
        keys, self.dirty = self.dirty, set()
        for key in sorted(keys):
            group = self.groups.get(key)
            if group is None or group.invalid or self._stale(group, now):
                continue
            pods = self.pods.get(key, {}).values()
            wanted = self.contained.call(pg.KIND, key, functools.partial(decide_status, group, pods, now=now))
            if wanted is not None and wanted != group.status:
                out.append((group, wanted))
        return out

    @staticmethod
    def _stale(group: PodGroupRecord, now: float) -> bool:
        status = group.status
        if status.scheduled != group.min_member or status.running != 0 or not status.schedule_start_time:
            return False
        try:
            started = datetime.fromisoformat(status.schedule_start_time.replace("Z", "+00:00")).timestamp()
            created = datetime.fromisoformat(group.creation_timestamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return False
        return started - created > STALE_SCHEDULED_SECONDS

    async def reconcile(self) -> int:
        """Write every changed status, up to ``workers`` PodGroups at a time (each by one worker); the
        number written. A failed write is retried later."""
        return sum(await run_with_workers(self.decisions(), self.workers, self._write))

    async def _write(self, decision: tuple[PodGroupRecord, PodGroupStatusRecord]) -> int:
        group, wanted = decision
        try:
            await self.api.patch_pod_group(group.namespace, group.name, {"status": wanted.to_wire()})
        except Exception as exc:
            if isinstance(exc, ClusterError) and not permanent(exc):
                log.warning("updating status of PodGroup %s failed: %s", group.key, exc)
                later = self.call_later or asyncio.get_running_loop().call_later
                later(self.retry_seconds, functools.partial(self._mark, group.key))
            else:  # refused for good, or a failure of our own: not retried until the PodGroup changes
                self.contained.report(pg.KIND, group.key, exc)
            return 0
        # Applied locally at once, so events arriving before the watch echoes it do not repeat it.
        self.groups[group.key] = _replace_status(group, wanted)
        self.writes += 1
        return 1

    async def run(self, stop: asyncio.Event) -> None:
        """Reconcile until ``stop`` is set; call only while holding the leader Lease."""
        await self.loop.run(
            stop, ready=lambda: True, reconcile=lambda _full: self.reconcile(), pending=lambda: bool(self.dirty)
        )


def _group_key(pod: Pod | None) -> str:
    name = pod.labels.get(pg.LABEL_POD_GROUP, "") if pod is not None else ""
    return f"{pod.namespace}/{name}" if pod is not None and name else ""


def _replace_status(group: PodGroupRecord, status: PodGroupStatusRecord) -> PodGroupRecord:
    return dataclasses.replace(group, status=status)
