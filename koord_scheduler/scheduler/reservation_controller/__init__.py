"""The Reservation lifecycle controller (Koordinator ``pkg/scheduler/plugins/reservation/controller``).

:mod:`.decide` holds the decisions as pure functions; :mod:`.reconciler` chooses what to decide when and
applies it; :mod:`.operator` feeds it from kopf's watches; its names load on first use, so importing the decisions
does not import kopf and the kubernetes client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from koord_scheduler.scheduler.reservation_controller.decide import (
    ControllerOptions,
    Decision,
    OwnerPod,
    decide,
    owner_pod_from_raw,
)
from koord_scheduler.scheduler.reservation_controller.reconciler import ClusterView, Reconciler, StatusWriter

if TYPE_CHECKING:
    from koord_scheduler.scheduler.reservation_controller.operator import (
        ApiSettings,
        ReservationControllerThread,
        run_reservation_controller,
    )

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

_OPERATOR_NAMES = frozenset({"ApiSettings", "ReservationControllerThread", "run_reservation_controller"})

if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        if name not in _OPERATOR_NAMES:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.operator"), name)
        globals()[name] = value
        return value
