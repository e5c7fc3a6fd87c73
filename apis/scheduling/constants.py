"""Names from ``apis/scheduling/v1alpha1`` and ``apis/extension/reservation.go``."""

from __future__ import annotations

from typing import Final

GROUP: Final = "scheduling.koordinator.sh"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

PHASE_PENDING: Final = "Pending"
PHASE_AVAILABLE: Final = "Available"
PHASE_SUCCEEDED: Final = "Succeeded"
PHASE_WAITING: Final = "Waiting"
PHASE_FAILED: Final = "Failed"

CONDITION_SCHEDULED: Final = "Scheduled"
CONDITION_READY: Final = "Ready"
REASON_SCHEDULED: Final = "Scheduled"
REASON_UNSCHEDULABLE: Final = "Unschedulable"
REASON_AVAILABLE: Final = "Available"
REASON_SUCCEEDED: Final = "Succeeded"
REASON_EXPIRED: Final = "Expired"

ANNOTATION_RESERVATION_ALLOCATED: Final = "scheduling.koordinator.sh/reservation-allocated"
"""On an owner pod: ``{"name": ..., "uid": ...}`` of the reservation it consumes (written at PreBind)."""
ANNOTATION_RESERVATION_AFFINITY: Final = "scheduling.koordinator.sh/reservation-affinity"
"""On a pod: JSON ``ReservationAffinity`` (name, selector terms, reservationSelector, tolerations)."""
ANNOTATION_EXACT_MATCH_RESERVATION: Final = "scheduling.koordinator.sh/exact-match-reservation"
LABEL_RESERVATION_IGNORED: Final = "scheduling.koordinator.sh/reservation-ignored"
LABEL_RESERVATION_ORDER: Final = "scheduling.koordinator.sh/reservation-order"
ANNOTATION_RESERVE_POD: Final = "scheduling.koordinator.sh/reserve-pod"
ANNOTATION_RESERVATION_NAME: Final = "scheduling.koordinator.sh/reservation-name"
ANNOTATION_RESERVATION_NODE: Final = "scheduling.koordinator.sh/reservation-node"
