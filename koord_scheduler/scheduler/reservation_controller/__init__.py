"""The Reservation lifecycle controller (Koordinator ``pkg/scheduler/plugins/reservation/controller``).

:mod:`.decide` holds the decisions as pure functions; :mod:`.reconciler` chooses what to decide when and
applies it; :mod:`.operator` feeds it from kopf's watches.
"""

from koord_scheduler.scheduler.reservation_controller.decide import (
    ControllerOptions,
    Decision,
    OwnerPod,
    decide,
    owner_pod_from_raw,
)
from koord_scheduler.scheduler.reservation_controller.operator import (
    ApiSettings,
    ReservationControllerThread,
    run_reservation_controller,
)
from koord_scheduler.scheduler.reservation_controller.reconciler import ClusterView, Reconciler, StatusWriter

__all__ = [
    "ApiSettings",
    "ClusterView",
    "ControllerOptions",
    "Decision",
    "OwnerPod",
    "Reconciler",
    "ReservationControllerThread",
    "StatusWriter",
    "decide",
    "owner_pod_from_raw",
    "run_reservation_controller",
]
