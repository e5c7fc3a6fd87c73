"""The HTTP surfaces that act on the real API server, attacked as the security review did it.

- The admission webhook, over real TLS, with its lookups going to the real kube-apiserver: a forged review
  whose namespace carries a second request line (``DELETE`` of a victim pod) is denied and the victim
  lives; the API server's own review of a pod carrying a 1 MiB environment value (a 1 MiB-plus review, under the
  3 MiB limit) is still answered and mutated.
- ``koord-scheduler extender-server`` (the binary): ``/bind`` with a smuggled namespace is refused before
  any request and the victim lives; a pod of another scheduler is not bound; a served pod is. Over TLS
  with a required client certificate, a real kube-scheduler authenticates with ``tlsConfig.certFile`` and
  binds through it; a caller without a certificate is turned away.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from colocation_webhook import PROFILES_PATH, WebhookThread, install_api, register
from controlplane import ControlPlane, free_port
from kubesched import KOORD_SCHEDULER, Scope, wait_until

from koord_scheduler.webhook.certs import generate_bundle

pytestmark = pytest.mark.integration

MWC = "pykoord-hostile-http"


def smuggled(namespace: str) -> str:
    return f"{namespace}/pods/x HTTP/1.1\r\nHost: a\r\n\r\nDELETE /api/v1/namespaces/{namespace}/pods/victim"


def pending_pod(scope: Scope, name: str, *, scheduler_name: str, padding: int = 0) -> Any:
    body = scope.pod_body(name, scheduler_name=scheduler_name)
    body["metadata"]["labels"] = {"hostile-http": "true"}
    if padding:  # annotations stop at 256 KiB; an environment value makes the pod itself big
        body["spec"]["containers"][0]["env"] = [{"name": "PADDING", "value": "x" * padding}]
    return scope.ok("POST", f"/api/v1/namespaces/{scope.namespace}/pods", body)


def post(url: str, body: Any, *, context: ssl.SSLContext | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode("latin-1")


@pytest.fixture
def scope(control_plane: ControlPlane) -> Iterator[Scope]:
    s = Scope.create(control_plane, "hostile-http")
    yield s
    s.cleanup()


@pytest.fixture
def webhook(control_plane: ControlPlane, scope: Scope, tmp_path: Path) -> Iterator[WebhookThread]:
    """The admission runtime on loopback (its lookups go to the real API server), registered for pod
    CREATEs in the scope's namespace, with a profile whose namespace selector makes every review look the
    namespace up."""
    install_api(control_plane)
    profile: dict[str, Any] = {
        "apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile",
        "metadata": {"name": f"{scope.name}-profile"},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": scope.namespace}},
            "selector": {"matchLabels": {"hostile-http": "true"}},
            "labels": {"koordinator.sh/mutated": "true"},
        },
    }
    scope.ok("POST", PROFILES_PATH, profile)
    thread = WebhookThread(control_plane, tmp_path / "certs").start()
    register(control_plane, MWC, port=thread.port, ca_pem=thread.bundle.ca_pem, namespace=scope.namespace)
    try:
        wait_until(
            lambda: (
                any(p.name == profile["metadata"]["name"] for p in thread.runtime.lookup.profiles())
                if thread.runtime
                else False
            ),
            timeout=20,
            what="profile watched",
        )
        yield thread
    finally:
        thread.stop()
        control_plane.request("DELETE", f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{MWC}")
        control_plane.request("DELETE", f"{PROFILES_PATH}/{profile['metadata']['name']}")


def test_forged_review_cannot_delete_a_pod_through_the_webhook(
    scope: Scope, webhook: WebhookThread, control_plane: ControlPlane
) -> None:
    victim = pending_pod(scope, "victim", scheduler_name="nobody")  # through the webhook: admitted and mutated
    assert victim["metadata"]["labels"]["koordinator.sh/mutated"] == "true"
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "forged-1",
            "operation": "CREATE",
            "namespace": smuggled(scope.namespace),
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "object": {"metadata": {"labels": {"hostile-http": "true"}}, "spec": {"containers": []}},
        },
    }
    context = ssl.create_default_context(cadata=webhook.bundle.ca_pem.decode())
    status, answer = post(f"https://127.0.0.1:{webhook.port}/mutate-pod", review, context=context)
    still = control_plane.request("GET", f"/api/v1/namespaces/{scope.namespace}/pods/victim")
    assert still.status == 200 and still.json()["metadata"]["uid"] == victim["metadata"]["uid"], "the victim lives"
    assert status == 200
    assert answer["response"]["allowed"] is False
    assert answer["response"]["status"]["message"].startswith("request.namespace ")
    assert webhook.metric("koord_webhook_requests_refused_total", {"path": "/mutate-pod", "reason": "Denied"}) == 1


def test_a_megabyte_review_from_the_api_server_is_answered(scope: Scope, webhook: WebhookThread) -> None:
    """The API server sends the whole pod: a 1 MiB environment value makes a review over a megabyte, under
    the 3 MiB limit, and the webhook still mutates it."""
    pod = pending_pod(scope, "big", scheduler_name="nobody", padding=1024 * 1024)
    assert pod["metadata"]["labels"]["koordinator.sh/mutated"] == "true"
    assert webhook.metric("koord_webhook_requests_refused_total", {"path": "/mutate-pod", "reason": "TooLarge"}) == 0


@contextlib.contextmanager
def extender_server(scope: Scope, tmp_path: Path, *extra: str, context: ssl.SSLContext | None = None) -> Iterator[str]:
    """``koord-scheduler extender-server`` for the scope's scheduler name, on loopback (its default); its URL."""
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": f"{scope.scheduler_name}-extender"}],
    }
    path = tmp_path / "extender.yaml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    log_path = tmp_path / "extender.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [
                str(KOORD_SCHEDULER),
                "extender-server",
                "--config",
                str(path),
                "--kubeconfig",
                str(scope.plane.kubeconfig),
                "--scheduler-names",
                scope.scheduler_name,
                "--port",
                str(port),
                "-v",
                "2",
                *extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    url = f"{'https' if context else 'http'}://127.0.0.1:{port}"
    try:
        wait_until(lambda: _healthy(url, context) or process.poll() is not None, timeout=30, what="extender /healthz")
        assert process.poll() is None, log_path.read_text()[-3000:]
        yield url
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        text = log_path.read_text()
        assert "Traceback" not in text, text[-3000:]


@pytest.fixture
def extender(scope: Scope, tmp_path: Path) -> Iterator[str]:
    with extender_server(scope, tmp_path) as url:
        yield url


def _healthy(url: str, context: ssl.SSLContext | None = None) -> bool:
    """One GET /healthz on a connection closed whatever happens (a TLS handshake that times out while the
    server starts must not leave its socket to the garbage collector)."""
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    conn: http.client.HTTPConnection = (
        http.client.HTTPSConnection(host, int(port), timeout=2, context=context)
        if url.startswith("https")
        else http.client.HTTPConnection(host, int(port), timeout=2)
    )
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def test_extender_bind_refuses_smuggling_and_other_schedulers_pods(scope: Scope, extender: str) -> None:
    node = scope.add_node("n")
    victim = pending_pod(scope, "victim", scheduler_name=scope.scheduler_name)
    theirs = pending_pod(scope, "theirs", scheduler_name="someone-else")
    status, answer = post(
        f"{extender}/bind", {"PodName": "x", "PodNamespace": smuggled(scope.namespace), "PodUID": "", "Node": node}
    )
    assert status == 200
    assert answer["Error"].startswith("bad ExtenderBindingArgs: PodNamespace ")
    status, answer = post(
        f"{extender}/bind",
        {"PodName": "theirs", "PodNamespace": scope.namespace, "PodUID": theirs["metadata"]["uid"], "Node": node},
    )
    assert "its schedulerName is 'someone-else'" in answer["Error"]
    assert scope.pod("theirs")["spec"].get("nodeName") is None
    assert scope.pod("victim")["metadata"]["uid"] == victim["metadata"]["uid"], "the victim pod is still there"
    status, answer = post(
        f"{extender}/bind",
        {"PodName": "victim", "PodNamespace": scope.namespace, "PodUID": victim["metadata"]["uid"], "Node": node},
    )
    assert (status, answer) == (200, {"Error": ""})
    assert scope.pod("victim")["spec"]["nodeName"] == node


def test_kube_scheduler_authenticates_with_its_client_certificate(scope: Scope, tmp_path: Path) -> None:
    """What kube-scheduler's extender client can send is a client certificate (tlsConfig.certFile/keyFile):
    the extender requires one, a real kube-scheduler presents it and binds a pod through /bind, and a caller
    without one is turned away at the TLS handshake."""
    serving, clients = generate_bundle(["127.0.0.1"]), generate_bundle(["kube-scheduler"], client=True)
    files = {
        "tls.crt": serving.cert_pem,
        "tls.key": serving.key_pem,
        "ca.crt": serving.ca_pem,
        "client-ca.crt": clients.ca_pem,
        "client.crt": clients.cert_pem,
        "client.key": clients.key_pem,
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    server_ca = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    with_cert = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    with_cert.load_cert_chain(tmp_path / "client.crt", tmp_path / "client.key")
    node = scope.add_node("n")
    with extender_server(
        scope,
        tmp_path,
        "--tls-cert-file",
        str(tmp_path / "tls.crt"),
        "--tls-private-key-file",
        str(tmp_path / "tls.key"),
        "--client-ca-file",
        str(tmp_path / "client-ca.crt"),
        context=with_cert,
    ) as url:
        # Refused in the handshake; with TLS 1.3 the client may only see it when it reads (a reset, an SSL alert).
        with pytest.raises(OSError):
            post(f"{url}/bind", {"PodName": "x", "PodNamespace": scope.namespace, "Node": node}, context=server_ca)
        config = {
            "profiles": [{"schedulerName": scope.scheduler_name}],
            "extenders": [
                {
                    "urlPrefix": url,
                    "filterVerb": "filter",
                    "bindVerb": "bind",
                    "nodeCacheCapable": True,
                    "enableHTTPS": True,
                    "httpTimeout": "5s",
                    "tlsConfig": {
                        "caFile": str(tmp_path / "ca.crt"),
                        "certFile": str(tmp_path / "client.crt"),
                        "keyFile": str(tmp_path / "client.key"),
                    },
                }
            ],
        }
        with scope.plane.start_kube_scheduler(config, name=f"ext-tls-{scope.name}") as kube_scheduler:
            pending_pod(scope, "through-the-extender", scheduler_name=scope.scheduler_name)
            try:
                scope.wait_all_bound(1, timeout=60)
            except AssertionError:
                print(kube_scheduler.log_tail())
                raise
    assert scope.pod("through-the-extender")["spec"]["nodeName"] == node
