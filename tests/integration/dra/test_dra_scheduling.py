"""Dynamic Resource Allocation against the real control loop: kube-apiserver, kube-controller-manager's
resourceclaim controller, and koord-scheduler as a subprocess.

- A pod whose claim comes from a ResourceClaimTemplate waits for kube-controller-manager to create the
  claim, then binds; its claim is allocated (the device of the node's ResourceSlice), carries the
  scheduler's finalizer and is reserved for the pod.
- A second pod wanting the only device stays pending with upstream's reason (a pod with claims is never
  bound as if it had none), and binds once the first pod is deleted and the controller released its claim.
- A shared claim puts both of its pods on the node of its devices.
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

pytestmark = pytest.mark.integration

RESOURCE = "/apis/resource.k8s.io/v1"
FINALIZER = "resource.kubernetes.io/delete-protection"


@pytest.fixture
def scope(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[Scope]:
    control_plane.start_controller_manager()
    prefix = request.node.name.removeprefix("test_").replace("_", "-")[:24].rstrip("-")
    s = Scope.create(control_plane, prefix)
    yield s
    s.plane.request("DELETE", f"/api/v1/namespaces/{s.namespace}/pods?gracePeriodSeconds=0")
    for slice_name in s.ok("GET", f"{RESOURCE}/resourceslices")["items"]:
        if slice_name["spec"]["driver"] == driver(s):
            s.plane.request("DELETE", f"{RESOURCE}/resourceslices/{slice_name['metadata']['name']}")
    s.plane.request("DELETE", f"{RESOURCE}/deviceclasses/{driver(s)}")
    s.cleanup()


@pytest.fixture
def koord(scope: Scope, tmp_path: Path) -> Iterator[SchedulerProcess]:
    proc = SchedulerProcess.start(scope.plane, scheduler_config(scope), tmp_path)
    yield proc
    if proc.alive:
        proc.kill()


def driver(scope: Scope) -> str:
    return f"{scope.name}.gpu.example.com"


def device_class(scope: Scope) -> str:
    name = driver(scope)
    scope.ok(
        "POST",
        f"{RESOURCE}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{name}"'}}]},
        },
    )
    return name


def resource_slice(scope: Scope, node: str, devices: int) -> None:
    scope.ok(
        "POST",
        f"{RESOURCE}/resourceslices",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpus"},
            "spec": {
                "driver": driver(scope),
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(devices)],
            },
        },
    )


def claim_spec(class_name: str) -> dict[str, Any]:
    return {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class_name}}]}}


def template(scope: Scope, name: str, class_name: str) -> None:
    scope.ok(
        "POST",
        f"{RESOURCE}/namespaces/{scope.namespace}/resourceclaimtemplates",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": scope.namespace},
            "spec": {"spec": claim_spec(class_name)},
        },
    )


def claim(scope: Scope, name: str, class_name: str) -> None:
    scope.ok(
        "POST",
        f"{RESOURCE}/namespaces/{scope.namespace}/resourceclaims",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": scope.namespace},
            "spec": claim_spec(class_name),
        },
    )


def pod_with_claim(scope: Scope, name: str, *, template_name: str = "", claim_name: str = "") -> dict[str, Any]:
    body = scope.pod_body(name)
    entry = {"name": "gpu"}
    entry["resourceClaimTemplateName" if template_name else "resourceClaimName"] = template_name or claim_name
    body["spec"]["resourceClaims"] = [entry]
    body["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return body


def claims(scope: Scope) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = scope.ok("GET", f"{RESOURCE}/namespaces/{scope.namespace}/resourceclaims")["items"]
    return items


def scheduled_message(scope: Scope, pod: str) -> str:
    conditions = scope.pod(pod)["status"].get("conditions", [])
    return next((c.get("message", "") for c in conditions if c["type"] == "PodScheduled"), "")


def test_template_claim_is_allocated_reserved_and_released(scope: Scope, koord: SchedulerProcess) -> None:
    node = scope.add_node("n1")
    class_name = device_class(scope)
    resource_slice(scope, node, 1)
    template(scope, "one-gpu", class_name)

    scope.add_pods([pod_with_claim(scope, "first", template_name="one-gpu")])
    (first,) = scope.wait_all_bound(1, timeout=60)
    assert first["spec"]["nodeName"] == node
    (generated,) = claims(scope)
    assert generated["metadata"]["ownerReferences"][0]["uid"] == first["metadata"]["uid"]
    assert FINALIZER in generated["metadata"]["finalizers"]
    results = generated["status"]["allocation"]["devices"]["results"]
    assert [(r["request"], r["driver"], r["pool"], r["device"]) for r in results] == [
        ("gpu", driver(scope), node, "gpu-0")
    ]
    assert [(r["resource"], r["name"], r["uid"]) for r in generated["status"]["reservedFor"]] == [
        ("pods", "first", first["metadata"]["uid"])
    ]
    assert generated["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    ]

    # The only device is taken: the second pod is not bound as if it had no claim.
    scope.add_pods([pod_with_claim(scope, "second", template_name="one-gpu")])
    wait_until(
        lambda: "cannot allocate all claims" in scheduled_message(scope, "second"),
        timeout=60,
        what="the second pod rejected for its claim",
    )
    assert not scope.pod("second")["spec"].get("nodeName")

    # Deleting the first pod lets kube-controller-manager release its generated claim (no consumer left:
    # deallocated); the device goes to the second pod.
    scope.ok("DELETE", f"/api/v1/namespaces/{scope.namespace}/pods/first?gracePeriodSeconds=0")
    wait_until(
        lambda: bool(scope.pod("second")["spec"].get("nodeName")),
        timeout=90,
        what="the second pod bound once the device was released",
    )
    by_owner = {c["metadata"]["ownerReferences"][0]["name"]: c for c in claims(scope)}
    assert "allocation" not in by_owner.get("first", {}).get("status", {})
    second = by_owner["second"]
    assert [r["device"] for r in second["status"]["allocation"]["devices"]["results"]] == ["gpu-0"]
    assert [r["name"] for r in second["status"]["reservedFor"]] == ["second"]
    assert koord.alive


def test_shared_claim_places_both_pods_on_its_node(scope: Scope, koord: SchedulerProcess) -> None:
    nodes = [scope.add_node(f"n{i}") for i in range(3)]
    class_name = device_class(scope)
    resource_slice(scope, nodes[2], 1)
    claim(scope, "shared", class_name)

    scope.add_pods(pod_with_claim(scope, f"p{i}", claim_name="shared") for i in range(2))
    pods = scope.wait_all_bound(2, timeout=60)

    assert {p["spec"]["nodeName"] for p in pods} == {nodes[2]}
    (shared,) = claims(scope)
    assert sorted(r["name"] for r in shared["status"]["reservedFor"]) == ["p0", "p1"]
