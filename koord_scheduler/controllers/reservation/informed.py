"""The Reservation controller on koord-scheduler's own informers: no watch of its own.

:class:`ReservationController` is one of the controllers the scheduler hosts (``--controllers``): the
source's :class:`~koord_scheduler.controllers.fanout.FanoutSink` hands it every Node, Pod and
Reservation the scheduler already lists and watches, and it keeps two indexes from them, as the controller's
view (:class:`~.reconciler.ClusterView`):

- owner pods by Reservation uid: the pods whose ``reservation-allocated`` annotation names a Reservation,
  neither terminal nor being deleted (the source delivers a pod that reaches a terminal phase as deleted);
- the names of the nodes that exist.

Each event marks what it can change dirty in the :class:`~.reconciler.Reconciler` (a Reservation, its
owners' Reservations, every Reservation when a node goes), which decides (:func:`~.decide.decide`) and
writes through :class:`KubeStatusWriter`, on the controller's own connection pool with the hosted
controllers' rate limits, ``controllerWorkers`` Reservations at a time. :meth:`ReservationController.run`
starts on the leader once the source has listed every kind the view needs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from apis.core.types import Node, Pod
from apis.scheduling.annotations import parse_allocated_annotation
from apis.scheduling.constants import GROUP, VERSION
from apis.scheduling.record import ReservationRecord
from koord_scheduler.controllers.reservation.decide import ControllerOptions, OwnerPod
from koord_scheduler.controllers.reservation.reconciler import ClusterView, Reconciler
from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.object_errors import ObjectErrors
from kubeapi.http import MERGE_PATCH, ApiError, ApiHttp

log = logging.getLogger(__name__)

KIND = "Reservation"
PLURAL = "reservations"


class KubeStatusWriter:
    """:class:`~.reconciler.StatusWriter` over an :class:`ApiHttp`: a JSON merge patch of the status
    subresource, and delete; a Reservation that is gone already is fine."""

    def __init__(self, http: ApiHttp) -> None:
        self.http = http

    @staticmethod
    def path(name: str, subresource: str = "") -> str:
        path = f"/apis/{GROUP}/{VERSION}/{PLURAL}/{name}"
        return f"{path}/{subresource}" if subresource else path

    async def patch_status(self, name: str, patch: Mapping[str, Any]) -> None:
        try:
            await self.http.request("PATCH", self.path(name, "status"), body=dict(patch), content_type=MERGE_PATCH)
        except ApiError as err:
            if not err.not_found:
                raise

    async def delete(self, name: str) -> None:
        try:
            await self.http.request("DELETE", self.path(name))
        except ApiError as err:
            if not err.not_found:
                raise
            return
        log.info("garbage-collected reservation %s", name)


class _Writer(Protocol):
    async def patch_status(self, name: str, patch: Mapping[str, Any]) -> None: ...

    async def delete(self, name: str) -> None: ...


def owner_ref(pod: Pod | None) -> str:
    """The uid of the Reservation ``pod`` is allocated from; ``""`` when none, or the pod is terminal or
    being deleted (it no longer holds what it was given)."""
    if pod is None or pod.is_terminal or pod.meta.deletion_timestamp is not None:
        return ""
    ref = parse_allocated_annotation(pod.annotations)
    return ref[1] if ref is not None else ""


class ReservationController:
    """See the module docstring. Event methods run on the event-loop thread (the informers' handlers)."""

    def __init__(
        self,
        writer: _Writer,
        *,
        options: ControllerOptions | None = None,
        ready: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.time,
        object_errors: ObjectErrors | None = None,
    ) -> None:
        self.ready = ready
        """Nodes, Pods and Reservations have all been listed; nothing is decided before."""
        self.owners: dict[str, dict[str, OwnerPod]] = {}
        """Reservation uid -> pod key -> the owner pod (what :class:`ClusterView` reads)."""
        self.nodes: dict[str, bool] = {}
        self.view = ClusterView(owners=_OwnerLists(self.owners), nodes=self.nodes)
        self.reconciler = Reconciler(options or ControllerOptions(), writer, clock=clock, object_errors=object_errors)
        self._owner_of: dict[str, str] = {}
        """pod key -> the Reservation uid it is indexed under."""

    # ----- informer events -----

    def on_node(self, event: EventType, old: Node | None, new: Node | None) -> None:
        if new is None:
            if old is not None and self.nodes.pop(old.name, None) is not None:
                self.reconciler.mark_all_dirty()
            return
        self.nodes[new.name] = True

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        pod = new or old
        if pod is None:
            return
        key = pod.key
        was = self._owner_of.get(key, "")
        now = owner_ref(new) if event != EventType.DELETED else ""
        if was:
            owners = self.owners.get(was)
            if owners is not None:
                owners.pop(key, None)
                if not owners:
                    del self.owners[was]
            del self._owner_of[key]
            if was != now:
                self.reconciler.mark_dirty(was)
        if now and new is not None:
            self.owners.setdefault(now, {})[key] = OwnerPod(new.namespace, new.name, new.uid, dict(new.requests))
            self._owner_of[key] = now
            self.reconciler.mark_dirty(now)

    def on_object(self, kind: str, event: EventType, old: Any, new: Any) -> None:
        if kind != KIND:
            return
        record: ReservationRecord = new if new is not None else old
        if record.raw is not None:
            # Only kept and marked here: the reconciler decides once :meth:`run` runs, after every list.
            self.reconciler.observe_reservation(event.name, record.raw, self.view)

    # ----- the loop -----

    async def run(self, stop: asyncio.Event) -> None:
        """Reconcile until ``stop`` is set, once Nodes, Pods and Reservations are listed; call only while
        holding the leader Lease. The loop (:class:`~koord_scheduler.controllers.loop.ReconcileLoop`)
        contains per-Reservation and per-pass failures; what escapes it reaches the hosted controllers'
        supervisor, which calls this again."""
        await self.reconciler.run(stop, ready=self.ready)


class _OwnerLists(Mapping[str, list[OwnerPod]]):
    """The owner index as the reconciler reads it: Reservation uid -> its owner pods."""

    def __init__(self, owners: dict[str, dict[str, OwnerPod]]) -> None:
        self._owners = owners

    def __getitem__(self, uid: str) -> list[OwnerPod]:
        return list(self._owners[uid].values())

    def __iter__(self) -> Any:
        return iter(self._owners)

    def __len__(self) -> int:
        return len(self._owners)
