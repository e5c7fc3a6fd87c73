"""``simulate`` on config/simulate/topology-cluster.yaml with the default profile gives the placements
kube-scheduler gives (derivations in the file's comments)."""

from __future__ import annotations

from pathlib import Path

from apis.config import parse_scheduler_config
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.app.simulate import run_simulation

REPO = Path(__file__).resolve().parents[5]
CLUSTER = REPO / "config" / "simulate" / "topology-cluster.yaml"
DEFAULT = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


async def test_topology_cluster_placements() -> None:
    config = parse_scheduler_config(DEFAULT, source="test")
    result, _ = await run_simulation(CLUSTER, config, build_registry(use_entry_points=False), now=1_700_000_000.0)
    got = {p.name: p.node for p in result.placements}
    assert got == {
        "web-1": "c1",  # only zone-c keeps the web skew at 1
        "web-2": "b2",  # zone-a fails the spread; b1/c1 run web (hostname anti-affinity)
        "batch-1": "c1",  # needs web on the host; db-0 repels zone-b, own anti-affinity repels zone-a
        "api-1": "c1",  # soft zone spread: zone-c has no api pod
        "cache-1": "b2",  # preferred affinity to db on the same host
        "web-pinned": None,
    }
    pinned = next(p for p in result.placements if p.name == "web-pinned")
    assert pinned.message.startswith(
        "0/6 nodes are available: 2 node(s) didn't match pod topology spread constraints, "
        "4 node(s) didn't match Pod's node affinity/selector."
    )


async def test_workloads_cluster_uses_namespaces_and_services() -> None:
    """config/simulate/workloads-cluster.yaml: the Service gives web-2 the default spread; the Namespace
    labels decide which cache pod the namespaceSelector selects. Without those documents both differ."""
    config = parse_scheduler_config(DEFAULT, source="test")
    registry = build_registry(use_entry_points=False)
    path = REPO / "config" / "simulate" / "workloads-cluster.yaml"
    result, _ = await run_simulation(path, config, registry, now=1_700_000_000.0)
    assert {p.name: p.node for p in result.placements} == {"web-2": "b1", "near-shop-cache": "a2"}
    assert result.problems == []

    text = path.read_text()
    stripped = "\n".join(
        line for line in text.splitlines() if "kind: Service" not in line and "kind: Namespace" not in line
    )
    result, _ = await run_simulation(None, config, registry, now=1_700_000_000.0, cluster_text=stripped)
    got = {p.name: p.node for p in result.placements}
    assert got == {"web-2": "a1", "near-shop-cache": None}
