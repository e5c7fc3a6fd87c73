"""Building each profile's :class:`Framework` from configuration and a registry."""

from __future__ import annotations

from collections.abc import Callable

from apis.config import ConfigError, KubeSchedulerConfiguration
from apis.config.profile import (
    append_default_pre_bind,
    default_plugins,
    enabled_plugin_names,
    expand_profile,
    merge_with_defaults,
    plugin_args_for_profile,
)
from koord_scheduler.framework.errors import ProfileError
from koord_scheduler.framework.handle import SchedulerServices
from koord_scheduler.framework.interfaces import Plugin, implements
from koord_scheduler.framework.registry import Registry
from koord_scheduler.framework.runtime import Framework
from koord_scheduler.framework.types import PointObserver


def build_profiles(
    config: KubeSchedulerConfiguration,
    registry: Registry,
    services: SchedulerServices,
    *,
    observer: Callable[[str], PointObserver] | None = None,
    node_cache: bool = True,
) -> dict[str, Framework]:
    """schedulerName -> Framework, for every profile. Raises ConfigError / ProfileError naming the field.

    Each profile's framework is built first and handed to the profile's plugin factories as their handle
    (``services`` are the scheduler's, shared by the profiles); then it takes the plugins the profile uses."""
    frameworks: dict[str, Framework] = {}
    registered = registry.names()
    defaults = default_plugins(registered)
    for i, profile in enumerate(config.profiles):
        path = f"profiles[{i}]"
        merged = merge_with_defaults(append_default_pre_bind(profile.plugins, registered), defaults)
        enabled = [n for n in enabled_plugin_names(merged) if n in registry]
        args = plugin_args_for_profile(profile, enabled, registry.args_models_for(enabled), path=path)
        percentage = profile.percentage_of_nodes_to_score
        if percentage is None:
            percentage = config.percentage_of_nodes_to_score
        framework = Framework(
            profile.scheduler_name,
            services,
            percentage_of_nodes_to_score=percentage,
            observer=observer(profile.scheduler_name) if observer is not None else None,
            node_cache=node_cache,
        )
        instances: dict[str, Plugin] = {}
        for name in enabled:
            spec = registry.get(name)
            try:
                plugin = spec.factory(args.get(name), framework)
            except (ConfigError, ProfileError):
                raise
            except Exception as exc:
                raise ProfileError(f"{path}: initializing plugin {name!r}: {exc}") from exc
            if not isinstance(plugin, Plugin):
                raise ProfileError(f"{path}: plugin factory for {name!r} returned an object without a name")
            if plugin.name != name:
                raise ProfileError(f"{path}: plugin factory for {name!r} returned a plugin named {plugin.name!r}")
            instances[name] = plugin

        def implements_point(name: str, point: str, _instances: dict[str, Plugin] = instances) -> bool:
            plugin = _instances.get(name)
            return plugin is not None and implements(plugin, point)

        expanded = expand_profile(
            merged, implements_point, registered, path=f"{path}.plugins", scheduler_name=profile.scheduler_name
        )
        used = set(expanded.enabled())
        framework.install({n: p for n, p in instances.items() if n in used}, expanded.points, expanded.score_weights)
        frameworks[profile.scheduler_name] = framework
    return frameworks
