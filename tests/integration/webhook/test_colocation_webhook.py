"""The ClusterColocationProfile webhook behind a real kube-apiserver.

The admission server runs in this process with a generated CA; a MutatingWebhookConfiguration points
at it on loopback. The profile and pod are the ones of Koordinator's colocation-profile manual, and the
pod comes out as the manual shows it (batch-cpu "1000" there is the quantity the API server writes as
"1k"). With the server stopped, pods are still admitted (failurePolicy Ignore).
"""

from __future__ import annotations

import signal
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from colocation_webhook import PROFILES_PATH, REPO, WebhookThread, install_api, register
from controlplane import ControlPlane, free_port

from apis.core.quantity import parse_quantity

pytestmark = pytest.mark.integration

NAMESPACE = "coloc-manual"
MWC = "pykoord-colocation-test"

MANUAL_PROFILE: dict[str, Any] = {
    "apiVersion": "config.koordinator.sh/v1alpha1",
    "kind": "ClusterColocationProfile",
    "metadata": {"name": "colocation-profile-example"},
    "spec": {
        "namespaceSelector": {"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
        "selector": {"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
        "qosClass": "BE",
        "priorityClassName": "koord-batch",
        "koordinatorPriority": 1000,
        "schedulerName": "koord-scheduler",
        "labels": {"koordinator.sh/mutated": "true"},
        "annotations": {"koordinator.sh/intercepted": "true"},
        "patch": {"spec": {"terminationGracePeriodSeconds": 30}},
    },
}


def manual_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"koordinator.sh/enable-colocation": "true"}},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "nginx:1.15.1",
                    "resources": {
                        "limits": {"cpu": "1", "memory": "3456Mi"},
                        "requests": {"cpu": "1", "memory": "3456Mi"},
                    },
                }
            ]
        },
    }


@pytest.fixture(scope="module")
def webhook(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookThread]:
    install_api(control_plane)
    control_plane.request(
        "POST",
        "/api/v1/namespaces",
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": NAMESPACE, "labels": {"koordinator.sh/enable-colocation": "true"}},
        },
    )
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
    [
        pytest.param(50, True, id="int"),
        pytest.param("50%", True, id="percent"),
        pytest.param(150, False, id="int-over-100"),
        pytest.param("50", False, id="string-without-percent"),
    ],
)
def test_crd_validates_probability(
    control_plane: ControlPlane, webhook: WebhookThread, probability: Any, ok: bool
) -> None:
    name = f"probability-{str(probability).replace('%', 'pct')}"
    control_plane.request("DELETE", f"{PROFILES_PATH}/{name}")
    body = {
        "apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile",
        "metadata": {"name": name},
        "spec": {"probability": probability, "selector": {"matchLabels": {"never": "matches"}}},
    }
    result = control_plane.request("POST", PROFILES_PATH, body)
    control_plane.request("DELETE", f"{PROFILES_PATH}/{name}")
    assert (result.status == 201) is ok, result.body


def test_crd_rejects_unknown_selector_operator(control_plane: ControlPlane, webhook: WebhookThread) -> None:
    body = {
        "apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile",
        "metadata": {"name": "bad-operator"},
        "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["b"]}]}},
    }
    result = control_plane.request("POST", PROFILES_PATH, body)
    assert result.status == 422, result.body


def test_webhook_down_pods_still_admitted(control_plane: ControlPlane, tmp_path: Path, webhook: WebhookThread) -> None:
    down = WebhookThread(control_plane, tmp_path)  # its port has nothing listening: never started
    register(
        control_plane,
        "pykoord-colocation-down",
        port=down.port,
        ca_pem=down.bundle.ca_pem,
        namespace=NAMESPACE,
        timeout_seconds=2,
    )
    try:
        pod = _create_pod(control_plane, "while-down")
        assert pod["metadata"]["name"] == "while-down"
    finally:
        control_plane.request(
            "DELETE", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/pykoord-colocation-down"
        )


def _events_for(plane: ControlPlane, name: str) -> list[dict[str, Any]]:
    found = plane.request("GET", "/apis/events.k8s.io/v1/namespaces/default/events").json()["items"]
    return [e for e in found if e.get("regarding", {}).get("name") == name]


def _wait_events(plane: ControlPlane, name: str, reason: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        events = [e for e in _events_for(plane, name) if e.get("reason") == reason]
        if events:
            return events
        time.sleep(0.2)
    raise AssertionError(f"no {reason} Event on ClusterColocationProfile {name}: {_events_for(plane, name)}")


def test_profile_the_schema_cannot_refuse_is_skipped_with_an_event(
    control_plane: ControlPlane, webhook: WebhookThread
) -> None:
    name = "in-without-values"
    body = {
        "apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchExpressions": [{"key": "koordinator.sh/enable-colocation", "operator": "In"}]},
            "labels": {"must-not": "appear"},
        },
    }
    control_plane.request("DELETE", f"{PROFILES_PATH}/{name}")
    assert control_plane.request("POST", PROFILES_PATH, body).status == 201
    try:
        events = _wait_events(control_plane, name, "InvalidClusterColocationProfile")
        assert "operator In needs values" in events[0]["note"]
        assert events[0]["type"] == "Warning"
        pod = _create_pod(control_plane, "after-invalid-profile")
        assert "must-not" not in pod["metadata"]["labels"]
        assert pod["metadata"]["labels"]["koordinator.sh/qosClass"] == "BE"  # the valid profile still applies
    finally:
        control_plane.request("DELETE", f"{PROFILES_PATH}/{name}")


