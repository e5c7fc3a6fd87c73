"""Where the API server is and how to authenticate: a kubeconfig file, or the in-cluster service account.

Both are read here without the kubernetes client package (:mod:`kubeapi.kubeconfig` parses the file);
importing that package costs about 0.2 CPU-s at start-up. Only a kubeconfig user authenticated by an
``exec`` plugin or an ``auth-provider`` goes through the client's loader, imported then. Requests
themselves never go through the client's model layer (see :mod:`~kubeapi.http`).
"""

from __future__ import annotations

import base64
import contextlib
import os
import ssl
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeapi.errors import KubeConfigError
from kubeapi.kubeconfig import KubeconfigEntry, read_kubeconfig, read_token_file

__all__ = ["TOKEN_CACHE_SECONDS", "Connection", "KubeConfigError", "load_connection", "load_in_cluster"]

TOKEN_CACHE_SECONDS = 10.0
"""How long a token read from a file (the in-cluster service account's, a kubeconfig's ``tokenFile``) is
reused before the file is read again; a rotated token is in use within this time (client-go: a minute).
A failed re-read keeps the token read before, as client-go does."""

SERVICE_TOKEN_FILENAME = "/var/run/secrets/kubernetes.io/serviceaccount/token"
SERVICE_CERT_FILENAME = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"


@dataclass(frozen=True, slots=True)
class Connection:
    """An API server endpoint and credentials.

    ``server`` has no trailing slash. ``ssl_context`` is None for plain HTTP. ``authorization`` returns the
    current ``Authorization`` header value, or None when authentication is by client certificate only.
    ``description`` says where it came from, for log lines and error messages.
    """

    server: str
    ssl_context: ssl.SSLContext | None
    authorization: Callable[[], str | None]
    description: str
    tls_server_name: str | None = None
    new_ssl_context: Callable[[], ssl.SSLContext] | None = None
    """Builds a fresh context with ``ssl_context``'s settings (CA, client certificate, verification); None
    for plain HTTP."""

    def h2_ssl_context(self) -> ssl.SSLContext | None:
        """The same TLS settings offering ALPN ``h2`` only, for :mod:`~kubeapi.http2`; built on each call,
        only when HTTP/2 is asked for (``ssl_context`` must keep speaking HTTP/1.1 for the pool and
        aiohttp)."""
        if self.new_ssl_context is None:
            return None
        context = self.new_ssl_context()
        context.set_alpn_protocols(["h2"])
        return context


def load_connection(kubeconfig: str = "") -> Connection:
    """From ``kubeconfig`` when given (its current context), else the in-cluster service account.

    Raises :class:`KubeConfigError` with the reason when neither works.
    """
    if kubeconfig:
        if not os.path.isfile(kubeconfig):
            raise KubeConfigError(f"kubeconfig {kubeconfig!r}: no such file", reason="no such file")
        entry = read_kubeconfig(kubeconfig)
        if entry.plugin:
            return _with_kubernetes_client(kubeconfig)
        return _from_entry(entry, kubeconfig)
    if not os.environ.get("KUBERNETES_SERVICE_HOST"):
        raise KubeConfigError(
            "no kubeconfig given (--kubeconfig or clientConnection.kubeconfig) and not running in a "
            "cluster (KUBERNETES_SERVICE_HOST is unset)",
            reason="not running in a cluster (KUBERNETES_SERVICE_HOST is unset)",
        )
    return load_in_cluster()


def load_in_cluster(
    environ: Mapping[str, str] | None = None,
    *,
    token_file: str = SERVICE_TOKEN_FILENAME,
    ca_file: str = SERVICE_CERT_FILENAME,
) -> Connection:
    """The in-cluster service account: ``https://KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT`` (an
    IPv6 host in brackets), the CA in ``ca_file``, the bearer token in ``token_file`` (re-read as it
    rotates, see :data:`TOKEN_CACHE_SECONDS`). Raises :class:`KubeConfigError`
    (``in-cluster configuration: reason``)."""
    env = os.environ if environ is None else environ

    def fail(reason: str) -> KubeConfigError:
        return KubeConfigError(f"in-cluster configuration: {reason}", reason=reason)

    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        unset = "KUBERNETES_SERVICE_HOST" if not host else "KUBERNETES_SERVICE_PORT"
        raise fail(f"{unset} is unset or empty")
    if ":" in host or "%" in host:
        host = f"[{host}]"
    try:
        token = read_token_file(token_file, field=f"service account token {token_file}")
    except ValueError as exc:
        raise fail(str(exc)) from None
    try:
        with open(ca_file, "rb") as f:
            if not f.read().strip():
                raise fail(f"service account CA {ca_file}: the file is empty")
        context = ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise fail(f"service account CA {ca_file}: {exc}") from None
    return Connection(
        server=f"https://{host}:{port}",
        ssl_context=context,
        new_ssl_context=lambda: ssl.create_default_context(cafile=ca_file),
        authorization=_file_token(token_file, token),
        description="in-cluster service account",
    )


