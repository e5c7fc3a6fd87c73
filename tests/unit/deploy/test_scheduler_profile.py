"""deploy/'s koord-scheduler profile is Koordinator's chart profile for every plugin pykoord implements,
and the chart's own configuration is refused with a message naming the plugins pykoord lacks.

The expected profile is derived from the chart (rendered from the fixture) and from what the real
``koord-scheduler simulate`` refuses in it, so neither a chart update nor a newly implemented plugin can
leave deploy/ silently behind.
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm import FIXTURES, chart_scheduler_config

from koord_scheduler.app.plugin_loading import build_registry

REPO = Path(__file__).resolve().parents[3]
CONFIGMAP = REPO / "deploy" / "koord-scheduler" / "configmap.yaml"
SCHEDULER = Path(sys.executable).parent / "koord-scheduler"
INVALID_ENTRY = re.compile(r"profiles\[0\]\.plugins\.(\w+)\.enabled\[(\d+)\]: Invalid value: \"(\w+)\"")


def simulate(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCHEDULER), "simulate", "--config", str(config), "-o", "json"],
                          capture_output=True, text=True, timeout=120, check=False)


def deployed_config() -> dict[str, Any]:
    configmap = yaml.safe_load(CONFIGMAP.read_text())
    config: dict[str, Any] = yaml.safe_load(configmap["data"]["koord-scheduler-config"])
    return config


def chart_plugin_names(config: dict[str, Any]) -> set[str]:
    plugins = config["profiles"][0]["plugins"]
    return {p["name"] for point in plugins.values() for p in point.get("enabled", [])}


REFUSED_ARG = re.compile(r"profiles\[0\]\.pluginConfig\[(\d+)\]\.args\.(\w+): Forbidden")


@pytest.fixture(scope="module")
def chart_args_refusal(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    path = tmp_path_factory.mktemp("chart-args") / "koord-scheduler-config.yaml"
    path.write_text(yaml.safe_dump(chart_scheduler_config()))
    return simulate(path)


def without_refused_args(config: dict[str, Any], refusal: str) -> dict[str, Any]:
    """The chart config less the plugin args pykoord refuses (features it does not implement)."""
    out = copy.deepcopy(config)
    for m in REFUSED_ARG.finditer(refusal):
        out["profiles"][0]["pluginConfig"][int(m.group(1))]["args"].pop(m.group(2))
    return out


@pytest.fixture(scope="module")
def chart_refusal(
    tmp_path_factory: pytest.TempPathFactory, chart_args_refusal: subprocess.CompletedProcess[str]
) -> subprocess.CompletedProcess[str]:
    path = tmp_path_factory.mktemp("chart") / "koord-scheduler-config.yaml"
    path.write_text(yaml.safe_dump(without_refused_args(chart_scheduler_config(), chart_args_refusal.stderr)))
    return simulate(path)


def test_chart_job_preemption_arg_is_refused(chart_args_refusal: subprocess.CompletedProcess[str]) -> None:
    assert chart_args_refusal.returncode == 2
    refused = {m.group(2) for m in REFUSED_ARG.finditer(chart_args_refusal.stderr)}
    assert refused == {"enablePreemption"}, chart_args_refusal.stderr


def test_chart_config_less_refused_args_loads_or_names_every_missing_plugin(
    chart_refusal: subprocess.CompletedProcess[str],
) -> None:
    """With the args pykoord refuses taken out, the chart's profile loads; while a plugin of it is not
    registered, the refusal's first line names every missing one."""
    missing = chart_plugin_names(chart_scheduler_config()) - set(build_registry(()).names())
    assert "Traceback" not in chart_refusal.stderr
    if not missing:
        assert chart_refusal.returncode == 0, chart_refusal.stderr[-2000:]
        return
    assert chart_refusal.returncode == 2, chart_refusal.stdout[-500:]
    first = chart_refusal.stderr.splitlines()[0]
    assert first.endswith(f"plugins not registered: {', '.join(sorted(missing))}"), first


def test_deployed_profile_is_the_chart_profile_cut_to_what_pykoord_implements(
    chart_refusal: subprocess.CompletedProcess[str], chart_args_refusal: subprocess.CompletedProcess[str]
) -> None:
    chart = without_refused_args(chart_scheduler_config(), chart_args_refusal.stderr)
    want_profile = copy.deepcopy(chart["profiles"][0])
    refused = {(m.group(1), int(m.group(2))) for m in INVALID_ENTRY.finditer(chart_refusal.stderr)}
    registered = set(build_registry(()).names())
    for point, entries in want_profile["plugins"].items():
        kept = [e for k, e in enumerate(entries.get("enabled", [])) if (point, k) not in refused]
        if kept:
            entries["enabled"] = kept
        else:
            entries.pop("enabled", None)
    want_profile["plugins"] = {k: v for k, v in want_profile["plugins"].items() if v}
    job_preemption_refused = "enablePreemption" in {m.group(2) for m in REFUSED_ARG.finditer(chart_args_refusal.stderr)}
    if "Coscheduling" not in registered or job_preemption_refused:
        # The chart preempts through Coscheduling's job preemption; DefaultPreemption stands in for it.
        want_profile["plugins"]["postFilter"].setdefault("enabled", []).append({"name": "DefaultPreemption"})
    want_profile["pluginConfig"] = [c for c in want_profile["pluginConfig"] if c["name"] in registered]

    got = deployed_config()
    assert got["profiles"] == [want_profile]
    assert got["leaderElection"] == chart["leaderElection"]


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
    preemptors = {"DefaultPreemption", "Coscheduling"} & set(names)
    assert preemptors, names
    assert preemptors <= registered
