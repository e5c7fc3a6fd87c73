"""Koordinator's ``scheduling.koordinator.sh/v1alpha1`` API: the Reservation, wire-compatible.

:mod:`.reservation` holds the pydantic model (what the API server stores, what the controller writes and
what the CRD manifest is generated from); :mod:`.record` holds the lean, immutable view the scheduler's
hot path reads, parsed once per watch event.
"""

from apis.scheduling.constants import (
    ANNOTATION_EXACT_MATCH_RESERVATION,
    ANNOTATION_RESERVATION_AFFINITY,
    ANNOTATION_RESERVATION_ALLOCATED,
    ANNOTATION_RESERVATION_NAME,
    ANNOTATION_RESERVATION_NODE,
    ANNOTATION_RESERVE_POD,
    API_VERSION,
    CONDITION_READY,
    CONDITION_SCHEDULED,
    GROUP,
    LABEL_RESERVATION_IGNORED,
    LABEL_RESERVATION_ORDER,
    PHASE_AVAILABLE,
    PHASE_FAILED,
    PHASE_PENDING,
    PHASE_SUCCEEDED,
    PHASE_WAITING,
    REASON_AVAILABLE,
    REASON_EXPIRED,
    REASON_SCHEDULED,
    REASON_SUCCEEDED,
    REASON_UNSCHEDULABLE,
    VERSION,
)
from apis.scheduling.record import (
    OwnerTerm,
    ReservationAffinity,
    ReservationRecord,
    parse_reservation,
    parse_reservation_affinity,
)
from apis.scheduling.reservation import (
    Reservation,
    ReservationCondition,
    ReservationOwner,
    ReservationSpec,
    ReservationStatus,
)

__all__ = [
    "ANNOTATION_EXACT_MATCH_RESERVATION",
    "ANNOTATION_RESERVATION_AFFINITY",
    "ANNOTATION_RESERVATION_ALLOCATED",
    "ANNOTATION_RESERVATION_NAME",
    "ANNOTATION_RESERVATION_NODE",
    "ANNOTATION_RESERVE_POD",
    "API_VERSION",
    "CONDITION_READY",
    "CONDITION_SCHEDULED",
    "GROUP",
    "LABEL_RESERVATION_IGNORED",
    "LABEL_RESERVATION_ORDER",
    "PHASE_AVAILABLE",
    "PHASE_FAILED",
    "PHASE_PENDING",
    "PHASE_SUCCEEDED",
    "PHASE_WAITING",
    "REASON_AVAILABLE",
    "REASON_EXPIRED",
    "REASON_SCHEDULED",
    "REASON_SUCCEEDED",
    "REASON_UNSCHEDULABLE",
    "VERSION",
    "OwnerTerm",
    "Reservation",
    "ReservationAffinity",
    "ReservationCondition",
    "ReservationOwner",
    "ReservationRecord",
    "ReservationSpec",
    "ReservationStatus",
    "parse_reservation",
    "parse_reservation_affinity",
]
