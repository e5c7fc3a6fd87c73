"""What the ClusterColocationProfile webhook does to a pod being created. Pure: JSON in, JSON out.

Models Koordinator ``pkg/webhook/pod/mutating`` (``cluster_colocation_profile.go`` and
``extended_resource_spec.go``):

1. :func:`match_profiles`: every profile whose ``namespaceSelector`` matches the namespace's labels and
   whose ``selector`` matches the pod's labels (absent or empty selectors match all), sorted by name.
2. :func:`mutate_pod`, for each matched profile in that order (later ones overwrite earlier ones):
   the probability roll (0 → never, 100 → always, else applied unless ``roll() > percent`` with
   ``roll()`` uniform in 0..99), then labels, annotations, labelKeysMapping, annotationKeysMapping,
   labelSuffixes, schedulerName, the ``koordinator.sh/qosClass`` label, the PriorityClass (name, value,
   preemption policy), the ``koordinator.sh/priority`` label, and the strategic merge ``patch`` last.
3. Unless a matched profile (even one the roll skipped) carries ``config.koordinator.sh/skip-update-resources``,
   when some profile matched: the pod's priority class is recomputed (label ``koordinator.sh/priority-class``,
   else the ``spec.priority`` band, else from the QoS class), and for koord-batch / koord-mid only, ``cpu``
   and ``memory`` in every init container's and container's requests and limits and in ``spec.overhead``
   become ``kubernetes.io/{batch,mid}-{cpu,memory}``: cpu as an integer of milli-cores, memory unchanged;
   an extended limit without a request gets the limit as its request. koord-prod and koord-free pods and
   pods of no class keep ``cpu`` / ``memory``.
4. For every pod: the annotation ``node.koordinator.sh/extended-resource-spec`` is rebuilt from the
   containers' (not init containers') batch-cpu / batch-memory requests and limits, and written when it
   differs from what the pod has.
5. For every pod: the DeviceResourceSpec rule (:mod:`.device_spec`): ``koordinator.sh/gpu`` becomes
   ``gpu-core`` + ``gpu-memory-ratio``, and ``koordinator.sh/gpu.shared`` is added to GPU containers.

Differences from Koordinator, deliberate: a profile that cannot be used (selector that does not parse,
probability out of range, PriorityClass not found, a patch that does not apply or leaves an invalid pod)
is skipped and reported in :attr:`MutationResult.skipped` (the server turns that into an Event on the
profile); Koordinator counts a bad selector as a match and fails the whole admission for the others.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apis.colocation import ANNOTATION_EXTENDED_RESOURCE_SPEC, ResolvedProfile, canonical_quantity, format_decimal
from apis.core import boundedjson
from apis.core.errors import ParseError, QuantityError
from apis.core.parse import parse_pod
from apis.core.quantity import NANOS_PER_UNIT, milli_value, quantity_nanos
from apis.core.selectors import label_selector_matches
from apis.extension.constants import (
    LABEL_POD_PRIORITY,
    LABEL_POD_QOS,
    RESOURCE_BATCH_CPU,
    RESOURCE_BATCH_MEMORY,
)
from apis.extension.priority import PriorityClass, priority_class_with_default, resource_name_for
from apis.extension.qos import kube_qos_class, qos_class_with_default
from koord_scheduler.webhook.device_spec import mutate_device_resources
from koord_scheduler.webhook.strategicmerge import PatchError, strategic_merge_pod

Json = dict[str, Any]

_EXTENDED_SPEC_RESOURCES = (RESOURCE_BATCH_CPU, RESOURCE_BATCH_MEMORY)


class MutationError(ValueError):
    """The pod cannot be mutated (the webhook then admits it unchanged); the message says why."""


@dataclass(frozen=True, slots=True)
class PriorityClassInfo:
    """What the webhook copies from a ``scheduling.k8s.io/v1`` PriorityClass."""

    name: str
    value: int
    preemption_policy: str | None = None


@dataclass(frozen=True, slots=True)
class ProfileSkip:
    """A matched profile that was not applied because it cannot be used (not a probability skip)."""

    profile: str
    reason: str
    message: str


@dataclass(slots=True)
class MutationResult:
    pod: Json
    """The mutated pod (a copy; the input is not changed)."""
    matched: list[str] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)
    skipped: list[ProfileSkip] = field(default_factory=list)
    resources_renamed: bool = False


def match_profiles(
    labels: Mapping[str, str], profiles: Iterable[ResolvedProfile], namespace_labels: Mapping[str, str] | None
) -> list[ResolvedProfile]:
    """The profiles that select a pod with ``labels`` in a namespace with ``namespace_labels``, by name.

    ``namespace_labels`` may be None when no profile has a namespace selector (it is not looked up
    then); a profile with one never matches a namespace whose labels are unknown.
    """
    matched = []
    for profile in profiles:
        if profile.namespace_selector is not None and (
            namespace_labels is None or not label_selector_matches(profile.namespace_selector, namespace_labels)
        ):
            continue
        if profile.selector is not None and not label_selector_matches(profile.selector, labels):
            continue
        matched.append(profile)
    return sorted(matched, key=lambda p: p.name)


def skipped_by_probability(percent: int, roll: Callable[[], int]) -> bool:
    """Koordinator's ``shouldSkipProfile``: ``roll()`` is ``rand.Intn(100)``, so 50 applies 51% of the time."""
    return percent == 0 or (percent != 100 and roll() > percent)


