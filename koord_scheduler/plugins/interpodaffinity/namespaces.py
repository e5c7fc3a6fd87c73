"""Namespaces as InterPodAffinity reads them: name -> labels, kube-scheduler's namespace lister.

A term's non-empty ``namespaceSelector`` selects the namespaces whose labels match it, and existing
pods' selectors are matched against the incoming pod's namespace labels. The plugin watches Namespaces
through the handle (from the API server, or the Namespace documents of a ``simulate`` cluster file);
an unknown namespace has no labels and is selected by no non-empty selector, as upstream.

:attr:`NamespaceStore.version` grows with every change that alters some namespace's labels, so
counts cached per term (:class:`~koord_scheduler.plugins.topology_index.TopologyIndex`) can be dropped
when they may depend on a label that changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from apis.core.parse import parse_object_meta
from koord_scheduler.framework.types import EventType, ObjectKind


@dataclass(frozen=True, slots=True)
class NamespaceLabelsEntry:
    """What is kept of a Namespace: its name and labels."""

    name: str
    labels: Mapping[str, str]


def parse_namespace(raw: Mapping[str, Any]) -> NamespaceLabelsEntry:
    """Raises ``ValueError`` (``ParseError`` naming the field) for a malformed object."""
    meta = parse_object_meta(dict(raw), "Namespace")
    if not meta.name:
        raise ValueError("Namespace: metadata.name is required")
    return NamespaceLabelsEntry(meta.name, meta.labels)


NAMESPACE_KIND = ObjectKind(
    kind="Namespace", group="", version="v1", plural="namespaces", namespaced=False, parse=parse_namespace
)


class NamespaceStore:
    """Namespace name -> labels, fed by watch events; callable as a ``NamespaceLabels``."""

    def __init__(self) -> None:
        self._labels: dict[str, Mapping[str, str]] = {}
        self.version = 0

    def __call__(self, namespace: str) -> Mapping[str, str] | None:
        return self._labels.get(namespace)

    def on_event(self, event: EventType, old: Any, new: Any) -> None:
        if event == EventType.DELETED:
            if isinstance(old, NamespaceLabelsEntry) and self._labels.pop(old.name, None) is not None:
                self.version += 1
            return
        if not isinstance(new, NamespaceLabelsEntry):
            return
        if self._labels.get(new.name) != new.labels:
            self._labels[new.name] = new.labels
            self.version += 1

    def __len__(self) -> int:
        return len(self._labels)
