"""The koordlet's peak predictor (Koordinator ``pkg/koordlet/prediction``).

- :mod:`.histogram`: decaying histograms with exponential buckets and their checkpoints;
- :mod:`.server`: one model per pod, per priority class and for the system part, trained every minute,
  expired after 30 min without samples, checkpointed to disk so a restart keeps the history;
- :mod:`.predictor`: ``prodReclaimableMetric`` and the node peak from those models (pure);
- :mod:`.report`: the wiring to the metric cache and the NodeMetric reporter.
"""

from koordlet.prediction.predictor import Amounts, PredictedProd, predict_prod
from koordlet.prediction.report import ProdPeakReport, UsageTraining
from koordlet.prediction.server import PeakPredictServer, Prediction, PredictionConfig

__all__ = [
    "Amounts",
    "PeakPredictServer",
    "PredictedProd",
    "Prediction",
    "PredictionConfig",
    "ProdPeakReport",
    "UsageTraining",
    "predict_prod",
]
