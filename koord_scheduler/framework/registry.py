"""An explicit plugin registry. Nothing registers itself at import time.

A registry is built from typed lines, one :class:`PluginSpec` per plugin, the form scheduler-plugins'
``cmd/scheduler/main.go`` uses (``app.WithPlugin(name, New)``)::

    PluginSpec(loadaware.NAME, loadaware.new, loadaware.ARGS)

mypy checks each line: the factory must take the args model (or None) and a
:class:`~koord_scheduler.framework.handle.Handle`, and return a plugin. A factory whose args type is not
the line's model, one that asks its handle for a member the framework does not have, or one that returns
something without a ``name`` is a type error at that line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar, overload

from pydantic import BaseModel

from koord_scheduler.framework.errors import RegistryError
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import Plugin

ENTRY_POINT_GROUP = "koord_scheduler.plugins"
"""The entry-point group out-of-tree plugins are installed under (``pip install`` a package that names
``MyPlugin = "my_package.plugin"`` there, and list ``MyPlugin`` in a profile)."""

PluginFactory = Callable[[Any, Handle], Plugin]
"""``factory(args, handle) -> plugin``. ``args`` is the validated args model instance, or None when the
plugin declares no args model; ``handle`` is the profile's framework."""

A = TypeVar("A", bound=BaseModel)


class PluginSpec:
    """One registered plugin: its name, its factory and its args model.

    The constructor is generic in the args model (and the spec itself is not, so that a list of specs
    gives mypy no context to widen it to ``Any``): ``PluginSpec(NAME, new, ARGS)`` type-checks only when
    ``new`` accepts ``ARGS | None`` (or None, without a model) and a :class:`Handle`.
    """

    __slots__ = ("args_model", "factory", "name")

    @overload
    def __init__(self, name: str, factory: Callable[[None, Handle], Plugin], args_model: None = None) -> None: ...

    @overload
    def __init__(self, name: str, factory: Callable[[A | None, Handle], Plugin], args_model: type[A]) -> None: ...

    def __init__(self, name: str, factory: PluginFactory, args_model: type[BaseModel] | None = None) -> None:
        self.name = name
        self.factory: PluginFactory = factory
        self.args_model: type[BaseModel] | None = args_model

    def __repr__(self) -> str:
        model = self.args_model.__name__ if self.args_model is not None else None
        return f"PluginSpec({self.name!r}, {getattr(self.factory, '__qualname__', self.factory)!r}, {model})"


class DeferredSpec:
    """A plugin known by name whose :class:`PluginSpec` is built on first use.

    ``load`` imports the plugin's package and returns its typed ``PluginSpec`` line, so a plugin that no
    profile names is never imported. The spec it returns must carry ``name``."""

    __slots__ = ("load", "name")

    def __init__(self, name: str, load: Callable[[], PluginSpec]) -> None:
        self.name = name
        self.load = load

    def __repr__(self) -> str:
        return f"DeferredSpec({self.name!r})"


class Registry:
    """Plugin name -> factory (and args model). ``merge`` refuses duplicate names.

    Entries may be :class:`DeferredSpec`: their names are known up front (``names``, ``in``), their specs
    are loaded by ``get``, ``args_models_for`` and iteration, the first time each is asked for."""

    def __init__(self, specs: Iterable[PluginSpec | DeferredSpec] = ()) -> None:
        self._specs: dict[str, PluginSpec | DeferredSpec] = {}
        for spec in specs:
            self.add(spec)

    def add(self, spec: PluginSpec | DeferredSpec) -> None:
        if spec.name in self._specs:
            raise RegistryError(f"a plugin named {spec.name!r} already exists")
        if not spec.name:
            raise RegistryError("a plugin name must not be empty")
        self._specs[spec.name] = spec

    def merge(self, other: Registry) -> Registry:
        """A new registry holding both; a name present in both is an error. Deferred entries stay deferred."""
        merged = Registry(self._specs.values())
        for spec in other._specs.values():
            merged.add(spec)
        return merged

    def get(self, name: str) -> PluginSpec:
        try:
            entry = self._specs[name]
        except KeyError:
            raise RegistryError(f"plugin {name!r} does not exist") from None
        if isinstance(entry, PluginSpec):
            return entry
        spec = entry.load()
        if spec.name != name:
            raise RegistryError(f"the deferred plugin {name!r} loaded a plugin named {spec.name!r}")
        self._specs[name] = spec
        return spec

    def names(self) -> list[str]:
        return list(self._specs)

    def args_models(self) -> dict[str, type[BaseModel]]:
        """Every plugin's args model (loads every deferred plugin)."""
        return self.args_models_for(self._specs)

    def args_models_for(self, names: Iterable[str]) -> dict[str, type[BaseModel]]:
        """The args models of the registered plugins among ``names`` that have one (loads only those)."""
        models: dict[str, type[BaseModel]] = {}
        for name in names:
            if name in self._specs:
                model = self.get(name).args_model
                if model is not None:
                    models[name] = model
        return models

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[PluginSpec]:
        return iter([self.get(name) for name in list(self._specs)])

    def __len__(self) -> int:
        return len(self._specs)


@overload
def with_plugin(name: str, factory: Callable[[None, Handle], Plugin], *, args_model: None = None) -> PluginSpec: ...


@overload
def with_plugin(name: str, factory: Callable[[A | None, Handle], Plugin], *, args_model: type[A]) -> PluginSpec: ...


def with_plugin(name: str, factory: PluginFactory, *, args_model: type[BaseModel] | None = None) -> PluginSpec:
    """An out-of-tree plugin given in code: ``new_scheduler_command(with_plugin("X", new_x))``."""
    return PluginSpec(name, factory, args_model)
