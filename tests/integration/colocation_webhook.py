"""The colocation admission server run in-process against a test control plane (tests and bench).

:class:`WebhookThread` runs :class:`~koord_scheduler.webhook.options.WebhookRuntime` on its own event loop
in a thread (the tests' HTTP calls are blocking), with a generated CA and a certificate for 127.0.0.1.
:func:`register` points a MutatingWebhookConfiguration at it on loopback, :func:`register_quota_webhook` a
ValidatingWebhookConfiguration for ElasticQuotas.
"""

from __future__ import annotations

import asyncio
import base64
import threading
import time
from pathlib import Path
from typing import Any

import yaml
from controlplane import ControlPlane, free_port
from prometheus_client import CollectorRegistry

from koord_scheduler.webhook.certs import CertBundle, generate_bundle, write_bundle
from koord_scheduler.webhook.gates import AdmissionGates
from koord_scheduler.webhook.options import WebhookOptions, WebhookRuntime
from kubeapi import load_connection

REPO = Path(__file__).resolve().parents[2]
CRD = REPO / "deploy" / "crds" / "config.koordinator.sh_clustercolocationprofiles.yaml"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
MWC_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
PROFILES_PATH = "/apis/config.koordinator.sh/v1alpha1/clustercolocationprofiles"


def _ok(result: Any, what: str, *, allow: tuple[int, ...] = ()) -> Any:
    if result.status >= 300 and result.status not in allow:
        raise AssertionError(f"{what}: {result.status} {result.body[:500]!r}")
    return result


def install_api(plane: ControlPlane) -> None:
    """The ClusterColocationProfile CRD (established) and Koordinator's PriorityClasses."""
    crd = yaml.safe_load(CRD.read_text())
    _ok(plane.request("POST", CRD_PATH, crd), "create CRD", allow=(409,))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = plane.request("GET", f"{CRD_PATH}/{crd['metadata']['name']}").json()
        conditions = {c["type"]: c["status"] for c in got.get("status", {}).get("conditions", [])}
        if conditions.get("Established") == "True":
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the ClusterColocationProfile CRD did not become Established")
    for pc in yaml.safe_load_all((REPO / "deploy" / "priorityclasses.yaml").read_text()):
        _ok(
            plane.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", pc),
            "create PriorityClass",
            allow=(409,),
        )
    # Wait until the API serves the new kind (discovery lags the Established condition a little).
    while plane.request("GET", PROFILES_PATH).status != 200:
        time.sleep(0.2)


class WebhookThread:
    """The admission server on 127.0.0.1:port with a fresh CA; ``ca_pem`` is for the webhook config."""

    def __init__(
        self,
        plane: ControlPlane,
        cert_dir: Path | None,
        *,
        port: int | None = None,
        namespace: str = "koordinator-system",
        configuration: str = "",
        gates: AdmissionGates | None = None,
    ) -> None:
        """``cert_dir`` None: the self-signed bootstrap (Secret in ``namespace``, CA into ``configuration``).
        ``gates``: the webhooks' feature gates (Koordinator's defaults when None)."""
        self.plane = plane
        self.port = port or free_port()
        self.bundle: CertBundle = generate_bundle(["127.0.0.1"])
        if cert_dir is not None:
            write_bundle(self.bundle, cert_dir)
        self.options = WebhookOptions(
            port=self.port,
            bind_address="127.0.0.1",
            cert_dir=str(cert_dir) if cert_dir is not None else "",
            namespace=namespace,
            configuration_name=configuration or "unused",
            gates=gates or AdmissionGates(),
        )
        self.registry = CollectorRegistry()
        self.runtime: WebhookRuntime | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="colocation-webhook", daemon=True)

    def start(self) -> WebhookThread:
        self._thread.start()
        if not self._ready.wait(30) or self._error is not None:
            raise AssertionError(f"the webhook did not start: {self._error!r}")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self.runtime = WebhookRuntime(self.options, load_connection(str(self.plane.kubeconfig)), self.registry)
        try:
            await self.runtime.start()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            await self.runtime.stop()
            return
        self._ready.set()
        await self._stop.wait()
        await self.runtime.stop()

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        return self.registry.get_sample_value(name, labels or {}) or 0.0


def register(
    plane: ControlPlane, name: str, *, port: int, ca_pem: bytes, namespace: str, timeout_seconds: int = 5
) -> None:
    """A MutatingWebhookConfiguration sending pod CREATEs in ``namespace`` to https://127.0.0.1:port."""
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "mpod-create.colocation.koordinator.sh",
                "admissionReviewVersions": ["v1", "v1beta1"],
                "sideEffects": "None",
                "failurePolicy": "Ignore",
                "timeoutSeconds": timeout_seconds,
                "clientConfig": {
                    "url": f"https://127.0.0.1:{port}/mutate-pod",
                    "caBundle": base64.b64encode(ca_pem).decode(),
                },
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    }
                ],
            }
        ],
    }
    plane.request("DELETE", f"{MWC_PATH}/{name}")
    _ok(plane.request("POST", MWC_PATH, body), "create MutatingWebhookConfiguration")


VWC_PATH = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


def register_quota_webhook(
    plane: ControlPlane,
    name: str,
    *,
    port: int,
    ca_pem: bytes,
    namespace: str,
    failure_policy: str = "Ignore",
    timeout_seconds: int = 5,
) -> None:
    """The chart's ElasticQuota ValidatingWebhookConfiguration, pointed at https://127.0.0.1:port and
    limited to ``namespace`` (the shared test cluster's other quotas are left alone)."""
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "velasticquota.koordinator.sh",
                "admissionReviewVersions": ["v1", "v1beta1"],
                "sideEffects": "None",
                "failurePolicy": failure_policy,
                "timeoutSeconds": timeout_seconds,
                "clientConfig": {
                    "url": f"https://127.0.0.1:{port}/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
                    "caBundle": base64.b64encode(ca_pem).decode(),
                },
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "rules": [
                    {
                        "apiGroups": ["scheduling.sigs.k8s.io"],
                        "apiVersions": ["v1alpha1"],
                        "operations": ["CREATE", "UPDATE", "DELETE"],
                        "resources": ["elasticquotas"],
                        "scope": "Namespaced",
                    }
                ],
            }
        ],
    }
    plane.request("DELETE", f"{VWC_PATH}/{name}")
    _ok(plane.request("POST", VWC_PATH, body), "create ValidatingWebhookConfiguration")
