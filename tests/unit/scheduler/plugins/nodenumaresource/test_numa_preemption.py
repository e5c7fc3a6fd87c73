"""Preemption of pods with bound CPUs: NodeNUMAResource's PreFilterExtensions give a victim's CPUs
back in the dry run (Koordinator ``nodenumaresource/preempt.go``), so a higher-priority LSR pod
preempts exactly the pods whose CPUs it needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from apis.config import load_scheduler_config, parse_scheduler_config
from koord_scheduler.app.simulate import SimulationResult, run_simulation
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.memory_source import MemoryCluster

REPO = Path(__file__).resolve().parents[5]
NOW = 1_800_000_000.0


async def test_lsr_pod_preempts_the_pods_holding_the_cores_it_needs() -> None:
    config = load_scheduler_config(REPO / "config/simulate/numa-scheduler-config.yaml")
    cluster_file = REPO / "config/simulate/numa-preemption-cluster.yaml"
    result, scheduler = await run_simulation(cluster_file, config, in_tree_registry(), now=NOW)
    placements = {p.name: (p.node, p.message) for p in result.placements}
    assert placements == {"lsr-big": ("numa-1", "")}
    assert result.extra_sections["Preemptions"] == [
        {"preemptor": "default/lsr-big", "node": "numa-1", "victims": ["default/lsr-c", "default/lsr-d"]}
    ]
    cluster = scheduler.source
    assert isinstance(cluster, MemoryCluster)
    assert {"default/lsr-a", "default/lsr-b"} <= set(cluster.pods)
    section = next(v for k, v in result.extra_sections.items() if k.startswith("Bound cpusets"))
    assert {row["pod"]: row["cpuset"] for row in section} == {
        "default/lsr-a": "0",
        "default/lsr-b": "1",
        "default/lsr-big": "2-3,6-7",
    }


# ----- job-level and quota preemption: the same node in cluster text -----

TOPOLOGY = json.dumps({"detail": [{"id": i, "core": i % 4, "socket": 0, "node": 0} for i in range(8)]})
FULL_PCPUS = json.dumps({"requiredCPUBindPolicy": "FullPCPUs"})
QUOTA_LABEL = {"quota.scheduling.koordinator.sh/name": "team"}


def numa_node() -> list[str]:
    """numa-1: 4 cores, 8 threads (CPU k and k+4 are siblings), one NUMA node."""
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "numa-1", "labels": {"kubernetes.io/hostname": "numa-1"}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }
    nrt = {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {"name": "numa-1", "annotations": {"node.koordinator.sh/cpu-topology": TOPOLOGY}},
        "topologyPolicies": ["None"],
        "zones": [],
    }
    return [json.dumps(node), json.dumps(nrt)]


def lsr_pod(
    name: str,
    priority: int,
    cpu: int,
    *,
    cpuset: str = "",
    created: str = "",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> str:
    """An LSR pod; bound to numa-1 holding ``cpuset`` when given, else pending and requiring whole cores."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "labels": {"koordinator.sh/qosClass": "LSR", **(labels or {})},
        "annotations": dict(annotations or {}),
    }
    if created:
        meta["creationTimestamp"] = created
    requests = {"cpu": str(cpu), "memory": "1Gi"}
    spec: dict[str, Any] = {
        "priority": priority,
        "containers": [{"name": "c", "image": "app", "resources": {"requests": requests, "limits": requests}}],
    }
    if cpuset:
        spec["nodeName"] = "numa-1"
        meta["annotations"]["scheduling.koordinator.sh/resource-status"] = json.dumps({"cpuset": cpuset})
    else:
        meta["annotations"]["scheduling.koordinator.sh/resource-spec"] = FULL_PCPUS
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


def one_cpu_on_each_core(labels: dict[str, str] | None = None) -> list[str]:
    """lsr-a..d hold CPUs 0..3, one on each core (oldest first): no core is whole."""
    return [
        lsr_pod(f"lsr-{c}", 9100, 1, cpuset=str(i), created=f"2024-01-01T00:0{i}:00Z", labels=labels)
        for i, c in enumerate("abcd")
    ]


JOB_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
      - name: NodeNUMAResource
    postFilter:
      disabled:
      - name: '*'
      enabled:
      - name: Coscheduling
  pluginConfig:
  - name: Coscheduling
    args:
      enablePreemption: true
"""


async def simulate(config: str, objects: list[str]) -> tuple[SimulationResult, MemoryCluster]:
    result, scheduler = await run_simulation(
        None, parse_scheduler_config(config), in_tree_registry(), now=NOW, cluster_text="\n---\n".join(objects)
    )
    assert isinstance(scheduler.source, MemoryCluster)
    return result, scheduler.source


async def test_lsr_gang_preempts_a_whole_core_per_member() -> None:
    """Each member needs a whole core. Put back in order, lsr-a and lsr-b leave cores 2 and 3 whole, one
    per member; lsr-c would leave one core for two members (the first member placed holds its core in
    the dry run), so lsr-c and lsr-d are the victims."""
    gang = {"gang.scheduling.koordinator.sh/name": "g", "gang.scheduling.koordinator.sh/min-available": "2"}
    objects = [*numa_node(), *one_cpu_on_each_core()]
    objects += [lsr_pod(f"g{i}", 9500, 2, annotations=gang) for i in range(2)]
    result, _ = await simulate(JOB_CONFIG, objects)
    assert {p.name: p.node for p in result.placements} == {"g0": "numa-1", "g1": "numa-1"}
    (record,) = result.extra_sections["JobPreemptions"]
    assert sorted(record["victims"]) == ["default/lsr-c", "default/lsr-d"]
    section = next(v for k, v in result.extra_sections.items() if k.startswith("Bound cpusets"))
    cpusets = {row["pod"]: row["cpuset"] for row in section}
    assert sorted([cpusets["default/g0"], cpusets["default/g1"]]) == ["2,6", "3,7"]


QUOTA_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: NodeNUMAResource
    preFilter:
      enabled:
      - name: ElasticQuota
    postFilter:
      disabled:
      - name: '*'
      enabled:
      - name: ElasticQuota
    reserve:
      enabled:
      - name: ElasticQuota
"""


async def test_quota_preemption_frees_the_cores_an_lsr_pod_needs() -> None:
    """lsr-big needs 2 whole cores; the same-quota pods are put back oldest first (as quota preemption
    orders them): lsr-a and lsr-b stay, lsr-c and lsr-d go."""
    quota = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "team", "namespace": "default"},
        "spec": {"min": {"cpu": "8", "memory": "32Gi"}, "max": {"cpu": "8", "memory": "32Gi"}},
    }
    objects = [*numa_node(), json.dumps(quota), *one_cpu_on_each_core(QUOTA_LABEL)]
    objects.append(lsr_pod("lsr-big", 9500, 4, labels=QUOTA_LABEL))
    result, cluster = await simulate(QUOTA_CONFIG, objects)
    assert {p.name: (p.node, p.message) for p in result.placements} == {"lsr-big": ("numa-1", "")}
    assert {k for k in cluster.pods if k.startswith("default/lsr-")} == {
        "default/lsr-a",
        "default/lsr-b",
        "default/lsr-big",
    }
    section = next(v for k, v in result.extra_sections.items() if k.startswith("Bound cpusets"))
    assert {row["pod"]: row["cpuset"] for row in section}["default/lsr-big"] == "2-3,6-7"
