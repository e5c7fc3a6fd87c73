"""Nominated pods: pending pods that preemption promised a node to, and the Filter pass that protects them.

kube-scheduler's ``PodNominator`` (``backend/queue/nominator.go``) and
``RunFilterPluginsWithNominatedPods`` (``framework/runtime/framework.go``).

A pod is nominated to a node when its ``status.nominatedNodeName`` is set, or when a PostFilter plugin
(DefaultPreemption) returned the node for it in this process (the status write may lag). The nomination
ends when the pod is assumed, bound or deleted, or when a later update or PostFilter result clears it.

Filtering with nominated pods: a pod must leave room for the pods nominated to a node with a priority
greater than or equal to its own, so on such a node Filter runs once as if those pods were running there
(accounted in the snapshot, and added to every PreFilter state through ``PreFilterExtensions.add_pod``)
and once without them (filters such as pod affinity may pass only with them absent). The node is
feasible only if both passes succeed. The pass without them is the ordinary Filter run over all nodes;
:func:`filter_with_nominated_pods` runs the other pass, on the feasible nodes that carry such pods only,
so a cluster with no nominations pays nothing. When both passes fail upstream reports the first one's
reasons and we report the ordinary pass's; only the message can differ.

When NodeResourcesFit is the only active Filter whose answer depends on the pods on a node (the test of
``defaultpreemption.resource_reprieve.resource_fit_request``), the second pass is NodeResourcesFit's own
arithmetic on all those nodes at once, the nominated pods' requests added to their rows in one numpy step;
otherwise it runs the whole Filter chain node by node. Its cost is the nominated pods on the feasible nodes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import replace

import numpy as np

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis, FailureChunk
from koord_scheduler.framework.runtime import Framework, PluginCycleError
from koord_scheduler.framework.snapshot import ClusterSnapshot, NodeInfo, Positions
from koord_scheduler.framework.status import Code, Status, error
from koord_scheduler.plugins import names
from koord_scheduler.plugins.defaultpreemption.resource_reprieve import resource_fit_request
from koord_scheduler.plugins.noderesources.fit import FitRequest, fit_failures, group_codes, status_for_code

log = logging.getLogger(__name__)


class PodNominator:
    """Pod key -> the node it is nominated to, and node -> the nominated pods (in nomination order)."""

    def __init__(self) -> None:
        self._node_of: dict[str, str] = {}
        self._by_node: dict[str, dict[str, Pod]] = {}

    def add(self, pod: Pod, node_name: str = "") -> None:
        """Nominate ``pod`` to ``node_name`` (default: its ``nominated_node_name``); "" with no
        status nomination removes it. A pod that is bound is never nominated."""
        self.delete(pod)
        node = node_name or pod.nominated_node_name
        if not node or pod.node_name:
            return
        self._node_of[pod.key] = node
        self._by_node.setdefault(node, {})[pod.key] = pod

    def update(self, old: Pod | None, new: Pod) -> None:
        """A pending pod changed. Keeps an in-memory nomination when neither version carries one in
        its status (the PostFilter result is newer than the watch), as upstream's ``UpdateNominatedPod``."""
        if new.node_name:
            self.delete(new)
            return
        node = new.nominated_node_name
        old_status = old.nominated_node_name if old is not None else ""
        if not node and not old_status:
            node = self._node_of.get(new.key, "")
        self.add(new, node)

    def delete(self, pod: Pod) -> None:
        node = self._node_of.pop(pod.key, None)
        if node is None:
            return
        pods = self._by_node.get(node)
        if pods is not None:
            pods.pop(pod.key, None)
            if not pods:
                del self._by_node[node]

    def node_of(self, key: str) -> str:
        return self._node_of.get(key, "")

    def nominated_pods_for_node(self, node_name: str) -> list[Pod]:
        pods = self._by_node.get(node_name)
        return list(pods.values()) if pods else []

    def by_node(self) -> Iterator[tuple[str, Iterable[Pod]]]:
        """Node -> its nominated pods, without copying: do not change the nominator while iterating."""
        for node, pods in self._by_node.items():
            yield node, pods.values()

    def nodes(self) -> Iterator[tuple[str, list[Pod]]]:
        for node, pods in self._by_node.items():
            yield node, list(pods.values())

    def __len__(self) -> int:
        return len(self._node_of)

    def __bool__(self) -> bool:
        return bool(self._node_of)


def yielded_to(nominated: Iterable[Pod], pod: Pod) -> list[Pod]:
    """The nominated pods ``pod`` must leave room for: priority >= its own, other than itself."""
    return [p for p in nominated if p.priority >= pod.priority and p.key != pod.key]


def filter_with_nominated_pods(
    fwk: Framework,
    state: CycleState,
    pod: Pod,
    snapshot: ClusterSnapshot,
    feasible: Positions,
    *,
    diagnosis: Diagnosis,
    nominator: PodNominator | None,
) -> Positions:
    """Drop the feasible positions where ``pod`` does not fit once the nominated pods it yields to are
    counted; their statuses go into ``diagnosis``. Order is kept."""
    if not nominator or len(feasible) == 0:
        return feasible
    is_feasible = np.zeros(snapshot.capacity, dtype=np.bool_)
    is_feasible[feasible] = True
    feasible_at = is_feasible.tolist()
    positions = snapshot.positions
    to_check: list[tuple[int, list[Pod]]] = []
    for node_name, pods in nominator.by_node():
        pos = positions.get(node_name)
        if pos is None or not feasible_at[pos]:
            continue  # only the nodes that passed the ordinary pass are filtered again
        ahead = yielded_to(pods, pod)
        if ahead:
            to_check.append((pos, ahead))
    if not to_check:
        return feasible
    fit = resource_fit_request(fwk, state)
    if fit is not None:
        chunk = _fit_rejections(fit, snapshot, to_check)
    else:
        chunk = _filter_rejections(fwk, state, pod, snapshot, to_check)
    if chunk is None:
        return feasible
    diagnosis.add_chunk(chunk)
    drop = np.zeros(snapshot.capacity, dtype=np.bool_)
    drop[chunk.positions] = True
    return feasible[~drop[feasible]]


