"""The selectors of Services and pod controllers, for the default constraints' selector.

kube-scheduler's ``helper.DefaultSelector`` gives a pod without its own spread constraints the union of
- the selectors of the Services in its namespace that select it (``GetPodServices``; a Service without
  a selector selects nothing), and
- the selector of its controller when that is a ReplicationController (its selector map), ReplicaSet or
  StatefulSet (its ``LabelSelector``'s requirements) the listers know; an unknown controller adds nothing.

An empty result means "no default constraints". The plugin watches these four kinds through the handle
(the API server's objects, or a ``simulate`` file's documents); :class:`WorkloadStore` keeps only names
and selectors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from apis.core.frozendict import FrozenDict
from apis.core.jsonfields import as_map, get_str_map
from apis.core.parse import parse_label_selector, parse_object_meta
from apis.core.selectors import label_selector_matches
from apis.core.types import LabelSelector, Operator, Pod, SelectorRequirement
from koord_scheduler.framework.types import EventType, ObjectKind


@dataclass(frozen=True, slots=True)
class WorkloadSelector:
    """A Service's or controller's selector: ``labels`` for Services and ReplicationControllers (a map;
    None when unset), ``selector`` for ReplicaSets and StatefulSets (a LabelSelector; None when unset)."""

    kind: str
    namespace: str
    name: str
    labels: Mapping[str, str] | None = None
    selector: LabelSelector | None = None


def _parser(kind: str, *, map_selector: bool) -> Any:
    def parse(raw: Mapping[str, Any]) -> WorkloadSelector:
        """Raises ``ValueError`` (``ParseError`` naming the field) for a malformed object."""
        obj = dict(raw)
        meta = parse_object_meta(obj, kind, default_namespace="default")
        try:
            raw_spec = obj.get("spec")
            spec = as_map(raw_spec, "spec") if raw_spec is not None else {}
            if map_selector:
                labels = get_str_map(spec, "selector") if spec.get("selector") is not None else None
                return WorkloadSelector(kind, meta.namespace, meta.name, labels=labels or None)
            selector = parse_label_selector(spec.get("selector"))
            return WorkloadSelector(kind, meta.namespace, meta.name, selector=selector)
        except ValueError as err:
            message = str(err)
            # Field paths are relative to what was parsed: make them whole (spec.selector.<...>).
            if message.startswith("selector"):
                message = "spec." + message
            elif not message.startswith("spec"):
                message = "spec.selector." + message
            raise ValueError(f"{kind} {meta.namespace}/{meta.name}: {message}") from None

    return parse


SERVICE_KIND = ObjectKind("Service", "", "v1", "services", True, _parser("Service", map_selector=True))
REPLICATION_CONTROLLER_KIND = ObjectKind(
    "ReplicationController",
    "",
    "v1",
    "replicationcontrollers",
    True,
    _parser("ReplicationController", map_selector=True),
)
REPLICA_SET_KIND = ObjectKind(
    "ReplicaSet", "apps", "v1", "replicasets", True, _parser("ReplicaSet", map_selector=False)
)
STATEFUL_SET_KIND = ObjectKind(
    "StatefulSet", "apps", "v1", "statefulsets", True, _parser("StatefulSet", map_selector=False)
)
WORKLOAD_KINDS = (SERVICE_KIND, REPLICATION_CONTROLLER_KIND, REPLICA_SET_KIND, STATEFUL_SET_KIND)

_CONTROLLERS = {
    ("v1", "ReplicationController"): "ReplicationController",
    ("apps/v1", "ReplicaSet"): "ReplicaSet",
    ("apps/v1", "StatefulSet"): "StatefulSet",
}
"""Owner reference (apiVersion, kind) -> the kind whose lister ``DefaultSelector`` asks."""


def requirements(selector: LabelSelector) -> tuple[SelectorRequirement, ...]:
    """``LabelSelectorAsSelector(s).Requirements()``: matchLabels as ``In [value]``, then matchExpressions."""
    return (
        *(SelectorRequirement(k, Operator.IN, (v,)) for k, v in sorted(selector.match_labels.items())),
        *selector.match_expressions,
    )


def default_selector(
    pod: Pod, services: list[Mapping[str, str]], controller: WorkloadSelector | None
) -> LabelSelector | None:
    """``helper.DefaultSelector`` from the selectors of the Services selecting ``pod`` and of its
    controller as the store knows it (None: unknown or not a controller kind). None when empty."""
    merged: dict[str, str] = {}
    for labels in services:
        merged.update(labels)
    expressions: tuple[SelectorRequirement, ...] = ()
    if controller is not None:
        if controller.labels is not None:
            merged.update(controller.labels)
        elif controller.selector is not None:
            expressions = requirements(controller.selector)
    if not merged and not expressions:
        return None
    return LabelSelector(match_labels=FrozenDict(merged), match_expressions=expressions)


class WorkloadStore:
    """Services per namespace and controllers by (kind, namespace, name), fed by watch events."""

    def __init__(self) -> None:
        self._services: dict[str, dict[str, Mapping[str, str]]] = {}
        self._controllers: dict[tuple[str, str, str], WorkloadSelector] = {}

    def on_event(self, event: EventType, old: Any, new: Any) -> None:
        gone = old if event == EventType.DELETED else None
        if isinstance(gone, WorkloadSelector):
            self._forget(gone)
            return
        if isinstance(new, WorkloadSelector):
            if new.kind == "Service":
                services = self._services.setdefault(new.namespace, {})
                if new.labels is None:
                    services.pop(new.name, None)
                else:
                    services[new.name] = new.labels
            else:
                self._controllers[(new.kind, new.namespace, new.name)] = new

    def _forget(self, obj: WorkloadSelector) -> None:
        if obj.kind == "Service":
            self._services.get(obj.namespace, {}).pop(obj.name, None)
        else:
            self._controllers.pop((obj.kind, obj.namespace, obj.name), None)

    def services_selecting(self, pod: Pod) -> list[Mapping[str, str]]:
        """``GetPodServices``: the selectors of the Services in the pod's namespace that select it."""
        services = self._services.get(pod.namespace)
        if not services:
            return []
        labels = pod.meta.labels
        return [  # by name, so that the merge of conflicting keys does not depend on arrival order
            s for _, s in sorted(services.items()) if label_selector_matches(LabelSelector(match_labels=s), labels)
        ]

    def controller_of(self, pod: Pod) -> WorkloadSelector | None:
        owner = next((ref for ref in pod.meta.owner_references if ref.controller), None)
        if owner is None:
            return None
        kind = _CONTROLLERS.get((owner.api_version, owner.kind))
        return None if kind is None else self._controllers.get((kind, pod.namespace, owner.name))

    def default_selector(self, pod: Pod) -> LabelSelector | None:
        return default_selector(pod, self.services_selecting(pod), self.controller_of(pod))
