"""The product's HTTP servers on ``aiohttp.web``: the one module outside the API client that imports it.

koord-scheduler serves the admission webhook, ``extender-server``, ``/metrics`` with the probes and the
``/apis/v1`` plugin services, and the loopback debug switches; each builds its application here and runs it
in a :class:`HardenedServer`, bounded by :class:`~kubeapi.serving_limits.ServingLimits` (body size, head,
body and TLS-handshake time-outs, connection count) and optionally TLS with client certificates
(:func:`~kubeapi.serving_limits.server_ssl_context`).

The request, response and error types the handlers use are aiohttp's, under the names below (aliases, not
wrappers: a handler behaves exactly as on ``aiohttp.web``). This module imports aiohttp when it is loaded:
the servers import it when they start, so ``--help`` and flag parsing do not load aiohttp.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from aiohttp import typedefs, web

from kubeapi.serving_limits import (
    BodyTimeoutError,
    BodyTooLargeError,
    FoldedLog,
    ServingLimits,
    TokenFile,
)

log = logging.getLogger(__name__)

Application = web.Application
Request = web.Request
Response = web.Response
StreamResponse = web.StreamResponse
HTTPException = web.HTTPException
HTTPBadRequest = web.HTTPBadRequest
HTTPRequestEntityTooLarge = web.HTTPRequestEntityTooLarge
HTTPRequestTimeout = web.HTTPRequestTimeout
HTTPInternalServerError = web.HTTPInternalServerError
middleware = web.middleware

Handler = Callable[[Request], Awaitable[StreamResponse]]
"""A request handler."""
NextHandler = Handler
"""What a middleware calls next."""
Route = tuple[str, str, Handler]
"""``(method, path, handler)``; method ``"*"`` for any; the path may hold ``{name}`` / ``{name:regex}``."""
Middleware = typedefs.Middleware
"""``async (request, next_handler) -> response``, decorated with :func:`middleware`."""


def new_app(routes: Iterable[Route], *, max_body_bytes: int, middlewares: Sequence[Middleware] = ()) -> Application:
    """An application serving ``routes``, the ``middlewares`` first to last around each handler, reading
    at most ``max_body_bytes`` of a body (more: ``413``)."""
    app = web.Application(client_max_size=max_body_bytes, middlewares=list(middlewares))
    add_routes(app, routes)
    return app


def add_routes(app: Application, routes: Iterable[Route]) -> None:
    """Add ``routes`` to ``app`` (before it is started); a ``GET`` route answers ``HEAD`` too."""
    for method, path, handler in routes:
        if method == "GET":
            app.router.add_get(path, handler)
        else:
            app.router.add_route(method, path, handler)


def token_middleware(tokens: TokenFile, *, exempt: frozenset[str] = frozenset()) -> Middleware:
    """A middleware answering ``401`` unless the request carries the token; ``exempt`` paths
    (``/healthz`` for the kubelet's probes) are served without it."""

    @web.middleware
    async def require_token(request: Request, handler: NextHandler) -> StreamResponse:
        if request.path not in exempt and not tokens.accepts(request.headers.get("Authorization")):
            return web.Response(
                status=401, text="a valid bearer token is required\n", headers={"WWW-Authenticate": "Bearer"}
            )
        return await handler(request)

    return require_token


async def read_body(request: web.Request, limits: ServingLimits) -> bytes:
    """The request body, at most ``limits.max_body_bytes``, within ``limits.body_timeout``. Raises
    :class:`BodyTooLargeError` (answer 413) or :class:`BodyTimeoutError` (answer 408)."""
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
