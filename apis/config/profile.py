"""From a profile's ``plugins`` to the ordered plugin list of every extension point.

Pure functions the framework runtime calls when it builds a profile, in this order::

    defaults = default_plugins(registry.names())
    merged = merge_with_defaults(profile.plugins, defaults)          # kube-scheduler mergePluginSet
    args = plugin_args_for_profile(profile, enabled_plugin_names(merged), registry.args_models, path=...)
    ... instantiate each enabled, registered plugin with its args ...
    expanded = expand_profile(merged, implements, registry.names(), path=..., scheduler_name=...)  # expand multiPoint

Extension points are named as in the config file (``preFilter``, ``score``...). The default plugin list
is filtered by the registry (a plugin pykoord does not have is silently dropped from the *defaults*);
a plugin the *user* names that is not registered is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from pydantic import BaseModel

from apis.config.errors import ConfigError, FieldError, invalid, join_path
from apis.config.plugin_args import args_field_errors
from apis.config.types import KubeSchedulerProfile, Plugin, PluginRef, Plugins, PluginSet

EXTENSION_POINTS: tuple[str, ...] = (
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
)
"""Every extension point a profile configures, in scheduling-cycle order (``multiPoint`` is not one)."""

MULTI_POINT = "multiPoint"
MAX_NODE_SCORE = 100
MAX_TOTAL_SCORE = 2**63 - 1

_ATTRIBUTE = {point: "".join(f"_{c.lower()}" if c.isupper() else c for c in point) for point in EXTENSION_POINTS}
_INTERFACE = {point: point[0].upper() + point[1:] + "Plugin" for point in EXTENSION_POINTS}
"""The Go interface names upstream's messages use (``FilterPlugin``)."""

DEFAULT_MULTIPOINT: tuple[PluginRef, ...] = (
    Plugin(name="SchedulingGates"),
    Plugin(name="PrioritySort"),
    Plugin(name="NodeUnschedulable"),
    Plugin(name="NodeName"),
    Plugin(name="TaintToleration", weight=3),
    Plugin(name="NodeAffinity", weight=2),
    Plugin(name="NodePorts"),
    Plugin(name="NodeResourcesFit", weight=1),
    Plugin(name="VolumeRestrictions"),
    Plugin(name="NodeVolumeLimits"),
    Plugin(name="VolumeBinding"),
    Plugin(name="VolumeZone"),
    Plugin(name="PodTopologySpread", weight=2),
    Plugin(name="InterPodAffinity", weight=2),
    Plugin(name="DynamicResources", weight=2),
    Plugin(name="DefaultPreemption"),
    Plugin(name="NodeResourcesBalancedAllocation", weight=1),
    Plugin(name="ImageLocality", weight=1),
    Plugin(name="DefaultBinder"),
)
"""kube-scheduler v1.35's default MultiPoint list, restricted to the plugins pykoord registers, in
upstream's order. Weights are the Score weights (VolumeBinding, listed without one, scores with weight 1
when its StorageCapacityScoring shape is configured). DynamicResources sits right before DefaultPreemption,
where ``applyFeatureGates`` inserts it (DynamicResourceAllocation is GA and locked on in v1.35), so its
PostFilter runs first.
"""

Implements = Callable[[str, str], bool]
"""``implements(plugin_name, extension_point)``: does the instantiated plugin extend that point?"""


@dataclass(frozen=True, slots=True)
class ExpandedProfile:
    """The outcome of :func:`expand_profile`.

    ``points`` maps every name in :data:`EXTENSION_POINTS` to the plugins to run there, in order.
    ``score_weights`` holds the weight of every plugin in ``points["score"]`` (never 0).
    """

    points: Mapping[str, tuple[str, ...]]
    score_weights: Mapping[str, int]

    def plugins_for(self, point: str) -> tuple[str, ...]:
        return self.points[point]

    def enabled(self) -> tuple[str, ...]:
        """Every plugin that runs at some point, each once, in first-use order."""
        return tuple(dict.fromkeys(name for point in EXTENSION_POINTS for name in self.points[point]))


def point_set(plugins: Plugins, point: str) -> PluginSet:
    """The ``PluginSet`` of ``point`` (an extension point or ``multiPoint``)."""
    attribute = "multi_point" if point == MULTI_POINT else _ATTRIBUTE[point]
    result: PluginSet = getattr(plugins, attribute)
    return result


def default_plugins(registered: Collection[str]) -> Plugins:
    """The default profile (only ``multiPoint.enabled`` is set), without unregistered plugins."""
    return Plugins(multi_point=PluginSet(enabled=tuple(p for p in DEFAULT_MULTIPOINT if p.name in registered)))


DEFAULT_PRE_BIND = "DefaultPreBind"


