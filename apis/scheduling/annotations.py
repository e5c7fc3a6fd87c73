"""The ``scheduling.koordinator.sh/reservation-allocated`` annotation: which reservation a pod consumes.

The Reservation plugin writes it at PreBind; the Reservation controller reads it to keep
``status.currentOwners`` true to the pods. The value is JSON ``{"name": ..., "uid": ...}``, as Koordinator
writes it (``apis/extension/reservation.go``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from apis.core import boundedjson
from apis.scheduling.constants import ANNOTATION_RESERVATION_ALLOCATED


def allocated_annotation(name: str, uid: str) -> str:
    """The annotation value naming the reservation ``name`` with ``uid``."""
    return json.dumps({"name": name, "uid": uid}, separators=(",", ":"))


def parse_allocated_annotation(pod_annotations: Mapping[str, str]) -> tuple[str, str] | None:
    """(name, uid) of the reservation a pod's ``reservation-allocated`` annotation names; None when the
    annotation is absent or is not a JSON object."""
    text = pod_annotations.get(ANNOTATION_RESERVATION_ALLOCATED)
    if not text:
        return None
    try:
        raw = boundedjson.loads(text)
    except ValueError:
        return None
    if not isinstance(raw, Mapping):
        return None
    return str(raw.get("name", "")), str(raw.get("uid", ""))