def _filter_rejections(
    fwk: Framework, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, to_check: list[tuple[int, list[Pod]]]
) -> FailureChunk | None:
    """The generic pass: the whole Filter chain on each node, one node at a time."""
    rejected: list[int] = []
    statuses: list[Status] = []
    for pos, ahead in to_check:
        status = filter_one_with_pods(fwk, state, pod, snapshot=snapshot, position=pos, extra=ahead)
        if status.code == Code.ERROR:
            raise PluginCycleError(status)
        if not status.is_success:
            rejected.append(pos)
            statuses.append(status)
    if not rejected:
        return None
    return FailureChunk(np.asarray(rejected, dtype=np.intp), np.arange(len(rejected), dtype=np.int32), tuple(statuses))


def _fit_rejections(
    fit: FitRequest, snapshot: ClusterSnapshot, to_check: list[tuple[int, list[Pod]]]
) -> FailureChunk | None:
    """The same pass when NodeResourcesFit is the only active Filter whose answer depends on the pods
    on the node (:func:`~koord_scheduler.plugins.defaultpreemption.resource_reprieve.resource_fit_request`):
    the nominated pods' requests are added to the nodes' rows in one step and checked with the plugin's
    own arithmetic. The other active filters passed in the ordinary pass and cannot change their answer."""
    checked: list[tuple[int, list[Pod]]] = []
    for pos, ahead in to_check:
        present = snapshot.info(pos).pods
        extra = [p for p in ahead if p.key not in present]  # assumed ones are already accounted
        if extra:
            checked.append((pos, extra))
    if not checked:
        return None
    width = -1
    while width != len(snapshot.resource_names):
        # request_vector adds a column for a resource seen first: gather again until none was added.
        width = len(snapshot.resource_names)
        vectors = [snapshot.request_vector(p) for _, extra in checked for p in extra]
    at = np.fromiter((pos for pos, _ in checked), dtype=np.intp, count=len(checked))
    counts = np.fromiter((len(extra) for _, extra in checked), dtype=np.int64, count=len(checked))
    added = np.zeros((len(checked), width), dtype=np.int64)
    np.add.at(added, np.repeat(np.arange(len(checked), dtype=np.intp), counts), np.array(vectors, dtype=np.int64))
    failing, codes = fit_failures(
        fit,
        np.arange(len(checked), dtype=np.intp),
        allocatable=np.take(snapshot.allocatable, at, axis=0),
        requested=np.take(snapshot.requested, at, axis=0) + added,
        pod_count=np.take(snapshot.pod_count, at) + counts,
        allowed_pods=np.take(snapshot.allowed_pods, at),
    )
    if len(failing) == 0:
        return None
    distinct, ids = group_codes(codes, len(fit.names) + 2)
    statuses = tuple(status_for_code(code, fit.names).with_plugin(names.NODE_RESOURCES_FIT) for code in distinct)
    return FailureChunk(at[failing], ids, statuses)


def filter_one_with_pods(
    fwk: Framework, state: CycleState, pod: Pod, *, snapshot: ClusterSnapshot, position: int, extra: list[Pod]
) -> Status:
    """Filter ``pod`` on one node as if the pods in ``extra`` ran there. The snapshot is restored
    before returning; ``state`` is not modified (a clone gets the AddPod updates)."""
    info = snapshot.info(position)
    node_name = info.name
    added: list[Pod] = []
    trial = state.clone()
    try:
        for other in extra:
            if other.key in info.pods:
                continue  # already accounted (assumed): counting it twice would be wrong
            placed = replace(other, node_name=node_name)
            snapshot.add_pod(placed)
            added.append(placed)
            status = _run_add_pod(fwk, trial, pod, added=placed, info=info)
            if not status.is_success:
                return status
        probe = Diagnosis(num_all_nodes=1)
        passed = fwk.filter_nodes_uncached(trial, pod, np.array([position], dtype=np.intp), probe)
    except PluginCycleError as exc:
        return exc.status
    finally:
        for placed in added:
            snapshot.remove_pod(placed)
    if len(passed):
        return Status()
    return probe.chunks[0].status_at(0) if probe.chunks else Status(Code.UNSCHEDULABLE)


def _run_add_pod(fwk: Framework, state: CycleState, pod: Pod, *, added: Pod, info: NodeInfo) -> Status:
    for plugin in fwk.pre_filter_plugins:
        if plugin.name in state.skip_filter:
            continue
        extensions = plugin.pre_filter_extensions()
        if extensions is None:
            continue
        try:
            status: Status = extensions.add_pod(state, pod, added, info)
        except Exception as exc:
            log.exception("AddPod of %s raised", plugin.name)
            return error(f"running AddPod on PreFilter plugin {plugin.name!r}: {exc}").with_plugin(plugin.name)
        if not status.is_success:
            return error(
                f"running AddPod on PreFilter plugin {plugin.name!r}: {status.message}"
            ).with_plugin(plugin.name)
    return Status()


__all__ = ["PodNominator", "filter_one_with_pods", "filter_with_nominated_pods", "yielded_to"]
