"""Writing a Reservation's ``status.conditions`` without losing another writer's conditions.

A Reservation's conditions have two writers: the scheduler's Reservation plugin (``Scheduled``, and
``Ready`` at binding) and the Reservation controller (``Ready`` when it fails, expires or succeeds). A JSON
merge patch replaces a list whole, so each writer sends the complete list, merged by type
(:func:`merge_conditions`) into the copy it last saw, together with that copy's ``metadata.resourceVersion``
(:func:`conditions_patch`). The API server applies such a patch only to that version (else 409 Conflict),
so a write computed from a stale copy is refused instead of dropping the other writer's condition; the
writer merges again into the newer copy. Koordinator gets the same from ``UpdateStatus`` with the whole
object (``pkg/scheduler/plugins/reservation/plugin.go`` ``Bind``,
``pkg/scheduler/frameworkext/eventhandlers/reservation_handler.go`` ``updateReservationStatus``,
``pkg/scheduler/plugins/reservation/controller/controller.go``), retried on conflict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

CONFLICT_RETRY_DELAYS_S = (0.01, 0.05, 0.25, 1.25)
"""Waits before each retry after a conflict: client-go's ``retry.DefaultBackoff`` (10 ms, factor 5, four
steps), which Koordinator's ``RetryOnConflictOrTooManyRequests`` uses; the watch brings the newer copy."""


def merge_conditions(existing: Iterable[Any], updates: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``existing`` with each of ``updates`` put in place of the condition of its ``type`` (appended when
    there is none). Entries of ``existing`` that are not objects are dropped; the order is kept."""
    by_type = {str(u.get("type", "")): dict(u) for u in updates}
    out: list[dict[str, Any]] = []
    for c in existing:
        if not isinstance(c, Mapping):
            continue
        kind = str(c.get("type", ""))
        out.append(by_type.pop(kind) if kind in by_type else dict(c))
    out.extend(by_type.values())
    return out


def conditions_patch(
    reservation: Mapping[str, Any] | None,
    updates: Iterable[Mapping[str, Any]],
    *,
    status: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The merge patch of the status subresource that sets ``updates`` (merged by type into the
    conditions of ``reservation``, the writer's last copy) and the other ``status`` fields, guarded by the
    copy's ``resourceVersion``. Without a copy (or a copy without a version) the patch carries just
    ``updates``, unguarded: nothing is known that could be lost."""
    raw = reservation or {}
    current = raw.get("status") or {}
    existing = current.get("conditions") if isinstance(current, Mapping) else None
    body: dict[str, Any] = {
        "status": {**dict(status or {}), "conditions": merge_conditions(existing or (), updates)},
    }
    meta = raw.get("metadata") or {}
    version = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    if isinstance(version, str) and version:
        body["metadata"] = {"resourceVersion": version}
    return body
