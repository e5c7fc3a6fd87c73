"""The request accounting of ``bench/e2e_throughput.py``: the bench's own client, which counts what it sends
the way kube-apiserver counts it, and readings of kube-apiserver's counters with the bench's own requests
taken out (the counters themselves: tests/integration/apiserver_requests.py)."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from apiserver_requests import RequestCounts, client_request_key, parse_request_counts

from kubeapi import ApiHttp


class CountingHttp(ApiHttp):
    """The bench's own client; it counts its requests the way kube-apiserver does (a watch once it ends,
    and the watches it holds open), so they can be taken out of the contender's figures."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: Counter[Any] = Counter()
        self.open_watches: Counter[Any] = Counter()

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
        accept: str = "application/json",
    ) -> bytes:
        self.sent[client_request_key(method, path, params)] += 1
        return await super().request(method, path, body=body, content_type=content_type, params=params, accept=accept)

    @contextlib.asynccontextmanager
    async def stream(
        self, path: str, params: Mapping[str, str], *, accept: str = "application/json"
    ) -> AsyncIterator[Any]:
        key = client_request_key("GET", path, params)
        self.open_watches[key] += 1
        try:
            async with super().stream(path, params, accept=accept) as content:
                yield content
        finally:
            self.open_watches[key] -= 1
            self.sent[key] += 1


@dataclass(frozen=True)
class Reading:
    """kube-apiserver's counters at one moment, and the bench's own requests and open watches then."""

    counts: RequestCounts
    sent: Counter[Any]
    open_watches: Counter[Any]

    def since(self, before: Reading) -> RequestCounts:
        own_open = Counter(self.open_watches)
        own_open.subtract(before.open_watches)
        return self.counts.since(before.counts, own=self.sent - before.sent, own_open=own_open)


async def read_request_counts(http: CountingHttp) -> Reading:
    sent, open_watches = http.sent.copy(), http.open_watches.copy()
    return Reading(parse_request_counts((await http.request("GET", "/metrics")).decode()), sent, open_watches)
