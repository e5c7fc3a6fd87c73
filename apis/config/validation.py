"""Semantic checks of a decoded :class:`KubeSchedulerConfiguration` (``validation.go``).

Every check returns :class:`FieldError`\\ s with apimachinery's wording; nothing raises. Plugin args
are checked here for plugins that have a model in ``args_models`` (the loader passes the in-tree
ones); registry-dependent checks (unknown plugins, extension points) happen in
:mod:`apis.config.profile` when the framework is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from apis.config.duration import format_go_duration
from apis.config.errors import FieldError, duplicate, invalid, join_path, required
from apis.config.extender import Extender
from apis.config.naming import is_extended_resource_name, qualified_name_errors
from apis.config.plugin_args import args_field_errors
from apis.config.types import (
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    LeaderElectionConfiguration,
    Plugins,
)

MAX_INT32 = 2**31 - 1


def validate_configuration(
    config: KubeSchedulerConfiguration, args_models: Mapping[str, type[BaseModel]]
) -> list[FieldError]:
    """All problems in ``config``; args are decoded and checked for plugins in ``args_models``."""
    errors: list[FieldError] = []
    if config.client_connection.burst < 0:
        errors.append(invalid("clientConnection.burst", config.client_connection.burst, "must be non-negative"))
    errors += _leader_election_errors(config.leader_election)
    if config.parallelism <= 0:
        errors.append(invalid("parallelism", config.parallelism, "should be an integer value greater than zero"))
    if not config.profiles:
        errors.append(required("profiles"))
    seen_names: dict[str, int] = {}
    for i, profile in enumerate(config.profiles):
        path = join_path("profiles", i)
        errors += validate_profile(profile, path, args_models)
        if profile.scheduler_name in seen_names:
            errors.append(
                duplicate(
                    join_path(path, "schedulerName"),
                    f"profiles[{seen_names[profile.scheduler_name]}].schedulerName",
                )
            )
        seen_names.setdefault(profile.scheduler_name, i)
    if config.profiles:
        errors += _common_queue_sort_errors(config.profiles)
    errors += _percentage_errors("percentageOfNodesToScore", config.percentage_of_nodes_to_score)
    if config.pod_initial_backoff_seconds <= 0:
        errors.append(invalid("podInitialBackoffSeconds", config.pod_initial_backoff_seconds, "must be greater than 0"))
    if config.pod_max_backoff_seconds < config.pod_initial_backoff_seconds:
        errors.append(
            invalid(
                "podMaxBackoffSeconds",
                config.pod_max_backoff_seconds,
                "must be greater than or equal to PodInitialBackoffSeconds",
            )
        )
    errors += _extender_errors(config.extenders)
    return errors


def validate_profile(
    profile: KubeSchedulerProfile, path: str, args_models: Mapping[str, type[BaseModel]]
) -> list[FieldError]:
    errors: list[FieldError] = []
    if not profile.scheduler_name:
        errors.append(required(join_path(path, "schedulerName")))
    if profile.percentage_of_nodes_to_score is not None:
        errors += _percentage_errors(join_path(path, "percentageOfNodesToScore"), profile.percentage_of_nodes_to_score)
    if profile.plugins is not None:
        errors += plugin_weight_errors(profile.plugins, join_path(path, "plugins"))
    seen: set[str] = set()
    for j, plugin_config in enumerate(profile.plugin_config):
        config_path = join_path(join_path(path, "pluginConfig"), j)
        if plugin_config.name in seen:
            errors.append(duplicate(config_path, plugin_config.name))
        seen.add(plugin_config.name)
        _, args_errors = args_field_errors(
            plugin_config.name, plugin_config.args, args_models, path=join_path(config_path, "args")
        )
        errors += args_errors
    return errors


def plugin_weight_errors(plugins: Plugins, path: str) -> list[FieldError]:
    """Weights must fit Go's int32 and not be negative.

    Stricter than upstream, which lets a negative weight through to scoring; a negative score
    weight is never what a user meant.
    """
    errors = []
    for attr, field in Plugins.model_fields.items():
        point_path = join_path(join_path(path, field.alias or attr), "enabled")
        for k, plugin in enumerate(getattr(plugins, attr).enabled):
            if plugin.weight is None:
                continue
            weight_path = join_path(join_path(point_path, k), "weight")
            if plugin.weight < 0:
                errors.append(invalid(weight_path, plugin.weight, "must not be negative (0 means the default, 1)"))
            elif plugin.weight > MAX_INT32:
                errors.append(invalid(weight_path, plugin.weight, f"must be at most {MAX_INT32}"))
    return errors


def _percentage_errors(path: str, value: int) -> list[FieldError]:
    if not 0 <= value <= 100:
        return [invalid(path, value, "not in valid range [0-100]")]
    return []


def _leader_election_errors(le: LeaderElectionConfiguration) -> list[FieldError]:
    """component-base ``ValidateLeaderElectionConfiguration`` plus kube-scheduler's leases-only rule."""
    if not le.leader_elect:
        return []
    base = "leaderElection"
    errors = []
    for name, seconds in (
        ("leaseDuration", le.lease_duration),
        ("renewDeadline", le.renew_deadline),
        ("retryPeriod", le.retry_period),
    ):
        if seconds <= 0:
            errors.append(invalid(join_path(base, name), format_go_duration(seconds), "must be greater than zero"))
    if le.lease_duration <= le.renew_deadline:
        errors.append(
            invalid(
                join_path(base, "leaseDuration"),
                format_go_duration(le.renew_deadline),
                "LeaseDuration must be greater than RenewDeadline",
            )
        )
    for name, value in (
        ("resourceLock", le.resource_lock),
        ("resourceNamespace", le.resource_namespace),
        ("resourceName", le.resource_name),
    ):
        if not value:
            errors.append(invalid(join_path(base, name), value, f"{name} is required"))
    if le.resource_lock and le.resource_lock != "leases":
        errors.append(invalid(join_path(base, "resourceLock"), le.resource_lock, 'resourceLock value must be "leases"'))
    return errors


