"""The NodeResourcesFit check (``fitsRequest`` in ``noderesources/fit.go``), vectorised over nodes.

A shared module: NodeResourcesFit filters with it, and DefaultPreemption's victim search runs the same
arithmetic on node rows with pods taken off, so the answers are the plugin's, not a re-derivation of them.
NodeResourcesFit's PreFilter state (:data:`PRE_FILTER_KEY`) lives here for the same reason.

Each node's outcome is encoded as a bitmask, so a whole Filter call costs a few array operations and
the distinct failure combinations (usually a handful) become one :class:`Status` each:

- bit 0: too many pods (``pod_count + 1 > allowed_pods``);
- bit ``1 + j``: insufficient resource ``j`` of the checked columns;
- bit ``1 + k`` (``k`` checked columns): some insufficient resource has ``request > allocatable``, so the
  node can never fit the pod and the status is UnschedulableAndUnresolvable.

A code of 0 means the node fits.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from apis.core.types import PODS
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.restored import RESTORED_CAPACITY
from koord_scheduler.framework.snapshot import IntArray, Positions
from koord_scheduler.framework.status import Status, unresolvable, unschedulable
from koord_scheduler.plugins import names
from koord_scheduler.plugins.resource_scoring import column_index

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
    index: slice | list[int] = field(init=False, compare=False, repr=False)
    """Selects ``columns`` of a row block (:func:`~koord_scheduler.plugins.resource_scoring.column_index`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "index", column_index(self.columns.tolist()))

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


def fit_failures(
    fit: FitRequest,
    positions: Positions,
    *,
    allocatable: IntArray,
    requested: IntArray,
    pod_count: IntArray,
    allowed_pods: IntArray,
) -> tuple[Positions, IntArray]:
    """(indices into ``positions`` of the nodes that do not fit, their failure codes), in the cheaper form
    for the number of nodes: plain ints for a handful (DefaultPreemption's reprieve batches), else
    :func:`fit_failures_arrays`. NodeResourcesFit's own Filter does not come here: the runtime picks its
    per-node or batch form."""
    if len(positions) <= _SCALAR_MAX:
        return _fit_failures_scalar(
            fit, positions, allocatable=allocatable, requested=requested, pod_count=pod_count, allowed_pods=allowed_pods
        )
    return fit_failures_arrays(
        fit, positions, allocatable=allocatable, requested=requested, pod_count=pod_count, allowed_pods=allowed_pods
    )


def fit_failures_arrays(
    fit: FitRequest,
    positions: Positions,
    *,
    allocatable: IntArray,
    requested: IntArray,
    pod_count: IntArray,
    allowed_pods: IntArray,
) -> tuple[Positions, IntArray]:
    """:func:`fit_failures` with array operations whatever the number of nodes.

    The common case, where most nodes fit, costs a few whole-array operations and one boolean gather;
    codes are built only for the failing nodes. When ``positions`` covers most of the snapshot it is
    cheaper to compare every row and gather the answer than to gather the inputs.
    """
    if len(positions) * 2 >= len(pod_count):
        failing_rows = pod_count >= allowed_pods
        for col, amount in zip(fit.columns.tolist(), fit.amounts.tolist(), strict=True):
            failing_rows |= np.subtract(allocatable[:, col], requested[:, col]) < amount
        failing = np.take(failing_rows, positions)
    else:
        # Whole rows: np.take of a column view would first copy the entire (strided) column.
        free_rows = np.take(allocatable, positions, axis=0)
        free_rows -= np.take(requested, positions, axis=0)
        failing = np.take(pod_count, positions) >= np.take(allowed_pods, positions)
        short = free_rows[:, fit.index] < fit.amounts
        failing |= np.logical_or.reduce(short, axis=1)
    idx: Positions = failing.nonzero()[0]
    if len(idx) == 0:
        return idx, np.zeros(0, dtype=np.int64)
    return idx, failure_codes(
        fit,
        positions[idx],
        allocatable=allocatable,
        requested=requested,
        pod_count=pod_count,
        allowed_pods=allowed_pods,
    )


_SCALAR_MAX = 8
"""Up to this many nodes, plain Python over scalars beats a dozen numpy calls on tiny arrays."""


def fit_code(
    fit: FitRequest,
    pos: int,
    *,
    allocatable: IntArray,
    requested: IntArray,
    pod_count: IntArray,
    allowed_pods: IntArray,
) -> int:
    """The failure code of the node at ``pos`` (0 when the pod fits), in plain ints: the per-node form."""
    code = 1 if pod_count[pos] >= allowed_pods[pos] else 0
    never = False
    for j, (col, amount) in enumerate(zip(fit.columns.tolist(), fit.amounts.tolist(), strict=True)):
        alloc = int(allocatable[pos, col])
        if alloc - int(requested[pos, col]) < amount:
            code |= 1 << (j + 1)
            never = never or amount > alloc
    if code and never:
        code |= 1 << (len(fit.names) + 1)
    return code


