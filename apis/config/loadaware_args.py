"""``LoadAwareSchedulingArgs``: Koordinator's fields and defaults, plus pykoord's ``scoringStrategy``.

Defaults are Koordinator's code defaults (``config/v1/defaults.go``), not the Helm chart's values
(the chart sets ``filterExpiredNodeMetrics: false`` and ``nodeMetricExpirationSeconds: 300``).
Percentages are integers 0..100 keyed by resource name; 0 in a threshold map disables that resource.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field, ValidationInfo, field_validator

from apis.config.args_base import ArgsModel
from apis.config.duration import GoDuration
from apis.config.errors import FieldError, forbidden, invalid, join_path, not_found, not_supported, required
from apis.config.types import ConfigModel

DEFAULT_NODE_METRIC_EXPIRATION_SECONDS = 180
DEFAULT_ESTIMATOR = "defaultEstimator"
DEFAULT_RESOURCE_WEIGHTS: Mapping[str, int] = {"cpu": 1, "memory": 1}
DEFAULT_USAGE_THRESHOLDS: Mapping[str, int] = {"cpu": 65, "memory": 95}
DEFAULT_ESTIMATED_SCALING_FACTORS: Mapping[str, int] = {"cpu": 85, "memory": 70}
AGGREGATION_TYPES = ("avg", "p50", "p90", "p95", "p99")

LEAST_USED = "LeastUsed"
TARGET_UTILIZATION = "TargetUtilization"
LOAD_AWARE_SCORING_TYPES = (LEAST_USED, TARGET_UTILIZATION)


class LoadAwareSchedulingAggregatedArgs(ConfigModel):
    """Filter/score on percentile usage (``NodeMetric.status.nodeMetric.aggregatedNodeUsages``)."""

    usage_thresholds: dict[str, int] = {}
    usage_aggregation_type: str = ""
    """One of avg, p50, p90, p95, p99; empty = aggregated filtering off."""
    usage_aggregated_duration: GoDuration = 0.0
    """Seconds; 0 = the longest window the koordlet reports."""
    score_aggregation_type: str = ""
    score_aggregated_duration: GoDuration = 0.0


class LoadAwareScoringStrategy(ConfigModel):
    """pykoord extension. ``LeastUsed`` is Koordinator's scorer (score = weighted free percentage).
    ``TargetUtilization`` peaks at ``targetUtilization[resource]`` percent of estimated usage and falls
    off linearly on both sides, packing nodes up to the target instead of spreading."""

    type: str = LEAST_USED
    target_utilization: dict[str, int] = {}


class LoadAwareSchedulingArgs(ArgsModel):
    filter_expired_node_metrics: bool = True
    """Reject nodes whose NodeMetric is older than ``nodeMetricExpirationSeconds``."""
    node_metric_expiration_seconds: int = DEFAULT_NODE_METRIC_EXPIRATION_SECONDS
    enable_schedule_when_node_metrics_expired: bool = False
    """With ``filterExpiredNodeMetrics``, still admit such nodes (and skip usage checks on them)."""
    dominant_resource_weight: int = 0
    """0..100; weight of the most-used resource's score added on top of ``resourceWeights``."""
    resource_weights: dict[str, int] = Field(default_factory=dict, validate_default=True)
    """Score weights (1..100). Empty → cpu:1, memory:1 unless ``dominantResourceWeight`` is set."""
    usage_thresholds: dict[str, int] = Field(default_factory=dict, validate_default=True)
    """Percent of allocatable (0..100, 0 = off). Empty → cpu:65, memory:95."""
    prod_usage_thresholds: dict[str, int] = {}
    """Prod pods' usage threshold in percent; empty = off."""
    prod_usage_include_sys: bool = False
    score_according_prod_usage: bool = False
    estimator: str = ""
    """Estimator name; empty or ``defaultEstimator`` (the only one) = the default estimator."""
    estimated_scaling_factors: dict[str, int] = Field(default_factory=dict, validate_default=True)
    """Percent of a request assumed used before metrics show it (1..100); merged over cpu:85, memory:70."""
    estimated_seconds_after_pod_scheduled: int | None = None
    estimated_seconds_after_initialized: int | None = None
    allow_customize_estimation: bool = False
    aggregated: LoadAwareSchedulingAggregatedArgs | None = None
    supported_resources: tuple[str, ...] = ()
    scoring_strategy: LoadAwareScoringStrategy = LoadAwareScoringStrategy()

    @field_validator("resource_weights")
    @classmethod
    def _default_weights(cls, weights: dict[str, int], info: ValidationInfo) -> dict[str, int]:
        if not weights and not info.data.get("dominant_resource_weight"):
            return dict(DEFAULT_RESOURCE_WEIGHTS)
        return weights

    @field_validator("usage_thresholds")
    @classmethod
    def _default_thresholds(cls, thresholds: dict[str, int]) -> dict[str, int]:
        return thresholds or dict(DEFAULT_USAGE_THRESHOLDS)

    @field_validator("estimated_scaling_factors")
    @classmethod
    def _merge_scaling_factors(cls, factors: dict[str, int]) -> dict[str, int]:
        return {**DEFAULT_ESTIMATED_SCALING_FACTORS, **factors}

    def field_errors(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        if self.estimator not in ("", DEFAULT_ESTIMATOR):
            # Koordinator registers only its default estimator; pykoord's is the same one.
            errors.append(not_supported(join_path(path, "estimator"), self.estimator, [DEFAULT_ESTIMATOR]))
        if self.node_metric_expiration_seconds <= 0:
            errors.append(
                invalid(
                    join_path(path, "nodeMetricExpirationSeconds"),
                    self.node_metric_expiration_seconds,
                    "nodeMetricExpirationSeconds should be a positive value",
                )
            )
        errors += _percentages(self.resource_weights, join_path(path, "resourceWeights"), low=1)
        if not 0 <= self.dominant_resource_weight <= 100:
            errors.append(
                invalid(
                    join_path(path, "dominantResourceWeight"),
                    self.dominant_resource_weight,
                    "not in valid range [0, 100]",
                )
            )
        errors += _percentages(self.usage_thresholds, join_path(path, "usageThresholds"), low=0)
        errors += _percentages(self.prod_usage_thresholds, join_path(path, "prodUsageThresholds"), low=0)
        factors_path = join_path(path, "estimatedScalingFactors")
        errors += _percentages(self.estimated_scaling_factors, factors_path, low=1)
        errors += [
            not_found(factors_path, name)
            for name in sorted(self.resource_weights)
            if name not in self.estimated_scaling_factors
        ]
        for name in ("estimatedSecondsAfterPodScheduled", "estimatedSecondsAfterInitialized"):
            value = getattr(self, _snake(name))
            if value is not None and value < 0:
                errors.append(invalid(join_path(path, name), value, "must not be negative"))
        if self.aggregated is not None:
            errors += _aggregated_errors(self.aggregated, join_path(path, "aggregated"))
        errors += self._scoring_errors(join_path(path, "scoringStrategy"))
        return errors

    def _scoring_errors(self, path: str) -> list[FieldError]:
        strategy = self.scoring_strategy
        targets_path = join_path(path, "targetUtilization")
        if strategy.type not in LOAD_AWARE_SCORING_TYPES:
            return [not_supported(join_path(path, "type"), strategy.type, LOAD_AWARE_SCORING_TYPES)]
        if strategy.type == LEAST_USED:
            if strategy.target_utilization:
                return [forbidden(targets_path, "must be empty when type is not TargetUtilization")]
            return []
        if not strategy.target_utilization:
            return [required(targets_path, "must be specified when type is TargetUtilization")]
        errors = _percentages(strategy.target_utilization, targets_path, low=1)
        errors += [
            not_found(targets_path, name)
            for name in sorted(self.resource_weights)
            if name not in strategy.target_utilization
        ]
        return errors


def _snake(camel: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)


def _percentages(values: Mapping[str, int], path: str, *, low: int) -> list[FieldError]:
    return [
        invalid(f"{path}[{name}]", value, f"not in valid range [{low}, 100]")
        for name, value in sorted(values.items())
        if not low <= value <= 100
    ]


def _aggregated_errors(aggregated: LoadAwareSchedulingAggregatedArgs, path: str) -> list[FieldError]:
    errors = _percentages(aggregated.usage_thresholds, join_path(path, "usageThresholds"), low=0)
    for type_field, duration_field in (
        ("usageAggregationType", "usageAggregatedDuration"),
        ("scoreAggregationType", "scoreAggregatedDuration"),
    ):
        agg_type = getattr(aggregated, _snake(type_field))
        if agg_type and agg_type not in AGGREGATION_TYPES:
            errors.append(not_supported(join_path(path, type_field), agg_type, AGGREGATION_TYPES))
        duration = getattr(aggregated, _snake(duration_field))
        if duration < 0:
            errors.append(invalid(join_path(path, duration_field), duration, "duration must be >= 0"))
    return errors
