"""Object kinds more than one plugin watches or writes (shared, so every subscription agrees)."""

from __future__ import annotations

from apis.scheduling import GROUP, VERSION, parse_reservation
from koord_scheduler.framework.types import ObjectKind

RESERVATION_KIND = ObjectKind(
    kind="Reservation",
    group=GROUP,
    version=VERSION,
    plural="reservations",
    namespaced=False,
    parse=parse_reservation,
)
