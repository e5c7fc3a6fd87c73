"""The ClusterColocationProfile webhook behind a real kube-apiserver.

The admission server runs in this process with a generated CA; a MutatingWebhookConfiguration points
at it on loopback. The profile and pod are the ones of Koordinator's colocation-profile manual, and the
pod comes out as the manual shows it (batch-cpu "1000" there is the quantity the API server writes as
"1k"). With the server stopped, pods are still admitted (failurePolicy Ignore).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from colocation_webhook import PROFILES_PATH, WebhookThread, install_api, register
from controlplane import ControlPlane

from apis.core.quantity import parse_quantity

pytestmark = pytest.mark.integration

NAMESPACE = "coloc-manual"
MWC = "pykoord-colocation-test"

MANUAL_PROFILE = {
    "apiVersion": "config.koordinator.sh/v1alpha1", "kind": "ClusterColocationProfile",
    "metadata": {"name": "colocation-profile-example"},
    "spec": {
        "namespaceSelector": {"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
        "selector": {"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
        "qosClass": "BE", "priorityClassName": "koord-batch", "koordinatorPriority": 1000,
        "schedulerName": "koord-scheduler",
        "labels": {"koordinator.sh/mutated": "true"},
        "annotations": {"koordinator.sh/intercepted": "true"},
        "patch": {"spec": {"terminationGracePeriodSeconds": 30}},
    },
}


def manual_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"koordinator.sh/enable-colocation": "true"}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.15.1", "resources": {
            "limits": {"cpu": "1", "memory": "3456Mi"}, "requests": {"cpu": "1", "memory": "3456Mi"}}}]},
    }


@pytest.fixture(scope="module")
def webhook(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookThread]:
    install_api(control_plane)
    control_plane.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": NAMESPACE, "labels": {"koordinator.sh/enable-colocation": "true"}}})
    control_plane.request("DELETE", f"{PROFILES_PATH}/{MANUAL_PROFILE['metadata']['name']}")
    created = control_plane.request("POST", PROFILES_PATH, MANUAL_PROFILE)
    assert created.status == 201, created.body
    thread = WebhookThread(control_plane, tmp_path_factory.mktemp("webhook-certs")).start()
    register(control_plane, MWC, port=thread.port, ca_pem=thread.bundle.ca_pem, namespace=NAMESPACE)
    try:
        yield thread
    finally:
        thread.stop()
        control_plane.request("DELETE", f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{MWC}")


def _create_pod(plane: ControlPlane, name: str) -> dict[str, Any]:
    plane.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}?gracePeriodSeconds=0")
    result = plane.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", manual_pod(name))
    assert result.status == 201, result.body
    pod: dict[str, Any] = result.json()
    return pod


def _wait_profile_seen(webhook: WebhookThread) -> None:
    deadline = time.monotonic() + 10
    assert webhook.runtime is not None
    while not webhook.runtime.lookup.profiles() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_manual_profile_mutates_the_manual_pod(control_plane: ControlPlane, webhook: WebhookThread) -> None:
    _wait_profile_seen(webhook)
    pod = _create_pod(control_plane, "test-pod")
    labels, annotations, spec = pod["metadata"]["labels"], pod["metadata"]["annotations"], pod["spec"]
    assert labels["koordinator.sh/qosClass"] == "BE"
    assert labels["koordinator.sh/priority"] == "1000"
    assert labels["koordinator.sh/mutated"] == "true"
    assert annotations["koordinator.sh/intercepted"] == "true"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["priority"] == 5000
    assert spec["priorityClassName"] == "koord-batch"
    assert spec["preemptionPolicy"] == "PreemptLowerPriority"
    assert spec["schedulerName"] == "koord-scheduler"
    resources = spec["containers"][0]["resources"]
    for section in ("limits", "requests"):
        got = {k: parse_quantity(v) for k, v in resources[section].items()}
        assert got == {"kubernetes.io/batch-cpu": 1000, "kubernetes.io/batch-memory": parse_quantity("3456Mi")}
    assert annotations["node.koordinator.sh/extended-resource-spec"] == (
        '{"containers":{"app":{"limits":{"kubernetes.io/batch-cpu":"1k","kubernetes.io/batch-memory":"3456Mi"},'
        '"requests":{"kubernetes.io/batch-cpu":"1k","kubernetes.io/batch-memory":"3456Mi"}}}}'
    )
    assert webhook.metric("koord_webhook_pods_mutated_total") >= 1


def test_pod_not_selected_is_left_as_written(control_plane: ControlPlane, webhook: WebhookThread) -> None:
    _wait_profile_seen(webhook)
    body = manual_pod("not-selected")
    body["metadata"]["labels"] = {"app": "web"}
    control_plane.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/not-selected?gracePeriodSeconds=0")
    result = control_plane.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body)
    assert result.status == 201, result.body
    pod = result.json()
    assert "koordinator.sh/qosClass" not in pod["metadata"]["labels"]
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "3456Mi"}


@pytest.mark.parametrize(
    ("probability", "ok"),
    [pytest.param(50, True, id="int"), pytest.param("50%", True, id="percent"),
     pytest.param(150, False, id="int-over-100"), pytest.param("50", False, id="string-without-percent")],
)
def test_crd_validates_probability(control_plane: ControlPlane, webhook: WebhookThread, probability: Any,
                                   ok: bool) -> None:
    name = f"probability-{str(probability).replace('%', 'pct')}"
    control_plane.request("DELETE", f"{PROFILES_PATH}/{name}")
    body = {"apiVersion": "config.koordinator.sh/v1alpha1", "kind": "ClusterColocationProfile",
            "metadata": {"name": name}, "spec": {"probability": probability,
                                                 "selector": {"matchLabels": {"never": "matches"}}}}
    result = control_plane.request("POST", PROFILES_PATH, body)
    control_plane.request("DELETE", f"{PROFILES_PATH}/{name}")
    assert (result.status == 201) is ok, result.body


def test_crd_rejects_unknown_selector_operator(control_plane: ControlPlane, webhook: WebhookThread) -> None:
    body = {"apiVersion": "config.koordinator.sh/v1alpha1", "kind": "ClusterColocationProfile",
            "metadata": {"name": "bad-operator"},
            "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["b"]}]}}}
    result = control_plane.request("POST", PROFILES_PATH, body)
    assert result.status == 422, result.body


def test_webhook_down_pods_still_admitted(control_plane: ControlPlane, tmp_path: Path,
                                          webhook: WebhookThread) -> None:
    down = WebhookThread(control_plane, tmp_path)  # its port has nothing listening: never started
    register(control_plane, "pykoord-colocation-down", port=down.port, ca_pem=down.bundle.ca_pem,
             namespace=NAMESPACE, timeout_seconds=2)
    try:
        pod = _create_pod(control_plane, "while-down")
        assert pod["metadata"]["name"] == "while-down"
    finally:
        control_plane.request(
            "DELETE", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/pykoord-colocation-down")
