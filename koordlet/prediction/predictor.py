"""``prodReclaimableMetric`` and the node peak from the predict server's models: pure functions.

Koordinator ``pkg/koordlet/prediction/peak_predictor.go`` (the ``ProdReclaimablePredictor``: the minimum of
two predictors; the peak is HEAD's ``GetPeak``, the maximum of theirs). Prod pods are those of class
koord-prod or none (``GetPodPriorityClassWithDefault``). CPU in millicores, memory in bytes; the safety
margin ``m`` multiplies a peak by ``(100 + m) / 100`` and truncates.

**Per pod**: for each Running prod pod not being deleted, ``peak = p95 CPU * margin`` and ``p98 memory *
margin`` of its own model; ``reclaimable += max(request - peak, 0)``. A pod younger than the cold-start
duration, or without a model yet, reclaims nothing and counts its request as peak. The result is
``min(max(allocatable - Σ peak, 0), Σ reclaimable)``.

**Per priority**: ``peak = (p95/p98 of the sys model + of the koord-prod and none class models) *
margin``; the result is ``min(max(allocatable - peak, 0), max(Σ prod requests - peak, 0))``; it needs
the sys and class models (none yet: no result).

``allocatable`` is the node annotation ``node.koordinator.sh/raw-allocatable`` when it is set (the
allocatable before resource amplification), else ``status.allocatable``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from apis.core.quantity import milli_value, value
from apis.extension import PriorityClass
from koordlet.prediction.server import SYSTEM_ITEM, Prediction, node_item_uid
from koordlet.statesinformer.pods import PodMeta

ANNOTATION_RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"
_PROD_CLASSES = (PriorityClass.PROD, PriorityClass.NONE)
_TERMINATED = ("Succeeded", "Failed")

Predictions = Callable[[str], Prediction | None]


@dataclass(frozen=True, slots=True)
class Amounts:
    """CPU millicores and memory bytes."""

    cpu: int = 0
    memory: int = 0

    def __add__(self, other: Amounts) -> Amounts:
        return Amounts(self.cpu + other.cpu, self.memory + other.memory)

    def min(self, other: Amounts) -> Amounts:
        return Amounts(min(self.cpu, other.cpu), min(self.memory, other.memory))

    def max(self, other: Amounts) -> Amounts:
        return Amounts(max(self.cpu, other.cpu), max(self.memory, other.memory))

    def minus_floor0(self, other: Amounts) -> Amounts:
        return Amounts(max(self.cpu - other.cpu, 0), max(self.memory - other.memory, 0))


@dataclass(frozen=True, slots=True)
class PredictedProd:
    """What the koordlet reports: ``reclaimable`` and the node ``peak``."""

    reclaimable: Amounts
    peak: Amounts


def margin_scaled(amount: Amounts, margin_percent: int) -> Amounts:
    ratio = (100 + margin_percent) / 100
    return Amounts(int(amount.cpu * ratio), int(amount.memory * ratio))


def is_prod(pod: PodMeta) -> bool:
    return pod.priority_class in _PROD_CLASSES


def _requests(pod: PodMeta) -> Amounts:
    return Amounts(pod.total_request("cpu"), pod.total_request("memory"))


def _inactive(pod: PodMeta) -> bool:
    return pod.deleting or pod.phase in _TERMINATED


def pod_predictor(
    pods: Iterable[PodMeta],
    predictions: Predictions,
    allocatable: Amounts,
    *,
    margin_percent: int,
    cold_start: float,
    now: float,
) -> PredictedProd:
    """The per-pod predictor (module docstring)."""
    reclaimable = peak = unpredicted = Amounts()
    for pod in pods:
        if not is_prod(pod):
            continue
        if pod.created is not None and now - pod.created <= cold_start:
            unpredicted += _requests(pod)
            continue
        if _inactive(pod):
            continue
        prediction = predictions(pod.uid)
        if prediction is None:
            unpredicted += _requests(pod)
            continue
        pod_peak = margin_scaled(Amounts(prediction.cpu("p95"), prediction.memory("p98")), margin_percent)
        peak += pod_peak
        reclaimable += _requests(pod).minus_floor0(pod_peak)
    return PredictedProd(allocatable.minus_floor0(peak).min(reclaimable), peak + unpredicted)


def priority_predictor(
    pods: Iterable[PodMeta], predictions: Predictions, allocatable: Amounts, *, margin_percent: int
) -> PredictedProd | None:
    """The per-priority predictor (module docstring); None before the node-level models exist."""
    request = Amounts()
    for pod in pods:
        if is_prod(pod) and not _inactive(pod):
            request += _requests(pod)
    total = Amounts()
    for item in (SYSTEM_ITEM, *(pc.value for pc in _PROD_CLASSES)):
        prediction = predictions(node_item_uid(item))
        if prediction is None:
            return None
        total += Amounts(prediction.cpu("p95"), prediction.memory("p98"))
    peak = margin_scaled(total, margin_percent)
    return PredictedProd(allocatable.minus_floor0(peak).min(request.minus_floor0(peak)), peak)


def predict_prod(
    pods: Iterable[PodMeta],
    predictions: Predictions,
    allocatable: Amounts,
    *,
    margin_percent: int,
    cold_start: float,
    now: float,
) -> PredictedProd | None:
    """The minimum of both predictors' reclaimable and the maximum of their peaks; None when the
    priority predictor has no models yet."""
    pods = list(pods)
    by_pod = pod_predictor(
        pods, predictions, allocatable, margin_percent=margin_percent, cold_start=cold_start, now=now
    )
    by_priority = priority_predictor(pods, predictions, allocatable, margin_percent=margin_percent)
    if by_priority is None:
        return None
    return PredictedProd(by_pod.reclaimable.min(by_priority.reclaimable), by_pod.peak.max(by_priority.peak))


def node_allocatable(allocatable: Mapping[str, int], annotations: Mapping[str, str]) -> Amounts:
    """The raw-allocatable annotation's cpu/memory when it parses, else ``allocatable`` (cpu in milli)."""
    text = annotations.get(ANNOTATION_RAW_ALLOCATABLE)
    if text:
        try:
            raw = json.loads(text)
            if isinstance(raw, dict) and raw:
                return Amounts(milli_value(str(raw.get("cpu", 0))), value(str(raw.get("memory", 0))))
        except (ValueError, TypeError, RecursionError):
            pass
    return Amounts(allocatable.get("cpu", 0), allocatable.get("memory", 0))
