"""The admission server's start-up, for ``koord-scheduler`` cluster mode; its flags and what they mean are
in :mod:`.flags`."""

from __future__ import annotations

import ssl
import tempfile
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from koord_scheduler.webhook.admission import POD_CREATE, PodMutator, WebhookMetrics
from koord_scheduler.webhook.bootstrap import VALIDATING_CONFIGURATIONS, ensure_secret_bundle, inject_ca_bundle
from koord_scheduler.webhook.certs import read_bundle, server_ssl_context, service_dns_names, write_bundle
from koord_scheduler.webhook.flags import WebhookOptions
from koord_scheduler.webhook.kube import KubeColocationLookup
from koord_scheduler.webhook.pod_validation import PodValidationMetrics, PodValidator
from koord_scheduler.webhook.quota import MUTATE_QUOTA_PATH, VALIDATE_QUOTA_PATH, QuotaDefaulter, QuotaValidator
from koord_scheduler.webhook.quota_kube import KubeQuotaLookup
from koord_scheduler.webhook.review import allow, parse_review
from koord_scheduler.webhook.server import MUTATE_POD_PATH, VALIDATE_POD_PATH, AdmissionServing, WebhookServer
from kubeapi.connection import Connection
from kubeapi.events import EventRecorder
from kubeapi.http import ApiHttp, HttpOptions
from kubeapi.ratelimit import TokenBucket
from kubeapi.serving_limits import ClientAuth


class WebhookRuntime:
    """Everything the admission server runs on: API access, watch caches, Events, the TLS server."""

    def __init__(self, options: WebhookOptions, connection: Connection, registry: CollectorRegistry) -> None:
        self.options = options
        self.registry = registry
        self.http = ApiHttp(connection, TokenBucket(50, 100), options=HttpOptions(pool_size=4, request_timeout=5.0))
        self.recorder = EventRecorder(self.http)
        self.lookup = KubeColocationLookup(self.http, self.recorder)
        self.mutator = PodMutator(self.lookup, metrics=WebhookMetrics.create(registry))
        self.quota_lookup = KubeQuotaLookup(self.http)
        self.quotas = QuotaValidator(self.quota_lookup, gates=options.gates)
        self.quota_defaults = QuotaDefaulter(self.quota_lookup, gates=options.gates)
        self.pods = PodValidator(self.quota_lookup, gates=options.gates, metrics=PodValidationMetrics.create(registry))
        self.server: WebhookServer | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    async def _ssl_context(self) -> ssl.SSLContext:
        o = self.options
        if o.cert_dir:
            read_bundle(Path(o.cert_dir))  # a missing file is named here, before the server starts
            return server_ssl_context(Path(o.cert_dir), client_ca_file=o.client_ca_file)
        hosts = [*service_dns_names(o.service_name, o.namespace), *o.extra_hosts]
        bundle = await ensure_secret_bundle(self.http, o.namespace, o.secret_name, hosts)
        await inject_ca_bundle(self.http, o.configuration_name, bundle.ca_pem)
        await inject_ca_bundle(
            self.http, o.validating_configuration_name, bundle.ca_pem, collection=VALIDATING_CONFIGURATIONS
        )
        self._tmp = tempfile.TemporaryDirectory(prefix="koord-webhook-")
        write_bundle(bundle, Path(self._tmp.name))
        return server_ssl_context(Path(self._tmp.name), client_ca_file=o.client_ca_file)

    async def start(self) -> None:
        """Certificates, caches, then the server. Raises ``OSError`` / ``ClusterError`` if any fails."""
        context = await self._ssl_context()
        self.recorder.start()
        await self.lookup.start()
        await self.quota_lookup.start()
        o = self.options
        serving = AdmissionServing(o.bind_address, o.port, auth=ClientAuth(o.client_ca_file, o.token_file))
        routes = {
            VALIDATE_POD_PATH: self.pods.review,
            VALIDATE_QUOTA_PATH: self.quotas.review,
            MUTATE_QUOTA_PATH: self.quota_defaults.review,
        }
        if not o.gates.pod_mutating_webhook:  # Koordinator's PodMutatingWebhook=false: pods admitted unchanged
            routes[MUTATE_POD_PATH] = allow_pod_create
        self.server = WebhookServer(self.mutator, context, serving=serving, routes=routes, registry=self.registry)
        await self.server.start()

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()
        await self.lookup.stop()
        await self.quota_lookup.stop()
        await self.recorder.stop()
        await self.http.close()
        if self._tmp is not None:
            self._tmp.cleanup()


async def allow_pod_create(body: Any) -> dict[str, Any]:
    """``/mutate-pod`` with the gate ``PodMutatingWebhook`` off: every pod CREATE it serves is allowed as is."""
    return allow(parse_review(body, POD_CREATE)["uid"])
