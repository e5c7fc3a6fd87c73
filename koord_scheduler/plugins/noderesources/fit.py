"""The NodeResourcesFit check (``fitsRequest`` in ``noderesources/fit.go``), vectorised over nodes.

Each node's outcome is encoded as a bitmask, so a whole Filter call costs a few array operations and
the distinct failure combinations (usually a handful) become one :class:`Status` each:

- bit 0: too many pods (``pod_count + 1 > allowed_pods``);
- bit ``1 + j``: insufficient resource ``j`` of the checked columns;
- bit ``1 + k`` (``k`` checked columns): some insufficient resource has ``request > allocatable``, so the
  node can never fit the pod and the status is UnschedulableAndUnresolvable.

A code of 0 means the node fits.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np

from apis.core.types import PODS
from koord_scheduler.framework.snapshot import IntArray, Positions
from koord_scheduler.framework.status import Status, unresolvable, unschedulable

TOO_MANY_PODS = "Too many pods"
MAX_CHECKED_COLUMNS = 61
"""Bits 0 and ``1 + k`` bracket the per-resource bits; an int64 code holds 61 resources."""

_NATIVE_PREFIX = "kubernetes.io/"
_QUOTA_REQUESTS_PREFIX = "requests."


def insufficient_reason(resource: str) -> str:
    return f"Insufficient {resource}"


def is_extended_resource(name: str) -> bool:
    """``v1helper.IsExtendedResourceName``: a domain-prefixed name outside ``kubernetes.io/``."""
    return "/" in name and _NATIVE_PREFIX not in name and not name.startswith(_QUOTA_REQUESTS_PREFIX)


def is_ignored(name: str, ignored_resources: Collection[str], ignored_groups: Collection[str]) -> bool:
    """Whether Filter skips ``name``: only extended resources can be ignored, by name or by the domain
    before the ``/``."""
    if not is_extended_resource(name):
        return False
    return name in ignored_resources or name.split("/", 1)[0] in ignored_groups


@dataclass(frozen=True, slots=True)
class FitRequest:
    """The part of a pod's request Filter checks: the snapshot columns with a request > 0 that are not
    ignored, in column order (cpu, memory, ephemeral-storage first, then scalars as first seen)."""

    columns: Positions
    amounts: IntArray
    names: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return len(self.names) == 0


def fit_request(
    request: IntArray,
    resource_names: list[str],
    *,
    ignored_resources: Collection[str] = (),
    ignored_groups: Collection[str] = (),
) -> FitRequest:
    """Select the checked columns of a pod's request row (``ClusterSnapshot.request_vector``)."""
    columns = [
        c
        for c in np.flatnonzero(request > 0).tolist()
        if not is_ignored(resource_names[c], ignored_resources, ignored_groups)
    ]
    if len(columns) > MAX_CHECKED_COLUMNS:
        raise ValueError(f"a pod requests {len(columns)} resources; at most {MAX_CHECKED_COLUMNS} supported")
    cols = np.asarray(columns, dtype=np.intp)
    return FitRequest(cols, request[cols].copy(), tuple(resource_names[c] for c in columns))


def fit_codes(
    fit: FitRequest,
    positions: Positions,
    *,
    allocatable: IntArray,
    requested: IntArray,
    pod_count: IntArray,
    allowed_pods: IntArray,
) -> IntArray:
    """One failure code per position (see the module docstring); 0 where the pod fits."""
    codes: IntArray = (pod_count[positions] >= allowed_pods[positions]).astype(np.int64)
    if fit.empty:
        return codes
    unresolvable_any = np.zeros(len(positions), dtype=np.bool_)
    for j, (col, amount) in enumerate(zip(fit.columns.tolist(), fit.amounts.tolist(), strict=True)):
        alloc = allocatable[positions, col]
        short = amount > alloc - requested[positions, col]
        codes |= short.astype(np.int64) << (j + 1)
        unresolvable_any |= short & (amount > alloc)
    codes |= unresolvable_any.astype(np.int64) << (len(fit.names) + 1)
    return codes


def status_for_code(code: int, names: tuple[str, ...]) -> Status:
    """The Status of one failure code, reasons in kube-scheduler's order."""
    reasons = [TOO_MANY_PODS] if code & 1 else []
    reasons += [insufficient_reason(name) for j, name in enumerate(names) if code >> (j + 1) & 1]
    if code >> (len(names) + 1) & 1:
        return unresolvable(*reasons)
    return unschedulable(*reasons)


def fits_on_empty_node(
    requests: Mapping[str, int],
    allocatable: Mapping[str, int],
    *,
    ignored_resources: Collection[str] = (),
    ignored_groups: Collection[str] = (),
) -> bool:
    """Whether a pod with ``requests`` fits a node with ``allocatable`` and no pods (``isFit`` in the
    queueing hints)."""
    if allocatable.get(PODS, 0) < 1:
        return False
    for name, amount in requests.items():
        if amount <= 0 or name == PODS or is_ignored(name, ignored_resources, ignored_groups):
            continue
        if amount > allocatable.get(name, 0):
            return False
    return True
