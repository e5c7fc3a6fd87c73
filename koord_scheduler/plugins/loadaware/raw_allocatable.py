"""``node.koordinator.sh/raw-allocatable``: a node's allocatable before Koordinator's resource
amplification (Koordinator ``EstimateNode``).

When a node's CPU (say) is amplified, ``status.allocatable`` shows more than the machine has; load-aware
thresholds and scores must compare real usage with the real capacity. The annotation is a JSON resource
list (``{"cpu": "48", "memory": "192Gi"}``); each resource it names replaces the node's allocatable for the
load maths, the others keep ``status.allocatable``. A malformed annotation is ignored (the node keeps its
allocatable), as Koordinator ignores one it cannot decode.
"""

from __future__ import annotations

from collections.abc import Sequence

from apis.core import boundedjson
from apis.core.quantity import to_amount

ANNOTATION_RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"


def raw_allocatable_row(raw: str, resources: Sequence[str], base: Sequence[int]) -> list[int]:
    """``base`` (allocatable over ``resources``, in pykoord's units: milli-CPU, bytes, counts) with the
    annotation's values in place; ``base`` unchanged when the annotation does not decode."""
    try:
        decoded = boundedjson.loads(raw)
    except ValueError:
        return list(base)
    if not isinstance(decoded, dict):
        return list(base)
    row = list(base)
    for i, resource in enumerate(resources):
        value = decoded.get(resource)
        if value is None:
            continue
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            return list(base)
        try:
            row[i] = to_amount(resource, value)  # as node allocatable is read: millicores for cpu
        except ValueError:
            return list(base)
    return row
