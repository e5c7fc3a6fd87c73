"""Serving certificates for the admission server: read from a directory, or made here.

Two ways, as Koordinator's webhook server offers them:

- **Mounted** (``--webhook-cert-dir``): ``tls.crt`` and ``tls.key`` (and, optionally, ``ca.crt``) from a
  directory, the layout of a ``kubernetes.io/tls`` Secret or of cert-manager. Whoever made them also
  puts the CA into the MutatingWebhookConfiguration.
- **Self-signed** (no directory): :func:`generate_bundle` makes a CA and a serving certificate for the
  Service's DNS names; :mod:`koord_scheduler.webhook.bootstrap` keeps them in a Secret (so every replica
  serves the same certificate) and patches the CA into the webhook configuration.

Pure except for :func:`write_bundle` / :func:`read_bundle`, which touch only the given directory.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubeapi.serving_limits import server_ssl_context as tls_server_context

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
CA_FILE = "ca.crt"
VALIDITY = dt.timedelta(days=3650)
RENEW_BEFORE = dt.timedelta(days=30)
"""A stored certificate that expires within this is replaced at start."""


@dataclass(frozen=True, slots=True)
class CertBundle:
    """PEM text of the CA certificate, the serving certificate and its private key."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names the API server uses to reach ``service`` in ``namespace``."""
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]


def generate_bundle(hosts: Sequence[str], *, now: dt.datetime | None = None, client: bool = False) -> CertBundle:
    """A new CA and a serving certificate for ``hosts`` (DNS names or IP addresses), ECDSA P-256;
    ``client``: a client certificate (extended key usage clientAuth) instead, its subject ``hosts[0]``."""
    now = now or dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "koord-scheduler-webhook-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    alt_names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt_names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else "webhook")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    return CertBundle(
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )


def bundle_usable(bundle: CertBundle, hosts: Sequence[str], *, now: dt.datetime | None = None) -> bool:
    """Whether ``bundle``'s serving certificate covers every host and lives past :data:`RENEW_BEFORE`."""
    now = now or dt.datetime.now(dt.UTC)
    try:
        cert = x509.load_pem_x509_certificate(bundle.cert_pem)
        x509.load_pem_x509_certificate(bundle.ca_pem)
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return False
    covered = {str(n) for n in names.get_values_for_type(x509.DNSName)}
    covered |= {str(n) for n in names.get_values_for_type(x509.IPAddress)}
    return set(hosts) <= covered and cert.not_valid_after_utc - RENEW_BEFORE > now


def write_bundle(bundle: CertBundle, directory: Path) -> None:
    """``tls.crt``, ``tls.key`` (mode 0600) and ``ca.crt`` in ``directory`` (created if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / CERT_FILE).write_bytes(bundle.cert_pem)
    key_path = directory / KEY_FILE
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(bundle.key_pem)
    (directory / CA_FILE).write_bytes(bundle.ca_pem)


def read_bundle(directory: Path) -> CertBundle:
    """The bundle in ``directory``; ``ca.crt`` may be missing (empty CA). Raises ``OSError`` naming the file."""
    ca_path = directory / CA_FILE
    return CertBundle(
        ca_pem=ca_path.read_bytes() if ca_path.exists() else b"",
        cert_pem=(directory / CERT_FILE).read_bytes(),
        key_pem=(directory / KEY_FILE).read_bytes(),
    )


def server_ssl_context(directory: Path, *, client_ca_file: str = "") -> ssl.SSLContext:
    """A TLS server context (TLS 1.2+) from ``tls.crt`` / ``tls.key`` in ``directory``; with
    ``client_ca_file``, callers must present a client certificate signed by it."""
    return tls_server_context(str(directory / CERT_FILE), str(directory / KEY_FILE), client_ca_file=client_ca_file)
