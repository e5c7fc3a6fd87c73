"""The Reservation plugin's section of ``koord-scheduler simulate`` output."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.core.quantity import format_quantity
from koord_scheduler.plugins.reservation.cache import ReservationCache


def simulation_rows(cache: ReservationCache, reported_invalid: Mapping[str, str]) -> list[dict[str, Any]]:
    """The ``koord-scheduler simulate`` rows: every reservation, then the invalid ones never cached."""
    rows = []
    for entry in sorted(cache, key=lambda e: e.record.name):
        rec = entry.record
        rows.append(
            {
                "reservation": rec.name,
                "node": rec.node_name or None,
                "phase": "Succeeded" if entry.exhausted else rec.phase,
                "owners": entry.owners(),
                "allocatable": _fmt(entry.allocatable),
                "allocated": _fmt(entry.allocated()),
            }
        )
    for name, message in sorted(reported_invalid.items()):
        if cache.get_by_name(name) is None:
            rows.append(
                {
                    "reservation": name,
                    "node": None,
                    "phase": "Invalid",
                    "owners": [],
                    "allocatable": message,
                    "allocated": "",
                }
            )
    return rows


def _fmt(amounts: Mapping[str, int]) -> str:
    return ",".join(f"{k}={format_quantity(k, v)}" for k, v in sorted(amounts.items()) if v)
