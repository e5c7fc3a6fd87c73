"""Self-signed certificate bootstrap, as Koordinator's webhook server does it when no certificate is mounted.

1. :func:`ensure_secret_bundle`: read the Secret (``kubernetes.io/tls``: ``tls.crt``, ``tls.key``,
   ``ca.crt``); if it is missing, or its certificate does not cover the Service's DNS names or expires
   within 30 days, make a new CA and serving certificate and write them. Replicas racing to create it
   settle on whichever write won (a 409 rereads the Secret), so they all serve one certificate.
2. :func:`inject_ca_bundle`: put the CA into ``clientConfig.caBundle`` of every webhook of the
   MutatingWebhookConfiguration and of the ValidatingWebhookConfiguration (a JSON patch, only where it
   differs). A configuration that does not exist yet is logged and left alone; the next start (or replica)
   patches it.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from typing import Any

from koord_scheduler.webhook.certs import CA_FILE, CERT_FILE, KEY_FILE, CertBundle, bundle_usable, generate_bundle
from kubeapi.http import ApiError, ApiHttp
from kubeapi.paths import resource_path

log = logging.getLogger(__name__)

JSON_PATCH = "application/json-patch+json"
ADMISSION_GROUP = "admissionregistration.k8s.io"
MUTATING_CONFIGURATIONS = "mutatingwebhookconfigurations"
VALIDATING_CONFIGURATIONS = "validatingwebhookconfigurations"
_KINDS = {
    MUTATING_CONFIGURATIONS: "MutatingWebhookConfiguration",
    VALIDATING_CONFIGURATIONS: "ValidatingWebhookConfiguration",
}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _bundle_of(secret: dict[str, Any]) -> CertBundle | None:
    data = secret.get("data") or {}
    try:
        return CertBundle(
            ca_pem=base64.b64decode(data.get(CA_FILE, "")),
            cert_pem=base64.b64decode(data[CERT_FILE]),
            key_pem=base64.b64decode(data[KEY_FILE]),
        )
    except (KeyError, ValueError):
        return None


async def ensure_secret_bundle(http: ApiHttp, namespace: str, name: str, hosts: Sequence[str]) -> CertBundle:
    """The bundle stored in Secret ``namespace/name``, made and stored first if missing or unusable."""
    path = resource_path("", "v1", "secrets", namespace=namespace)
    secret_path = resource_path("", "v1", "secrets", namespace=namespace, name=name)
    for _ in range(3):
        try:
            secret = await http.request_json("GET", secret_path)
        except ApiError as exc:
            if not exc.not_found:
                raise
            secret = None
        current = _bundle_of(secret) if secret is not None else None
        if current is not None and bundle_usable(current, hosts):
            return current
        bundle = generate_bundle(list(hosts))
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/managed-by": "koord-scheduler"},
            },
            "data": {CERT_FILE: _b64(bundle.cert_pem), KEY_FILE: _b64(bundle.key_pem), CA_FILE: _b64(bundle.ca_pem)},
        }
        try:
            if secret is None:
                await http.request_json("POST", path, body=body)
            else:
                body["metadata"]["resourceVersion"] = (secret.get("metadata") or {}).get("resourceVersion", "")
                await http.request_json("PUT", secret_path, body=body)
        except ApiError as exc:
            if exc.conflict:  # another replica wrote it first: use theirs
                continue
            raise
        log.info("webhook certificate written to Secret %s/%s for %s", namespace, name, ", ".join(hosts))
        return bundle
    raise ApiError(409, "Conflict", f"Secret {namespace}/{name} kept changing while the certificate was stored")


async def inject_ca_bundle(
    http: ApiHttp, configuration: str, ca_pem: bytes, *, collection: str = MUTATING_CONFIGURATIONS
) -> int:
    """Set ``caBundle`` on each webhook of the webhook configuration ``configuration`` (in ``collection``:
    :data:`MUTATING_CONFIGURATIONS` or :data:`VALIDATING_CONFIGURATIONS`); how many changed."""
    kind = _KINDS[collection]
    path = resource_path(ADMISSION_GROUP, "v1", collection, name=configuration)
    try:
        mwc = await http.request_json("GET", path)
    except ApiError as exc:
        if exc.not_found:
            log.warning("%s %s not found; its caBundle is not set", kind, configuration)
            return 0
        raise
    want = _b64(ca_pem)
    ops: list[dict[str, Any]] = []
    for i, webhook in enumerate(mwc.get("webhooks") or ()):
        client_config = webhook.get("clientConfig") or {}
        if client_config.get("caBundle") != want:
            ops.append({"op": "test", "path": f"/webhooks/{i}/name", "value": webhook.get("name")})
            ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": want})
    if ops:
        await http.request_json("PATCH", path, body=ops, content_type=JSON_PATCH)
        log.info("caBundle set on %d webhook(s) of %s %s", len(ops) // 2, kind, configuration)
    return len(ops) // 2
