"""``simulate`` runs pending pods through the ClusterColocationProfile webhook before scheduling."""

from __future__ import annotations

from typing import Any

import yaml

from apis.config import KubeSchedulerConfiguration
from apis.core.quantity import parse_quantity
from koord_scheduler.app.cluster_file import parse_cluster_text
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.app.simulate import run_simulation
from koord_scheduler.webhook.offline import colocation_from_objects, file_admission

PROFILE: dict[str, Any] = {
    "apiVersion": "config.koordinator.sh/v1alpha1",
    "kind": "ClusterColocationProfile",
    "metadata": {"name": "spark-be"},
    "spec": {
        "namespaceSelector": {"matchLabels": {"colocation": "on"}},
        "selector": {"matchLabels": {"app": "spark"}},
        "qosClass": "BE",
        "priorityClassName": "koord-batch",
    },
}


def objects(*, batch_cpu: str) -> list[dict[str, Any]]:
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {
            "allocatable": {
                "cpu": "4",
                "memory": "16Gi",
                "pods": "110",
                "kubernetes.io/batch-cpu": batch_cpu,
                "kubernetes.io/batch-memory": "8Gi",
            }
        },
    }
    namespace: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "jobs", "labels": {"colocation": "on"}},
    }

    def pod(name: str, namespace: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": "spark"}},
            "spec": {
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "2", "memory": "2Gi"}}}]
            },
        }

    return [node, namespace, PROFILE, pod("spark-1", "jobs"), pod("spark-2", "default")]


def test_cluster_file_pods_are_admitted_through_the_profiles() -> None:
    parsed = parse_cluster_text(yaml.safe_dump_all(objects(batch_cpu="1")), admission=file_admission)
    assert parsed.problems == []
    by_name = {p.name: p for p in parsed.pods}
    mutated = by_name["spark-1"]
    assert mutated.labels["koordinator.sh/qosClass"] == "BE"
    assert mutated.priority == 5000
    want = {"kubernetes.io/batch-cpu": 2000, "kubernetes.io/batch-memory": parse_quantity("2Gi")}
    assert dict(mutated.requests) == want
    untouched = by_name["spark-2"]  # namespace default has no colocation label
    assert "koordinator.sh/qosClass" not in untouched.labels
    assert dict(untouched.requests)["cpu"] == 2000


async def test_simulate_schedules_the_mutated_pod_against_batch_allocatable() -> None:
    text = yaml.safe_dump_all(objects(batch_cpu="1"))  # 1 milli-core of batch-cpu: the BE pod cannot fit
    result, _ = await run_simulation(None, KubeSchedulerConfiguration(), build_registry(()), now=0.0, cluster_text=text)
    placements = {p.name: p for p in result.placements}
    assert placements["spark-1"].node is None
    assert "batch-cpu" in placements["spark-1"].message
    assert placements["spark-2"].node == "n1"
    text = yaml.safe_dump_all(objects(batch_cpu="3000"))
    result, _ = await run_simulation(None, KubeSchedulerConfiguration(), build_registry(()), now=0.0, cluster_text=text)
    assert {p.name: p.node for p in result.placements} == {"spark-1": "n1", "spark-2": "n1"}


def test_invalid_profile_in_the_file_is_a_problem_and_unused() -> None:
    bad = {**PROFILE, "metadata": {"name": "bad"}, "spec": {"probability": 150}}
    colocation = colocation_from_objects([bad])
    assert colocation.profiles == []
    assert colocation.problems == [
        ("ClusterColocationProfile bad", "ClusterColocationProfile 'bad': spec.probability: 150 is outside 0..100")
    ]
