"""Where the API server is and how to authenticate: a kubeconfig file, or the in-cluster service account.

The kubernetes client's config loaders do the reading (kubeconfig contexts, exec plugins, in-cluster
token rotation); only their result is used here. Requests themselves never go through the client's
model layer (see :mod:`~kubeapi.http`).
"""

from __future__ import annotations

import os
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubeapi.errors import KubeApiError

TOKEN_CACHE_SECONDS = 10.0
"""How long an Authorization header is reused before the loader's refresh hook is asked again
(in-cluster tokens rotate hourly; the hook itself re-reads the file once a minute)."""


class KubeConfigError(KubeApiError):
    """No usable connection: a missing or malformed kubeconfig, or no in-cluster environment.

    The message names the source (``kubeconfig PATH: ...``); ``reason`` is the part after it, for callers
    that name the source their own way (koordlet says ``--kubeconfig PATH``)."""

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


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
    h2_ssl_context: ssl.SSLContext | None = None
    """The same TLS settings offering ALPN ``h2`` only, for :mod:`~kubeapi.http2` (a separate context:
    ``ssl_context`` must keep speaking HTTP/1.1 for the pool and aiohttp)."""


def load_connection(kubeconfig: str = "") -> Connection:
    """From ``kubeconfig`` when given (its current context), else the in-cluster service account.

    Raises :class:`KubeConfigError` with the reason when neither works.
    """
    from kubernetes import client, config

    cfg = client.Configuration()
    if kubeconfig:
        if not os.path.isfile(kubeconfig):
            raise KubeConfigError(f"kubeconfig {kubeconfig!r}: no such file", reason="no such file")
        try:
            config.load_kube_config(config_file=kubeconfig, client_configuration=cfg, persist_config=False)  # type: ignore[no-untyped-call]
        except Exception as exc:  # the loader raises ConfigException, ValueError, yaml errors...
            raise KubeConfigError(f"kubeconfig {kubeconfig!r}: {exc}", reason=_first_line(exc)) from None
        description = f"kubeconfig {kubeconfig}"
    else:
        if not os.environ.get("KUBERNETES_SERVICE_HOST"):
            raise KubeConfigError(
                "no kubeconfig given (--kubeconfig or clientConnection.kubeconfig) and not running in a "
                "cluster (KUBERNETES_SERVICE_HOST is unset)",
                reason="not running in a cluster (KUBERNETES_SERVICE_HOST is unset)",
            )
        try:
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        except Exception as exc:
            raise KubeConfigError(f"in-cluster configuration: {exc}", reason=_first_line(exc)) from None
        description = "in-cluster service account"
    return _from_client_configuration(cfg, description)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _from_client_configuration(cfg: Any, description: str) -> Connection:
    server = str(cfg.host).rstrip("/")
    context: ssl.SSLContext | None = None
    h2_context: ssl.SSLContext | None = None
    if server.startswith("https://"):
        try:
            context = _tls_context(cfg)
            h2_context = _tls_context(cfg)
            h2_context.set_alpn_protocols(["h2"])
        except (OSError, ssl.SSLError) as exc:
            raise KubeConfigError(
                f"{description}: TLS setup failed: {exc}", reason=f"TLS setup failed: {exc}"
            ) from None
    return Connection(
        server=server,
        ssl_context=context,
        h2_ssl_context=h2_context,
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
