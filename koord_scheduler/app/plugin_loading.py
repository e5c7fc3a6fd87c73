"""Assembling the plugin registry: in-tree, ``with_plugin`` options, and the entry-point group."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from pydantic import BaseModel

from koord_scheduler.framework.errors import RegistryError
from koord_scheduler.framework.registry import ENTRY_POINT_GROUP, PluginSpec, Registry, with_plugin
from koord_scheduler.plugins.registry import in_tree_registry

log = logging.getLogger(__name__)


def spec_from_object(name: str, obj: Any) -> PluginSpec:
    """Turn what an entry point names into a PluginSpec.

    Accepted: a :class:`PluginSpec`; a module (or object) with ``new`` and optional ``ARGS`` / ``NAME``;
    or a factory callable (optionally with an ``args_model`` attribute). ``name`` is the entry point's.
    """
    if isinstance(obj, PluginSpec):
        if obj.name != name:
            raise RegistryError(f"entry point {name!r} names plugin {obj.name!r}; the names must match")
        return obj
    factory = getattr(obj, "new", None)
    if callable(factory):
        args = getattr(obj, "ARGS", None)
        declared = getattr(obj, "NAME", name)
        if declared != name:
            raise RegistryError(f"entry point {name!r} names plugin {declared!r}; the names must match")
        return PluginSpec(name, factory, _args_model(name, args))
    if callable(obj):
        return PluginSpec(name, obj, _args_model(name, getattr(obj, "args_model", None)))
    raise RegistryError(f"entry point {name!r} is neither a PluginSpec, a module with new(), nor a factory")


def _args_model(name: str, model: Any) -> type[BaseModel] | None:
    if model is None:
        return None
    if isinstance(model, type) and issubclass(model, BaseModel):
        return model
    raise RegistryError(f"plugin {name!r}: args model must be a pydantic BaseModel subclass")


def entry_point_registry(eps: Iterable[EntryPoint] | None = None) -> Registry:
    """Plugins installed with pip under the entry-point group ``koord_scheduler.plugins``."""
    registry = Registry()
    for ep in eps if eps is not None else entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
        except Exception as exc:
            raise RegistryError(f"cannot load plugin entry point {ep.name!r} ({ep.value}): {exc}") from exc
        registry.add(spec_from_object(ep.name, obj))
        log.info("loaded out-of-tree plugin %s from %s", ep.name, ep.value)
    return registry


def build_registry(extra: Iterable[PluginSpec] = (), *, use_entry_points: bool = True) -> Registry:
    """in-tree + entry points + ``extra``; any duplicate name is an error."""
    registry = in_tree_registry()
    if use_entry_points:
        registry = registry.merge(entry_point_registry())
    return registry.merge(Registry(extra))


__all__ = ["ENTRY_POINT_GROUP", "build_registry", "entry_point_registry", "spec_from_object", "with_plugin"]