def _common_queue_sort_errors(profiles: tuple[KubeSchedulerProfile, ...]) -> list[FieldError]:
    """All profiles must configure queueSort (and its args) identically (``validateCommonQueueSort``)."""
    errors: list[FieldError] = []
    first = profiles[0]
    canon = first.plugins.queue_sort if first.plugins is not None else None
    queue_sort_name = canon.enabled[0].name if canon is not None and canon.enabled else ""
    if canon is not None and len(canon.enabled) > 1:
        errors.append(
            invalid(
                "profiles[0].plugins.queueSort.Enabled",
                len(canon.enabled),
                "only one queue sort plugin can be enabled",
            )
        )
    canon_config = first.plugin_config_for(queue_sort_name) if queue_sort_name else None
    canon_args = canon_config.args if canon_config is not None else None
    canon_dump = _dump(canon)
    for i, profile in enumerate(profiles[1:], start=1):
        current = profile.plugins.queue_sort if profile.plugins is not None else None
        if _dump(current) != canon_dump:
            errors.append(
                invalid(f"profiles[{i}].plugins.queueSort", _dump(current), "must be the same for all profiles")
            )
        for plugin_config in profile.plugin_config:
            if plugin_config.name == queue_sort_name and plugin_config.args != canon_args:
                errors.append(
                    invalid(
                        f"profiles[{i}].pluginConfig.args",
                        plugin_config.args,
                        "queueSort must be the same for all profiles",
                    )
                )
    return errors


def _dump(model: BaseModel | None) -> Any:
    """Semantic equality as apimachinery sees it: nil and empty compare equal."""
    if model is None:
        return {"enabled": [], "disabled": []}
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _extender_errors(extenders: tuple[Extender, ...]) -> list[FieldError]:
    """kube-scheduler's ``validateExtenders``."""
    errors: list[FieldError] = []
    binders = 0
    managed: set[str] = set()
    for i, extender in enumerate(extenders):
        path = join_path("extenders", i)
        if extender.prioritize_verb and extender.weight <= 0:
            errors.append(
                invalid(join_path(path, "weight"), extender.weight, "must have a positive weight applied to it")
            )
        if extender.bind_verb:
            binders += 1
        for j, resource in enumerate(extender.managed_resources):
            name = resource.name
            name_path = join_path(join_path(join_path(path, "managedResources"), j), "name")
            messages = qualified_name_errors(name)
            errors += [invalid(name_path, name, message) for message in messages]
            if not messages and not is_extended_resource_name(name):
                errors.append(invalid(name_path, name, "is an invalid extended resource name"))
            if name in managed:
                errors.append(invalid(name_path, name, "duplicate extender managed resource name"))
            managed.add(name)
    if binders > 1:
        errors.append(
            invalid(
                "extenders",
                f"found {binders} extenders implementing bind",
                "only one extender can implement bind",
            )
        )
    return errors