def test_unknown_priority_class_skips_the_profile_with_an_event(
    control_plane: ControlPlane, webhook: WebhookThread
) -> None:
    name = "zz-unknown-priority-class"
    body = {
        "apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
            "priorityClassName": "no-such-class",
            "labels": {"zz": "applied"},
        },
    }
    control_plane.request("DELETE", f"{PROFILES_PATH}/{name}")
    assert control_plane.request("POST", PROFILES_PATH, body).status == 201
    try:
        deadline = time.monotonic() + 10
        assert webhook.runtime is not None
        while name not in {p.name for p in webhook.runtime.lookup.profiles()} and time.monotonic() < deadline:
            time.sleep(0.05)
        pod = _create_pod(control_plane, "unknown-priority-class")
        assert "zz" not in pod["metadata"]["labels"]
        assert pod["spec"]["priorityClassName"] == "koord-batch"  # the manual's profile still applies
        events = _wait_events(control_plane, name, "PriorityClassNotFound")
        assert "no-such-class" in events[0]["note"]
    finally:
        control_plane.request("DELETE", f"{PROFILES_PATH}/{name}")


def test_self_signed_certificate_is_stored_and_injected(control_plane: ControlPlane, webhook: WebhookThread) -> None:
    namespace, configuration = "coloc-bootstrap", "pykoord-colocation-bootstrap"
    control_plane.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    control_plane.request("DELETE", f"/api/v1/namespaces/{namespace}/secrets/koord-scheduler-webhook-certs")
    register(control_plane, configuration, port=1, ca_pem=b"", namespace="nothing-matches")
    first = WebhookThread(control_plane, None, namespace=namespace, configuration=configuration).start()
    first.stop()
    secret = control_plane.request(
        "GET", f"/api/v1/namespaces/{namespace}/secrets/koord-scheduler-webhook-certs"
    ).json()
    assert secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt"}
    mwc_path = f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{configuration}"
    mwc = control_plane.request("GET", mwc_path).json()
    assert mwc["webhooks"][0]["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    second = WebhookThread(control_plane, None, namespace=namespace, configuration=configuration).start()
    second.stop()
    again = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/secrets/koord-scheduler-webhook-certs").json()
    assert again["data"] == secret["data"], "a second replica reuses the stored certificate"
    control_plane.request("DELETE", mwc_path)


def test_the_binary_bootstraps_its_certificate_and_mutates(
    control_plane: ControlPlane, tmp_path: Path, webhook: WebhookThread
) -> None:
    """``koord-scheduler --webhook-port`` end to end: self-signed certificate, caBundle patched, pod mutated."""
    namespace, configuration = "coloc-binary", "pykoord-colocation-binary"
    control_plane.request(
        "POST",
        "/api/v1/namespaces",
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {"koordinator.sh/enable-colocation": "true"}},
        },
    )
    control_plane.request("DELETE", f"/api/v1/namespaces/{namespace}/secrets/koord-scheduler-webhook-certs")
    port = free_port()
    register(control_plane, configuration, port=port, ca_pem=b"", namespace=namespace)
    log = (tmp_path / "koord-scheduler.log").open("wb")
    process = subprocess.Popen(
        [
            str(REPO / ".venv" / "bin" / "koord-scheduler"),
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "--leader-elect=false",
            "--metrics-port",
            "0",
            "--webhook-port",
            str(port),
            "--webhook-bind-address",
            "127.0.0.1",
            "--webhook-namespace",
            namespace,
            "--webhook-configuration-name",
            configuration,
            "--webhook-cert-hosts",
            "127.0.0.1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    mwc_path = f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{configuration}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and process.poll() is None:
            mwc = control_plane.request("GET", mwc_path).json()
            if mwc["webhooks"][0]["clientConfig"].get("caBundle") and _serving(port):
                break
            time.sleep(0.2)
        assert process.poll() is None, (tmp_path / "koord-scheduler.log").read_text()[-3000:]
        # Both webhooks (the in-process one of the fixture does not see this namespace) must not matter:
        result = control_plane.request("POST", f"/api/v1/namespaces/{namespace}/pods", manual_pod("from-binary"))
        assert result.status == 201, result.body
        pod = result.json()
        assert pod["metadata"]["labels"]["koordinator.sh/qosClass"] == "BE"
        assert pod["spec"]["priorityClassName"] == "koord-batch"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            assert process.wait(20) == 0, (tmp_path / "koord-scheduler.log").read_text()[-3000:]
        finally:
            log.close()
            control_plane.request("DELETE", mwc_path)


def _serving(port: int) -> bool:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False
