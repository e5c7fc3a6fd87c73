"""Args models for the kube-scheduler plugins pykoord implements, and :func:`decode_args`.

Defaults follow ``pkg/scheduler/apis/config/v1/defaults.go``; :meth:`field_errors` follows
``validation_pluginargs.go`` message for message. Koordinator's args are in
:mod:`apis.config.loadaware_args` and :mod:`apis.config.reservation_args`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, field_validator

from apis.config.args_base import ArgsModel
from apis.config.coscheduling_args import CoschedulingArgs
from apis.config.decoding import decode_model
from apis.config.deviceshare_args import DeviceShareArgs
from apis.config.dynamicresources_args import DynamicResourcesArgs
from apis.config.elasticquota_args import ElasticQuotaArgs
from apis.config.errors import (
    ConfigError,
    FieldError,
    duplicate,
    forbidden,
    invalid,
    join_path,
    not_supported,
    required,
)
from apis.config.loadaware_args import LoadAwareSchedulingArgs
from apis.config.naming import qualified_name_errors
from apis.config.numa_args import NodeNUMAResourceArgs
from apis.config.reservation_args import ReservationArgs
from apis.config.schedulinghint_args import SchedulingHintArgs
from apis.config.types import API_VERSION, ConfigModel

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
SCORING_STRATEGY_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
MAX_CUSTOM_PRIORITY_SCORE = 10
"""Shape scores are 0..10 and scaled to 0..100 by the plugin (``config.MaxCustomPriorityScore``)."""


class ResourceSpec(ConfigModel):
    """A resource and its weight. Weight 0 (or absent) becomes 1 during defaulting."""

    name: str
    weight: int = 0


DEFAULT_RESOURCES = (ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1))


def _default_resources(resources: tuple[ResourceSpec, ...]) -> tuple[ResourceSpec, ...]:
    """Empty → cpu:1, memory:1; weight 0 → 1 (``SetDefaults_NodeResources*Args``)."""
    if not resources:
        return DEFAULT_RESOURCES
    return tuple(r if r.weight != 0 else r.model_copy(update={"weight": 1}) for r in resources)


class UtilizationShapePoint(ConfigModel):
    utilization: int = 0
    """Percent, 0..100."""
    score: int = 0
    """0..10 (``MAX_CUSTOM_PRIORITY_SCORE``)."""


def validate_function_shape(shape: tuple[UtilizationShapePoint, ...], path: str) -> list[FieldError]:
    if not shape:
        return [required(path, "at least one point must be specified")]
    errors = []
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            errors.append(
                invalid(
                    join_path(join_path(path, i), "utilization"),
                    shape[i].utilization,
                    "values must be sorted in increasing order",
                )
            )
            break
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= 100:
            errors.append(
                invalid(
                    join_path(join_path(path, i), "utilization"),
                    point.utilization,
                    "not in valid range [0, 100]",
                )
            )
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            errors.append(
                invalid(
                    join_path(join_path(path, i), "score"),
                    point.score,
                    f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]",
                )
            )
    return errors


def _label_name_errors(value: str, path: str) -> list[FieldError]:
    """``metav1validation.ValidateLabelName``."""
    return [invalid(path, value, message) for message in qualified_name_errors(value)]


class RequestedToCapacityRatioParam(ConfigModel):
    shape: tuple[UtilizationShapePoint, ...] = ()


class ScoringStrategy(ConfigModel):
    """NodeResourcesFit scoring. ``type`` is left empty when the user gives a strategy without one,
    which validation rejects, as upstream does."""

    type: str = ""
    resources: tuple[ResourceSpec, ...] = ()
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None

    @field_validator("resources")
    @classmethod
    def _default_weights(cls, resources: tuple[ResourceSpec, ...]) -> tuple[ResourceSpec, ...]:
        return _default_resources(resources)


class NodeResourcesFitArgs(ArgsModel):
    ignored_resources: tuple[str, ...] = ()
    """Resources the Filter ignores."""
    ignored_resource_groups: tuple[str, ...] = ()
    """Resource name prefixes (``example.com`` for ``example.com/*``) the Filter ignores."""
    scoring_strategy: ScoringStrategy = ScoringStrategy(type=LEAST_ALLOCATED, resources=DEFAULT_RESOURCES)

    def field_errors(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        for i, name in enumerate(self.ignored_resources):
            errors += _label_name_errors(name, join_path(join_path(path, "ignoredResources"), i))
        for i, group in enumerate(self.ignored_resource_groups):
            group_path = join_path(join_path(path, "ignoredResourceGroups"), i)
            if "/" in group:
                errors.append(invalid(group_path, group, "resource group name can't contain '/'"))
            errors += _label_name_errors(group, group_path)
        strategy = self.scoring_strategy
        strategy_path = join_path(path, "scoringStrategy")
        if strategy.type not in SCORING_STRATEGY_TYPES:
            errors.append(
                not_supported(join_path(strategy_path, "type"), strategy.type, sorted(SCORING_STRATEGY_TYPES))
            )
        for i, resource in enumerate(strategy.resources):
            if not 0 < resource.weight <= 100:
                errors.append(
                    invalid(
                        join_path(join_path(join_path(strategy_path, "resources"), i), "weight"),
                        resource.weight,
                        f"resource weight of {resource.name} not in valid range (0, 100]",
                    )
                )
        ratio_path = join_path(strategy_path, "requestedToCapacityRatio")
        if strategy.type == REQUESTED_TO_CAPACITY_RATIO:
            if strategy.requested_to_capacity_ratio is None:
                errors.append(required(ratio_path, "must be specified when type is RequestedToCapacityRatio"))
            else:
                errors += validate_function_shape(
                    strategy.requested_to_capacity_ratio.shape, join_path(ratio_path, "shape")
                )
        elif strategy.requested_to_capacity_ratio is not None:
            errors.append(forbidden(ratio_path, "must be nil when type is not RequestedToCapacityRatio"))
        return errors


class NodeResourcesBalancedAllocationArgs(ArgsModel):
    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES

    @field_validator("resources")
    @classmethod
    def _default_weights(cls, resources: tuple[ResourceSpec, ...]) -> tuple[ResourceSpec, ...]:
        return _default_resources(resources)

    def field_errors(self, path: str) -> list[FieldError]:
        errors = []
        seen: set[str] = set()
        for i, resource in enumerate(self.resources):
            item = join_path(join_path(path, "resources"), i)
            if resource.name in seen:
                errors.append(duplicate(join_path(item, "name"), resource.name))
            seen.add(resource.name)
            if resource.weight != 1:
                errors.append(invalid(join_path(item, "weight"), resource.weight, "must be 1"))
        return errors


_NODE_AFFINITY_FIELDS = (
    "requiredDuringSchedulingIgnoredDuringExecution",
    "preferredDuringSchedulingIgnoredDuringExecution",
)


class NodeAffinityArgs(ArgsModel):
    added_affinity: dict[str, Any] | None = None
    """A raw ``v1.NodeAffinity`` mapping applied to every pod; parsed by ``apis.core.parse``."""

    def field_errors(self, path: str) -> list[FieldError]:
        if self.added_affinity is None:
            return []
        base = join_path(path, "addedAffinity")
        errors: list[FieldError] = []
        for key in self.added_affinity:
            if key not in _NODE_AFFINITY_FIELDS:
                errors.append(
                    invalid(
                        join_path(base, key),
                        key,
                        f"unknown field; supported: {', '.join(_NODE_AFFINITY_FIELDS)}",
                    )
                )
        required_terms = self.added_affinity.get(_NODE_AFFINITY_FIELDS[0])
        if required_terms is not None and not isinstance(required_terms, dict):
            errors.append(invalid(join_path(base, _NODE_AFFINITY_FIELDS[0]), required_terms, "must be a node selector"))
        preferred = self.added_affinity.get(_NODE_AFFINITY_FIELDS[1])
        if preferred is not None and not isinstance(preferred, list):
            errors.append(invalid(join_path(base, _NODE_AFFINITY_FIELDS[1]), preferred, "must be a list"))
        return errors


SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"


class TopologySpreadConstraint(ConfigModel):
    """``v1.TopologySpreadConstraint`` as written in args (``labelSelector`` must stay unset)."""

    max_skew: int = 0
    topology_key: str = ""
    when_unsatisfiable: str = ""
    label_selector: dict[str, Any] | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: tuple[str, ...] = ()


class PodTopologySpreadArgs(ArgsModel):
    default_constraints: tuple[TopologySpreadConstraint, ...] = ()
    defaulting_type: str = SYSTEM_DEFAULTING
    """``System`` uses the built-in zone/hostname constraints; ``List`` uses ``defaultConstraints``."""

    def field_errors(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        type_path = join_path(path, "defaultingType")
        if self.defaulting_type not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
            errors.append(not_supported(type_path, self.defaulting_type, [SYSTEM_DEFAULTING, LIST_DEFAULTING]))
        elif self.defaulting_type == SYSTEM_DEFAULTING and self.default_constraints:
            errors.append(invalid(type_path, self.defaulting_type, "when .defaultConstraints are not empty"))
        list_path = join_path(path, "defaultConstraints")
        for i, constraint in enumerate(self.default_constraints):
            item = join_path(list_path, i)
            if constraint.max_skew <= 0:
                errors.append(invalid(join_path(item, "maxSkew"), constraint.max_skew, "not in valid range (0, inf)"))
            key_path = join_path(item, "topologyKey")
            if not constraint.topology_key:
                errors.append(required(key_path, "can not be empty"))
            else:
                errors += _label_name_errors(constraint.topology_key, key_path)
            action_path = join_path(item, "whenUnsatisfiable")
            if not constraint.when_unsatisfiable:
                errors.append(required(action_path, "can not be empty"))
            elif constraint.when_unsatisfiable not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
                errors.append(
                    not_supported(action_path, constraint.when_unsatisfiable, [DO_NOT_SCHEDULE, SCHEDULE_ANYWAY])
                )
            if constraint.label_selector is not None:
                errors.append(
                    forbidden(
                        join_path(item, "labelSelector"),
                        "constraint must not define a selector, as they deduced for each pod",
                    )
                )
            for other in self.default_constraints[:i]:
                if (other.topology_key, other.when_unsatisfiable) == (
                    constraint.topology_key,
                    constraint.when_unsatisfiable,
                ):
                    errors.append(duplicate(item, f"{{{constraint.topology_key}, {constraint.when_unsatisfiable}}}"))
                    break
        return errors


class InterPodAffinityArgs(ArgsModel):
    hard_pod_affinity_weight: int = 1
    """Score weight given to existing pods' required affinity terms matching the incoming pod."""
    ignore_preferred_terms_of_existing_pods: bool = False

    def field_errors(self, path: str) -> list[FieldError]:
        weight = self.hard_pod_affinity_weight
        if not 0 <= weight <= 100:
            return [invalid(join_path(path, "hardPodAffinityWeight"), weight, "not in valid range [0, 100]")]
        return []


def validate_min_candidates(percentage: int, absolute: int, path: str) -> list[FieldError]:
    """DefaultPreemption's candidate-count checks (also used by Reservation preemption)."""
    percentage_path = join_path(path, "minCandidateNodesPercentage")
    absolute_path = join_path(path, "minCandidateNodesAbsolute")
    errors = []
    if not 0 <= percentage <= 100:
        errors.append(invalid(percentage_path, percentage, "not in valid range [0, 100]"))
    if absolute < 0:
        errors.append(invalid(absolute_path, absolute, "not in valid range [0, inf)"))
    if percentage == 0 and absolute == 0:
        errors.append(
            invalid(percentage_path, percentage, "cannot be zero at the same time as minCandidateNodesAbsolute")
        )
        errors.append(
            invalid(absolute_path, absolute, "cannot be zero at the same time as minCandidateNodesPercentage")
        )
    return errors


class DefaultPreemptionArgs(ArgsModel):
    min_candidate_nodes_percentage: int = 10
    """Dry-run preemption on at least this percent of nodes..."""
    min_candidate_nodes_absolute: int = 100
    """...and at least this many nodes: ``max(nodes * pct / 100, absolute)``."""

    def field_errors(self, path: str) -> list[FieldError]:
        return validate_min_candidates(self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute, path)


class VolumeBindingArgs(ArgsModel):
    bind_timeout_seconds: int = 600
    shape: tuple[UtilizationShapePoint, ...] | None = None
    """Only meaningful with the StorageCapacityScoring feature; validated when given."""

    def field_errors(self, path: str) -> list[FieldError]:
        errors = []
        if self.bind_timeout_seconds < 0:
            errors.append(
                invalid(
                    join_path(path, "bindTimeoutSeconds"),
                    self.bind_timeout_seconds,
                    "invalid BindTimeoutSeconds, should not be a negative value",
                )
            )
        if self.shape is not None:
            errors += validate_function_shape(self.shape, join_path(path, "shape"))
        return errors


IN_TREE_ARGS: Mapping[str, type[BaseModel]] = {
    "Coscheduling": CoschedulingArgs,
    "DefaultPreemption": DefaultPreemptionArgs,
    "ElasticQuota": ElasticQuotaArgs,
    "DeviceShare": DeviceShareArgs,
    "DynamicResources": DynamicResourcesArgs,
    "InterPodAffinity": InterPodAffinityArgs,
    "LoadAwareScheduling": LoadAwareSchedulingArgs,
    "NodeAffinity": NodeAffinityArgs,
    "NodeNUMAResource": NodeNUMAResourceArgs,
    "NodeResourcesBalancedAllocation": NodeResourcesBalancedAllocationArgs,
    "NodeResourcesFit": NodeResourcesFitArgs,
    "PodTopologySpread": PodTopologySpreadArgs,
    "Reservation": ReservationArgs,
    "SchedulingHint": SchedulingHintArgs,
    "VolumeBinding": VolumeBindingArgs,
}
"""Plugin name → args model for every plugin whose args pykoord knows. Read-only; copy to extend."""


def args_field_errors(
    plugin_name: str, raw: Mapping[str, Any] | None, args_models: Mapping[str, type[BaseModel]], *, path: str
) -> tuple[BaseModel | None, list[FieldError]]:
    """Like :func:`decode_args` but returns ``(args, errors)`` instead of raising.

    ``raw`` is the ``args`` mapping from ``pluginConfig`` (``None`` → defaults). ``path`` is the path
    of that ``args`` field. A plugin without a model in ``args_models`` yields ``(None, [])``.
    """
    model = args_models.get(plugin_name)
    if model is None:
        return None, []
    data = dict(raw or {})
    errors: list[FieldError] = []
    want_kind = f"{plugin_name}Args"
    kind = data.pop("kind", None)
    if kind is not None and kind != want_kind:
        errors.append(
            invalid(
                join_path(path, "kind"),
                kind,
                f"args for plugin {plugin_name} were not of type {want_kind}, got {kind}",
            )
        )
    api_version = data.pop("apiVersion", None)
    if api_version is not None and api_version != API_VERSION:
        errors.append(not_supported(join_path(path, "apiVersion"), api_version, [API_VERSION]))
    if errors:
        return None, errors
    args, errors = decode_model(model, data, path=path)
    if args is not None:
        checker = getattr(args, "field_errors", None)
        if callable(checker):
            errors = list(checker(path))
    return (args if not errors else None), errors


def decode_args(
    plugin_name: str,
    raw: Mapping[str, Any] | None,
    args_models: Mapping[str, type[BaseModel]],
    *,
    path: str = "args",
) -> BaseModel:
    """Decode, default and validate one plugin's args.

    ``kind``, when present, must be ``<plugin_name>Args``; ``apiVersion``, when present, must be
    ``kubescheduler.config.k8s.io/v1``. Both are dropped before validation. Out-of-tree plugins pass
    their own models in ``args_models``; a model that defines ``field_errors(path)`` gets semantic
    checks. Raises :class:`ConfigError` listing every problem, or ``KeyError`` if ``plugin_name`` has
    no model (a registry bug, not a user error).
    """
    if plugin_name not in args_models:
        raise KeyError(f"no args model registered for plugin {plugin_name!r}")
    args, errors = args_field_errors(plugin_name, raw, args_models, path=path)
    if errors or args is None:
        raise ConfigError(errors)
    return args
