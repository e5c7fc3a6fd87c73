"""The import-linter contracts name every plugin package, so a new plugin cannot slip past them."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import cast

REPO = Path(__file__).resolve().parents[3]
PLUGINS = REPO / "koord_scheduler" / "plugins"
SHARED_PACKAGES = frozenset({"storageinfo"})
"""Packages under plugins/ that hold code several plugins share (not plugins themselves)."""


def _contract(name: str) -> dict[str, object]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    found = [c for c in contracts if c["name"] == name]
    assert len(found) == 1, f"no single contract named {name!r}"
    return found[0]


def _plugin_packages() -> set[str]:
    return {
        f"koord_scheduler.plugins.{p.name}"
        for p in PLUGINS.iterdir()
        if (p / "__init__.py").is_file() and p.name not in SHARED_PACKAGES
    }


def test_independence_contract_lists_every_plugin_package() -> None:
    listed = set(cast(list[str], _contract("plugin packages are independent of each other")["modules"]))

    assert listed == _plugin_packages()


def test_scheduler_core_contract_forbids_every_plugin_package() -> None:
    contract = _contract("the scheduler core reaches plugins only through the registry")
    forbidden = cast(list[str], contract["forbidden_modules"])

    assert _plugin_packages() - set(forbidden) == set()
