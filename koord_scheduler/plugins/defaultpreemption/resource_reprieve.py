"""The victim search by resource arithmetic, many nodes at once.

:meth:`.victims.VictimSearch.select_victims_on_node` asks the whole Filter chain once per pod put
back, one node at a time. When every active Filter plugin either ignores the pods on the node
(:data:`NODE_ONLY_FILTERS`) or is NodeResourcesFit, and no PreFilter plugin keeps cross-node state, the
only answer that changes as pods come and go is NodeResourcesFit's, and that is integer arithmetic on the
node's requested row. :func:`reprieve_rows` runs the same reprieve (:func:`.policy.reprieve`) for a batch of
nodes in lock step with NodeResourcesFit's own check (``resource_fit.fit_failures``), so the answers
are the plugin's, not a re-derivation of them.

The caller still runs the full Filter chain on each resulting node state before trusting it (see
``VictimSearch._fast_chunk`` in :mod:`.victims`): correctness never depends on this shortcut, only speed does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from apis.core.types import Pod
from koord_scheduler.framework.snapshot import BoolArray, ClusterSnapshot, IntArray
from koord_scheduler.framework.status import Status
from koord_scheduler.plugins import names
from koord_scheduler.plugins.resource_fit import (
    NODE_ONLY_FILTERS,
    FitRequest,
    fit_failures,
    resource_fit_request,
    status_for_code,
)


@dataclass(frozen=True, slots=True)
class NodeRows:
    """The inputs of :func:`reprieve_rows` for ``k`` nodes over ``w`` resource columns; ``m`` is the
    longest reprieve order.

    - ``allocatable``, ``requested`` (k, w): the node rows with every preemptible pod taken off;
    - ``pod_count``, ``allowed_pods`` (k,): likewise;
    - ``nominated_requested`` (k, w), ``nominated_count`` (k,): what the nominated pods that count add;
    - ``returned`` (k, m, w): the request of the ``j``-th pod to put back on each node, zero past its end;
    - ``present`` (k, m): whether node ``i`` has a ``j``-th pod.
    """

    allocatable: IntArray
    requested: IntArray
    pod_count: IntArray
    allowed_pods: IntArray
    nominated_requested: IntArray
    nominated_count: IntArray
    returned: IntArray
    present: BoolArray


def reprieve_rows(fit: FitRequest, rows: NodeRows) -> tuple[BoolArray, BoolArray]:
    """(fits, victim): ``fits[i]`` says the pod fits node ``i`` with all its preemptible pods off (with
    and without the nominated pods, as ``RunFilterPluginsWithNominatedPods``); ``victim[i, j]`` says the
    ``j``-th pod in node ``i``'s reprieve order stays off. Pods are put back in order and each one stays
    back when the pod still fits; nodes that do not fit get no victims."""
    k = len(rows.pod_count)
    local = np.arange(k, dtype=np.intp)
    with_nominated = bool(rows.nominated_count.any()) or bool(rows.nominated_requested.any())

    def fits(requested: IntArray, pod_count: IntArray) -> BoolArray:
        ok = np.ones(k, dtype=np.bool_)
        failing, _ = fit_failures(
            fit,
            local,
            allocatable=rows.allocatable,
            requested=requested,
            pod_count=pod_count,
            allowed_pods=rows.allowed_pods,
        )
        ok[failing] = False
        if with_nominated:
            failing, _ = fit_failures(
                fit,
                local,
                allocatable=rows.allocatable,
                requested=requested + rows.nominated_requested,
                pod_count=pod_count + rows.nominated_count,
                allowed_pods=rows.allowed_pods,
            )
            ok[failing] = False
        return ok

    ok = fits(rows.requested, rows.pod_count)
    victim = np.zeros(rows.present.shape, dtype=np.bool_)
    requested = rows.requested.copy()
    pod_count = rows.pod_count.copy()
    for j in range(rows.present.shape[1]):
        trying = rows.present[:, j] & ok
        if not trying.any():
            continue
        step = trying.astype(np.int64)
        trial_requested = requested + rows.returned[:, j, :] * step[:, None]
        trial_count = pod_count + step
        spared = trying & fits(trial_requested, trial_count)
        requested[spared] = trial_requested[spared]
        pod_count[spared] = trial_count[spared]
        victim[:, j] = trying & ~spared
    return ok, victim


def rejection_statuses(
    fit: FitRequest, rows: NodeRows, fits: BoolArray, node_names: Sequence[str]
) -> dict[str, Status]:
    """NodeResourcesFit's status on each node ``i`` with ``fits[i]`` False (from :func:`reprieve_rows`),
    with every preemptible pod off and the nominated pods counted: the status the Filter chain gives when
    NodeResourcesFit is its only plugin that looks at the pods on the node."""
    k = len(rows.pod_count)
    failing, codes = fit_failures(
        fit,
        np.arange(k, dtype=np.intp),
        allocatable=rows.allocatable,
        requested=rows.requested + rows.nominated_requested,
        pod_count=rows.pod_count + rows.nominated_count,
        allowed_pods=rows.allowed_pods,
    )
    by_code: dict[int, Status] = {}
    out: dict[str, Status] = {}
    for i, code in zip(failing.tolist(), codes.tolist(), strict=True):
        if fits[i]:
            continue
        status = by_code.get(code)
        if status is None:
            status = by_code[code] = status_for_code(code, fit.names).with_plugin(names.NODE_RESOURCES_FIT)
        out[node_names[i]] = status
    return out


def node_rows(
    snapshot: ClusterSnapshot,
    positions: Sequence[int],
    orders: Sequence[Sequence[Pod]],
    nominated: Sequence[Sequence[Pod]],
) -> NodeRows:
    """Gather :class:`NodeRows` from the snapshot: ``orders[i]`` are node ``i``'s preemptible pods in
    reprieve order (all of them come off), ``nominated[i]`` the nominated pods that count there."""
    width = -1
    while width != len(snapshot.resource_names):
        # request_vector adds a column for a resource seen first: gather again until none was added.
        width = len(snapshot.resource_names)
        vectors = [snapshot.request_vector(pod) for order in orders for pod in order]
        nominated_vectors = [snapshot.request_vector(pod) for pods in nominated for pod in pods]
    at = np.asarray(positions, dtype=np.intp)
    k = len(at)
    lengths = np.fromiter((len(o) for o in orders), dtype=np.intp, count=k)
    longest = int(lengths.max()) if k else 0
    returned = np.zeros((k, longest, width), dtype=np.int64)
    if vectors:
        row = np.repeat(np.arange(k, dtype=np.intp), lengths)
        starts = np.cumsum(lengths) - lengths
        col = np.arange(len(vectors), dtype=np.intp) - np.repeat(starts, lengths)
        returned[row, col] = np.array(vectors, dtype=np.int64)
    present = np.arange(longest, dtype=np.intp)[None, :] < lengths[:, None]
    nominated_count = np.fromiter((len(p) for p in nominated), dtype=np.int64, count=k)
    nominated_requested = np.zeros((k, width), dtype=np.int64)
    if nominated_vectors:
        np.add.at(
            nominated_requested,
            np.repeat(np.arange(k, dtype=np.intp), nominated_count),
            np.array(nominated_vectors, dtype=np.int64),
        )
    removed = returned.sum(axis=1)
    return NodeRows(
        allocatable=np.take(snapshot.allocatable, at, axis=0),
        requested=np.take(snapshot.requested, at, axis=0) - removed,
        pod_count=np.take(snapshot.pod_count, at) - present.sum(axis=1),
        allowed_pods=np.take(snapshot.allowed_pods, at),
        nominated_requested=nominated_requested,
        nominated_count=nominated_count,
        returned=returned,
        present=present,
    )


__all__ = ["NODE_ONLY_FILTERS", "NodeRows", "node_rows", "rejection_statuses", "reprieve_rows", "resource_fit_request"]
