"""Koordinator QoS classes (``apis/extension/qos.go``) and the Kubernetes QoS class they default from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum

from apis.extension.constants import LABEL_POD_QOS


class QoSClass(StrEnum):
    """Koordinator QoS class, as written in the ``koordinator.sh/qosClass`` label. ``NONE`` means unset."""

    LSE = "LSE"
    LSR = "LSR"
    LS = "LS"
    BE = "BE"
    SYSTEM = "SYSTEM"
    NONE = ""


class KubeQOSClass(StrEnum):
    """``pod.status.qosClass`` in Kubernetes."""

    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BEST_EFFORT = "BestEffort"


_BY_NAME = {q.value: q for q in QoSClass if q is not QoSClass.NONE}

_FOR_KUBE = {
    KubeQOSClass.GUARANTEED: QoSClass.LSR,  # QoSClassForGuaranteed
    KubeQOSClass.BURSTABLE: QoSClass.LS,
    KubeQOSClass.BEST_EFFORT: QoSClass.BE,
}


def qos_class_by_name(name: str) -> QoSClass:
    """The class named exactly ``name``; anything unknown is ``QoSClass.NONE`` (as Koordinator does)."""
    return _BY_NAME.get(name, QoSClass.NONE)


def qos_class_for_kube_qos(kube_qos: str) -> QoSClass:
    """Guaranteed → LSR, Burstable → LS, BestEffort → BE; an unknown string → NONE."""
    try:
        return _FOR_KUBE[KubeQOSClass(kube_qos)]
    except ValueError:
        return QoSClass.NONE


def qos_class_with_default(labels: Mapping[str, str], kube_qos: str) -> QoSClass:
    """The ``koordinator.sh/qosClass`` label if it names a class, else the default from the k8s QoS class."""
    explicit = qos_class_by_name(labels.get(LABEL_POD_QOS, ""))
    if explicit is not QoSClass.NONE:
        return explicit
    return qos_class_for_kube_qos(kube_qos)


def kube_qos_class(containers: Iterable[tuple[Mapping[str, int], Mapping[str, int]]]) -> KubeQOSClass:
    """Kubernetes QoS from ``(requests, limits)`` per container (cpu and memory only, as the kubelet does).

    Used when ``status.qosClass`` is not yet set. Amounts are plain ints (any unit, zero means unset).
    Guaranteed: every container has cpu and memory limits, and requests equal limits where given.
    BestEffort: no container has any cpu/memory request or limit.
    """
    any_set = False
    guaranteed = True
    for requests, limits in containers:
        for res in ("cpu", "memory"):
            req, lim = requests.get(res, 0), limits.get(res, 0)
            if req or lim:
                any_set = True
            if not lim or (req and req != lim):
                guaranteed = False
    if not any_set:
        return KubeQOSClass.BEST_EFFORT
    return KubeQOSClass.GUARANTEED if guaranteed else KubeQOSClass.BURSTABLE
