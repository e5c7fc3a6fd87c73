"""The peak predictor wired to the koordlet: training over the usage windows the reporter reads, and the
prediction the NodeMetric reporter writes (``prodReclaimableMetric``, ``prodPeakMetric``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from koordlet.prediction.predictor import node_allocatable, predict_prod
from koordlet.prediction.server import PeakPredictServer
from koordlet.statesinformer.informer import StatesInformer
from koordlet.statesinformer.pods import PodMeta
from koordlet.statesinformer.reporter import UsageSource

USED_PERCENTILES = ("p95", "p98")
"""The predictors read p95 (CPU) and p98 (memory); the others are not computed for a report."""


class UsageTraining:
    """The predict server's training source over the reporter's :class:`UsageSource` (p90 per window)."""

    def __init__(self, usage: UsageSource) -> None:
        self.usage = usage

    def pod_p90(self, pod_uid: str, resource: str, start: float, end: float) -> float | None:
        window = self.usage.pod_usage(pod_uid, resource, start, end)
        return None if window is None or window.count == 0 else window.get("p90")

    def node_p90(self, resource: str, start: float, end: float) -> float | None:
        window = self.usage.node_usage(resource, start, end)
        return None if window is None or window.count == 0 else window.get("p90")


class ProdPeakReport:
    """The reporter's ``ProdPrediction``: the prod reclaimable and the node peak for the pods that have
    metrics, against this node's allocatable; None until the predictor has its node-level models (trained
    or restored from checkpoints) or while the node is unknown."""

    def __init__(self, server: PeakPredictServer, informer: StatesInformer) -> None:
        self.server = server
        self.informer = informer

    def __call__(self, pods: Sequence[PodMeta], now: float) -> tuple[Mapping[str, int], Mapping[str, int]] | None:
        node = self.informer.node
        if node is None:
            return None
        config = self.server.config
        result = predict_prod(
            pods,
            lambda uid: self.server.prediction(uid, USED_PERCENTILES),
            node_allocatable(node.allocatable, node.annotations),
            margin_percent=config.safety_margin_percent,
            cold_start=config.cold_start_duration,
            now=now,
        )
        if result is None:
            return None
        return (
            {"cpu": result.reclaimable.cpu, "memory": result.reclaimable.memory},
            {"cpu": result.peak.cpu, "memory": result.peak.memory},
        )
