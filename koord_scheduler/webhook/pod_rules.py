"""The pod validating webhook's rules, as Koordinator's ``vpod.koordinator.sh`` applies them. Pure.

Models Koordinator v1.8 ``pkg/webhook/pod/validating`` (``verify_annotations.go``,
``cluster_colocation_profile.go``) and ``pkg/webhook/elasticquota/pod_check.go``, in the order Koordinator's
handler runs them (the first step that finds something answers, with every error of that step):

1. the reserve-pod annotation ``scheduling.koordinator.sh/reserve-pod`` is forbidden on pods;
2. ClusterColocationProfile rules: on UPDATE the ``koordinator.sh/qosClass`` label, the priority class and
   the ``koordinator.sh/priority`` label are immutable (the last one unless
   ``ColocationProfileSkipValidatingPriority``); a pod requesting ``kubernetes.io/batch-cpu`` or
   ``batch-memory`` must be ``qosClass=BE``; ``BE`` with no priority class or koord-prod, and ``LSR`` with no
   class, koord-mid, koord-batch or koord-free, are forbidden; ``LSR`` and ``LSE`` pods request a whole
   number of CPUs (not zero);
3. ElasticQuota: on UPDATE the ``quota.scheduling.koordinator.sh/preemptible`` label is immutable; the
   quota a pod belongs to may not be a parent quota (unless ``SupportParentQuotaSubmitPod``).

Messages are Koordinator's, byte for byte: ``field.ErrorList`` rendering (``<path>: Required value: ...``,
``<path>: Forbidden: ...``, ``<path>: Invalid value: "<value>": ...``, several joined as ``[a, b]``).
The QoS class is the label's value when it is one of LSE, LSR, LS, BE, SYSTEM (else none); the priority
class is the ``koordinator.sh/priority-class`` label when present, else the band of ``spec.priority``
(koord-prod 9000-9999, koord-mid 7000-7999, koord-batch 5000-5999, koord-free 3000-3999), else none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from apis.colocation import format_decimal
from apis.core.types import CPU, Pod
from apis.extension.constants import (
    LABEL_POD_PRIORITY,
    LABEL_POD_PRIORITY_CLASS,
    LABEL_POD_QOS,
    RESOURCE_BATCH_CPU,
    RESOURCE_BATCH_MEMORY,
)
from apis.extension.priority import PriorityClass, priority_class_by_value
from apis.extension.qos import QoSClass
from apis.scheduling.constants import ANNOTATION_RESERVE_POD
from apis.scheduling.elasticquota import DEFAULT_QUOTA, LABEL_PREEMPTIBLE, LABEL_QUOTA_NAME, QuotaRecord

Json = dict[str, Any]

_KNOWN_QOS = {q.value for q in QoSClass if q is not QoSClass.NONE}
_KNOWN_CLASSES = {p.value for p in PriorityClass if p is not PriorityClass.NONE}


# ----- Go's field.Error rendering -----


def go_quote(text: str) -> str:
    """Go's ``strconv.Quote``: double quotes, ``\\"`` and ``\\\\``, C escapes, ``\\xHH`` / ``\\uHHHH`` for the rest."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in _C_ESCAPES:
            out.append(_C_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif not ch.isprintable():
            out.append(f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_C_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def required(path: str, detail: str) -> str:
    return f"{path}: Required value: {detail}"


def forbidden(path: str, detail: str) -> str:
    return f"{path}: Forbidden: {detail}"


def invalid(path: str, value: str, detail: str) -> str:
    return f"{path}: Invalid value: {go_quote(value)}: {detail}"


def aggregate(errors: Sequence[str]) -> str:
    """``field.ErrorList.ToAggregate().Error()``: duplicates dropped; one error as is, several as ``[a, b]``."""
    unique = list(dict.fromkeys(errors))
    if len(unique) <= 1:
        return unique[0] if unique else ""
    return "[" + ", ".join(unique) + "]"


# ----- what the rules read of a pod -----


def labels_of(pod: Mapping[str, Any]) -> Mapping[str, str]:
    meta = pod.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def annotations_of(pod: Mapping[str, Any]) -> Mapping[str, str]:
    meta = pod.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return annotations if isinstance(annotations, Mapping) else {}


def qos_class(labels: Mapping[str, str]) -> str:
    """``GetPodQoSClassRaw``: the label's value when it is a known class, else ``""``."""
    value = labels.get(LABEL_POD_QOS, "")
    return value if value in _KNOWN_QOS else ""


def priority_class(labels: Mapping[str, str], priority: int | None) -> str:
    """``GetPodPriorityClassRaw``: the ``koordinator.sh/priority-class`` label when present (an unknown
    name is none), else the band of ``spec.priority``."""
    if LABEL_POD_PRIORITY_CLASS in labels:
        value = labels[LABEL_POD_PRIORITY_CLASS]
        return value if value in _KNOWN_CLASSES else ""
    return priority_class_by_value(priority).value


def spec_priority(pod: Mapping[str, Any]) -> int | None:
    spec = pod.get("spec")
    value = spec.get("priority") if isinstance(spec, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ----- 1. the reserve-pod annotation -----


def reserve_pod_annotation_errors(pod: Mapping[str, Any]) -> list[str]:
    """``forbidSpecialAnnotations``: only the scheduler's reserve pods may carry it."""
    if ANNOTATION_RESERVE_POD in annotations_of(pod):
        return [forbidden(f"annotations.{ANNOTATION_RESERVE_POD}", "cannot set in annotations")]
    return []


# ----- 2. the ClusterColocationProfile rules -----


def colocation_errors(
    new: Mapping[str, Any],
    parsed: Pod,
    old: Mapping[str, Any] | None = None,
    *,
    skip_validating_priority: bool = False,
) -> list[str]:
    """Every error of Koordinator's ``clusterColocationProfileValidatingPod``; ``old`` is the stored pod
    on UPDATE (None on CREATE); ``parsed`` is ``new`` parsed (its requests are ``PodRequests``)."""
    errors: list[str] = []
    new_labels = labels_of(new)
    new_qos = qos_class(new_labels)
    new_class = priority_class(new_labels, spec_priority(new))
    if old is not None:
        old_labels = labels_of(old)
        if qos_class(old_labels) != new_qos:
            errors.append(invalid(f"labels.{LABEL_POD_QOS}", new_qos, "field is immutable"))
        if priority_class(old_labels, spec_priority(old)) != new_class:
            errors.append(invalid("spec.priority", new_class, "field is immutable"))
        if not skip_validating_priority:
            new_priority = new_labels.get(LABEL_POD_PRIORITY, "")
            if old_labels.get(LABEL_POD_PRIORITY, "") != new_priority:
                errors.append(invalid(f"labels.{LABEL_POD_PRIORITY}", new_priority, "field is immutable"))
    requests = parsed.requests
    if (requests.get(RESOURCE_BATCH_CPU, 0) or requests.get(RESOURCE_BATCH_MEMORY, 0)) and new_qos != QoSClass.BE:
        errors.append(
            required(f"labels.{LABEL_POD_QOS}", "must specify koordinator QoS BE with koordinator colocation resources")
        )
    for qos, classes in _FORBIDDEN_COMBINATIONS:
        if new_qos == qos and new_class in classes:
            errors.append(
                forbidden("Pod", f"{LABEL_POD_QOS}={qos} and priorityClass={new_class} cannot be used in combination")
            )
    if new_qos in (QoSClass.LSR, QoSClass.LSE):
        cpu_milli = requests.get(CPU, 0)
        path = "pod.spec.containers[*].resources.requests"
        if cpu_milli == 0:
            errors.append(required(path, "LSR Pod must declare the requested CPUs"))
        elif cpu_milli % 1000:
            errors.append(
                invalid(path, format_decimal(cpu_milli * 1_000_000), "the requested CPUs of LSR Pod must be integer")
            )
    return errors


_FORBIDDEN_COMBINATIONS: tuple[tuple[str, frozenset[str]], ...] = (
    (QoSClass.BE.value, frozenset({PriorityClass.NONE.value, PriorityClass.PROD.value})),
    (
        QoSClass.LSR.value,
        frozenset(
            {PriorityClass.NONE.value, PriorityClass.MID.value, PriorityClass.BATCH.value, PriorityClass.FREE.value}
        ),
    ),
)


# ----- 3. the ElasticQuota pod checks -----


def quota_name_of_pod(
    labels: Mapping[str, str],
    namespace: str,
    quotas: Mapping[str, QuotaRecord],
    *,
    disable_default_quota: bool = False,
) -> str:
    """Koordinator's ``GetQuotaName`` then ``getQuotaNameFromPodNoLock``: the pod's quota label; else (not
    with ``DisableDefaultQuota``) the quota named like the namespace in that namespace, else the first quota
    (by name) whose ``namespaces`` annotation lists it, else the default quota. A name that is not a known
    quota is the default quota."""
    name = labels.get(LABEL_QUOTA_NAME, "")
    if not name and not disable_default_quota:
        same = quotas.get(namespace)
        if same is not None and same.meta.namespace == namespace:
            name = same.name
        else:
            listing = sorted(r.name for r in quotas.values() if namespace in r.namespaces)
            name = listing[0] if listing else DEFAULT_QUOTA
    return name if name in quotas else DEFAULT_QUOTA


def quota_pod_error(
    new: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    *,
    namespace: str,
    quotas: Mapping[str, QuotaRecord],
    parent_submit: bool = False,
    disable_default_quota: bool = False,
) -> str:
    """Koordinator's ``ValidateAddPod`` (CREATE) / ``ValidateUpdatePod`` (UPDATE, ``old`` given): ``""`` or
    the error."""
    labels = labels_of(new)
    if old is not None and labels_of(old).get(LABEL_PREEMPTIBLE) != labels.get(LABEL_PREEMPTIBLE):
        return "Preemptible label is forbidden modify now."
    if parent_submit:
        return ""
    name = quota_name_of_pod(labels, namespace, quotas, disable_default_quota=disable_default_quota)
    if name in ("", DEFAULT_QUOTA):
        return ""
    if quotas[name].is_parent:
        meta = new.get("metadata")
        pod_name = meta.get("name", "") if isinstance(meta, Mapping) else ""
        return f"pod can not be linked to a parentQuotaGroup,quota:{name}, pod:{pod_name}"
    return ""
