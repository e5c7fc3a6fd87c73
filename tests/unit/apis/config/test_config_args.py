"""Plugin args: defaults (kube-scheduler pkg/scheduler/apis/config/v1/defaults.go), kind checks and validation
messages (pkg/scheduler/apis/config/validation/validation_pluginargs.go, and Koordinator's)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from apis.config import (
    IN_TREE_ARGS,
    ConfigError,
    LoadAwareSchedulingArgs,
    NodeResourcesFitArgs,
    ReservationArgs,
    decode_args,
)

P = "profiles[0].pluginConfig[0].args"


def decode(plugin: str, raw: dict[str, Any] | None) -> BaseModel:
    return decode_args(plugin, raw, IN_TREE_ARGS, path=P)


@pytest.mark.parametrize(
    ("plugin", "raw", "want"),
    [
        pytest.param(
            "NodeResourcesFit",
            {
                "scoringStrategy": {
                    "type": "MostAllocated",
                    "resources": [{"name": "cpu"}, {"name": "x/y", "weight": 3}],
                }
            },
            {
                "ignoredResources": [],
                "ignoredResourceGroups": [],
                "scoringStrategy": {
                    "type": "MostAllocated",
                    "resources": [{"name": "cpu", "weight": 1}, {"name": "x/y", "weight": 3}],
                },
            },
            id="fit-weight-zero-becomes-one",
        ),
        pytest.param(
            "NodeResourcesBalancedAllocation",
            {"resources": []},
            {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]},
            id="balanced-empty-resources-default",
        ),
        pytest.param(
            "LoadAwareScheduling",
            {"estimatedScalingFactors": {"nvidia.com/gpu": 50}, "dominantResourceWeight": 2},
            {
                "resourceWeights": {},
                "estimatedScalingFactors": {"cpu": 85, "memory": 70, "nvidia.com/gpu": 50},
            },
            id="loadaware-factors-merged-weights-not-defaulted-with-dominant",
        ),
        pytest.param(
            "Reservation",
            {"gcDurationSeconds": 0},
            {"gcDurationSeconds": 86400},
            id="reservation-zero-gc-duration-defaulted",
        ),
        pytest.param(
            "PodTopologySpread",
            None,
            {"defaultConstraints": [], "defaultingType": "System"},
            id="topology-spread-defaults",
        ),
    ],
)
def test_defaults(plugin: str, raw: dict[str, Any] | None, want: dict[str, Any]) -> None:
    got = decode(plugin, raw).model_dump(mode="json", by_alias=True, exclude_none=True)
    assert {k: got[k] for k in want} == want


def test_loadaware_code_defaults() -> None:
    got = LoadAwareSchedulingArgs()
    assert (
        got.filter_expired_node_metrics,
        got.node_metric_expiration_seconds,
        got.enable_schedule_when_node_metrics_expired,
        got.resource_weights,
        got.usage_thresholds,
        got.estimated_scaling_factors,
        got.prod_usage_thresholds,
        got.scoring_strategy.type,
    ) == (
        True,
        180,
        False,
        {"cpu": 1, "memory": 1},
        {"cpu": 65, "memory": 95},
        {"cpu": 85, "memory": 70},
        {},
        "LeastUsed",
    )


def test_reservation_defaults() -> None:
    got = ReservationArgs()
    assert (
        got.enable_preemption,
        got.min_candidate_nodes_percentage,
        got.min_candidate_nodes_absolute,
        got.controller_workers,
        got.gc_duration_seconds,
        got.gc_interval_seconds,
        got.resync_interval_seconds,
        got.pre_allocation_config.cluster_label_key,
    ) == (False, 10, 100, 1, 86400, 60, 60, "pod.koordinator.sh/is-pre-allocatable")


def test_fit_default_strategy_is_least_allocated() -> None:
    assert decode("NodeResourcesFit", {"apiVersion": "kubescheduler.config.k8s.io/v1"}) == NodeResourcesFitArgs()


@pytest.mark.parametrize(
    ("plugin", "raw", "want_errors"),
    [
        pytest.param(
            "InterPodAffinity",
            {"kind": "NodeAffinityArgs"},
            [
                f'{P}.kind: Invalid value: "NodeAffinityArgs": args for plugin InterPodAffinity were not '
                "of type InterPodAffinityArgs, got NodeAffinityArgs"
            ],
            id="wrong-kind",
        ),
        pytest.param(
            "InterPodAffinity",
            {"apiVersion": "kubescheduler.config.k8s.io/v1beta2"},
            [
                f'{P}.apiVersion: Unsupported value: "kubescheduler.config.k8s.io/v1beta2": '
                'supported values: "kubescheduler.config.k8s.io/v1"'
            ],
            id="wrong-api-version",
        ),
        pytest.param(
            "InterPodAffinity",
            {"hardPodAffinityWeight": 101},
            [f"{P}.hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"],
            id="hard-pod-affinity-weight",
        ),
        pytest.param(
            "InterPodAffinity",
            {"hardPodAfinityWeight": 1},
            [f'{P}.hardPodAfinityWeight: Unknown field: did you mean "hardPodAffinityWeight"?'],
            id="unknown-args-field",
        ),
        pytest.param(
            "DefaultPreemption",
            {"minCandidateNodesPercentage": 101, "minCandidateNodesAbsolute": -1},
            [
                f"{P}.minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100]",
                f"{P}.minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)",
            ],
            id="preemption-ranges",
        ),
        pytest.param(
            "DefaultPreemption",
            {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
            [
                f"{P}.minCandidateNodesPercentage: Invalid value: 0: "
                "cannot be zero at the same time as minCandidateNodesAbsolute",
                f"{P}.minCandidateNodesAbsolute: Invalid value: 0: "
                "cannot be zero at the same time as minCandidateNodesPercentage",
            ],
            id="preemption-both-zero",
        ),
        pytest.param(
            "VolumeBinding",
            {"bindTimeoutSeconds": -1},
            [f"{P}.bindTimeoutSeconds: Invalid value: -1: invalid BindTimeoutSeconds, should not be a negative value"],
            id="volume-binding-timeout",
        ),
        pytest.param(
            "NodeResourcesBalancedAllocation",
            {"resources": [{"name": "cpu", "weight": 2}, {"name": "cpu"}]},
            [
                f"{P}.resources[0].weight: Invalid value: 2: must be 1",
                f'{P}.resources[1].name: Duplicate value: "cpu"',
            ],
            id="balanced-weight-and-duplicate",
        ),
        pytest.param(
            "NodeResourcesFit",
            {"scoringStrategy": {"type": "Bogus", "resources": [{"name": "cpu", "weight": 101}]}},
            [
                f'{P}.scoringStrategy.type: Unsupported value: "Bogus": supported values: '
                '"LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"',
                f"{P}.scoringStrategy.resources[0].weight: Invalid value: 101: "
                "resource weight of cpu not in valid range (0, 100]",
            ],
            id="fit-type-and-weight",
        ),
        pytest.param(
            "NodeResourcesFit",
            {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
            [
                f"{P}.scoringStrategy.requestedToCapacityRatio: Required value: "
                "must be specified when type is RequestedToCapacityRatio"
            ],
            id="fit-ratio-required",
        ),
        pytest.param(
            "NodeResourcesFit",
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": []},
                }
            },
            [
                f"{P}.scoringStrategy.requestedToCapacityRatio.shape: Required value: "
                "at least one point must be specified"
            ],
            id="fit-shape-empty",
        ),
        pytest.param(
            "NodeResourcesFit",
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {
                        "shape": [
                            {"utilization": 50, "score": 11},
                            {"utilization": 40, "score": 0},
                            {"utilization": 101},
                        ]
                    },
                }
            },
            [
                f"{P}.scoringStrategy.requestedToCapacityRatio.shape[1].utilization: Invalid value: 40: "
                "values must be sorted in increasing order",
                f"{P}.scoringStrategy.requestedToCapacityRatio.shape[0].score: Invalid value: 11: "
                "not in valid range [0, 10]",
                f"{P}.scoringStrategy.requestedToCapacityRatio.shape[2].utilization: Invalid value: 101: "
                "not in valid range [0, 100]",
            ],
            id="fit-shape-points",
        ),
        pytest.param(
            "NodeResourcesFit",
            {"scoringStrategy": {"type": "LeastAllocated", "requestedToCapacityRatio": {"shape": []}}},
            [
                f"{P}.scoringStrategy.requestedToCapacityRatio: Forbidden: "
                "must be nil when type is not RequestedToCapacityRatio"
            ],
            id="fit-ratio-forbidden",
        ),
        pytest.param(
            "NodeResourcesFit",
            {"ignoredResourceGroups": ["example.com/x"]},
            [
                f'{P}.ignoredResourceGroups[0]: Invalid value: "example.com/x": '
                "resource group name can't contain '/'",
            ],
            id="fit-group-with-slash",
        ),
        pytest.param(
            "PodTopologySpread",
            {"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
            [f'{P}.defaultingType: Invalid value: "System": when .defaultConstraints are not empty'],
            id="spread-system-with-constraints",
        ),
        pytest.param(
            "PodTopologySpread",
            {"defaultingType": "Other"},
            [f'{P}.defaultingType: Unsupported value: "Other": supported values: "System", "List"'],
            id="spread-defaulting-type",
        ),
        pytest.param(
            "PodTopologySpread",
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "Maybe", "labelSelector": {}},
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
                ],
            },
            [
                f"{P}.defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)",
                f"{P}.defaultConstraints[0].topologyKey: Required value: can not be empty",
                f'{P}.defaultConstraints[0].whenUnsatisfiable: Unsupported value: "Maybe": '
                'supported values: "DoNotSchedule", "ScheduleAnyway"',
                f"{P}.defaultConstraints[0].labelSelector: Forbidden: "
                "constraint must not define a selector, as they deduced for each pod",
                f'{P}.defaultConstraints[2]: Duplicate value: "{{zone, ScheduleAnyway}}"',
            ],
            id="spread-constraints",
        ),
        pytest.param(
            "NodeAffinity",
            {"addedAffinity": {"requiredDuringSchedulingRequiredDuringExecution": {}}},
            [
                f"{P}.addedAffinity.requiredDuringSchedulingRequiredDuringExecution: Invalid value: "
                '"requiredDuringSchedulingRequiredDuringExecution": unknown field; supported: '
                "requiredDuringSchedulingIgnoredDuringExecution, "
                "preferredDuringSchedulingIgnoredDuringExecution"
            ],
            id="node-affinity-unknown-key",
        ),
        pytest.param(
            "NodeAffinity",
            {"addedAffinity": ["not", "a", "mapping"]},
            [f'{P}.addedAffinity: Invalid value: ["not","a","mapping"]: input should be a valid dictionary'],
            id="node-affinity-not-a-mapping",
        ),
        pytest.param(
            "LoadAwareScheduling",
            {
                "nodeMetricExpirationSeconds": 0,
                "resourceWeights": {"cpu": 0, "nvidia.com/gpu": 1},
                "dominantResourceWeight": 101,
                "usageThresholds": {"cpu": 101},
                "prodUsageThresholds": {"memory": -1},
                "estimatedScalingFactors": {"cpu": 0},
            },
            [
                f"{P}.nodeMetricExpirationSeconds: Invalid value: 0: "
                "nodeMetricExpirationSeconds should be a positive value",
                f"{P}.resourceWeights[cpu]: Invalid value: 0: not in valid range [1, 100]",
                f"{P}.dominantResourceWeight: Invalid value: 101: not in valid range [0, 100]",
                f"{P}.usageThresholds[cpu]: Invalid value: 101: not in valid range [0, 100]",
                f"{P}.prodUsageThresholds[memory]: Invalid value: -1: not in valid range [0, 100]",
                f"{P}.estimatedScalingFactors[cpu]: Invalid value: 0: not in valid range [1, 100]",
                f'{P}.estimatedScalingFactors: Not found: "nvidia.com/gpu"',
            ],
            id="loadaware-ranges",
        ),
        pytest.param(
            "LoadAwareScheduling",
            {"aggregated": {"usageAggregationType": "p80", "scoreAggregatedDuration": "-1m"}},
            [
                f'{P}.aggregated.usageAggregationType: Unsupported value: "p80": '
                'supported values: "avg", "p50", "p90", "p95", "p99"',
                f"{P}.aggregated.scoreAggregatedDuration: Invalid value: -60: duration must be >= 0",
            ],
            id="loadaware-aggregated",
        ),
        pytest.param(
            "LoadAwareScheduling",
            {"scoringStrategy": {"type": "TargetUtilization", "targetUtilization": {"cpu": 0}}},
            [
                f"{P}.scoringStrategy.targetUtilization[cpu]: Invalid value: 0: not in valid range [1, 100]",
                f'{P}.scoringStrategy.targetUtilization: Not found: "memory"',
            ],
            id="loadaware-target-utilization",
        ),
        pytest.param(
            "LoadAwareScheduling",
            {"scoringStrategy": {"type": "LeastUsed", "targetUtilization": {"cpu": 50}}},
            [f"{P}.scoringStrategy.targetUtilization: Forbidden: must be empty when type is not TargetUtilization"],
            id="loadaware-target-with-least-used",
        ),
        pytest.param(
            "LoadAwareScheduling",
            {"usageThresholds": {"cpu": "high"}},
            [
                f'{P}.usageThresholds[cpu]: Invalid value: "high": '
                "input should be a valid integer, unable to parse string as an integer"
            ],
            id="loadaware-map-value-type",
        ),
        pytest.param(
            "Reservation",
            {
                "minCandidateNodesPercentage": 101,
                "gcIntervalSeconds": -1,
                "controllerWorkers": 0,
                "ignoredResources": ["cpu"],
                "ignoredResourceGroups": ["kubernetes.io"],
            },
            [
                f"{P}.minCandidateNodesPercentage: Invalid value: 101: must be in the range [0, 100]",
                f"{P}.gcIntervalSeconds: Invalid value: -1: must be non-negative",
                f"{P}.controllerWorkers: Invalid value: 0: must be at least 1",
                f'{P}.ignoredResources[0]: Invalid value: "cpu": must be an extended resource name '
                "(e.g. example.com/gpu); native resources cannot be ignored",
                f'{P}.ignoredResourceGroups[0]: Invalid value: "kubernetes.io": '
                "must be usable as an extended "
                'resource prefix (a valid DNS subdomain and not the reserved "kubernetes.io" namespace)',
            ],
            id="reservation",
        ),
    ],
)
def test_validation(plugin: str, raw: dict[str, Any], want_errors: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        decode(plugin, raw)
    assert [str(e) for e in caught.value.errors] == want_errors


def test_unknown_plugin_has_no_model() -> None:
    with pytest.raises(KeyError):
        decode_args("NoSuchPlugin", {}, IN_TREE_ARGS)


def test_bad_args_reported_by_loader_with_profile_path() -> None:
    from apis.config import parse_scheduler_config

    with pytest.raises(ConfigError) as caught:
        parse_scheduler_config(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [
                    {
                        "pluginConfig": [
                            {"name": "NoSuchPlugin", "args": {"anything": 1}},
                            {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": -1}},
                        ]
                    }
                ],
            }
        )
    assert [str(e) for e in caught.value.errors] == [
        "profiles[0].pluginConfig[1].args.hardPodAffinityWeight: Invalid value: -1: not in valid range [0, 100]"
    ]