def _from_entry(entry: KubeconfigEntry, path: str) -> Connection:
    def fail(reason: str) -> KubeConfigError:
        return KubeConfigError(f"kubeconfig {path!r}: {reason}", reason=reason)

    context: ssl.SSLContext | None = None
    if entry.server.startswith("https://"):
        field = "certificate-authority-data" if entry.ca_data else "certificate-authority"
        try:
            context = _verifying_context(entry)
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise fail(f"cluster {entry.cluster!r}: {field}: TLS setup failed: {exc}") from None
        if entry.cert_file or entry.cert_data:
            try:
                _load_client_certificate(context, entry)
            except (OSError, ssl.SSLError) as exc:
                raise fail(f"user {entry.user!r}: client-certificate/client-key: TLS setup failed: {exc}") from None
    authorization: Callable[[], str | None]
    if entry.token_file:
        authorization = _file_token(entry.token_file, entry.token or "")
    elif entry.token:
        static = f"Bearer {entry.token}"
        authorization = lambda: static  # noqa: E731
    elif entry.basic:
        basic = "Basic " + base64.b64encode(":".join(entry.basic).encode()).decode("ascii")
        authorization = lambda: basic  # noqa: E731
    else:
        authorization = lambda: None  # noqa: E731
    return Connection(
        server=entry.server,
        ssl_context=context,
        new_ssl_context=None if context is None else lambda: _client_context(entry),
        authorization=authorization,
        description=f"kubeconfig {path}",
        tls_server_name=entry.tls_server_name,
    )


def _cadata(data: bytes | None) -> str | bytes | None:
    """PEM as text, DER as bytes (what :func:`ssl.create_default_context` takes)."""
    if data is None:
        return None
    return data.decode("ascii") if data.lstrip().startswith(b"-----") else data


def _verifying_context(entry: KubeconfigEntry) -> ssl.SSLContext:
    """The server check ``entry`` asks for: its CA (file or data; the system's when neither), or none
    with ``insecure-skip-tls-verify``."""
    if entry.insecure:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=entry.ca_file, cadata=_cadata(entry.ca_data))


def _client_context(entry: KubeconfigEntry) -> ssl.SSLContext:
    """The server check and the client certificate ``entry`` asks for, in one new context."""
    context = _verifying_context(entry)
    if entry.cert_file or entry.cert_data:
        _load_client_certificate(context, entry)
    return context


def _load_client_certificate(context: ssl.SSLContext, entry: KubeconfigEntry) -> None:
    """The client certificate and key into ``context``; ``-data`` fields go through files in a private
    temporary folder, removed at once (the ssl module loads certificates from files only)."""
    if entry.cert_data is None and entry.key_data is None:
        context.load_cert_chain(str(entry.cert_file), entry.key_file)
        return
    with tempfile.TemporaryDirectory(prefix="kubeapi-") as folder:
        cert_file = entry.cert_file or _private_file(folder, "client.crt", entry.cert_data or b"")
        key_file = entry.key_file or (_private_file(folder, "client.key", entry.key_data) if entry.key_data else None)
        context.load_cert_chain(cert_file, key_file)


def _private_file(folder: str, name: str, data: bytes) -> str:
    path = os.path.join(folder, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def _file_token(path: str, first: str) -> Callable[[], str | None]:
    """``Bearer <token>`` from ``path``, read again once :data:`TOKEN_CACHE_SECONDS` have passed; ``first``
    is the token read at load time. A failed re-read keeps the previous token."""
    cached: list[Any] = [f"Bearer {first}", time.monotonic()]

    def current() -> str | None:
        now = time.monotonic()
        if now - cached[1] > TOKEN_CACHE_SECONDS:
            cached[1] = now
            with contextlib.suppress(ValueError):
                cached[0] = f"Bearer {read_token_file(path, field=path)}"
        value: str | None = cached[0]
        return value

    return current


def _with_kubernetes_client(kubeconfig: str) -> Connection:
    """The kubernetes client's loader, for users whose credentials come from an ``exec`` plugin or an
    ``auth-provider``; the package is imported only here."""
    from kubernetes import client, config

    cfg = client.Configuration()
    try:
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg, persist_config=False)  # type: ignore[no-untyped-call]
    except Exception as exc:  # the loader raises ConfigException, ValueError, yaml errors...
        raise KubeConfigError(f"kubeconfig {kubeconfig!r}: {exc}", reason=_first_line(exc)) from None
    return _from_client_configuration(cfg, f"kubeconfig {kubeconfig}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _from_client_configuration(cfg: Any, description: str) -> Connection:
    server = str(cfg.host).rstrip("/")
    context: ssl.SSLContext | None = None
    if server.startswith("https://"):
        try:
            context = _tls_context(cfg)
        except (OSError, ssl.SSLError) as exc:
            raise KubeConfigError(
                f"{description}: TLS setup failed: {exc}", reason=f"TLS setup failed: {exc}"
            ) from None
    return Connection(
        server=server,
        ssl_context=context,
        new_ssl_context=None if context is None else lambda: _tls_context(cfg),
        authorization=_authorization(cfg),
        description=description,
        tls_server_name=getattr(cfg, "tls_server_name", None) or None,
    )


def _tls_context(cfg: Any) -> ssl.SSLContext:
    if cfg.verify_ssl:
        context = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
    else:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cfg.cert_file:
        context.load_cert_chain(cfg.cert_file, cfg.key_file or None)
    return context


def _token(cfg: Any) -> str | None:
    """The bearer header value. The kubernetes client (>= 31) keeps kubeconfig and in-cluster tokens
    under ``BearerToken``; older releases used ``authorization``."""
    value = cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix("authorization")
    return str(value) if value else None


def _authorization(cfg: Any) -> Callable[[], str | None]:
    hook = getattr(cfg, "refresh_api_key_hook", None)
    if hook is None:
        static = _token(cfg) or _basic_auth(cfg)
        return lambda: static
    cached: list[Any] = [None, -1e18]

    def current() -> str | None:
        now = time.monotonic()
        if now - cached[1] > TOKEN_CACHE_SECONDS:
            hook(cfg)
            cached[0] = _token(cfg)
            cached[1] = now
        value: str | None = cached[0]
        return value

    return current


def _basic_auth(cfg: Any) -> str | None:
    if cfg.username or cfg.password:
        token: str = cfg.get_basic_auth_token()
        return token
    return None
