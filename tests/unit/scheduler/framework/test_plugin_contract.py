"""The plugin contract is checked end to end: every in-tree plugin declares exactly the Protocols the runtime
finds on it, and mypy refuses a registry line whose factory does not fit the framework's handle.

Each plugin module states its Protocols in the return type of ``declared_capabilities(plugin)`` (mypy checks
the signatures there); the runtime finds them with ``isinstance`` (:func:`protocols_of`). A Protocol the
plugin implements but does not declare escapes mypy's signature check, and a declared one the runtime does
not find is a point the runtime never calls; both fail here.
"""

from __future__ import annotations

import sys
import textwrap
import typing
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from apis.config.plugin_args import VolumeBindingArgs
from koord_scheduler.framework.capabilities import PLUGIN_PROTOCOLS, protocols_of
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.plugins.volumebinding import plugin as volumebinding
from tests.fwtest import FakeHandle, make_snapshot
from tests.plugin_catalog import instances

REPO = Path(__file__).resolve().parents[4]


def declarations(module: ModuleType) -> dict[type, tuple[type, ...]]:
    """Plugin class -> the Protocols its module's ``declared_capabilities*`` functions return."""
    found: dict[type, tuple[type, ...]] = {}
    for name, value in vars(module).items():
        if name.startswith("declared_capabilities") and callable(value):
            hints = typing.get_type_hints(value)
            found[hints["plugin"]] = typing.get_args(hints["return"])
    return found


def names(protocols: tuple[type, ...]) -> list[str]:
    return [p.__name__ for p in protocols]


@pytest.mark.parametrize("plugin_name", in_tree_registry().names())
def test_each_plugin_declares_exactly_the_protocols_the_runtime_finds(plugin_name: str) -> None:
    plugin = instances()[plugin_name]
    module = sys.modules[in_tree_registry().get(plugin_name).factory.__module__]
    declared = declarations(module)
    assert type(plugin) in declared, f"{module.__name__} declares nothing for {type(plugin).__name__}"
    assert names(declared[type(plugin)]) == names(protocols_of(plugin))


def test_the_capacity_scoring_variant_of_volume_binding_declares_its_score_points_too() -> None:
    args = VolumeBindingArgs.model_validate(
        {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
    )
    plugin = volumebinding.new(args, FakeHandle(make_snapshot([])))
    assert type(plugin) is volumebinding.CapacityScoringVolumeBinding
    declared = declarations(volumebinding)[type(plugin)]
    assert names(declared) == names(protocols_of(plugin))
    assert "ScorePlugin" in names(declared)


def test_the_protocol_list_is_the_three_tiers_without_the_base_plugin() -> None:
    tiers = {p.__module__.rsplit(".", 1)[-1] for p in PLUGIN_PROTOCOLS}
    assert tiers == {"interfaces", "koordinator_stages", "fast_paths"}
    assert "Plugin" not in names(PLUGIN_PROTOCOLS)
    assert {"FilterPlugin", "FilterTransformer", "SignedPlugin"} <= set(names(PLUGIN_PROTOCOLS))


# ----- the registry's typed lines, checked by mypy -----

GOOD_AND_BAD = """
from __future__ import annotations

from pydantic import BaseModel

from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.registry import PluginSpec, Registry
from koord_scheduler.plugins.loadaware import plugin as loadaware
from koord_scheduler.plugins.nodeaffinity import plugin as nodeaffinity


class OtherArgs(BaseModel):
    x: int = 0


class Plain:
    name = "Plain"


def new_plain(args: None, handle: Handle) -> Plain:
    return Plain()


def new_clocked(args: None, handle: Handle) -> Plain:
    handle.clock()
    return Plain()


def new_asks_for_the_cache(args: None, handle: Handle) -> Plain:
    handle.cache.add_pod  # error: the scheduler's cache is not part of the handle
    return Plain()


class PrivateHandle:
    def only_mine(self) -> None: ...


def new_private_handle(args: None, handle: PrivateHandle) -> Plain:
    return Plain()


def new_not_a_plugin(args: None, handle: Handle) -> int:
    return 1


GOOD = Registry([
    PluginSpec(loadaware.NAME, loadaware.new, loadaware.ARGS),
    PluginSpec(nodeaffinity.NAME, nodeaffinity.new, nodeaffinity.ARGS),
    PluginSpec("Plain", new_plain),
    PluginSpec("Clocked", new_clocked, None),
])
BAD_ARGS = PluginSpec(loadaware.NAME, loadaware.new, OtherArgs)  # error
BAD_SWAPPED = PluginSpec(nodeaffinity.NAME, loadaware.new, nodeaffinity.ARGS)  # error
BAD_NO_MODEL = PluginSpec(loadaware.NAME, new_plain, loadaware.ARGS)  # error
BAD_HANDLE = PluginSpec("Private", new_private_handle)  # error
BAD_RESULT = PluginSpec("NotAPlugin", new_not_a_plugin)  # error
"""


def run_mypy(source: str, tmp_path: Path) -> list[str]:
    """mypy --strict (the project's configuration) over ``source``; the error lines, path stripped."""
    api = pytest.importorskip("mypy.api")
    snippet = tmp_path / "registry_lines.py"
    snippet.write_text(textwrap.dedent(source))
    run: Callable[[list[str]], tuple[str, str, int]] = api.run
    stdout, _, _ = run(
        [
            "--config-file",
            str(REPO / "pyproject.toml"),
            "--cache-dir",
            str(REPO / ".mypy_cache"),
            "--no-error-summary",
            str(snippet),
        ]
    )
    prefix = f"{snippet.name}:"
    return [line.split(prefix, 1)[1] for line in stdout.splitlines() if prefix in line]


@pytest.mark.slow
def test_mypy_refuses_registry_lines_whose_factory_does_not_fit(tmp_path: Path) -> None:
    """A wrong args model, a factory of another plugin, a factory asking for a model the line does not
    give, a factory with a handle of its own, a factory returning no plugin, and a factory using a member
    the handle does not have: each is a mypy error on its line, and nothing else is."""
    want_lines = [i for i, line in enumerate(GOOD_AND_BAD.splitlines(), start=1) if "# error" in line]
    errors = run_mypy(GOOD_AND_BAD, tmp_path)
    got_lines = sorted({int(e.split(":", 1)[0]) for e in errors})
    assert len(want_lines) == 6
    assert got_lines == want_lines, "\n".join(errors)
    assert any('"Handle" has no attribute "cache"' in e for e in errors), "\n".join(errors)
