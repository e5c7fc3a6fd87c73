"""deploy/'s and config/'s koord-scheduler profile is Koordinator's chart profile, unchanged, and the
chart's own configuration runs in the real ``koord-scheduler simulate``.

The expected profile is derived from the chart (rendered from the fixture), so a chart update cannot leave
deploy/ silently behind.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from helm import FIXTURES, chart_scheduler_config

from koord_scheduler.app.plugin_loading import build_registry

REPO = Path(__file__).resolve().parents[3]
CONFIGMAP = REPO / "deploy" / "koord-scheduler" / "configmap.yaml"
SCHEDULER = Path(sys.executable).parent / "koord-scheduler"
INVALID_ENTRY = re.compile(r"profiles\[0\]\.plugins\.(\w+)\.enabled\[(\d+)\]: Invalid value: \"(\w+)\"")


def simulate(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCHEDULER), "simulate", "--config", str(config), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def deployed_config() -> dict[str, Any]:
    configmap = yaml.safe_load(CONFIGMAP.read_text())
    config: dict[str, Any] = yaml.safe_load(configmap["data"]["koord-scheduler-config"])
    return config


def chart_plugin_names(config: dict[str, Any]) -> set[str]:
    plugins = config["profiles"][0]["plugins"]
    return {p["name"] for point in plugins.values() for p in point.get("enabled", [])}


def test_chart_config_loads_unchanged(tmp_path: Path) -> None:
    """The chart's own configuration, as the chart renders it with its defaults, loads and schedules."""
    path = tmp_path / "koord-scheduler-config.yaml"
    path.write_text(yaml.safe_dump(chart_scheduler_config()))
    result = simulate(path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr


def test_deployed_profile_is_the_chart_profile_unchanged() -> None:
    chart = chart_scheduler_config()
    got = deployed_config()
    assert got["profiles"] == chart["profiles"]
    assert got["leaderElection"] == chart["leaderElection"]


def test_shipped_koordinator_config_is_the_chart_profile_unchanged() -> None:
    shipped = yaml.safe_load((REPO / "config" / "scheduler" / "koordinator.yaml").read_text())
    chart = chart_scheduler_config()
    assert shipped["profiles"] == chart["profiles"]


def test_configmap_comment_names_every_plugin_left_out() -> None:
    missing = chart_plugin_names(chart_scheduler_config()) - set(build_registry(()).names())
    comments = "\n".join(line for line in CONFIGMAP.read_text().splitlines() if line.startswith("#"))
    for name in sorted(missing):
        assert re.search(rf"^#\s+{name}\b", comments, re.MULTILINE), f"{name} is not listed as left out"


def test_deployed_config_loads_and_schedules() -> None:
    result = simulate(CONFIGMAP)
    assert result.returncode == 0, result.stderr


def test_koordinator_sample_configmap_loads_and_schedules() -> None:
    """Koordinator's sample scheduler ConfigMap (every Koordinator plugin, no job preemption) runs as is."""
    sample = FIXTURES / "samples" / "scheduler-config-configmap.yaml"
    result = simulate(sample)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr


def test_deployed_profile_preempts() -> None:
    """The chart disables every default PostFilter; the deployed profile must still preempt."""
    post_filter = deployed_config()["profiles"][0]["plugins"]["postFilter"]
    assert post_filter["disabled"] == [{"name": "*"}]
    names = [e["name"] for e in post_filter["enabled"]]
    assert names[0] == "Reservation"
    registered = set(build_registry(()).names())
    assert "Coscheduling" in names and "Coscheduling" in registered
    coscheduling = [c for c in deployed_config()["profiles"][0]["pluginConfig"] if c["name"] == "Coscheduling"]
    assert coscheduling[0]["args"]["enablePreemption"] is True
