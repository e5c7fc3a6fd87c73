"""VolumeBinding (minimal): claims must exist and be bound; bound volumes' node affinity restricts nodes."""

from __future__ import annotations

from typing import Any

import pytest

from apis.config import parse_scheduler_config
from apis.core.types import NodeSelectorTerm, Operator, SelectorRequirement
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.plugins.volumebinding import policy
from koord_scheduler.plugins.volumebinding.plugin import parse_claim, parse_volume
from koord_scheduler.plugins.volumebinding.policy import ClaimRecord, VolumeRecord
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from tests.builders import make_node, make_pod

ZONE_A = (NodeSelectorTerm(match_expressions=(SelectorRequirement("zone", Operator.IN, ("a",)),)),)


@pytest.mark.parametrize(
    ("claims", "volumes", "want_reason", "want_volumes"),
    [
        pytest.param({}, {}, 'persistentvolumeclaim "data" not found', (), id="claim-not-found"),
        pytest.param({"ns/data": ClaimRecord("ns", "data", "pv1", deleting=True)}, {},
                     'persistentvolumeclaim "data" is being deleted', (), id="claim-being-deleted"),
        pytest.param({"ns/data": ClaimRecord("ns", "data", "")}, {},
                     "pod has unbound immediate PersistentVolumeClaims", (), id="unbound-claim"),
        pytest.param({"ns/data": ClaimRecord("ns", "data", "pv1")}, {},
                     "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)", (),
                     id="bound-to-missing-pv"),
        pytest.param({"ns/data": ClaimRecord("ns", "data", "pv1")}, {"pv1": VolumeRecord("pv1", ZONE_A)},
                     "", (VolumeRecord("pv1", ZONE_A),), id="bound-ok"),
        pytest.param({"other/data": ClaimRecord("other", "data", "pv1")}, {"pv1": VolumeRecord("pv1")},
                     'persistentvolumeclaim "data" not found', (), id="claims-are-namespaced"),
    ],
)
def test_claims_verdict(claims: dict[str, ClaimRecord], volumes: dict[str, VolumeRecord], want_reason: str,
                        want_volumes: tuple[VolumeRecord, ...]) -> None:
    assert policy.claims_verdict("ns", ("data",), claims, volumes) == (want_reason, want_volumes)


def test_volume_node_affinity() -> None:
    assert policy.volumes_fit_node([VolumeRecord("pv1", ZONE_A)], {"zone": "a"}, "n1")
    assert not policy.volumes_fit_node([VolumeRecord("pv1", ZONE_A)], {"zone": "b"}, "n2")
    assert policy.volumes_fit_node([VolumeRecord("pv2")], {}, "n3")


def test_parsers() -> None:
    claim = {"metadata": {"name": "data", "namespace": "ns", "deletionTimestamp": "2024-01-01T00:00:00Z"},
             "spec": {"volumeName": "pv1"}}
    assert parse_claim(claim) == ClaimRecord("ns", "data", "pv1", deleting=True)
    volume = {"metadata": {"name": "pv1"}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}}
    assert parse_volume(volume) == VolumeRecord("pv1", ZONE_A)
    assert parse_volume({"metadata": {"name": "pv2"}, "spec": {}}) == VolumeRecord("pv2", None)


CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled: [{name: VolumeBinding}]
"""


def objects(claims: list[dict[str, Any]], volumes: list[dict[str, Any]]) -> dict[str, list[tuple[str, Any]]]:
    return {
        "PersistentVolumeClaim": [(f"{c['metadata']['namespace']}/{c['metadata']['name']}", c) for c in claims],
        "PersistentVolume": [(v["metadata"]["name"], v) for v in volumes],
    }


async def test_pods_with_claims_stay_pending_with_a_reason_or_follow_the_volume() -> None:
    nodes = [make_node(n).label("zone", z).capacity(cpu="4", memory="8Gi", pods=10).build()
             for n, z in (("n1", "a"), ("n2", "b"))]
    pods = [
        make_pod("plain").req(cpu="1").build(),
        make_pod("missing").req(cpu="1").pvc("nope").build(),
        make_pod("unbound").req(cpu="1").pvc("fresh").build(),
        make_pod("zonal").req(cpu="1").pvc("data").build(),
    ]
    claims = [
        {"metadata": {"name": "fresh", "namespace": "default"}, "spec": {}},
        {"metadata": {"name": "data", "namespace": "default"}, "spec": {"volumeName": "pv-b"}},
    ]
    volumes = [{"metadata": {"name": "pv-b"}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}}}]
    cluster = MemoryCluster.from_objects(nodes, pods, objects(claims, volumes))
    scheduler = build_scheduler(parse_scheduler_config(CONFIG), in_tree_registry(), cluster, clock=lambda: 1.0)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    await scheduler.run_until_idle()
    assert cluster.pods["default/plain"].node_name != ""
    assert cluster.pods["default/zonal"].node_name == "n2"
    assert cluster.pods["default/missing"].node_name == ""
    assert cluster.conditions["default/missing"][1] == (
        '0/2 nodes are available: persistentvolumeclaim "nope" not found. '
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert cluster.conditions["default/unbound"][1].startswith(
        "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    )
