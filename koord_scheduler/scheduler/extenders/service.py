"""pykoord's plugins behind the extender protocol: the answers ``koord-scheduler extender-server`` gives.

A stock kube-scheduler posts ``ExtenderArgs``; one profile's framework answers from the scheduler cache
that the server's own informers keep:

- filter: PreFilter, the BeforeFilter transformers and the Filter plugins on the nodes sent; an
  ``ExtenderFilterResult`` with the nodes that pass (as ``NodeNames``, and as ``Nodes`` when whole
  nodes were sent) and each rejected node's reasons (``FailedAndUnresolvableNodes`` for
  UnschedulableAndUnresolvable, ``FailedNodes`` otherwise). Nodes the cache does not know fail as
  unresolvable.
- prioritize: PreFilter, BeforeScore and the Score plugins' weighted sum, mapped linearly from
  ``0..100 * sum(weights)`` onto the protocol's ``0..10`` (kube-scheduler scales it back by the
  extender's weight).
- preempt: the candidates kube-scheduler's own dry run found (victims as UIDs, or as whole pods) are
  kept only where the pod passes this profile's PreFilter and Filter plugins with the victims taken off
  the node; the victims kept are the ones sent (``ExtenderPreemptionResult.NodeNameToMetaVictims``). A
  victim the cache does not hold is already gone and frees nothing more.
- bind: the Binding subresource, through the cluster source.

A malformed request gets an ``Error`` naming the field, never a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from apis.core.errors import ParseError
from apis.core.parse import parse_pod
from apis.core.types import ObjectMeta, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.runtime import Framework, PluginCycleError
from koord_scheduler.framework.snapshot import ClusterSnapshot, NodeInfo
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.scheduler.extenders.wire import MAX_EXTENDER_PRIORITY

UNKNOWN_NODE = "node not found in the extender's cache"


class RequestError(ValueError):
    """An ``ExtenderArgs`` or ``ExtenderBindingArgs`` that does not decode."""


def _get(obj: Mapping[str, Any], name: str) -> Any:
    if name in obj:
        return obj[name]
    lowered = name.lower()
    return next((v for k, v in obj.items() if isinstance(k, str) and k.lower() == lowered), None)


def request_node_names(body: Mapping[str, Any]) -> tuple[list[str], list[Any] | None]:
    """The node names an ``ExtenderArgs`` carries, and the whole node items when it sent them."""
    names = _get(body, "NodeNames")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise RequestError("NodeNames: expected a list of strings")
        return names, None
    nodes = _get(body, "Nodes")
    items = _get(nodes, "items") if isinstance(nodes, Mapping) else None
    if not isinstance(items, list):
        raise RequestError("ExtenderArgs: neither NodeNames nor Nodes.items given")
    out = []
    for i, item in enumerate(items):
        meta = item.get("metadata") if isinstance(item, Mapping) else None
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(name, str):
            raise RequestError(f"Nodes.items[{i}].metadata.name: expected a string")
        out.append(name)
    return out, items


def request_pod(body: Mapping[str, Any]) -> Pod:
    raw = _get(body, "Pod")
    if not isinstance(raw, Mapping):
        raise RequestError("Pod: expected a JSON object")
    try:
        return parse_pod(dict(raw))
    except ParseError as exc:
        raise RequestError(str(exc)) from exc


class ExtenderService:
    """Answers extender verbs with one profile's framework over ``snapshot``'s nodes."""

    def __init__(self, fwk: Framework, snapshot: ClusterSnapshot) -> None:
        self.fwk = fwk
        self.snapshot = snapshot
        self.max_total = 100 * sum(e.weight for e in fwk.score_phase.entries)

    def filter(self, body: Mapping[str, Any]) -> dict[str, Any]:
        try:
            pod = request_pod(body)
            names, items = request_node_names(body)
        except RequestError as exc:
            return {"Error": f"bad ExtenderArgs: {exc}"}
        known = [n for n in names if n in self.snapshot.positions]
        failed: dict[str, str] = {}
        unresolvable = {n: UNKNOWN_NODE for n in names if n not in self.snapshot.positions}
        state = CycleState()
        try:
            pod, pre_result, status = self.fwk.run_pre_filter(state, pod)
            if not status.is_success:
                target = unresolvable if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE else failed
                target.update({n: status.message for n in known})
                return _filter_result([], items, failed, unresolvable)
            if pre_result is not None and pre_result.node_names is not None:
                allowed = pre_result.node_names
                message = f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(pre_result.plugins))}]"
                unresolvable.update({n: message for n in known if n not in allowed})
                known = [n for n in known if n in allowed]
            positions = np.array([self.snapshot.positions[n] for n in known], dtype=np.intp)
            pod = self.fwk.run_before_filter(state, pod, positions)
            diagnosis = Diagnosis(num_all_nodes=len(names))
            feasible = self.fwk.run_filter_plugins(state, pod, positions, diagnosis)
        except PluginCycleError as exc:
            return {"Error": exc.status.message}
        for chunk in diagnosis.chunks:
            for i, pos in enumerate(chunk.positions.tolist()):
                status = chunk.status_at(i)
                target = unresolvable if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE else failed
                target[self.snapshot.info(pos).name] = _message(status)
        passed = [self.snapshot.info(int(p)).name for p in feasible.tolist()]
        return _filter_result(passed, items, failed, unresolvable)

    def prioritize(self, body: Mapping[str, Any]) -> list[dict[str, Any]] | dict[str, Any]:
        """A ``HostPriorityList``; on a malformed request an object with ``Error`` (kube-scheduler then
        ignores this extender's scores for the cycle)."""
        try:
            pod = request_pod(body)
            names, _ = request_node_names(body)
        except RequestError as exc:
            return {"Error": f"bad ExtenderArgs: {exc}"}
        known = [n for n in names if n in self.snapshot.positions]
        scores = dict.fromkeys(names, 0)
        if known and self.max_total > 0:
            state = CycleState()
            try:
                pod, _, _ = self.fwk.run_pre_filter(state, pod)  # PreScore reads what PreFilter wrote
                positions = np.array([self.snapshot.positions[n] for n in known], dtype=np.intp)
                pod, positions = self.fwk.run_before_score(state, pod, positions)
                totals = self.fwk.run_score_plugins(state, pod, positions)
            except PluginCycleError as exc:
                return {"Error": exc.status.message}
            for pos, total in zip(positions.tolist(), totals.tolist(), strict=True):
                scores[self.snapshot.info(pos).name] = protocol_score(int(total), self.max_total)
        return [{"Host": n, "Score": s} for n, s in scores.items()]

    def preempt(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """An ``ExtenderPreemptionResult``. Raises :class:`RequestError` for a malformed request and
        :class:`PluginCycleError` when a plugin fails."""
        pod = request_pod(body)
        candidates = request_victims(body)
        kept: dict[str, Any] = {}
        state = CycleState()
        pod, pre_result, status = self.fwk.run_pre_filter(state, pod)
        if not status.is_success:
            return {"NodeNameToMetaVictims": kept}
        allowed = pre_result.node_names if pre_result is not None else None
        for node, (uids, violations) in candidates.items():
            info = self.snapshot.node_info(node)
            if info is None or (allowed is not None and node not in allowed):
                continue
            if self._fits_without(state, pod, info, uids):
                kept[node] = {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": violations}
        return {"NodeNameToMetaVictims": kept}

    def _fits_without(self, state: CycleState, pod: Pod, info: NodeInfo, uids: list[str]) -> bool:
        """The Filter plugins pass ``pod`` on the node with the pods of ``uids`` taken off (put back after)."""
        wanted = set(uids)
        victims = [p for p in info.pods.values() if p.uid in wanted]
        trial = state.clone()
        removed: list[Pod] = []
        try:
            for victim in victims:
                self.snapshot.remove_pod(victim)
                removed.append(victim)
                for plugin in self.fwk.pre_filter_plugins:
                    extensions = plugin.pre_filter_extensions()
                    if extensions is not None and plugin.name not in trial.skip_filter:
                        extensions.remove_pod(trial, pod, victim, info)
            positions = np.array([info.position], dtype=np.intp)
            return len(self.fwk.filter_nodes_uncached(trial, pod, positions, Diagnosis(num_all_nodes=1))) == 1
        finally:
            for victim in removed:
                self.snapshot.add_pod(victim)


def request_victims(body: Mapping[str, Any]) -> dict[str, tuple[list[str], int]]:
    """node -> (victim UIDs, PDB violations) of an ``ExtenderPreemptionArgs``: ``NodeNameToMetaVictims``
    (UIDs) when given, else ``NodeNameToVictims`` (whole pods)."""
    meta = _get(body, "NodeNameToMetaVictims")
    key, source = ("NodeNameToMetaVictims", meta) if meta else ("NodeNameToVictims", _get(body, "NodeNameToVictims"))
    if source is None:
        return {}
    if not isinstance(source, Mapping):
        raise RequestError(f"{key}: expected a JSON object")
    out: dict[str, tuple[list[str], int]] = {}
    for node, entry in source.items():
        what = f"{key}[{node!r}]"
        pods = _get(entry, "Pods") if isinstance(entry, Mapping) else None
        if not isinstance(pods, list):
            raise RequestError(f"{what}.Pods: expected a list")
        uids = []
        for j, victim in enumerate(pods):
            holder = _get(victim, "metadata") if meta is None and isinstance(victim, Mapping) else victim
            uid = _get(holder, "uid" if meta is None else "UID") if isinstance(holder, Mapping) else None
            if not isinstance(uid, str):
                raise RequestError(f"{what}.Pods[{j}]: no UID")
            uids.append(uid)
        violations = _get(entry, "NumPDBViolations") or 0
        if isinstance(violations, bool) or not isinstance(violations, int):
            raise RequestError(f"{what}.NumPDBViolations: expected an integer")
        out[str(node)] = (uids, violations)
    return out


def protocol_score(total: int, max_total: int) -> int:
    """A framework total (``0..max_total``) as an extender score (``0..10``), rounded down and clamped."""
    if max_total <= 0:
        return 0
    return max(0, min(MAX_EXTENDER_PRIORITY, total * MAX_EXTENDER_PRIORITY // max_total))


def binding_pod(body: Mapping[str, Any]) -> tuple[Pod, str]:
    """The pod (name, namespace, uid) and node of an ``ExtenderBindingArgs``."""
    fields = {k: _get(body, k) for k in ("PodName", "PodNamespace", "PodUID", "Node")}
    for key, value in fields.items():
        if not isinstance(value, str) or (key != "PodUID" and not value):
            raise RequestError(f"ExtenderBindingArgs.{key}: expected a non-empty string")
    meta = ObjectMeta(name=fields["PodName"], namespace=fields["PodNamespace"], uid=fields["PodUID"])
    return Pod(meta=meta), fields["Node"]


def _message(status: Status) -> str:
    return ", ".join(status.reasons) if status.reasons else status.plugin


def _filter_result(
    passed: list[str], items: list[Any] | None, failed: dict[str, str], unresolvable: dict[str, str]
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "NodeNames": passed,
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": unresolvable,
        "Error": "",
    }
    if items is not None:
        keep = set(passed)
        result["Nodes"] = {"items": [i for i in items if i["metadata"]["name"] in keep]}
    return result
