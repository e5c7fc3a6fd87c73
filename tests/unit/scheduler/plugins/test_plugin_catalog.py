"""The plugin names, the in-tree registry, the args models and the default MultiPoint list agree.

Every table here is derived from the registry (``koord_scheduler/plugins/registry.py``); the only
hand-written facts are upstream conventions (``kind: <Plugin>Args``, Score weights only for Score plugins).
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from apis.config import IN_TREE_ARGS, decode_args
from apis.config.profile import DEFAULT_MULTIPOINT
from koord_scheduler.plugins import names
from koord_scheduler.plugins.registry import in_tree_registry
from tests.plugin_catalog import extension_points, registered

NAME_CONSTANTS = {value for key, value in vars(names).items() if key.isupper() and isinstance(value, str)}


def test_registry_names_are_unique_and_each_is_a_names_constant() -> None:
    got = in_tree_registry().names()

    assert len(got) == len(set(got))
    assert set(got) - NAME_CONSTANTS == set()


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in sorted(NAME_CONSTANTS)])
def test_every_names_constant_is_registered(name: str) -> None:
    assert name in registered()


@pytest.mark.parametrize("name", [pytest.param(p.name, id=p.name) for p in DEFAULT_MULTIPOINT])
def test_every_default_multipoint_plugin_is_registered(name: str) -> None:
    assert name in registered()


def test_default_multipoint_names_are_unique() -> None:
    got = [p.name for p in DEFAULT_MULTIPOINT]

    assert len(got) == len(set(got))


@pytest.mark.parametrize(
    "name", [pytest.param(p.name, id=p.name) for p in DEFAULT_MULTIPOINT if p.weight and p.name in registered()]
)
def test_default_score_weights_are_on_score_plugins(name: str) -> None:
    assert "score" in extension_points()[name]


def test_args_table_is_the_registry_args_table() -> None:
    assert dict(IN_TREE_ARGS) == in_tree_registry().args_models()


@pytest.mark.parametrize(
    ("name", "model"), [pytest.param(n, m, id=n) for n, m in in_tree_registry().args_models().items()]
)
def test_args_model_follows_the_kind_convention_and_defaults_decode(name: str, model: type[BaseModel]) -> None:
    assert model.__name__ == f"{name}Args"

    decoded = decode_args(name, {"kind": f"{name}Args"}, IN_TREE_ARGS)

    assert decoded == model()


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in in_tree_registry().names()])
def test_every_registered_plugin_builds_and_extends_some_point(name: str) -> None:
    assert extension_points()[name] != frozenset()


def test_exactly_one_in_tree_queue_sort() -> None:
    got = [name for name, points in extension_points().items() if "queueSort" in points]

    assert got == [names.PRIORITY_SORT]
