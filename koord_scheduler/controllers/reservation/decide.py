"""What the Reservation controller does to one Reservation, as a pure function of the object, its owner
pods, whether its node exists, and the time.

- Pending/Available reservations expire when ``now > spec.expires``, when ``now - creation > spec.ttl``
  (ttl 0 never expires), or when their node is gone: phase ``Failed``, condition ``Ready=False`` reason
  ``Expired``.
- ``status.currentOwners`` (sorted by uid) and ``status.allocated`` (owners' requests masked to the
  allocatable names) are recomputed from the pods whose ``reservation-allocated`` annotation names the
  reservation's uid; with ``allocateOnce`` an allocated reservation becomes ``Succeeded``.
- ``Failed`` / ``Succeeded`` reservations are deleted ``gc_duration_seconds`` after that transition, or at
  once when their node is gone.
- A Pending/Available reservation with a field that cannot be read at all (``ttl: forever``, a template
  quantity beyond int64: :attr:`~apis.scheduling.ReservationRecord.malformed`) becomes ``Failed`` at once,
  condition ``Ready=False`` reason ``Invalid`` with the field in the message: it could never expire or be
  matched, and the API server accepts such objects (the CRD leaves these fields free-form).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from apis.config import KubeSchedulerConfiguration
from apis.config.plugin_args import args_field_errors
from apis.config.reservation_args import ReservationArgs
from apis.core.parse import parse_resource_list, parse_timestamp
from apis.core.quantity import format_quantity
from apis.scheduling import (
    CONDITION_READY,
    PHASE_AVAILABLE,
    PHASE_FAILED,
    PHASE_SUCCEEDED,
    REASON_EXPIRED,
    REASON_SUCCEEDED,
)
from apis.scheduling.conditions import merge_conditions
from apis.scheduling.record import DEFAULT_TTL_SECONDS, ReservationRecord, parse_reservation

REASON_INVALID = "Invalid"
"""The Ready condition's reason on a Reservation failed because a field cannot be read (pykoord's own)."""
MIN_REQUEUE_SECONDS = 3.0
MAX_REQUEUE_SECONDS = 15.0


@dataclass(frozen=True, slots=True)
class ControllerOptions:
    gc_duration_seconds: float = 86400.0
    gc_interval_seconds: float = 60.0
    disable_garbage_collection: bool = False
    sync_interval_seconds: float = MIN_REQUEUE_SECONDS
    workers: int = 1
    """Reservations written at the same time (``controllerWorkers``)."""


def controller_options(config: KubeSchedulerConfiguration) -> ControllerOptions:
    """The controller's options from the Reservation plugin's args (the first profile that configures
    them; Koordinator's controller reads the same ReservationArgs): gcDurationSeconds,
    gcIntervalSeconds, disableGarbageCollection, controllerWorkers."""
    for i, profile in enumerate(config.profiles):
        entry = profile.plugin_config_for("Reservation")
        if entry is None:
            continue
        args, errors = args_field_errors(
            "Reservation", entry.args, {"Reservation": ReservationArgs}, path=f"profiles[{i}].pluginConfig"
        )
        if isinstance(args, ReservationArgs) and not errors:
            return ControllerOptions(
                gc_duration_seconds=float(args.gc_duration_seconds),
                gc_interval_seconds=float(args.gc_interval_seconds),
                disable_garbage_collection=args.disable_garbage_collection,
                workers=args.controller_workers,
            )
    return ControllerOptions()


@dataclass(frozen=True, slots=True)
class OwnerPod:
    namespace: str
    name: str
    uid: str
    requests: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Decision:
    status_patch: Mapping[str, Any] | None = None
    """A merge patch of ``status`` (the status subresource), or None."""
    delete: bool = False
    requeue_after: float = MAX_REQUEUE_SECONDS


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def decide(
    reservation: Mapping[str, Any],
    owners: Sequence[OwnerPod],
    *,
    node_exists: bool,
    now: float,
    options: ControllerOptions = ControllerOptions(),
) -> Decision:
    meta = reservation.get("metadata") or {}
    spec = reservation.get("spec") or {}
    status = reservation.get("status") or {}
    phase = status.get("phase") or "Pending"
    node = status.get("nodeName") or ""
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    if phase in (PHASE_FAILED, PHASE_SUCCEEDED):
        return _collect(conditions, node=node, node_exists=node_exists, now=now, options=options)
    record = parse_reservation(reservation)
    if record.malformed:
        ready = _with_ready(conditions, "False", REASON_INVALID, record.invalid, now)
        return Decision(_guarded(meta, {"phase": PHASE_FAILED, "conditions": ready}))
    expiry = _expiry(record, meta)
    if (expiry is not None and now > expiry) or (node and not node_exists):
        message = "Reservation expired" if not (node and not node_exists) else f"node {node} is gone"
        failed = {
            "phase": PHASE_FAILED,
            "conditions": _with_ready(conditions, "False", REASON_EXPIRED, message, now),
        }
        return Decision(_guarded(meta, failed), requeue_after=MAX_REQUEUE_SECONDS)
    requeue = MAX_REQUEUE_SECONDS
    if expiry is not None:
        requeue = min(MAX_REQUEUE_SECONDS, max(MIN_REQUEUE_SECONDS, expiry - now))
    if phase != PHASE_AVAILABLE:
        return Decision(requeue_after=requeue)
    want_owners = [
        {"namespace": o.namespace, "name": o.name, "uid": o.uid} for o in sorted(owners, key=lambda o: o.uid)
    ]
    allocatable = parse_resource_list(status.get("allocatable") or {})
    allocated: dict[str, int] = {}
    for o in owners:
        for name, amount in o.requests.items():
            if name in allocatable:
                allocated[name] = allocated.get(name, 0) + amount
    want_allocated = {k: format_quantity(k, v) for k, v in sorted(allocated.items()) if v}
    have_owners = [
        {"namespace": o.get("namespace", ""), "name": o.get("name", ""), "uid": o.get("uid", "")}
        for o in status.get("currentOwners") or []
    ]
    have_allocated = parse_resource_list(status.get("allocated") or {})
    patch: dict[str, Any] = {}
    if have_owners != want_owners:
        patch["currentOwners"] = want_owners or None
    if dict(have_allocated) != {k: v for k, v in allocated.items() if v}:
        patch["allocated"] = want_allocated or None
    allocate_once = spec.get("allocateOnce")
    if (allocate_once is None or allocate_once) and want_owners:
        patch["phase"] = PHASE_SUCCEEDED
        patch["conditions"] = _with_ready(conditions, "False", REASON_SUCCEEDED, "Reservation is allocated", now)
    if not patch:
        return Decision(requeue_after=requeue)
    return Decision(_guarded(meta, patch) if "conditions" in patch else {"status": patch}, requeue_after=requeue)


def _expiry(record: ReservationRecord, meta: Mapping[str, Any]) -> float | None:
    if record.expires is not None:
        return record.expires
    ttl = record.ttl_seconds if record.ttl_seconds is not None else DEFAULT_TTL_SECONDS
    created = record.creation_timestamp if meta.get("creationTimestamp") else None
    if ttl <= 0 or created is None:
        return None
    return created + ttl


def _collect(
    conditions: list[Mapping[str, Any]], *, node: str, node_exists: bool, now: float, options: ControllerOptions
) -> Decision:
    if options.disable_garbage_collection:
        return Decision(requeue_after=options.gc_interval_seconds)
    if node and not node_exists:
        return Decision(delete=True)
    since = _stamp(conditions, only=CONDITION_READY)
    if since is None:
        # No readable Ready stamp: another writer's merge patch can replace the conditions list (the
        # scheduler's Scheduled=False on an invalid Reservation), so the latest stamp of any condition is
        # when the Reservation was last seen changing; none at all collects it now.
        since = _stamp(conditions)
    if since is None or now - since >= options.gc_duration_seconds:
        return Decision(delete=True)
    return Decision(requeue_after=min(options.gc_interval_seconds, max(1.0, since + options.gc_duration_seconds - now)))


def _stamp(conditions: list[Mapping[str, Any]], *, only: str = "") -> float | None:
    """The latest readable ``lastProbeTime`` / ``lastTransitionTime`` of the conditions (of type ``only``
    when given), None if there is none."""
    latest = None
    for c in conditions:
        if only and c.get("type") != only:
            continue
        stamp = c.get("lastProbeTime") or c.get("lastTransitionTime")
        try:
            at = parse_timestamp(stamp) if stamp else None
        except ValueError:  # an unreadable stamp counts as none
            at = None
        if at is not None and (latest is None or at > latest):
            latest = at
    return latest


def _guarded(meta: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    """A status patch that writes conditions, guarded by the ``resourceVersion`` they were merged into
    (:mod:`apis.scheduling.conditions`): a conflict means the plugin wrote in between, and the watch event
    of that write has the controller decide again on the newer copy."""
    version = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    if isinstance(version, str) and version:
        return {"metadata": {"resourceVersion": version}, "status": dict(status)}
    return {"status": dict(status)}


def _with_ready(
    conditions: list[Mapping[str, Any]], status: str, reason: str, message: str, now: float
) -> list[dict[str, Any]]:
    stamp = rfc3339(now)
    ready = {
        "type": CONDITION_READY,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp,
    }
    return merge_conditions(conditions, [ready])
