"""Koordinator priority classes (``apis/extension/priority.go``): ranges of ``spec.priority``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from apis.extension.constants import (
    LABEL_POD_PRIORITY_CLASS,
    RESOURCE_BATCH_CPU,
    RESOURCE_BATCH_MEMORY,
    RESOURCE_MID_CPU,
    RESOURCE_MID_MEMORY,
)
from apis.extension.qos import QoSClass


class PriorityClass(StrEnum):
    PROD = "koord-prod"
    MID = "koord-mid"
    BATCH = "koord-batch"
    FREE = "koord-free"
    NONE = ""


@dataclass(frozen=True, slots=True)
class PriorityRange:
    """Inclusive range of ``spec.priority`` values and the default value for pods of the class."""

    priority_class: PriorityClass
    min_value: int
    max_value: int
    default_value: int


PRIORITY_RANGES: tuple[PriorityRange, ...] = (
    PriorityRange(PriorityClass.PROD, 9000, 9999, 9500),
    PriorityRange(PriorityClass.MID, 7000, 7999, 7500),
    PriorityRange(PriorityClass.BATCH, 5000, 5999, 5500),
    PriorityRange(PriorityClass.FREE, 3000, 3999, 3500),
)

_BY_NAME = {r.priority_class.value: r.priority_class for r in PRIORITY_RANGES}


def priority_class_by_value(priority: int | None) -> PriorityClass:
    """The class whose range holds ``priority``; ``NONE`` for ``None`` or a value outside every range."""
    if priority is None:
        return PriorityClass.NONE
    for r in PRIORITY_RANGES:
        if r.min_value <= priority <= r.max_value:
            return r.priority_class
    return PriorityClass.NONE


def default_priority_class_for_qos(qos: QoSClass) -> PriorityClass:
    """SYSTEM/LSE/LSR/LS → koord-prod, BE → koord-batch, NONE → NONE."""
    if qos is QoSClass.BE:
        return PriorityClass.BATCH
    if qos is QoSClass.NONE:
        return PriorityClass.NONE
    return PriorityClass.PROD


def priority_class_with_default(
    labels: Mapping[str, str], priority: int | None, qos: QoSClass = QoSClass.NONE
) -> PriorityClass:
    """``GetPodPriorityClassWithDefault``: explicit label, then the range of ``priority``, then from QoS."""
    explicit = _BY_NAME.get(labels.get(LABEL_POD_PRIORITY_CLASS, ""))
    if explicit is not None:
        return explicit
    by_value = priority_class_by_value(priority)
    if by_value is not PriorityClass.NONE:
        return by_value
    return default_priority_class_for_qos(qos)


_RESOURCE_NAMES = {
    (PriorityClass.BATCH, "cpu"): RESOURCE_BATCH_CPU,
    (PriorityClass.BATCH, "memory"): RESOURCE_BATCH_MEMORY,
    (PriorityClass.MID, "cpu"): RESOURCE_MID_CPU,
    (PriorityClass.MID, "memory"): RESOURCE_MID_MEMORY,
}


def resource_name_for(priority_class: PriorityClass, resource: str) -> str:
    """The extended resource a pod of ``priority_class`` requests for ``resource`` (prod/none: native)."""
    return _RESOURCE_NAMES.get((priority_class, resource), resource)
