"""ApiHttp.request_status against a canned HTTP/1.1 server: the success status comes back, and a 429 is
retried after its Retry-After unless the caller asks for the answer at once (an eviction's PDB refusal)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from kubeapi.connection import Connection
from kubeapi.http import ApiError, ApiHttp
from kubeapi.ratelimit import TokenBucket
from tests.unit.kubeapi.test_kube_http1 import CannedServer, fixed


@pytest.fixture
async def made() -> AsyncIterator[list[tuple[ApiHttp, CannedServer]]]:
    out: list[tuple[ApiHttp, CannedServer]] = []
    yield out
    for http, server in out:
        await http.close()
        await server.stop()


async def start(
    made: list[tuple[ApiHttp, CannedServer]], respond: Callable[[int], bytes]
) -> tuple[ApiHttp, CannedServer]:
    server = CannedServer(respond)
    port = await server.start()
    connection = Connection(f"http://127.0.0.1:{port}", None, lambda: None, "canned")
    http = ApiHttp(connection, TokenBucket(0, 1))
    made.append((http, server))
    return http, server


PDB_REFUSAL = b'{"kind":"Status","reason":"TooManyRequests","message":"Cannot evict pod"}'


@pytest.mark.parametrize("status", [200, 201])
async def test_the_success_status_is_returned(made: list[tuple[ApiHttp, CannedServer]], status: int) -> None:
    http, server = await start(made, lambda i: fixed(b"{}", status=status))
    assert await http.request_status("POST", "/api/v1/namespaces/d/pods/p/eviction", body={"a": 1}) == status
    assert server.requests[0].startswith(b"POST /api/v1/namespaces/d/pods/p/eviction HTTP/1.1\r\n")
    assert server.requests[0].endswith(b'\r\n\r\n{"a":1}')


async def test_a_429_is_raised_at_once_without_throttle_retries(made: list[tuple[ApiHttp, CannedServer]]) -> None:
    http, server = await start(made, lambda i: fixed(PDB_REFUSAL, status=429, extra="Retry-After: 10\r\n"))
    with pytest.raises(ApiError) as err:
        await http.request_status("POST", "/x", body={}, retry_throttled=False)
    assert (err.value.status, err.value.reason) == (429, "TooManyRequests")
    assert len(server.requests) == 1


async def test_a_429_is_retried_by_default(made: list[tuple[ApiHttp, CannedServer]]) -> None:
    http, server = await start(
        made, lambda i: fixed(b"{}", status=429, extra="Retry-After: 0.1\r\n") if i == 0 else fixed(b"{}", status=201)
    )
    assert await http.request_status("POST", "/x", body={}) == 201
    assert len(server.requests) == 2


async def test_other_errors_raise_with_their_status(made: list[tuple[ApiHttp, CannedServer]]) -> None:
    http, _ = await start(made, lambda i: fixed(b'{"reason":"NotFound","message":"gone"}', status=404))
    with pytest.raises(ApiError) as err:
        await http.request_status("POST", "/x", body={}, retry_throttled=False)
    assert err.value.not_found
