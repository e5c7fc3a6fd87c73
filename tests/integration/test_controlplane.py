"""Smoke tests for the local control plane every integration test runs against."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from controlplane import REPO_ROOT, ControlPlane, HttpResult

pytestmark = pytest.mark.integration

DEFAULT_NS = "/api/v1/namespaces/default"


def pinned_versions() -> dict[str, str]:
    lines = (REPO_ROOT / "scripts" / "versions.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_until(check: Callable[[], Any], *, timeout: float = 30.0, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def ok(result: HttpResult, *, want_status: int) -> Any:
    assert result.status == want_status, result.body.decode(errors="replace")
    return result.json()


def node_body(name: str, labels: dict[str, str]) -> dict[str, Any]:
    resources = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"capacity": resources, "allocatable": resources},
    }


def pod_body(name: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [container], **spec},
    }


def condition(obj: dict[str, Any], kind: str) -> str | None:
    for cond in obj.get("status", {}).get("conditions", []):
        if cond["type"] == kind:
            status: str = cond["status"]
            return status
    return None


@pytest.fixture
def test_node(control_plane: ControlPlane) -> Any:
    """A plain (not kwok-managed) node with a unique label, deleted afterwards."""
    name = unique("node")
    node = ok(
        control_plane.request("POST", "/api/v1/nodes", node_body(name, {"pykoord-test": name})),
        want_status=201,
    )
    yield node
    control_plane.request("DELETE", f"/api/v1/nodes/{name}")


def delete_pod(control_plane: ControlPlane, name: str) -> None:
    # No kubelet confirms termination, so a graceful delete of a bound pod would hang.
    control_plane.request("DELETE", f"{DEFAULT_NS}/pods/{name}", {"gracePeriodSeconds": 0})


def test_readyz_and_version_via_kubernetes_client(control_plane: ControlPlane) -> None:
    from kubernetes import client

    with control_plane.api_client() as api:
        readyz = api.rest_client.pool_manager.request("GET", f"{api.configuration.host}/readyz")
        assert (readyz.status, readyz.data) == (200, b"ok")
        assert client.VersionApi(api).get_code().git_version == pinned_versions()["KUBERNETES_VERSION"]
        namespaces = {ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items}
    assert {"default", "kube-system", "kube-node-lease"} <= namespaces


def test_kwok_nodes_are_ready(control_plane: ControlPlane) -> None:
    nodes = ok(control_plane.request("GET", "/api/v1/nodes?labelSelector=type%3Dkwok"), want_status=200)
    got = {
        node["metadata"]["name"]: (condition(node, "Ready"), node["status"]["allocatable"]["cpu"])
        for node in nodes["items"]
    }
    want = {f"kwok-node-{i}": ("True", "4") for i in range(control_plane.kwok_nodes)}
    assert got == want


def test_bind_pod_via_binding_subresource(control_plane: ControlPlane, test_node: dict[str, Any]) -> None:
    node_name = test_node["metadata"]["name"]
    name = unique("bind")
    # A scheduler name nobody serves, so only this test binds the pod.
    pod = ok(
        control_plane.request("POST", f"{DEFAULT_NS}/pods", pod_body(name, schedulerName="nobody")),
        want_status=201,
    )
    try:
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": "default", "uid": pod["metadata"]["uid"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        # The server answers with a Status, not the Binding its OpenAPI spec promises.
        status = ok(control_plane.request("POST", f"{DEFAULT_NS}/pods/{name}/binding", binding), want_status=201)
        assert (status["kind"], status["status"]) == ("Status", "Success")

        bound = ok(control_plane.request("GET", f"{DEFAULT_NS}/pods/{name}"), want_status=200)
        assert (bound["spec"]["nodeName"], condition(bound, "PodScheduled")) == (node_name, "True")

        again = control_plane.request("POST", f"{DEFAULT_NS}/pods/{name}/binding", binding)
        assert again.status == 409
    finally:
        delete_pod(control_plane, name)


def test_service_account_token_request(control_plane: ControlPlane) -> None:
    sa = unique("sa")
    sa_path = f"{DEFAULT_NS}/serviceaccounts"
    ok(control_plane.request("POST", sa_path, {"metadata": {"name": sa}}), want_status=201)
    try:
        token_request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
        issued = ok(control_plane.request("POST", f"{sa_path}/{sa}/token", token_request), want_status=201)

        token = issued["status"]["token"]
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        whoami = ok(
            control_plane.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review, token=token),
            want_status=201,
        )
        assert whoami["status"]["userInfo"]["username"] == f"system:serviceaccount:default:{sa}"
        # Authenticated but not authorized: RBAC is really on.
        assert control_plane.request("GET", "/api/v1/nodes", token=token).status == 403
    finally:
        control_plane.request("DELETE", f"{sa_path}/{sa}")


def test_upstream_kube_scheduler_schedules_a_pod(control_plane: ControlPlane, test_node: dict[str, Any]) -> None:
    node_name = test_node["metadata"]["name"]
    name = unique("sched")
    with control_plane.start_kube_scheduler() as scheduler:
        ok(
            control_plane.request(
                "POST", f"{DEFAULT_NS}/pods", pod_body(name, nodeSelector={"pykoord-test": node_name})
            ),
            want_status=201,
        )
        try:

            def scheduled() -> dict[str, Any] | None:
                pod = ok(control_plane.request("GET", f"{DEFAULT_NS}/pods/{name}"), want_status=200)
                return pod if pod["spec"].get("nodeName") else None

            pod = wait_until(scheduled, what=f"kube-scheduler to bind {name}")
            assert (pod["spec"]["nodeName"], condition(pod, "PodScheduled")) == (node_name, "True")
            want_metric = 'scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 1'
            assert want_metric in scheduler.metrics().splitlines()
        finally:
            delete_pod(control_plane, name)


def test_restart_apiserver_keeps_state_and_port(control_plane: ControlPlane) -> None:
    name = unique("cm")
    body = {"metadata": {"name": name}, "data": {"k": "v"}}
    created = ok(control_plane.request("POST", f"{DEFAULT_NS}/configmaps", body), want_status=201)

    control_plane.stop_apiserver()
    with pytest.raises(OSError):
        control_plane.request("GET", "/readyz", timeout=2)
    control_plane.start_apiserver()

    assert control_plane.request("GET", "/readyz").status == 200
    got = ok(control_plane.request("GET", f"{DEFAULT_NS}/configmaps/{name}"), want_status=200)
    assert (got["metadata"]["uid"], got["data"]) == (created["metadata"]["uid"], {"k": "v"})

    control_plane.restart_apiserver()
    assert control_plane.request("DELETE", f"{DEFAULT_NS}/configmaps/{name}").status == 200
