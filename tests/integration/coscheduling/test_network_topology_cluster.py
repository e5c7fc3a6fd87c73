"""Network-topology-aware gangs against the real API server: the koord-scheduler binary with
``awareNetworkTopology`` places a gang by the cluster's ClusterNetworkTopology.

Every member requests 3 cpu on 4-cpu nodes, so one member fits a node. The ClusterNetworkTopology is
cluster-scoped and named ``default``: each test creates it (or makes sure it is absent) and deletes it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import REPO, SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

CRDS = [
    REPO / "deploy" / "crds" / "scheduling.sigs.k8s.io_podgroups.yaml",
    REPO / "deploy" / "crds" / "scheduling.koordinator.sh_clusternetworktopologies.yaml",
]
TOPOLOGIES = "/apis/scheduling.koordinator.sh/v1alpha1/clusternetworktopologies"
ANN = "gang.scheduling.koordinator.sh/"
SPINE_KEY = "network.topology.example.com/spine"
BLOCK_KEY = "network.topology.example.com/block"
MUST_GATHER_BLOCK = '{"gatherStrategy":[{"layer":"BlockLayer","strategy":"MustGather"}]}'


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    for crd in CRDS:
        docs = [d for d in yaml.safe_load_all(crd.read_text()) if d]
        result = control_plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", docs[0])
        assert result.status in (201, 409), result.body[:300]
    wait_until(
        lambda: control_plane.request("GET", TOPOLOGIES).status == 200,
        timeout=30,
        what="ClusterNetworkTopology CRD served",
    )
    control_plane.request("DELETE", f"{TOPOLOGIES}/default")
    s = Scope.create(control_plane, "nettopo")
    yield s
    control_plane.request("DELETE", f"{TOPOLOGIES}/default")
    s.cleanup()


@pytest.fixture
def scheduler(scope: Scope, tmp_path: Path) -> Iterator[SchedulerProcess]:
    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = {"multiPoint": {"enabled": [{"name": "Coscheduling"}]}}
    config["profiles"][0]["pluginConfig"] = [
        {"name": "Coscheduling", "args": {"awareNetworkTopology": True}},
    ]
    proc = SchedulerProcess.start(scope.plane, config, tmp_path)
    yield proc
    if proc.alive:
        proc.kill()


def create_topology(scope: Scope) -> None:
    scope.ok(
        "POST",
        TOPOLOGIES,
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "ClusterNetworkTopology",
            "metadata": {"name": "default"},
            "spec": {
                "networkTopologySpec": [
                    {
                        "topologyLayer": "SpineLayer",
                        "parentTopologyLayer": "ClusterTopologyLayer",
                        "labelKey": [SPINE_KEY],
                    },
                    {"topologyLayer": "BlockLayer", "parentTopologyLayer": "SpineLayer", "labelKey": [BLOCK_KEY]},
                    {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "BlockLayer"},
                ]
            },
        },
    )


def add_block(scope: Scope, prefix: str, block: str, count: int) -> list[str]:
    names = []
    for i in range(count):
        body = scope.node_body(f"{scope.name}-{prefix}{i}")
        body["metadata"]["labels"].update({SPINE_KEY: f"{scope.name}-s1", BLOCK_KEY: f"{scope.name}-{block}"})
        names.append(scope.add_node_body(body))
    return names


def gang(scope: Scope, count: int) -> list[dict[str, Any]]:
    notes = {ANN + "name": "g", ANN + "min-available": str(count), ANN + "network-topology-spec": MUST_GATHER_BLOCK}
    bodies = []
    for i in range(count):
        body = scope.pod_body(f"g{i}", cpu="3")
        body["metadata"]["annotations"] = dict(notes)
        bodies.append(body)
    return bodies


def bound(scope: Scope) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in scope.pods() if p["spec"].get("nodeName")}


def failed_notes(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for event in scope.events(reason="FailedScheduling"):
        out[event["regarding"]["name"]] = out.get(event["regarding"]["name"], "") + event.get("note", "")
    return out


def test_gang_lands_entirely_in_the_block_with_room_for_all(scope: Scope, scheduler: SchedulerProcess) -> None:
    create_topology(scope)
    # Block b1's nodes sort first by name and have room for 3 of the 4 members; block b2 has room for 4.
    add_block(scope, "a", "b1", 3)
    block_b2 = add_block(scope, "b", "b2", 4)
    scope.add_pods(gang(scope, 4))
    scope.wait_all_bound(4, timeout=30)
    assert sorted(bound(scope).values()) == sorted(block_b2)


def test_without_a_topology_the_gang_gets_koordinators_message(scope: Scope, scheduler: SchedulerProcess) -> None:
    add_block(scope, "b", "b2", 4)
    scope.add_pods(gang(scope, 4))
    wait_until(
        lambda: "no cluster network topology" in failed_notes(scope).get("g0", ""),
        timeout=30,
        what="the no-topology message on a member",
    )
    assert bound(scope) == {}
    # The topology appears; as in Koordinator it is no queueing event, a new node requeues the members.
    create_topology(scope)
    add_block(scope, "c", "b3", 1)
    scope.wait_all_bound(4, timeout=60)
