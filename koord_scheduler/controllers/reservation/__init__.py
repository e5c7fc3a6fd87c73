"""The Reservation lifecycle controller (Koordinator ``pkg/scheduler/plugins/reservation/controller``).

:mod:`.decide` holds the decisions as pure functions; :mod:`.reconciler` chooses what to decide when and
applies it; :mod:`.informed` feeds it from koord-scheduler's own informers and writes through its own
connection pool.
"""

from __future__ import annotations

from koord_scheduler.controllers.reservation.decide import (
    ControllerOptions,
    Decision,
    OwnerPod,
    decide,
)
from koord_scheduler.controllers.reservation.informed import KubeStatusWriter, ReservationController
from koord_scheduler.controllers.reservation.reconciler import ClusterView, Reconciler, StatusWriter

__all__ = [
    "ClusterView",
    "ControllerOptions",
    "Decision",
    "KubeStatusWriter",
    "OwnerPod",
    "Reconciler",
    "ReservationController",
    "StatusWriter",
    "decide",
]
