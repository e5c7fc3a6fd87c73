"""Serving HTTP to callers we do not control: size and time limits, TLS and client authentication.

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
- :class:`HardenedServer`: an aiohttp application served with both, on its own ``asyncio`` server.

The figures are bounds, not tuning: 3 MiB is the API server's own request-body limit (a review carries at
most an object and its old version, each at most 1.5 MiB in etcd), and ten seconds is longer than any
caller waits (webhooks time out after ``timeoutSeconds``, 5 here; kube-scheduler's extender client after
``httpTimeout``, 5 s by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # aiohttp loads with the server, not with the flags
    from aiohttp import web

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


Handler = Callable[["web.Request"], Awaitable["web.StreamResponse"]]


def token_middleware(tokens: TokenFile, *, exempt: frozenset[str] = frozenset()) -> Any:
    """An aiohttp middleware answering ``401`` unless the request carries the token; ``exempt`` paths
    (``/healthz`` for the kubelet's probes) are served without it."""
    from aiohttp import web

    @web.middleware
    async def require_token(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in exempt and not tokens.accepts(request.headers.get("Authorization")):
            return web.Response(
                status=401, text="a valid bearer token is required\n", headers={"WWW-Authenticate": "Bearer"}
            )
        return await handler(request)

    return require_token


async def read_body(request: web.Request, limits: ServingLimits) -> bytes:
    """The request body, at most ``limits.max_body_bytes``, within ``limits.body_timeout``. Raises
    :class:`BodyTooLargeError` (answer 413) or :class:`BodyTimeoutError` (answer 408)."""
    from aiohttp import web

    declared = request.content_length
    if declared is not None and declared > limits.max_body_bytes:
        raise BodyTooLargeError(f"the body declares {declared} bytes; the limit is {limits.max_body_bytes}")
    try:
        async with asyncio.timeout(limits.body_timeout):
            return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise BodyTooLargeError(f"the body is larger than {limits.max_body_bytes} bytes") from None
    except TimeoutError:
        raise BodyTimeoutError(f"the body did not arrive within {limits.body_timeout:g}s") from None


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


class _ProtocolErrors(logging.LoggerAdapter):  # type: ignore[type-arg]
    """aiohttp's server logger: a request it cannot parse (a request line or header over its limits, a
    malformed head) is answered 400 by aiohttp, and logged here as one folded warning line instead of
    ``ERROR`` with a traceback."""

    def __init__(self, logger: logging.Logger, folded: FoldedLog) -> None:
        super().__init__(logger, {})
        self.folded = folded

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kwargs: Any) -> None:
        exc = exc_info if isinstance(exc_info, BaseException) else None
        what = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}" if exc else ""
        self.folded.warning(f"protocol:{type(exc).__name__}", f"{str(msg) % args if args else msg}: {what}")


class _Refused(asyncio.Protocol):
    """Closes a connection over the limit as soon as it is made."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


class HardenedServer:
    """``app`` on ``address:port`` with :class:`ServingLimits` (and TLS when ``ssl_context`` is given).
    :meth:`start` (``OSError`` when the port is taken), then :meth:`stop`. ``port`` is the bound port."""

    def __init__(
        self,
        app: web.Application,
        *,
        address: str,
        port: int,
        ssl_context: ssl.SSLContext | None,
        limits: ServingLimits,
    ) -> None:
        self.app = app
        self.address = address
        self.port = port
        self.ssl_context = ssl_context
        self.limits = limits
        self.refused_connections = 0
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        from aiohttp import web

        # aiohttp closes a connection whose handler waits for a request longer than keepalive_timeout,
        # counted from the connection (after TLS) or from the last response: that is the header timeout.
        runner = web.AppRunner(
            self.app,
            access_log=None,
            handle_signals=False,
            keepalive_timeout=self.limits.header_timeout,
            lingering_time=self.limits.lingering_time,
            logger=_ProtocolErrors(log, FoldedLog(log)),
        )
        await runner.setup()
        web_server = runner.server
        assert web_server is not None
        limit = self.limits.max_connections

        def protocol() -> asyncio.BaseProtocol:
            if len(web_server.connections) >= limit:
                self.refused_connections += 1
                return _Refused()
            return web_server()

        try:
            self._server = await asyncio.get_running_loop().create_server(
                protocol,
                self.address,
                self.port,
                ssl=self.ssl_context,
                ssl_handshake_timeout=self.limits.handshake_timeout if self.ssl_context is not None else None,
                reuse_address=True,
            )
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()  # no new connections; the runner's cleanup closes the open ones
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), 5.0)
