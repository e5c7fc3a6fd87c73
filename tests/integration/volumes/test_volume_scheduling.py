"""Volume scheduling against the real control loop: kube-apiserver, kube-controller-manager's
PersistentVolume controller and a test provisioner, with koord-scheduler as a subprocess.

- StatefulSet-shaped pods with WaitForFirstConsumer claims are scheduled, and their volumes
  provisioned on the chosen nodes;
- static local volumes with node affinity pin their pods, and two pods never bind one volume;
- a class that allows no topology of the nodes leaves the pod unschedulable with upstream's message;
- a zone-labelled volume keeps its pod in the zone;
- a node at its CSI attach limit is filtered.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from controlplane import ControlPlane

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until
from provisioner import TestProvisioner

pytestmark = pytest.mark.integration

DRIVER = "csi.pykoord.test"


@pytest.fixture
def scope(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[Scope]:
    control_plane.start_controller_manager()
    prefix = request.node.name.removeprefix("test_").replace("_", "-")[:24].rstrip("-")
    s = Scope.create(control_plane, prefix)
    yield s
    s.ok("DELETE", f"/api/v1/namespaces/{s.namespace}/persistentvolumeclaims")
    s.cleanup()


@pytest.fixture
def koord(scope: Scope, tmp_path: Path) -> Iterator[SchedulerProcess]:
    proc = SchedulerProcess.start(scope.plane, scheduler_config(scope), tmp_path)
    yield proc
    if proc.alive:
        proc.kill()


def storage_class(
    scope: Scope,
    name: str,
    *,
    provisioner: str = DRIVER,
    mode: str = "WaitForFirstConsumer",
    topologies: list[dict[str, list[str]]] | None = None,
) -> str:
    full = f"{scope.name}-{name}"
    body: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": full},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }
    if topologies:
        body["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": k, "values": v} for k, v in t.items()]} for t in topologies
        ]
    scope.ok("POST", "/apis/storage.k8s.io/v1/storageclasses", body)
    return full


def claim(scope: Scope, name: str, class_name: str, *, size: str = "1Gi") -> None:
    scope.ok(
        "POST",
        f"/api/v1/namespaces/{scope.namespace}/persistentvolumeclaims",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": scope.namespace},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": class_name,
                "resources": {"requests": {"storage": size}},
            },
        },
    )


def volume(
    scope: Scope,
    name: str,
    class_name: str,
    *,
    node: str | None = None,
    labels: dict[str, str] | None = None,
    csi: bool = False,
) -> str:
    full = f"{scope.name}-{name}"
    spec: dict[str, Any] = {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": class_name,
        "persistentVolumeReclaimPolicy": "Retain",
    }
    if csi:
        spec["csi"] = {"driver": DRIVER, "volumeHandle": full}
    else:
        spec["local"] = {"path": f"/mnt/{name}"}
    if node is not None:
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
                ]
            }
        }
    scope.ok(
        "POST",
        "/api/v1/persistentvolumes",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": full, "labels": labels or {}},
            "spec": spec,
        },
    )
    return full


def pod_with_claims(scope: Scope, name: str, *claims: str) -> dict[str, Any]:
    body = scope.pod_body(name)
    body["spec"]["volumes"] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return body


def claim_of(scope: Scope, name: str) -> dict[str, Any]:
    return scope.ok("GET", f"/api/v1/namespaces/{scope.namespace}/persistentvolumeclaims/{name}")  # type: ignore[no-any-return]


def scheduled_message(scope: Scope, pod: str) -> str:
    conditions = scope.pod(pod)["status"].get("conditions", [])
    return next((c.get("message", "") for c in conditions if c["type"] == "PodScheduled"), "")


def test_statefulset_claims_are_provisioned_on_the_chosen_nodes(scope: Scope, koord: SchedulerProcess) -> None:
    nodes = [scope.add_node(f"n{i}") for i in range(3)]
    sc = storage_class(scope, "wffc")
    with TestProvisioner(scope.plane, DRIVER) as provisioner:
        for i in range(4):
            claim(scope, f"data-web-{i}", sc)
        scope.add_pods(pod_with_claims(scope, f"web-{i}", f"data-web-{i}") for i in range(4))
        # kube-controller-manager's PV binder closes each claim; on the shared cluster late in a full run it
        # has taken over 90 s for the four (the binds wait in PreBind for it, as kube-scheduler's do).
        pods = scope.wait_all_bound(4, timeout=240)
        assert not provisioner.errors
    for pod in pods:
        name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
        assert node in nodes
        bound = claim_of(scope, f"data-{name}")
        assert bound["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node
        assert bound["status"]["phase"] == "Bound"
        pv = scope.ok("GET", f"/api/v1/persistentvolumes/{bound['spec']['volumeName']}")
        values = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
        assert values == [node]


def test_static_local_volumes_pin_pods_and_are_never_shared(scope: Scope, koord: SchedulerProcess) -> None:
    nodes = [scope.add_node(f"n{i}") for i in range(3)]
    sc = storage_class(scope, "local", provisioner="kubernetes.io/no-provisioner")
    pvs = {volume(scope, f"local-{i}", sc, node=nodes[i]): nodes[i] for i in (1, 2)}
    for i in range(3):
        claim(scope, f"data-{i}", sc)
    scope.add_pods(pod_with_claims(scope, f"db-{i}", f"data-{i}") for i in range(3))
    pods = scope.wait_all_bound(2, timeout=90)
    placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
    assert sorted(n for n in placed.values() if n) == sorted(pvs.values())
    for name, node in placed.items():
        if not node:
            continue
        bound = claim_of(scope, f"data-{name.removeprefix('db-')}")
        wait_until(
            lambda b=bound: bool(claim_of(scope, b["metadata"]["name"])["spec"].get("volumeName")),
            timeout=30,
            what="claim bound",
        )
        assert pvs[claim_of(scope, bound["metadata"]["name"])["spec"]["volumeName"]] == node
    waiting = next(name for name, node in placed.items() if not node)
    wait_until(
        lambda: "didn't find available persistent volumes to bind" in scheduled_message(scope, waiting),
        timeout=30,
        what="the third pod reported unschedulable",
    )
    assert scheduled_message(scope, waiting).startswith("0/")


def test_class_allowing_no_topology_leaves_the_pod_unschedulable(scope: Scope, koord: SchedulerProcess) -> None:
    scope.add_node("n0")
    sc = storage_class(scope, "nowhere", topologies=[{"kubernetes.io/hostname": ["no-such-node"]}])
    claim(scope, "data", sc)
    scope.add_pods([pod_with_claims(scope, "web", "data")])
    wait_until(lambda: bool(scheduled_message(scope, "web")), timeout=30, what="PodScheduled condition")
    message = scheduled_message(scope, "web")
    assert "node(s) didn't find available persistent volumes to bind" in message
    assert not scope.pod("web")["spec"].get("nodeName")


def test_zone_labelled_volume_keeps_its_pod_in_the_zone(scope: Scope, koord: SchedulerProcess) -> None:
    for zone in ("a", "b", "c"):
        body = scope.node_body(f"{scope.name}-{zone}")
        body["metadata"]["labels"]["topology.kubernetes.io/zone"] = zone
        scope.add_node_body(body)
    sc = storage_class(scope, "zonal", provisioner="kubernetes.io/no-provisioner", mode="Immediate")
    pv = volume(scope, "zonal", sc, labels={"topology.kubernetes.io/zone": "b"}, csi=True)
    claim(scope, "data", sc)
    wait_until(
        lambda: claim_of(scope, "data")["spec"].get("volumeName") == pv,
        timeout=30,
        what="the PV controller binding the Immediate claim",
    )
    # The filler makes zone b's node the worst by score: only the volume's zone sends the pod there.
    filler = scope.pod_body("filler", cpu="3", memory="6Gi")
    filler["spec"]["nodeName"] = f"{scope.name}-b"
    scope.add_pods([filler, pod_with_claims(scope, "web", "data")])
    wait_until(lambda: bool(scope.pod("web")["spec"].get("nodeName")), timeout=60, what="web bound")
    assert scope.pod("web")["spec"]["nodeName"] == f"{scope.name}-b"


def test_node_at_its_csi_attach_limit_is_filtered(scope: Scope, koord: SchedulerProcess) -> None:
    full = scope.add_node("full")
    free = scope.add_node("free")
    for node, count in ((full, 1), (free, 5)):
        scope.ok(
            "POST",
            "/apis/storage.k8s.io/v1/csinodes",
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSINode",
                "metadata": {"name": node},
                "spec": {"drivers": [{"name": DRIVER, "nodeID": node, "allocatable": {"count": count}}]},
            },
        )
    sc = storage_class(scope, "csi", provisioner="kubernetes.io/no-provisioner", mode="Immediate")
    for i in range(2):
        pv = volume(scope, f"csi-{i}", sc, csi=True)
        claim(scope, f"data-{i}", sc)
        wait_until(
            lambda i=i, pv=pv: claim_of(scope, f"data-{i}")["spec"].get("volumeName") == pv,
            timeout=30,
            what="claim bound",
        )
    # The holder uses the one attachment "full" allows; the filler makes "free" the worse node by score.
    holder = scope.pod_body("holder")
    holder["spec"]["nodeName"] = full
    holder["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "data-0"}}]
    filler = scope.pod_body("filler", cpu="3", memory="6Gi")
    filler["spec"]["nodeName"] = free
    scope.add_pods([holder, filler])
    scope.add_pods([pod_with_claims(scope, "web", "data-1")])
    wait_until(lambda: bool(scope.pod("web")["spec"].get("nodeName")), timeout=60, what="web bound")
    assert scope.pod("web")["spec"]["nodeName"] == free
    for node in (full, free):
        scope.plane.request("DELETE", f"/apis/storage.k8s.io/v1/csinodes/{node}")