def _fit_failures_scalar(
    fit: FitRequest,
    positions: Positions,
    *,
    allocatable: IntArray,
    requested: IntArray,
    pod_count: IntArray,
    allowed_pods: IntArray,
) -> tuple[Positions, IntArray]:
    """:func:`fit_failures` for a handful of nodes: the same indices and codes."""
    failed: list[int] = []
    codes: list[int] = []
    for i, pos in enumerate(positions.tolist()):
        code = fit_code(
            fit, pos, allocatable=allocatable, requested=requested, pod_count=pod_count, allowed_pods=allowed_pods
        )
        if code:
            failed.append(i)
            codes.append(code)
    return np.asarray(failed, dtype=np.intp), np.asarray(codes, dtype=np.int64)


def failure_codes(
    fit: FitRequest,
    at: Positions,
    *,
    allocatable: IntArray,
    requested: IntArray,
    pod_count: IntArray,
    allowed_pods: IntArray,
) -> IntArray:
    """The failure code of each position in ``at`` (0 where the pod fits)."""
    codes: IntArray = (np.take(pod_count, at) >= np.take(allowed_pods, at)).astype(np.int64)
    never = np.zeros(len(at), dtype=np.bool_)
    alloc_rows = np.take(allocatable, at, axis=0)
    used_rows = np.take(requested, at, axis=0)
    for j, (col, amount) in enumerate(zip(fit.columns.tolist(), fit.amounts.tolist(), strict=True)):
        alloc = alloc_rows[:, col]
        short = alloc - used_rows[:, col] < amount
        codes |= short.astype(np.int64) << (j + 1)
        never |= short & (amount > alloc)
    codes |= never.astype(np.int64) << (len(fit.names) + 1)
    return codes


def group_codes(codes: IntArray, num_bits: int) -> tuple[list[int], npt.NDArray[np.int32]]:
    """(distinct codes ascending, index of each code's entry in that list)."""
    if num_bits <= 16:
        present = np.flatnonzero(np.bincount(codes, minlength=1 << num_bits))
        lookup = np.zeros(1 << num_bits, dtype=np.int32)
        lookup[present] = np.arange(len(present), dtype=np.int32)
        return present.tolist(), lookup[codes]
    distinct, inverse = np.unique(codes, return_inverse=True)
    return distinct.tolist(), inverse.astype(np.int32)


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


@dataclass(frozen=True, slots=True)
class PreFilterState:
    """NodeResourcesFit's PreFilter state: the pod's request row over the snapshot's columns, and the
    part Filter checks."""

    request: IntArray
    fit: FitRequest


PRE_FILTER_KEY: StateKey[PreFilterState] = StateKey("PreFilter" + names.NODE_RESOURCES_FIT)

NODE_ONLY_FILTERS = frozenset({names.NODE_UNSCHEDULABLE, names.NODE_NAME, names.TAINT_TOLERATION, names.NODE_AFFINITY})
"""Filter plugins whose answer depends on the pod and the Node object only, never on the pods on the node:
adding or taking off pods cannot change it."""


def exact_fit_request(state: CycleState, active_filters: Sequence[str]) -> FitRequest | None:
    """NodeResourcesFit's checked request for this cycle when its arithmetic alone decides how pods added
    to or taken off a node change the Filter answer, else None: every active Filter plugin (by name) is
    NodeResourcesFit or in :data:`NODE_ONLY_FILTERS`, NodeResourcesFit is not skipped, and no capacity is
    restored for the pod (reservations). The caller checks that no PreFilter extensions are active."""
    for name in active_filters:
        if name != names.NODE_RESOURCES_FIT and name not in NODE_ONLY_FILTERS:
            return None
    if names.NODE_RESOURCES_FIT in state.skip_filter or state.get(RESTORED_CAPACITY) is not None:
        return None
    pre = state.get(PRE_FILTER_KEY)
    return pre.fit if pre is not None else None


def resource_fit_request(fwk: Handle, state: CycleState) -> FitRequest | None:
    """:func:`exact_fit_request` for the framework's active Filter plugins, and None when an active
    PreFilter plugin has extensions (AddPod/RemovePod state)."""
    skip = state.skip_filter
    for plugin in fwk.pre_filter_plugins:
        if plugin.name not in skip and plugin.pre_filter_extensions() is not None:
            return None
    return exact_fit_request(state, [n for n in fwk.filter_plugin_names if n not in skip])
