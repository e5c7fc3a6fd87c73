"""kubeapi.serving: applications built from routes, served by HardenedServer over real sockets."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import aiohttp
import pytest

from kubeapi.serving import (
    HardenedServer,
    Middleware,
    NextHandler,
    Request,
    Response,
    Route,
    StreamResponse,
    middleware,
    new_app,
)
from kubeapi.serving_limits import ServingLimits

LIMITS = ServingLimits(max_body_bytes=16, max_connections=4, header_timeout=2.0, body_timeout=2.0)


async def _hello(_: Request) -> Response:
    return Response(text="hello")


async def _echo(request: Request) -> Response:
    return Response(body=await request.read())


async def _any(request: Request) -> Response:
    return Response(text=f"{request.method} {request.match_info['tail']}")


ROUTES: list[Route] = [("GET", "/hello", _hello), ("POST", "/echo", _echo), ("*", "/any/{tail:.*}", _any)]


async def _serve(app_routes: list[Route], *, middlewares: Sequence[Middleware] = ()) -> HardenedServer:
    server = HardenedServer(
        new_app(app_routes, max_body_bytes=LIMITS.max_body_bytes, middlewares=middlewares),
        address="127.0.0.1",
        port=0,
        ssl_context=None,
        limits=LIMITS,
    )
    await server.start()
    return server


async def test_routes_methods_and_the_body_limit() -> None:
    server = await _serve(ROUTES)
    base = f"http://127.0.0.1:{server.port}"
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/hello") as r:
                assert (r.status, await r.text()) == (200, "hello")
            async with session.head(f"{base}/hello") as r:
                assert r.status == 200  # a GET route answers HEAD, as aiohttp's add_get does
            async with session.post(f"{base}/hello") as r:
                assert r.status == 405
            async with session.post(f"{base}/echo", data=b"x" * 16) as r:
                assert (r.status, await r.read()) == (200, b"x" * 16)
            async with session.post(f"{base}/echo", data=b"x" * 17) as r:
                assert r.status == 413
            async with session.delete(f"{base}/any/a/b") as r:
                assert (r.status, await r.text()) == (200, "DELETE a/b")
            async with session.get(f"{base}/missing") as r:
                assert r.status == 404
    finally:
        await server.stop()


async def test_middlewares_run_first_to_last_around_the_handler() -> None:
    seen: list[str] = []

    def named(name: str) -> Middleware:
        @middleware
        async def around(request: Request, handler: NextHandler) -> StreamResponse:
            seen.append(f"{name}>")
            response = await handler(request)
            seen.append(f"<{name}")
            return response

        return around

    server = await _serve(ROUTES, middlewares=[named("outer"), named("inner")])
    try:
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{server.port}/hello") as r:
            assert r.status == 200
    finally:
        await server.stop()
    assert seen == ["outer>", "inner>", "<inner", "<outer"]


async def test_a_taken_port_is_an_oserror_and_stop_releases_the_port() -> None:
    first = await _serve(ROUTES)
    with pytest.raises(OSError):
        second = HardenedServer(
            new_app(ROUTES, max_body_bytes=16), address="127.0.0.1", port=first.port, ssl_context=None, limits=LIMITS
        )
        # reuse_address does not let two listeners share a port on Linux
        await second.start()
    port = first.port
    await first.stop()
    again = HardenedServer(
        new_app(ROUTES, max_body_bytes=16), address="127.0.0.1", port=port, ssl_context=None, limits=LIMITS
    )
    await again.start()
    await again.stop()
    await asyncio.sleep(0)