def append_default_pre_bind(user_plugins: Plugins | None, registered: Collection[str]) -> Plugins | None:
    """Koordinator's ``AppendDefaultPlugins``: a profile that configures plugins gets DefaultPreBind
    last at preBind, unless it enables it already or disables it (by name or ``*``) there. Nothing
    changes when DefaultPreBind is not registered."""
    if user_plugins is None or DEFAULT_PRE_BIND not in registered:
        return user_plugins
    pre_bind = user_plugins.pre_bind
    if {"*", DEFAULT_PRE_BIND} & pre_bind.disabled_names():
        return user_plugins
    if any(p.name == DEFAULT_PRE_BIND for p in pre_bind.enabled):
        return user_plugins
    appended = PluginSet(enabled=(*pre_bind.enabled, Plugin(name=DEFAULT_PRE_BIND)), disabled=pre_bind.disabled)
    return user_plugins.model_copy(update={"pre_bind": appended})


def merge_with_defaults(user_plugins: Plugins | None, defaults: Plugins) -> Plugins:
    """``mergePlugins``: combine the user's sets with the defaults, point by point (kube-scheduler
    pkg/scheduler/apis/config/v1/default_plugins.go).

    Per point: disabled = user's + default's; unless ``*`` is disabled, the default enabled list
    minus disabled names, with a user entry of the same name replacing the default in place (so it
    keeps the default position and takes the user's weight); then every other user entry, in user
    order. Duplicates are kept for :func:`expand_profile` to reject.
    """
    if user_plugins is None:
        return defaults
    merged = {
        attribute: _merge_set(getattr(defaults, attribute), getattr(user_plugins, attribute))
        for attribute in Plugins.model_fields
    }
    return Plugins(**merged)


def _merge_set(default_set: PluginSet, user_set: PluginSet) -> PluginSet:
    disabled = tuple(Plugin(name=p.name) for p in (*user_set.disabled, *default_set.disabled))
    disabled_names = {p.name for p in disabled}
    user_index = {p.name: i for i, p in enumerate(user_set.enabled)}
    replaced: set[int] = set()
    enabled: list[Plugin] = []
    if "*" not in disabled_names:
        for plugin in default_set.enabled:
            if plugin.name in disabled_names:
                continue
            index = user_index.get(plugin.name)
            if index is not None:
                replaced.add(index)
            enabled.append(plugin if index is None else user_set.enabled[index])
    enabled += [p for i, p in enumerate(user_set.enabled) if i not in replaced]
    return PluginSet(enabled=tuple(enabled), disabled=disabled)


def enabled_plugin_names(plugins: Plugins) -> tuple[str, ...]:
    """Every plugin named in some ``enabled`` list (multiPoint first, then each point), once each.

    These are the plugins the runtime must instantiate, and the ones that get default args (kube-scheduler
    pkg/scheduler/apis/config/v1/defaults.go, setDefaults_KubeSchedulerProfile).
    """
    names = [p.name for p in plugins.multi_point.enabled]
    for point in EXTENSION_POINTS:
        names += [p.name for p in point_set(plugins, point).enabled]
    return tuple(dict.fromkeys(names))


def plugin_args_for_profile(
    profile: KubeSchedulerProfile,
    enabled: Iterable[str],
    args_models: Mapping[str, type[BaseModel]],
    *,
    path: str = "",
) -> dict[str, BaseModel]:
    """Decoded, defaulted args for every enabled plugin that has an args model.

    A plugin with a ``pluginConfig`` entry gets it decoded; one without gets its model's defaults.
    Plugins without a model in ``args_models`` are absent from the result. ``path`` is the profile's
    path (``profiles[0]``). Raises :class:`ConfigError` listing every bad args field.
    """
    result: dict[str, BaseModel] = {}
    errors: list[FieldError] = []
    config_index = {pc.name: j for j, pc in enumerate(profile.plugin_config)}
    for name in enabled:
        if name not in args_models:
            continue
        j = config_index.get(name)
        raw = profile.plugin_config[j].args if j is not None else None
        args_path = join_path(join_path(join_path(path, "pluginConfig"), j), "args") if j is not None else name
        args, args_errors = args_field_errors(name, raw, args_models, path=args_path)
        errors += args_errors
        if args is not None:
            result[name] = args
    if errors:
        raise ConfigError(errors)
    return result


