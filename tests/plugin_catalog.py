"""What the in-tree plugins really are, derived from the registry instead of kept as a second list.

``instances()`` builds every in-tree plugin through the real factories (one profile that enables them all
at ``multiPoint``); ``extension_points()`` asks the framework's own ``implements`` which points each extends.
Tests of the profile algebra use it as their ``implements`` so they cannot drift from the plugins.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

from apis.config import parse_scheduler_config
from apis.config.profile import DEFAULT_MULTIPOINT, EXTENSION_POINTS
from koord_scheduler.framework.interfaces import Plugin, implements
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster

ALL_PLUGINS_PROFILE = "all-in-tree-plugins"


@cache
def instances() -> Mapping[str, Plugin]:
    """Registered plugin name -> the plugin its factory built (default args) in one profile enabling all."""
    registry = in_tree_registry()
    defaults = {p.name for p in DEFAULT_MULTIPOINT}
    extra = [{"name": name} for name in registry.names() if name not in defaults]
    config = parse_scheduler_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": ALL_PLUGINS_PROFILE, "plugins": {"multiPoint": {"enabled": extra}}}],
        }
    )
    scheduler = build_scheduler(config, registry, MemoryCluster.from_objects([], []), clock=lambda: 1.0)
    return scheduler.profiles[ALL_PLUGINS_PROFILE].plugins


@cache
def extension_points() -> Mapping[str, frozenset[str]]:
    """Registered plugin name -> the extension points (configuration names) its instance implements."""
    built = instances()
    return {
        name: frozenset(point for point in EXTENSION_POINTS if implements(built[name], point))
        for name in in_tree_registry().names()
        if name in built
    }


def registered() -> frozenset[str]:
    return frozenset(in_tree_registry().names())
