"""The Reservation lifecycle controller (Koordinator ``pkg/scheduler/plugins/reservation/controller``).

:mod:`.decide` holds the decisions as pure functions; :mod:`.operator` runs them with kopf.
"""

from koord_scheduler.scheduler.reservation_controller.decide import (
    ControllerOptions,
    Decision,
    OwnerPod,
    decide,
    owner_pod_from_raw,
)
from koord_scheduler.scheduler.reservation_controller.operator import ApiSettings, run_reservation_controller

__all__ = [
    "ApiSettings",
    "ControllerOptions",
    "Decision",
    "OwnerPod",
    "decide",
    "owner_pod_from_raw",
    "run_reservation_controller",
]
