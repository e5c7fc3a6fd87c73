"""An explicit plugin registry. Nothing registers itself at import time."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from koord_scheduler.framework.errors import RegistryError
from koord_scheduler.framework.handle import ExtendedHandle
from koord_scheduler.framework.interfaces import Plugin

ENTRY_POINT_GROUP = "koord_scheduler.plugins"
"""The entry-point group out-of-tree plugins are installed under (``pip install`` a package that names
``MyPlugin = "my_package.plugin"`` there, and list ``MyPlugin`` in a profile)."""

PluginFactory = Callable[[Any, ExtendedHandle], Plugin]
"""``factory(args, handle) -> plugin``. ``args`` is the validated args model instance, or None when the
plugin declares no args model. A factory may declare the narrower handle Protocol it needs
(``FrameworkHandle``); it receives the scheduler's :class:`~.handle.ExtendedHandle`."""


@dataclass(frozen=True, slots=True)
class PluginSpec:
    name: str
    factory: PluginFactory
    args_model: type[BaseModel] | None = None


class Registry:
    """Plugin name -> factory (and args model). ``merge`` refuses duplicate names."""

    def __init__(self, specs: Iterable[PluginSpec] = ()) -> None:
        self._specs: dict[str, PluginSpec] = {}
        for spec in specs:
            self.add(spec)

    def add(self, spec: PluginSpec) -> None:
        if spec.name in self._specs:
            raise RegistryError(f"a plugin named {spec.name!r} already exists")
        if not spec.name:
            raise RegistryError("a plugin name must not be empty")
        self._specs[spec.name] = spec

    def register(
        self, name: str, factory: PluginFactory, *, args_model: type[BaseModel] | None = None
    ) -> None:
        self.add(PluginSpec(name, factory, args_model))

    def merge(self, other: Registry) -> Registry:
        """A new registry holding both; a name present in both is an error."""
        merged = Registry(self._specs.values())
        for spec in other:
            merged.add(spec)
        return merged

    def get(self, name: str) -> PluginSpec:
        try:
            return self._specs[name]
        except KeyError:
            raise RegistryError(f"plugin {name!r} does not exist") from None

    def names(self) -> list[str]:
        return list(self._specs)

    def args_models(self) -> dict[str, type[BaseModel]]:
        return {n: s.args_model for n, s in self._specs.items() if s.args_model is not None}

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[PluginSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)


def with_plugin(name: str, factory: PluginFactory, *, args_model: type[BaseModel] | None = None) -> PluginSpec:
    """An out-of-tree plugin given in code: ``new_scheduler_command(with_plugin("X", new_x))``."""
    return PluginSpec(name, factory, args_model)
