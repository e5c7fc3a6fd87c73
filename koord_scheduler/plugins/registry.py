"""``in_tree_registry()``: every plugin shipped with koord-scheduler, in a fresh Registry each call.

Each plugin's package is imported the first time the registry is asked for its spec (a profile enables
it, or a caller iterates the registry): a start-up with the default profile never imports the
Koordinator plugins it does not run. Each loader is one typed ``PluginSpec`` line."""

from __future__ import annotations

from koord_scheduler.framework.registry import DeferredSpec, PluginSpec, Registry
from koord_scheduler.plugins import names


def _schedulinggates() -> PluginSpec:
    from koord_scheduler.plugins.schedulinggates import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _queuesort() -> PluginSpec:
    from koord_scheduler.plugins.queuesort import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _nodeunschedulable() -> PluginSpec:
    from koord_scheduler.plugins.nodeunschedulable import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _nodename() -> PluginSpec:
    from koord_scheduler.plugins.nodename import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _tainttoleration() -> PluginSpec:
    from koord_scheduler.plugins.tainttoleration import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _nodeaffinity() -> PluginSpec:
    from koord_scheduler.plugins.nodeaffinity import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _nodeports() -> PluginSpec:
    from koord_scheduler.plugins.nodeports import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _noderesources() -> PluginSpec:
    from koord_scheduler.plugins.noderesources import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _volumerestrictions() -> PluginSpec:
    from koord_scheduler.plugins.volumerestrictions import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _nodevolumelimits() -> PluginSpec:
    from koord_scheduler.plugins.nodevolumelimits import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _volumebinding() -> PluginSpec:
    from koord_scheduler.plugins.volumebinding import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _volumezone() -> PluginSpec:
    from koord_scheduler.plugins.volumezone import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _balancedallocation() -> PluginSpec:
    from koord_scheduler.plugins.balancedallocation import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _podtopologyspread() -> PluginSpec:
    from koord_scheduler.plugins.podtopologyspread import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _interpodaffinity() -> PluginSpec:
    from koord_scheduler.plugins.interpodaffinity import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _dynamicresources() -> PluginSpec:
    from koord_scheduler.plugins.dynamicresources import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _defaultpreemption() -> PluginSpec:
    from koord_scheduler.plugins.defaultpreemption import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _imagelocality() -> PluginSpec:
    from koord_scheduler.plugins.imagelocality import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _loadaware() -> PluginSpec:
    from koord_scheduler.plugins.loadaware import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _nodenumaresource() -> PluginSpec:
    from koord_scheduler.plugins.nodenumaresource import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _defaultbinder() -> PluginSpec:
    from koord_scheduler.plugins.defaultbinder import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _reservation() -> PluginSpec:
    from koord_scheduler.plugins.reservation import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _coscheduling() -> PluginSpec:
    from koord_scheduler.plugins.coscheduling import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _elasticquota() -> PluginSpec:
    from koord_scheduler.plugins.elasticquota import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _deviceshare() -> PluginSpec:
    from koord_scheduler.plugins.deviceshare import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _schedulinghint() -> PluginSpec:
    from koord_scheduler.plugins.schedulinghint import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


def _defaultprebind() -> PluginSpec:
    from koord_scheduler.plugins.defaultprebind import plugin

    return PluginSpec(plugin.NAME, plugin.new, plugin.ARGS)


IN_TREE: tuple[DeferredSpec, ...] = (
    DeferredSpec(names.SCHEDULING_GATES, _schedulinggates),
    DeferredSpec(names.PRIORITY_SORT, _queuesort),
    DeferredSpec(names.NODE_UNSCHEDULABLE, _nodeunschedulable),
    DeferredSpec(names.NODE_NAME, _nodename),
    DeferredSpec(names.TAINT_TOLERATION, _tainttoleration),
    DeferredSpec(names.NODE_AFFINITY, _nodeaffinity),
    DeferredSpec(names.NODE_PORTS, _nodeports),
    DeferredSpec(names.NODE_RESOURCES_FIT, _noderesources),
    DeferredSpec(names.VOLUME_RESTRICTIONS, _volumerestrictions),
    DeferredSpec(names.NODE_VOLUME_LIMITS, _nodevolumelimits),
    DeferredSpec(names.VOLUME_BINDING, _volumebinding),
    DeferredSpec(names.VOLUME_ZONE, _volumezone),
    DeferredSpec(names.NODE_RESOURCES_BALANCED_ALLOCATION, _balancedallocation),
    DeferredSpec(names.POD_TOPOLOGY_SPREAD, _podtopologyspread),
    DeferredSpec(names.INTER_POD_AFFINITY, _interpodaffinity),
    DeferredSpec(names.DYNAMIC_RESOURCES, _dynamicresources),
    DeferredSpec(names.DEFAULT_PREEMPTION, _defaultpreemption),
    DeferredSpec(names.IMAGE_LOCALITY, _imagelocality),
    DeferredSpec(names.LOAD_AWARE_SCHEDULING, _loadaware),
    DeferredSpec(names.NODE_NUMA_RESOURCE, _nodenumaresource),
    DeferredSpec(names.DEFAULT_BINDER, _defaultbinder),
    DeferredSpec(names.RESERVATION, _reservation),
    DeferredSpec(names.COSCHEDULING, _coscheduling),
    DeferredSpec(names.ELASTIC_QUOTA, _elasticquota),
    DeferredSpec(names.DEVICE_SHARE, _deviceshare),
    DeferredSpec(names.SCHEDULING_HINT, _schedulinghint),
    DeferredSpec(names.DEFAULT_PRE_BIND, _defaultprebind),
)
"""The in-tree plugins by name, in the order ``registry.names()`` reports them."""


def in_tree_registry() -> Registry:
    """A new registry of the in-tree plugins. Nothing is registered or imported at import time.

    One typed loader per plugin (mypy checks each factory against its args model and the framework's
    :class:`~koord_scheduler.framework.handle.Handle`); the registry calls it the first time the plugin's
    spec is needed."""
    return Registry(IN_TREE)
