"""The deployed koord-scheduler profile places BE pods by their batch resources: NodeResourcesFit scores
``kubernetes.io/batch-cpu`` / ``batch-memory`` with the chart's weights (LeastAllocated), and fit refuses
a node whose batch allocatable is too small."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.config import load_scheduler_config
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.app.simulate import run_simulation

REPO = Path(__file__).resolve().parents[3]
CONFIGMAP = REPO / "deploy" / "koord-scheduler" / "configmap.yaml"
BATCH = ("kubernetes.io/batch-cpu", "kubernetes.io/batch-memory")


def node(name: str, batch_cpu: str, batch_memory: str) -> dict[str, Any]:
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110", BATCH[0]: batch_cpu, BATCH[1]: batch_memory}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"capacity": resources, "allocatable": resources},
    }


def be_pod(name: str, batch_cpu: str) -> dict[str, Any]:
    resources = {BATCH[0]: batch_cpu, BATCH[1]: "1Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"koordinator.sh/qosClass": "BE"}},
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "main", "image": "x", "resources": {"requests": resources, "limits": resources}}],
        },
    }


async def place(tmp_path: Path, pods: list[dict[str, Any]], *, batch_weights: bool = True) -> dict[str, str | None]:
    configmap = yaml.safe_load(CONFIGMAP.read_text())
    config = yaml.safe_load(configmap["data"]["koord-scheduler-config"])
    if not batch_weights:
        config = copy.deepcopy(config)
        for entry in config["profiles"][0]["pluginConfig"]:
            if entry["name"] == "NodeResourcesFit":
                resources = entry["args"]["scoringStrategy"]["resources"]
                entry["args"]["scoringStrategy"]["resources"] = [r for r in resources if r["name"] not in BATCH]
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(config))
    cluster = [node("little", "3000", "10Gi"), node("lots", "12000", "40Gi"), *pods]
    cluster_path = tmp_path / "cluster.yaml"
    cluster_path.write_text(yaml.safe_dump_all(cluster))
    result, _ = await run_simulation(cluster_path, load_scheduler_config(config_path), build_registry(()), now=0.0)
    assert result.problems == []
    return {p.name: p.node for p in result.placements}


async def test_be_pod_goes_where_most_batch_resources_are_free(tmp_path: Path) -> None:
    assert await place(tmp_path, [be_pod("be", "1000")]) == {"be": "lots"}


async def test_without_batch_weights_nothing_prefers_the_roomier_node(tmp_path: Path) -> None:
    """The control: the same pod with the batch resources dropped from the scoring ties, and the
    first node listed wins."""
    placed = await place(tmp_path, [be_pod("be", "1000")], batch_weights=False)
    assert placed == {"be": "little"}


@pytest.mark.parametrize("batch_cpu, want", [("3000", {"little", "lots"}), ("4000", {"lots"})])
async def test_batch_cpu_fit(tmp_path: Path, batch_cpu: str, want: set[str]) -> None:
    """Two pods: with 3000 milli-cores both nodes fit one each or more; with 4000 only ``lots`` fits."""
    placed = await place(tmp_path, [be_pod("a", batch_cpu), be_pod("b", batch_cpu)])
    assert {n for n in placed.values() if n} <= want and all(placed.values())


def test_deployed_slo_controller_config_is_the_charts() -> None:
    from helm import FIXTURES

    chart_text = (FIXTURES / "chart-v1.8.0" / "slo-controller-config.yaml").read_text()
    chart = yaml.safe_load(chart_text.replace("{{ .Values.installation.namespace }}", "koordinator-system"))
    deployed = yaml.safe_load((REPO / "deploy" / "slo-controller-config.yaml").read_text())
    # Our chart adds the standard app.kubernetes.io/* labels; Koordinator's carries none.
    assert deployed["metadata"].pop("labels")["app.kubernetes.io/part-of"] == "pykoord"
    assert deployed == chart
