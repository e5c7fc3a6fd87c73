"""An out-of-tree plugin installed with pip is picked up by the stock koord-scheduler."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
EXAMPLE = ROOT / "examples" / "koord-scheduler-example-plugin"
SCHEDULER = Path(sys.executable).parent / "koord-scheduler"


def _simulate(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCHEDULER), "simulate", "-o", "json", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def installed_plugin(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """pip-install the example into its own target directory (no pykoord rebuild or reinstall)."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(EXAMPLE),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = str(target)
    return env


@pytest.mark.slow
def test_stock_scheduler_uses_pip_installed_plugin(installed_plugin: dict[str, str]) -> None:
    result = _simulate(installed_plugin, "--config", str(EXAMPLE / "scheduler-config.yaml"))
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    nodes = {p["name"]: p["node"] for p in doc["pods"]}
    # Without the plugin, web-1 lands on node-a2 (the emptiest node); AvoidNodes filters node-a2 out.
    assert nodes["web-1"] is not None
    assert "node-a2" not in nodes.values()
    placed = {n for n in nodes.values() if n}
    assert placed, "some pods must be placed"


def test_without_the_package_the_config_is_refused_naming_the_plugin() -> None:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    result = _simulate(env, "--config", str(EXAMPLE / "scheduler-config.yaml"))
    assert result.returncode == 2
    assert "AvoidNodes" in result.stderr
    assert "Traceback" not in result.stderr


def test_default_run_places_web_1_on_node_a2() -> None:
    """The baseline the plugin test relies on."""
    result = _simulate(dict(os.environ))
    assert result.returncode == 0, result.stderr
    nodes = {p["name"]: p["node"] for p in json.loads(result.stdout)["pods"]}
    assert nodes["web-1"] == "node-a2"