def mutate_pod(
    pod: Json,
    matched: Sequence[ResolvedProfile],
    *,
    priority_classes: Mapping[str, PriorityClassInfo],
    roll: Callable[[], int],
) -> MutationResult:
    """Apply ``matched`` (from :func:`match_profiles`) and the extended-resource-spec rule to ``pod``.

    Raises :class:`MutationError` when the pod itself cannot be handled (an unparsable quantity or
    extended-resource-spec annotation).
    """
    result = MutationResult(copy.deepcopy(pod), matched=[p.name for p in matched])
    skip_resources = False
    for profile in matched:
        skip_resources = skip_resources or profile.skip_update_resources
        if skipped_by_probability(profile.percent, roll):
            continue
        try:
            result.pod = _apply_profile(result.pod, profile, priority_classes)
        except _SkipProfileError as skip:
            result.skipped.append(ProfileSkip(profile.name, skip.reason, str(skip)))
            continue
        result.applied.append(profile.name)
    if matched and not skip_resources:
        result.resources_renamed = rename_resources(result.pod)
    update_extended_resource_spec(result.pod)
    mutate_device_resources(result.pod)
    return result


class _SkipProfileError(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _apply_profile(pod: Json, profile: ResolvedProfile, priority_classes: Mapping[str, PriorityClassInfo]) -> Json:
    spec = profile.spec
    priority_class: PriorityClassInfo | None = None
    if spec.priority_class_name:
        priority_class = priority_classes.get(spec.priority_class_name)
        if priority_class is None:
            raise _SkipProfileError("PriorityClassNotFound", f"PriorityClass {spec.priority_class_name!r} not found")
    out = copy.deepcopy(pod)
    meta = out.setdefault("metadata", {})
    pod_spec = out.setdefault("spec", {})
    if spec.labels:
        _map(meta, "labels").update(spec.labels)
    if spec.annotations:
        _map(meta, "annotations").update(spec.annotations)
    if spec.label_keys_mapping:
        labels = _map(meta, "labels")
        for old, new in sorted(spec.label_keys_mapping.items()):
            labels[new] = labels.get(old, "")
    if spec.annotation_keys_mapping:
        annotations = _map(meta, "annotations")
        for old, new in sorted(spec.annotation_keys_mapping.items()):
            annotations[new] = annotations.get(old, "")
    if spec.label_suffixes:
        labels = _map(meta, "labels")
        for key, suffix in sorted(spec.label_suffixes.items()):
            if key in labels:
                labels[key] = labels[key] + suffix
    if spec.scheduler_name:
        pod_spec["schedulerName"] = spec.scheduler_name
    if spec.qos_class:
        _map(meta, "labels")[LABEL_POD_QOS] = spec.qos_class
    if priority_class is not None:
        pod_spec["priorityClassName"] = priority_class.name
        pod_spec["priority"] = priority_class.value
        if priority_class.preemption_policy is None:
            pod_spec.pop("preemptionPolicy", None)
        else:
            pod_spec["preemptionPolicy"] = priority_class.preemption_policy
    if spec.koordinator_priority is not None:
        _map(meta, "labels")[LABEL_POD_PRIORITY] = str(spec.koordinator_priority)
    if spec.patch is not None:
        try:
            out = strategic_merge_pod(out, spec.patch)
        except PatchError as exc:
            raise _SkipProfileError("InvalidPatch", str(exc)) from None
        _check_pod(pod, out)
    return out


def _map(obj: Json, key: str) -> dict[str, str]:
    value = obj.get(key)
    if not isinstance(value, dict):
        value = {}
        obj[key] = value
    return value


def _check_pod(before: Json, after: Json) -> None:
    """A patch must leave a pod the API server accepts; checked with the project's pod parser."""
    try:
        parse_pod(before)
    except (ParseError, ValueError):
        return  # the parser does not know this pod's shape; nothing to compare against
    try:
        parse_pod(after)
    except (ParseError, ValueError) as exc:
        raise _SkipProfileError("InvalidPatch", f"the patched pod is invalid: {exc}") from None


# ----- resources -----


def _kube_qos(pod_spec: Json) -> str:
    def amounts(resources: Any, key: str) -> dict[str, int]:
        section = resources.get(key) if isinstance(resources, dict) else None
        if not isinstance(section, dict):
            return {}
        return {name: quantity_nanos(section[name]) for name in ("cpu", "memory") if name in section}

    rows = []
    for key in ("initContainers", "containers"):
        for container in pod_spec.get(key) or ():
            resources = container.get("resources") if isinstance(container, dict) else None
            rows.append((amounts(resources, "requests"), amounts(resources, "limits")))
    return kube_qos_class(rows).value


def pod_priority_class(pod: Json) -> PriorityClass:
    """Koordinator's ``GetPodPriorityClassWithDefault`` on raw pod JSON."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    kube_qos = status.get("qosClass") or _kube_qos(spec)
    priority = spec.get("priority")
    return priority_class_with_default(
        labels, priority if isinstance(priority, int) else None, qos_class_with_default(labels, kube_qos)
    )


def rename_resources(pod: Json) -> bool:
    """Rename cpu/memory to the batch or mid extended resources (step 3 of the module docstring).

    Returns whether anything changed. Raises :class:`MutationError` for an unparsable quantity.
    """
    try:
        priority_class = pod_priority_class(pod)
        if priority_class not in (PriorityClass.BATCH, PriorityClass.MID):
            return False
        spec = pod.get("spec") or {}
        changed = False
        for key in ("initContainers", "containers"):
            for container in spec.get(key) or ():
                resources = container.get("resources") if isinstance(container, dict) else None
                if not isinstance(resources, dict):
                    continue
                for section in ("requests", "limits"):
                    if isinstance(resources.get(section), dict):
                        changed = _rename(resources[section], priority_class) or changed
                changed = _request_from_limit(resources, priority_class) or changed
        if isinstance(spec.get("overhead"), dict):
            changed = _rename(spec["overhead"], priority_class) or changed
        return changed
    except QuantityError as exc:
        raise MutationError(f"pod resources: {exc}") from None


def _rename(resource_list: dict[str, Any], priority_class: PriorityClass) -> bool:
    changed = False
    for native in ("cpu", "memory"):
        if native not in resource_list:
            continue
        value = resource_list.pop(native)
        extended = resource_name_for(priority_class, native)
        if native == "cpu":
            value = format_decimal(milli_value(value) * NANOS_PER_UNIT)
        resource_list[extended] = value
        changed = True
    return changed


def _request_from_limit(resources: dict[str, Any], priority_class: PriorityClass) -> bool:
    limits = resources.get("limits")
    if not isinstance(limits, dict):
        return False
    changed = False
    for native in ("cpu", "memory"):
        extended = resource_name_for(priority_class, native)
        requests = resources.get("requests")
        if extended in limits and not (isinstance(requests, dict) and extended in requests):
            if not isinstance(requests, dict):
                requests = {}
                resources["requests"] = requests
            requests[extended] = limits[extended]
            changed = True
    return changed


# ----- extended-resource-spec annotation -----


def extended_resource_spec(pod: Json) -> Json:
    """``{"containers": {name: {"limits": {...}, "requests": {...}}}}`` from the containers' batch
    resources (canonical quantity strings); ``{}`` when no container has any."""
    containers: dict[str, Json] = {}
    for container in (pod.get("spec") or {}).get("containers") or ():
        resources = container.get("resources") if isinstance(container, dict) else None
        if not isinstance(resources, dict):
            continue
        entry: Json = {}
        for section in ("limits", "requests"):
            source = resources.get(section)
            if not isinstance(source, dict):
                continue
            picked = {name: canonical_quantity(source[name]) for name in _EXTENDED_SPEC_RESOURCES if name in source}
            if picked:
                entry[section] = picked
        if entry:
            containers[str(container.get("name", ""))] = entry
    return {"containers": dict(sorted(containers.items()))} if containers else {}


def _normalized(annotation: str) -> Json:
    spec = boundedjson.loads(annotation)
    if not isinstance(spec, dict):
        raise ValueError("not a JSON object")
    containers = spec.get("containers") or {}
    out: dict[str, Json] = {}
    for name, entry in containers.items():
        sections = {
            section: {k: canonical_quantity(v) for k, v in (entry.get(section) or {}).items()}
            for section in ("limits", "requests")
            if entry.get(section)
        }
        out[name] = sections
    return {"containers": dict(sorted(out.items()))} if out else {}


def update_extended_resource_spec(pod: Json) -> bool:
    """Write the annotation when it differs from the containers' batch resources; whether it did."""
    try:
        want = extended_resource_spec(pod)
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        current = annotations.get(ANNOTATION_EXTENDED_RESOURCE_SPEC)
        have = _normalized(current) if current is not None else {}
    except (QuantityError, ValueError, AttributeError, TypeError) as exc:
        raise MutationError(f"annotation {ANNOTATION_EXTENDED_RESOURCE_SPEC}: {exc}") from None
    if want == have:
        return False
    _map(pod.setdefault("metadata", {}), "annotations")[ANNOTATION_EXTENDED_RESOURCE_SPEC] = json.dumps(
        want, separators=(",", ":")
    )
    return True