def expand_profile(
    plugins: Plugins,
    implements: Implements,
    registered: Collection[str],
    *,
    path: str = "plugins",
    scheduler_name: str = "",
) -> ExpandedProfile:
    """Build each extension point's plugin list from (merged) ``plugins`` (``expandMultiPointPlugins``).

    For each point: its explicit ``enabled`` list is checked (registered, implements the point, not
    twice); unless the point disables ``*``, the MultiPoint plugins that implement it and are not
    disabled there are added. Order: MultiPoint plugins also listed at the point (in the point's
    order), then the other MultiPoint plugins, then the point's other plugins. Score weights: first of
    ``score.enabled`` then ``multiPoint.enabled`` wins; 0 or unset means 1.

    ``path`` locates ``plugins`` in the file (``profiles[0].plugins``) for error messages. Errors for
    multiPoint entries name the list, not an index, because merging renumbers it. Raises
    :class:`ConfigError` listing every problem, with upstream's wording.
    """
    errors: list[FieldError] = []
    unknown: dict[str, None] = {}
    points: dict[str, tuple[str, ...]] = {}
    multi_point_path = join_path(join_path(path, MULTI_POINT), "enabled")
    for plugin in plugins.multi_point.enabled:
        if plugin.name not in registered and plugin.name not in unknown:
            unknown[plugin.name] = None
            errors.append(invalid(multi_point_path, plugin.name, f'MultiPoint plugin "{plugin.name}" does not exist'))
    reported_twice: set[str] = set()
    for point in EXTENSION_POINTS:
        explicit, point_errors = _explicit_list(plugins, point, implements, registered, path)
        errors += point_errors
        unknown.update(dict.fromkeys(p.name for p in point_set(plugins, point).enabled if p.name not in registered))
        points[point], twice = _with_multi_point(plugins, point, explicit, implements, registered)
        for name in twice:
            if name not in reported_twice:
                reported_twice.add(name)
                errors.append(
                    invalid(multi_point_path, name, f'plugin "{name}" already registered as "{_INTERFACE[point]}"')
                )
    weights, weight_errors = _score_weights(plugins, points["score"], join_path(path, "score"))
    errors += weight_errors
    errors += _profile_errors(points, scheduler_name, path)
    if errors:
        summary = f'{len(errors)} error{"s" if len(errors) != 1 else ""} in profile "{scheduler_name}"'
        if unknown:
            summary += f"; plugins not registered: {', '.join(sorted(unknown))}"
        raise ConfigError(errors, summary=summary)
    return ExpandedProfile(points=MappingProxyType(points), score_weights=MappingProxyType(weights))


def _explicit_list(
    plugins: Plugins, point: str, implements: Implements, registered: Collection[str], path: str
) -> tuple[list[str], list[FieldError]]:
    """``updatePluginList``: the point's own enabled list, validated."""
    interface = _INTERFACE[point]
    names: list[str] = []
    errors: list[FieldError] = []
    for k, plugin in enumerate(point_set(plugins, point).enabled):
        entry_path = join_path(join_path(join_path(path, point), "enabled"), k)
        if plugin.name not in registered:
            errors.append(invalid(entry_path, plugin.name, f'{interface} "{plugin.name}" does not exist'))
        elif not implements(plugin.name, point):
            errors.append(
                invalid(entry_path, plugin.name, f'plugin "{plugin.name}" does not extend {interface} plugin')
            )
        elif plugin.name in names:
            errors.append(
                invalid(entry_path, plugin.name, f'plugin "{plugin.name}" already registered as "{interface}"')
            )
        else:
            names.append(plugin.name)
    return names, errors


def _with_multi_point(
    plugins: Plugins, point: str, explicit: list[str], implements: Implements, registered: Collection[str]
) -> tuple[tuple[str, ...], list[str]]:
    """Merge MultiPoint plugins into ``explicit``; also returns names MultiPoint registers twice."""
    disabled = point_set(plugins, point).disabled_names()
    if "*" in disabled:
        return tuple(explicit), []
    overrides: list[str] = []
    from_multi_point: list[str] = []
    twice: list[str] = []
    for plugin in plugins.multi_point.enabled:
        name = plugin.name
        if name not in registered or not implements(name, point) or name in disabled:
            continue
        if name in explicit:
            overrides.append(name)
        elif name in from_multi_point:
            twice.append(name)
        else:
            from_multi_point.append(name)
    first = [name for name in explicit if name in overrides]
    rest = [name for name in explicit if name not in overrides]
    return (*first, *from_multi_point, *rest), twice


def _score_weights(
    plugins: Plugins, score_plugins: tuple[str, ...], path: str
) -> tuple[dict[str, int], list[FieldError]]:
    """``getScoreWeights`` over ``score.enabled ++ multiPoint.enabled``: first occurrence wins."""
    weights: dict[str, int] = {}
    total = 0
    errors: list[FieldError] = []
    for plugin in (*plugins.score.enabled, *plugins.multi_point.enabled):
        if plugin.name not in score_plugins or plugin.name in weights:
            continue
        weight = plugin.weight or 1
        if weight * MAX_NODE_SCORE > MAX_TOTAL_SCORE - total:
            errors.append(invalid(path, plugin.name, "total score of Score plugins could overflow"))
            break
        weights[plugin.name] = weight
        total += weight * MAX_NODE_SCORE
    return {name: weights[name] for name in score_plugins if name in weights}, errors


def _profile_errors(points: Mapping[str, tuple[str, ...]], scheduler_name: str, path: str) -> list[FieldError]:
    errors = []
    queue_sort = points["queueSort"]
    if len(queue_sort) != 1:
        errors.append(
            invalid(
                join_path(path, "queueSort"),
                list(queue_sort),
                f'only one queue sort plugin required for profile with scheduler name "{scheduler_name}", '
                f"but got {len(queue_sort)}",
            )
        )
    if not points["bind"]:
        errors.append(
            invalid(
                join_path(path, "bind"),
                [],
                f'at least one bind plugin is needed for profile with scheduler name "{scheduler_name}"',
            )
        )
    return errors
