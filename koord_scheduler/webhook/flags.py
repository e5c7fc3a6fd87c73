"""The admission server's flags, for ``koord-scheduler`` cluster mode.

Kept apart from :mod:`.options` (the server's start-up) so that parsing the command line imports
nothing of the server: TLS, certificates and aiohttp load only when ``--webhook-port`` is set.

::

    --webhook-port PORT                 HTTPS port of /mutate-pod, /validate-pod and the ElasticQuota paths
                                        /mutate- and /validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota
                                        (default 0: off)
    --webhook-bind-address ADDR         default 0.0.0.0
    --webhook-cert-dir DIR              tls.crt / tls.key (and ca.crt) mounted from a Secret; when absent,
                                        a self-signed CA and certificate are made, kept in
                                        --webhook-secret-name, and the CA is patched into
                                        --webhook-configuration-name
    --webhook-namespace NS              where the Secret and Service live (default: $POD_NAMESPACE or
                                        koordinator-system)
    --webhook-service-name NAME         the Service the API server calls (certificate DNS names)
    --webhook-cert-hosts H1,H2          more names or IPs for the self-signed certificate (a webhook
                                        configuration that calls a URL instead of the Service)
    --webhook-secret-name NAME
    --webhook-configuration-name NAME   the MutatingWebhookConfiguration whose caBundle is set
    --webhook-validating-configuration-name NAME
                                        the ValidatingWebhookConfiguration (pods, ElasticQuotas) whose
                                        caBundle is set
    --webhook-client-ca-file FILE       require a client certificate signed by this CA (the API server
                                        presents one when its AdmissionConfiguration gives it a kubeconfig
                                        for this webhook)
    --webhook-token-file FILE           require ``Authorization: Bearer <the file's content>`` (the
                                        same kubeconfig may give the API server a token instead)
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field

from koord_scheduler.webhook.gates import DEFAULT_ADMISSION_GATES, AdmissionGates

DEFAULT_NAMESPACE = "koordinator-system"
DEFAULT_SERVICE = "koord-scheduler-webhook"
DEFAULT_SECRET = "koord-scheduler-webhook-certs"
DEFAULT_CONFIGURATION = "koord-scheduler-mutating-webhook-configuration"
DEFAULT_VALIDATING_CONFIGURATION = "koord-scheduler-validating-webhook-configuration"


@dataclass(frozen=True, slots=True)
class WebhookOptions:
    port: int = 0
    bind_address: str = "0.0.0.0"
    cert_dir: str = ""
    namespace: str = DEFAULT_NAMESPACE
    service_name: str = DEFAULT_SERVICE
    secret_name: str = DEFAULT_SECRET
    configuration_name: str = DEFAULT_CONFIGURATION
    validating_configuration_name: str = DEFAULT_VALIDATING_CONFIGURATION
    extra_hosts: tuple[str, ...] = ()
    client_ca_file: str = ""
    token_file: str = ""
    gates: AdmissionGates = field(default=DEFAULT_ADMISSION_GATES)
    """Koordinator's webhook feature gates (:mod:`.gates`); Koordinator's defaults."""

    @property
    def enabled(self) -> bool:
        return self.port > 0


def add_webhook_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("admission webhooks (ClusterColocationProfile, pod validation, ElasticQuota)")
    group.add_argument(
        "--webhook-port",
        type=int,
        default=0,
        metavar="PORT",
        help="HTTPS port for /mutate-pod, /validate-pod and the ElasticQuota defaulting and "
        "validating paths (default 0: off)",
    )
    group.add_argument("--webhook-bind-address", default="0.0.0.0", metavar="ADDR")
    group.add_argument(
        "--webhook-cert-dir",
        default="",
        metavar="DIR",
        help="directory with tls.crt and tls.key; empty: make a self-signed CA and certificate",
    )
    group.add_argument(
        "--webhook-namespace", default=os.environ.get("POD_NAMESPACE") or DEFAULT_NAMESPACE, metavar="NS"
    )
    group.add_argument("--webhook-service-name", default=DEFAULT_SERVICE, metavar="NAME")
    group.add_argument(
        "--webhook-cert-hosts",
        default="",
        metavar="H1,H2",
        help="more DNS names or IPs for the self-signed certificate",
    )
    group.add_argument("--webhook-secret-name", default=DEFAULT_SECRET, metavar="NAME")
    group.add_argument("--webhook-configuration-name", default=DEFAULT_CONFIGURATION, metavar="NAME")
    group.add_argument(
        "--webhook-validating-configuration-name", default=DEFAULT_VALIDATING_CONFIGURATION, metavar="NAME"
    )
    group.add_argument(
        "--webhook-client-ca-file",
        default="",
        metavar="FILE",
        help="require a client certificate signed by this CA (off by default)",
    )
    group.add_argument(
        "--webhook-token-file",
        default="",
        metavar="FILE",
        help="require this bearer token (the file's content; off by default)",
    )


def webhook_options(ns: argparse.Namespace) -> WebhookOptions:
    """The options from parsed flags. Raises ``ValueError`` naming the flag."""
    if not 0 <= ns.webhook_port <= 65535:
        raise ValueError(f"--webhook-port: {ns.webhook_port} is not a port number")
    return WebhookOptions(
        port=ns.webhook_port,
        bind_address=ns.webhook_bind_address,
        cert_dir=ns.webhook_cert_dir,
        namespace=ns.webhook_namespace,
        service_name=ns.webhook_service_name,
        secret_name=ns.webhook_secret_name,
        configuration_name=ns.webhook_configuration_name,
        validating_configuration_name=ns.webhook_validating_configuration_name,
        extra_hosts=tuple(h.strip() for h in ns.webhook_cert_hosts.split(",") if h.strip()),
        client_ca_file=ns.webhook_client_ca_file,
        token_file=ns.webhook_token_file,
    )
