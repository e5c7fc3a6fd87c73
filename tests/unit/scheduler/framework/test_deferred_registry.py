"""Deferred registry entries: known by name up front, loaded once on first use, checked when loaded."""

from __future__ import annotations

import pytest

from koord_scheduler.framework.errors import RegistryError
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import Plugin
from koord_scheduler.framework.registry import DeferredSpec, PluginSpec, Registry
from koord_scheduler.plugins.registry import IN_TREE, in_tree_registry


class _Named:
    def __init__(self, name: str) -> None:
        self.name = name


def _new_a(args: None, handle: Handle) -> Plugin:
    return _Named("A")


def _counting(name: str, loads: list[str]) -> DeferredSpec:
    def load() -> PluginSpec:
        loads.append(name)
        return PluginSpec(name, _new_a)

    return DeferredSpec(name, load)


def test_names_and_membership_load_nothing_and_get_loads_once() -> None:
    loads: list[str] = []
    registry = Registry([_counting("A", loads), _counting("B", loads)])
    assert registry.names() == ["A", "B"] and "A" in registry and len(registry) == 2
    assert loads == []
    assert registry.get("A").factory is _new_a
    assert registry.get("A").name == "A"
    assert loads == ["A"]
    assert registry.args_models_for(["B", "Unknown"]) == {}
    assert loads == ["A", "B"]


def test_merge_keeps_entries_deferred_and_refuses_duplicates() -> None:
    loads: list[str] = []
    merged = Registry([_counting("A", loads)]).merge(Registry([PluginSpec("C", _new_a)]))
    assert merged.names() == ["A", "C"] and loads == []
    with pytest.raises(RegistryError, match="a plugin named 'A' already exists"):
        merged.merge(Registry([PluginSpec("A", _new_a)]))


def test_a_loader_that_returns_another_name_is_refused() -> None:
    registry = Registry([DeferredSpec("A", lambda: PluginSpec("B", _new_a))])
    with pytest.raises(RegistryError, match="deferred plugin 'A' loaded a plugin named 'B'"):
        registry.get("A")
    with pytest.raises(RegistryError, match="plugin 'Z' does not exist"):
        registry.get("Z")


def test_every_in_tree_loader_returns_its_own_plugin() -> None:
    """Each deferred name matches the NAME of the package its loader imports, with the package's args model."""
    registry = in_tree_registry()
    specs = list(registry)
    assert [s.name for s in specs] == [d.name for d in IN_TREE] == registry.names()
    models = registry.args_models()
    assert models["LoadAwareScheduling"].__name__ == "LoadAwareSchedulingArgs"
    assert "DefaultBinder" not in models
