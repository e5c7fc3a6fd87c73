"""Serving HTTP to callers we do not control: size and time limits, TLS and client authentication.

This half loads without aiohttp (the flags parse into it); :mod:`kubeapi.serving` is the server itself.

The admission webhook (every pod creation in the cluster) and ``extender-server`` (kube-scheduler's
extender calls) both listen on the network; this module is what they share so that neither trusts the
caller to be well behaved:

- :class:`ServingLimits`: a request body larger than ``max_body_bytes`` gets ``413`` (a declared
  ``Content-Length`` is refused before any of it is read); a request head not complete within
  ``header_timeout`` of the connection (or of the previous response) closes it; a body not received within
  ``body_timeout`` gets ``408`` (after either refusal the connection closes within ``lingering_time``); a TLS
  handshake not done within ``handshake_timeout`` is dropped; connections beyond ``max_connections`` are
  closed at once. Slow clients (slowloris) thus hold a
  connection for a bounded time, and many of them a bounded number of connections.
- :class:`ClientAuth`: optionally a client certificate signed by ``client_ca_file`` (checked in the TLS
  handshake) and/or ``Authorization: Bearer <token>`` equal to the content of ``token_file`` (compared in
  constant time; the file is read again when it changes, so a rotated Secret needs no restart).
  A request without valid credentials gets ``401`` and nothing else happens.
- A request aiohttp cannot parse (a request line or header over 8 KiB, a malformed head) is answered
  ``400`` by aiohttp and logged as one folded warning line (:class:`FoldedLog`), never a traceback.
- :class:`kubeapi.serving.HardenedServer`: an application served with both, on its own ``asyncio`` server.

The figures are bounds, not tuning: 3 MiB is the API server's own request-body limit (a review carries at
most an object and its old version, each at most 1.5 MiB in etcd), and ten seconds is longer than any
caller waits (webhooks time out after ``timeoutSeconds``, 5 here; kube-scheduler's extender client after
``httpTimeout``, 5 s by default).
"""

from __future__ import annotations

import hmac
import logging
import os
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

MIB = 1024 * 1024
API_SERVER_BODY_LIMIT = 3 * MIB
"""kube-apiserver's ``maxRequestBodyBytes`` (apiserver ``server/config.go``)."""


class BodyTooLargeError(Exception):
    """The request body is (or declares to be) larger than the limit."""


class BodyTimeoutError(Exception):
    """The request body did not arrive within the time allowed."""


@dataclass(frozen=True, slots=True)
class ServingLimits:
    max_body_bytes: int = API_SERVER_BODY_LIMIT
    header_timeout: float = 10.0
    body_timeout: float = 10.0
    handshake_timeout: float = 10.0
    max_connections: int = 256
    lingering_time: float = 1.0
    """After refusing a body it did not read (413, 408), how long the server still reads and drops what the
    client sends before closing, so the client sees the answer rather than a reset (aiohttp's default: 10 s)."""


@dataclass(frozen=True, slots=True)
class ClientAuth:
    """Who may call. Both empty: anyone who can reach the port (then the network must be the guard)."""

    client_ca_file: str = ""
    """PEM CA bundle: the TLS handshake requires a client certificate it signed."""
    token_file: str = ""
    """A file holding the bearer token callers must send (surrounding whitespace ignored)."""

    @property
    def enabled(self) -> bool:
        return bool(self.client_ca_file or self.token_file)


def server_ssl_context(cert_file: str, key_file: str, *, client_ca_file: str = "") -> ssl.SSLContext:
    """A TLS 1.2+ server context; with ``client_ca_file`` a client certificate signed by it is required.
    Raises ``OSError`` / ``ssl.SSLError`` naming the file that cannot be used."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    if client_ca_file:
        context.load_verify_locations(cafile=client_ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


class TokenFile:
    """The expected bearer token, read from a file and read again when its mtime or size changes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._token = b""
        self.current()  # a missing or empty file is an error at start, not at the first request

    def current(self) -> bytes:
        stat = os.stat(self.path)
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            with open(self.path, "rb") as f:
                token = f.read(64 * 1024).strip()
            if not token:
                raise OSError(f"token file {self.path} is empty")
            self._token, self._stamp = token, stamp
        return self._token

    def accepts(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header value carries the token (constant-time comparison)."""
        if not header or not header.startswith("Bearer "):
            return False
        try:
            expected = self.current()
        except OSError as exc:
            log.warning("cannot read the token file: %s; refusing the request", exc)
            return False
        return hmac.compare_digest(header[len("Bearer ") :].strip().encode("latin-1", "replace"), expected)


class FoldedLog:
    """One warning line per key, then at most one every ``interval`` seconds with the count of those not
    logged, so a flood of bad requests cannot flood the log."""

    def __init__(
        self, logger: logging.Logger, *, interval: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.logger = logger
        self.interval = interval
        self.clock = clock
        self._last: dict[str, tuple[float, int]] = {}

    def warning(self, key: str, message: str) -> None:
        now = self.clock()
        last, folded = self._last.get(key, (-1e18, 0))
        if now - last < self.interval:
            self._last[key] = (last, folded + 1)
            return
        more = f" ({folded} more like it since the last line)" if folded else ""
        self.logger.warning("%s%s", message, more)
        if len(self._last) > 1000:  # keys come from a fixed set in practice; never grow without bound
            self._last.clear()
        self._last[key] = (now, 0)
