"""The colocation mutation without a cluster, for ``koord-scheduler simulate``.

A cluster file may hold ClusterColocationProfiles, Namespaces and PriorityClasses beside its Nodes and
Pods. :func:`colocation_from_objects` reads them; :meth:`OfflineColocation.mutate` then gives each pending
pod what the webhook would have given it when it was created. Differences from the live webhook:

- a namespace not in the file has only the ``kubernetes.io/metadata.name`` label the API server sets;
- PriorityClasses default to Koordinator's four (koord-prod 9000, koord-mid 7000, koord-batch 5000,
  koord-free 3000, PreemptLowerPriority), overridden by those in the file;
- the probability roll is seeded by the pod's ``namespace/name``, so a run is reproducible.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from apis.colocation import KIND, ResolvedProfile, resolve_profile
from apis.colocation.profile import ProfileError
from koord_scheduler.webhook.mutation import MutationError, PriorityClassInfo, match_profiles, mutate_pod

Json = dict[str, Any]

DEFAULT_PRIORITY_CLASSES = {
    name: PriorityClassInfo(name, value, "PreemptLowerPriority")
    for name, value in (("koord-prod", 9000), ("koord-mid", 7000), ("koord-batch", 5000), ("koord-free", 3000))
}
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(slots=True)
class OfflineColocation:
    profiles: list[ResolvedProfile] = field(default_factory=list)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClassInfo] = field(default_factory=lambda: dict(DEFAULT_PRIORITY_CLASSES))
    problems: list[tuple[str, str]] = field(default_factory=list)
    """(``Kind name``, message) for profiles that cannot be used."""

    def mutate(self, pod: Mapping[str, Any]) -> tuple[Json, list[str]]:
        """The pod as the webhook would admit it, and problems (skipped profiles, or why it is unchanged)."""
        raw: Json = dict(pod)
        if not self.profiles or (raw.get("spec") or {}).get("nodeName"):
            return raw, []
        meta = raw.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        labels = self.namespaces.get(namespace, {NAMESPACE_NAME_LABEL: namespace})
        matched = match_profiles(meta.get("labels") or {}, self.profiles, labels)
        if not matched:
            return raw, []
        roll = random.Random(f"{namespace}/{meta.get('name', '')}")
        try:
            result = mutate_pod(raw, matched, priority_classes=self.priority_classes, roll=lambda: roll.randrange(100))
        except MutationError as exc:
            return raw, [f"admitted unchanged: {exc}"]
        return result.pod, [f"ClusterColocationProfile {s.profile} skipped: {s.message}" for s in result.skipped]


def colocation_from_objects(objects: Iterable[Mapping[str, Any]]) -> OfflineColocation:
    out = OfflineColocation()
    for obj in objects:
        kind = obj.get("kind")
        raw_meta = obj.get("metadata")
        meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        name = str(meta.get("name", ""))
        if kind == KIND:
            try:
                out.profiles.append(resolve_profile(dict(obj)))
            except ProfileError as exc:
                out.problems.append((f"{KIND} {name}", str(exc)))
        elif kind == "Namespace":
            raw_labels = meta.get("labels")
            labels: Mapping[str, Any] = raw_labels if isinstance(raw_labels, dict) else {}
            out.namespaces[name] = {NAMESPACE_NAME_LABEL: name, **{str(k): str(v) for k, v in labels.items()}}
        elif kind == "PriorityClass" and isinstance(obj.get("value"), int):
            policy = obj.get("preemptionPolicy", "PreemptLowerPriority")
            out.priority_classes[name] = PriorityClassInfo(name, int(obj["value"]), str(policy) if policy else None)
    return out


def file_admission(objects: list[Mapping[str, Any]]) -> tuple[Any, list[tuple[str, str]]]:
    """The cluster file hook (``cluster_file.PodAdmission``): the offline webhook built from ``objects``."""
    colocation = colocation_from_objects(objects)
    return colocation.mutate, colocation.problems
