"""The states informer: this node, its pods, its NodeSLO (merged over defaults) and NodeMetric spec.

Sources (the API server watch, or cgroup discovery in standalone mode) push raw JSON in through the
``set_*`` / ``*_pod`` methods; readers get immutable snapshots. Callbacks registered per
:class:`RegisterType` run in registration order after each change; a callback that raises is logged and
the others still run.

A bad object costs that object only: a pod that cannot be parsed is left out of a list (and counted in
:attr:`StatesInformer.rejected`), and a NodeSLO is validated against Koordinator's ranges
(:class:`~apis.slo.validation.NodeSLOValidator`) before anything uses it: one with a field out of range
(``cpuSuppressThresholdPercent: 500``, ``memoryEvictThresholdPercent: -5``) or of the wrong type is
reported, naming every such field, and the last good spec (the defaults before any) stays in force.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import Any

from apis.slo import NodeMetricSpec, NodeSLOSpec, NodeSLOValidator, merge_node_slo_spec
from koordlet.statesinformer.pods import NodeInfo, PodMeta, parse_node, parse_pod
from koordlet.system.errorlog import FailureLog
from koordlet.system.layout import CgroupLayout

log = logging.getLogger(__name__)


class RegisterType(StrEnum):
    NODE_SLO_SPEC = "NodeSLOSpec"
    ALL_PODS = "AllPods"
    NODE_METADATA = "NodeMetadata"
    NODE_METRIC_SPEC = "NodeMetricSpec"


Callback = Callable[[RegisterType, "StatesInformer"], None]


class StatesInformer:
    def __init__(self, node_name: str, layout: CgroupLayout) -> None:
        self.node_name = node_name
        self.layout = layout
        self._lock = threading.Lock()
        self._node: NodeInfo | None = None
        self._pods: dict[str, PodMeta] = {}
        self._node_slo = merge_node_slo_spec(None)
        self._node_metric_spec: NodeMetricSpec | None = None
        self._callbacks: dict[RegisterType, dict[str, Callback]] = {t: {} for t in RegisterType}
        self._synced: set[RegisterType] = set()
        self.callback_errors = 0
        self.rejected = 0
        """Objects refused (a pod that does not parse, a NodeSLO out of range)."""
        self.failure_log = FailureLog(log)
        self._slo_validator = NodeSLOValidator()

    # -- readers -------------------------------------------------------------------------------

    @property
    def node(self) -> NodeInfo | None:
        return self._node

    def get_all_pods(self) -> tuple[PodMeta, ...]:
        return tuple(self._pods.values())

    def get_pod(self, uid: str) -> PodMeta | None:
        return self._pods.get(uid)

    @property
    def node_slo(self) -> NodeSLOSpec:
        """The NodeSLO spec merged over defaults (defaults alone until one is received)."""
        return self._node_slo

    @property
    def node_metric_spec(self) -> NodeMetricSpec | None:
        return self._node_metric_spec

    def has_synced(self, *types: RegisterType) -> bool:
        return all(t in self._synced for t in (types or (RegisterType.ALL_PODS,)))

    # -- callbacks -----------------------------------------------------------------------------

    def register_callback(self, kind: RegisterType, name: str, fn: Callback) -> None:
        """Run ``fn`` after each change of ``kind``. A duplicate name for the same kind is an error."""
        if name in self._callbacks[kind]:
            raise ValueError(f"callback {name!r} already registered for {kind.value}")
        self._callbacks[kind][name] = fn

    def _notify(self, kind: RegisterType) -> None:
        self._synced.add(kind)
        for name, fn in list(self._callbacks[kind].items()):
            try:
                fn(kind, self)
            except Exception as err:
                self.callback_errors += 1
                self.failure_log.failed(f"states informer callback {name} for {kind.value}", err)

    # -- writers (sources) ---------------------------------------------------------------------

    def set_node(self, raw: Mapping[str, Any]) -> None:
        self._node = parse_node(raw)
        self._notify(RegisterType.NODE_METADATA)

    def replace_pods(self, raws: Iterable[Mapping[str, Any]]) -> None:
        """The node's pods are exactly ``raws``; one that cannot be parsed is reported and left out."""
        pods: dict[str, PodMeta] = {}
        for raw in raws:
            try:
                pod = parse_pod(raw, self.layout)
            except Exception as err:
                self.reject(raw, "Pod", err)
                continue
            if pod.uid:
                pods[pod.uid] = pod
        with self._lock:
            self._pods = pods
        self._notify(RegisterType.ALL_PODS)

    def replace_pod_metas(self, pods: Iterable[PodMeta]) -> None:
        with self._lock:
            self._pods = {p.uid: p for p in pods}
        self._notify(RegisterType.ALL_PODS)

    def upsert_pod(self, raw: Mapping[str, Any]) -> None:
        pod = parse_pod(raw, self.layout)
        if not pod.uid:
            return
        with self._lock:
            if self._pods.get(pod.uid) == pod:
                return
            self._pods = {**self._pods, pod.uid: pod}
        self._notify(RegisterType.ALL_PODS)

    def apply_pod_changes(self, changes: Mapping[str, Mapping[str, Any] | None], *, kind: str, synced: bool) -> None:
        """Pod uid -> its new raw object, or None when deleted; one notification for all of them (also when
        nothing changed but ``synced``: the pods were listed). A pod that cannot be parsed is reported and
        its earlier version kept."""
        parsed: dict[str, PodMeta | None] = {}
        for uid, raw in changes.items():
            if raw is None:
                parsed[uid] = None
                continue
            try:
                meta = parse_pod(raw, self.layout)
            except Exception as err:
                self.reject(raw, kind, err)
                continue
            if meta.uid:
                parsed[meta.uid] = meta
        with self._lock:
            pods = dict(self._pods)
            for uid, pod in parsed.items():
                if pod is None:
                    pods.pop(uid, None)
                else:
                    pods[uid] = pod
            changed = pods != self._pods
            if changed:
                self._pods = pods
        if changed or synced:
            self._notify(RegisterType.ALL_PODS)

    def delete_pod(self, uid: str) -> None:
        with self._lock:
            if uid not in self._pods:
                return
            self._pods = {k: v for k, v in self._pods.items() if k != uid}
        self._notify(RegisterType.ALL_PODS)

    def set_node_slo(self, raw: Mapping[str, Any] | None) -> None:
        """A received NodeSLO (or ``None`` when deleted): validated, merged over the defaults; notify on
        change. One that breaks Koordinator's ranges is reported (each field named, once per distinct
        problem) and the last good spec stays in force (the defaults if there is none)."""
        received: NodeSLOSpec | None = None
        if raw:
            refused = self._slo_validator.rejections
            slo = self._slo_validator.accept(raw)
            self.rejected += self._slo_validator.rejections - refused
            received = slo.spec if slo is not None else None
        else:
            self._slo_validator.forget(self.node_name)
        merged = merge_node_slo_spec(received)
        if merged == self._node_slo and RegisterType.NODE_SLO_SPEC in self._synced:
            return
        self._node_slo = merged
        self._notify(RegisterType.NODE_SLO_SPEC)

    def reject(self, raw: Any, kind: str, err: BaseException) -> None:
        """``raw`` (a ``kind``) cannot be used: counted, and logged naming it (once a minute per object)."""
        self.rejected += 1
        meta = raw.get("metadata") if isinstance(raw, Mapping) else None
        meta = meta if isinstance(meta, Mapping) else {}
        name = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
        self.failure_log.failed(f"{kind} {name} ignored: reading it", err)

    def set_node_metric(self, raw: Mapping[str, Any] | None) -> None:
        spec = NodeMetricSpec.model_validate(raw.get("spec") or {}) if raw else None
        if spec == self._node_metric_spec and RegisterType.NODE_METRIC_SPEC in self._synced:
            return
        self._node_metric_spec = spec
        self._notify(RegisterType.NODE_METRIC_SPEC)
