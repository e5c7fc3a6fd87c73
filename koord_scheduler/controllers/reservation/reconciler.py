"""The loop between the informers and :func:`decide`: which Reservations to look at, and when.

The informers feed it (``observe_reservation``, ``mark_dirty``, ``mark_all_dirty``; see :mod:`.informed`)
and the :class:`Reconciler` runs :func:`decide`, on the hosted controllers' one
:class:`~koord_scheduler.controllers.loop.ReconcileLoop`, on

- the Reservations marked dirty by an event (their own, or one of their owner pods'), at once, and
- every Reservation, every ``sync_interval_seconds`` (expiry and GC are functions of the clock).

It applies each decision through a :class:`StatusWriter`. Writes are idempotent (merge patch of the status,
delete tolerating 404), and a patch that writes conditions carries the resourceVersion of the copy it was
decided on, so deciding on a stale copy is harmless: the write is refused (409) and the Reservation decided
again when the watch brings the newer copy. No finalizer and no state
annotation is ever written on a Reservation: deleting one never waits for the controller (Koordinator's
controller uses no finalizer either).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from koord_scheduler.controllers.loop import ReconcileLoop
from koord_scheduler.controllers.reservation.decide import (
    REASON_INVALID,
    ControllerOptions,
    Decision,
    OwnerPod,
    decide,
)
from koord_scheduler.controllers.workers import run_with_workers
from koord_scheduler.scheduler.object_errors import INVALID, RECONCILE_ERROR, ObjectErrors
from kubeapi.errors import is_conflict

log = logging.getLogger(__name__)


class StatusWriter(Protocol):
    """Applies decisions on the event loop. Both calls must tolerate a missing object; any other failure
    raises (the reconciler reports it against the Reservation and goes on)."""

    async def patch_status(self, name: str, patch: Mapping[str, Any]) -> None: ...

    async def delete(self, name: str) -> None: ...


@dataclass(frozen=True, slots=True)
class ClusterView:
    """Live read-only views the reconciler decides from (the controller's indexes over the informers)."""

    owners: Mapping[str, Iterable[OwnerPod]]
    """Reservation uid -> the pods whose ``reservation-allocated`` annotation names it."""
    nodes: Mapping[str, object]
    """Names of the nodes that exist."""


class Reconciler:
    """Owns the Reservations seen by the watch and decides on them. One per controller run; not thread-safe
    (the informers' handlers and :meth:`run` share one event loop)."""

    def __init__(
        self,
        options: ControllerOptions,
        writer: StatusWriter,
        *,
        is_leader: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.time,
        object_errors: ObjectErrors | None = None,
    ) -> None:
        self._options = options
        self._writer = writer
        self.object_errors = object_errors or ObjectErrors()
        """Where a Reservation that cannot be decided on or written is logged once and counted."""
        self._is_leader = is_leader
        self._clock = clock
        self._reservations: dict[str, dict[str, Any]] = {}  # uid -> last seen body
        self._dirty: set[str] = set()
        self._view: ClusterView | None = None
        interval = options.sync_interval_seconds
        self.loop = ReconcileLoop(
            "reservation", waiting_for="Nodes, Pods and Reservations", resync_seconds=interval, idle_seconds=interval
        )
        """When passes run (shared with the other hosted controllers)."""

    # --- fed by the watch ---------------------------------------------------------------------------

    def observe_reservation(self, event_type: str | None, body: Mapping[str, Any], view: ClusterView) -> None:
        """A Reservation event, with the view to decide it against. Until the first one nothing is decided;
        the caller makes that call only once ``view`` is complete (an empty pod index would wipe
        ``currentOwners``; an empty node index would expire every Reservation)."""
        self._view = view
        uid = str((body.get("metadata") or {}).get("uid", ""))
        if not uid:
            return
        if event_type == "DELETED":
            self._reservations.pop(uid, None)
            self._dirty.discard(uid)
            return
        self._reservations[uid] = dict(body)
        self.mark_dirty(uid)

    def mark_dirty(self, uid: str) -> None:
        """Decide on this Reservation soon (an owner pod changed)."""
        if uid in self._reservations:
            self._dirty.add(uid)
            self.loop.wake()

    def mark_all_dirty(self) -> None:
        """Decide on every Reservation soon (a node went away)."""
        self._dirty.update(self._reservations)
        self.loop.wake()

    # --- deciding and doing ---------------------------------------------------------------------------

    def decide_due(self, *, full: bool) -> list[tuple[str, Decision]]:
        """Decisions (reservation name, decision) for the dirty Reservations, or all of them when ``full``.
        Clears the dirty set. Empty when not the leader or before the first Reservation event."""
        due = set(self._reservations) if full else self._dirty & set(self._reservations)
        self._dirty.clear()
        view = self._view
        if view is None or not self._is_leader():
            return []
        now = self._clock()
        out: list[tuple[str, Decision]] = []
        for uid in sorted(due):
            body = self._reservations[uid]
            name = str(body["metadata"].get("name", ""))
            try:  # each Reservation on its own: one that cannot be decided on must not stop the others
                status = body.get("status") or {}
                node = (status.get("nodeName") or "") if isinstance(status, Mapping) else ""
                decision = decide(
                    body,
                    list(view.owners.get(uid, ())),
                    node_exists=not node or node in view.nodes,
                    now=now,
                    options=self._options,
                )
            except Exception as exc:
                self.object_errors.report("Reservation", name, RECONCILE_ERROR, f"{type(exc).__name__}: {exc}", exc=exc)
                continue
            if decision.delete or decision.status_patch is not None:
                out.append((name, decision))
            self._report_invalid(name, decision)
        return out

    def _report_invalid(self, name: str, decision: Decision) -> None:
        status = (decision.status_patch or {}).get("status") or {}
        for condition in status.get("conditions") or ():
            if condition.get("reason") == REASON_INVALID:
                self.object_errors.report("Reservation", name, INVALID, str(condition.get("message", "")))

    async def apply(self, decisions: Iterable[tuple[str, Decision]]) -> None:
        """Write the decisions, up to ``workers`` Reservations at a time (Koordinator's ``controllerWorkers``:
        that many workers take Reservations off one queue). Each Reservation is written by one worker only,
        so its own writes keep their order; a failing write does not stop the others."""
        await run_with_workers(decisions, self._options.workers, self._apply_one)

    async def _apply_one(self, item: tuple[str, Decision]) -> None:
        name, decision = item
        try:
            if decision.delete:
                await self._writer.delete(name)
            elif decision.status_patch is not None:
                await self._writer.patch_status(name, decision.status_patch)
        except Exception as exc:  # the next Reservation is written all the same
            if is_conflict(exc):
                # Decided on a copy the plugin has written over since: the watch event of that write marks
                # the Reservation dirty again (or already has), and it is decided on the newer copy.
                log.debug("reservation %s changed while deciding; deciding again on the newer copy", name)
                return
            self.object_errors.report("Reservation", name, RECONCILE_ERROR, f"{type(exc).__name__}: {exc}", exc=exc)

    async def reconcile(self, full: bool) -> None:
        """One pass: decide on the dirty Reservations (all of them when ``full``) and write the decisions."""
        await self.apply(self.decide_due(full=full))

    def pending(self) -> bool:
        """Reservations were marked dirty since the last pass began."""
        return bool(self._dirty)

    async def run(self, stop: asyncio.Event, *, ready: Callable[[], bool] = lambda: True) -> None:
        """Reconcile on the hosted controllers' :class:`~koord_scheduler.controllers.loop.ReconcileLoop`
        until ``stop`` is set: dirty Reservations as soon as they are marked, all of them every
        ``sync_interval_seconds``; nothing before ``ready()``."""
        await self.loop.run(stop, ready=ready, reconcile=self.reconcile, pending=self.pending)
