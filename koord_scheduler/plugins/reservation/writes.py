"""What the Reservation plugin writes to the cluster: Reservation status and events, and the owner pod's
``reservation-allocated`` annotation.

Bind's status write is awaited (its failure fails the binding). Everything else is best effort: started
as a task beside the scheduling cycle (never blocking it), logged when it fails, and awaited by
:meth:`ReservationWriter.drain` (tests and ``simulate``).

Conditions are merged by type into the watch's newest copy and written with its resourceVersion as a
precondition, retried on conflict (:mod:`apis.scheduling.conditions`): the Reservation controller's
``Ready`` condition survives the plugin's ``Scheduled`` one and the other way round.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from apis.core.quantity import format_quantity
from apis.core.types import Pod
from apis.scheduling import (
    ANNOTATION_RESERVATION_ALLOCATED,
    CONDITION_READY,
    CONDITION_SCHEDULED,
    PHASE_AVAILABLE,
    PHASE_FAILED,
    REASON_AVAILABLE,
    REASON_SCHEDULED,
    REASON_UNSCHEDULABLE,
    ReservationRecord,
)
from apis.scheduling.conditions import CONFLICT_RETRY_DELAYS_S, conditions_patch
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.errors import ClusterError, is_conflict
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.pod_patch import patch_at_pre_bind
from koord_scheduler.plugins.kinds import RESERVATION_KIND

log = logging.getLogger(__name__)


class ReservationWriter:
    """See the module docstring. ``handle.cluster`` is read at each write (the handle may swap it)."""

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reported_invalid: dict[str, str] = {}
        """Reservation name -> the last invalidity reported for it (each is reported once)."""
        self._latest: dict[str, ReservationRecord] = {}
        """Reservation name -> the watch's newest copy (see :meth:`observe`)."""

    @property
    def reported_invalid(self) -> Mapping[str, str]:
        """Reservation name -> why it is invalid, for those reported so far."""
        return self._reported_invalid

    # ----- Reservation status and events -----

    def observe(self, name: str, record: ReservationRecord | None) -> None:
        """The watch's newest copy of Reservation ``name`` (None: deleted), what conditions are merged into."""
        if record is None:
            self._latest.pop(name, None)
        else:
            self._latest[name] = record

    def report_invalid(self, record: ReservationRecord, message: str = "") -> None:
        """A Warning event ``InvalidReservation`` and ``Scheduled=False/Unschedulable`` with ``message``
        (default: the record's own invalidity), once per reservation and message."""
        message = message or record.invalid
        if self._reported_invalid.get(record.name) == message:
            return
        self._reported_invalid[record.name] = message
        log.warning("reservation %s is invalid: %s", record.name, message)
        cond = record.condition(CONDITION_SCHEDULED)
        write = cond is None or cond[3] != message
        self._spawn(self._write_invalid(record.name, message, write=write))

    async def _write_invalid(self, name: str, message: str, *, write: bool) -> None:
        cluster = self._handle.cluster
        await cluster.record_event(RESERVATION_KIND, name, type="Warning", reason="InvalidReservation", message=message)
        if write:
            await self._write_conditions(name, [condition(CONDITION_SCHEDULED, "False", REASON_UNSCHEDULABLE, message)])

    async def write_available(self, name: str, node_name: str, requests: Mapping[str, int]) -> None:
        """Bind of a reserve pod: ``Available`` on ``node_name`` with ``requests`` (``pods`` left out) as
        allocatable, Scheduled and Ready conditions (merged by type into the others); then a ``Scheduled``
        event (best effort). Raises :class:`ClusterError` when the Reservation has failed meanwhile
        (Koordinator's Bind: ``reservation is not active``)."""
        allocatable = {k: format_quantity(k, v) for k, v in sorted(requests.items()) if k != "pods"}
        await self._write_conditions(
            name,
            [
                condition(CONDITION_SCHEDULED, "True", REASON_SCHEDULED, "Reservation is scheduled"),
                condition(CONDITION_READY, "True", REASON_AVAILABLE, "Reservation is available"),
            ],
            status={"phase": PHASE_AVAILABLE, "nodeName": node_name, "allocatable": allocatable},
            refuse_failed=True,
        )
        self._spawn(
            self._handle.cluster.record_event(
                RESERVATION_KIND,
                name,
                type="Normal",
                reason="Scheduled",
                message=f"Successfully assigned reservation {name} to {node_name}",
            )
        )

    def report_unschedulable(self, record: ReservationRecord | None, name: str, message: str) -> None:
        """A reserve pod failed to schedule: a Warning event ``FailedScheduling`` and
        ``Scheduled=False/Unschedulable`` with ``message``, unless ``record`` already says exactly that."""
        if record is not None:
            cond = record.condition(CONDITION_SCHEDULED)
            if cond is not None and cond[1:] == ("False", REASON_UNSCHEDULABLE, message):
                return
        self._spawn(self._write_failure(name, message))

    async def _write_failure(self, name: str, message: str) -> None:
        cluster = self._handle.cluster
        await cluster.record_event(RESERVATION_KIND, name, type="Warning", reason="FailedScheduling", message=message)
        await self._write_conditions(name, [condition(CONDITION_SCHEDULED, "False", REASON_UNSCHEDULABLE, message)])

    async def _write_conditions(
        self,
        name: str,
        updates: list[dict[str, str]],
        *,
        status: Mapping[str, Any] | None = None,
        refuse_failed: bool = False,
    ) -> None:
        """One status patch: ``updates`` merged by type into the watched copy's conditions, guarded by its
        resourceVersion (:mod:`apis.scheduling.conditions`). On a conflict the merge is redone on the copy
        the watch has by then, after client-go's default backoff, as Koordinator's writers retry."""
        cluster = self._handle.cluster
        for attempt, delay in enumerate((0.0, *CONFLICT_RETRY_DELAYS_S)):
            if delay:
                await asyncio.sleep(delay)
            record = self._latest.get(name)
            if refuse_failed and record is not None and record.phase == PHASE_FAILED:
                raise ClusterError(f"reservation {name} is not active (phase {PHASE_FAILED})")
            patch = conditions_patch(record.raw if record is not None else None, updates, status=status)
            try:
                await cluster.patch_object_status(RESERVATION_KIND, name, patch)
                return
            except ClusterError as exc:
                if not is_conflict(exc) or attempt == len(CONFLICT_RETRY_DELAYS_S):
                    raise

    # ----- owner pods -----

    def report_owner_unschedulable(self, pod: Pod, message: str) -> None:
        """A Warning event ``FailedScheduling`` on an owner pod with reservation affinity."""
        self._spawn(
            self._handle.cluster.record_event(
                None, pod.name, namespace=pod.namespace, type="Warning", reason="FailedScheduling", message=message
            )
        )

    async def annotate_allocated(self, state: CycleState, pod: Pod, annotation: str) -> None:
        """PreBind: the ``reservation-allocated`` annotation, into DefaultPreBind's merged patch when the
        profile has it, else written now (awaited: PreBind fails with it)."""
        annotations = {ANNOTATION_RESERVATION_ALLOCATED: annotation}
        await patch_at_pre_bind(state, self._handle.cluster, pod, annotations=annotations)

    async def annotate_adopted(self, pods: Iterable[Pod], annotation: str) -> None:
        """PreBind of a pre-allocating reservation: the pods it adopts get its ``reservation-allocated``
        annotation (each its own patch, guarded by the pod's UID; awaited: PreBind fails with it)."""
        cluster = self._handle.cluster
        for pod in pods:
            await cluster.patch_pod_metadata(pod, annotations={ANNOTATION_RESERVATION_ALLOCATED: annotation})

    def remove_allocated(self, pod: Pod) -> None:
        """Unreserve after PreBind: take the annotation off again (best effort)."""
        self._spawn(self._handle.cluster.patch_pod_metadata(pod, annotations={ANNOTATION_RESERVATION_ALLOCATED: None}))

    # ----- tasks -----

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            coro.close()
            return
        task = loop.create_task(_logged(coro))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for in-flight writes."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


async def _logged(coro: Coroutine[Any, Any, Any]) -> None:
    try:
        await coro
    except Exception as exc:
        log.warning("reservation write failed: %s", exc)


def condition(type_: str, status: str, reason: str, message: str) -> dict[str, str]:
    """One entry of ``status.conditions``, stamped now as Koordinator stamps its conditions
    (``lastProbeTime`` and ``lastTransitionTime``)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": now,
        "lastTransitionTime": now,
    }
