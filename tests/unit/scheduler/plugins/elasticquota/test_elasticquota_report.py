"""InvalidQuotaTree Events: a problem still there when the Event is sent is reported once; one gone by then
(a child delivered before its parent in the same batch, as in the first list) is not."""

from __future__ import annotations

import asyncio
from typing import Any

from apis.config.elasticquota_args import ElasticQuotaArgs
from koord_scheduler.plugins.elasticquota.plugin import ElasticQuota
from koord_scheduler.scheduler.source import EventType
from tests.unit.scheduler.plugins.elasticquota.quota_helpers import quota


class Cluster:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    async def record_event(self, kind: Any, name: str, **kw: Any) -> None:
        self.events.append((name, kw["message"]))


class Handle:
    snapshot = None

    def __init__(self) -> None:
        self.cluster = Cluster()


def run(batches: list[list[Any]]) -> list[tuple[str, str]]:
    handle = Handle()
    plugin = ElasticQuota(ElasticQuotaArgs(), handle)  # type: ignore[arg-type]

    async def main() -> None:
        for batch in batches:
            for record in batch:
                plugin.on_quota(EventType.ADDED, None, record)
            await plugin.drain()

    asyncio.run(main())
    return handle.cluster.events


PARENT = quota("org", min={"cpu": 4}, max={"cpu": 8}, is_parent=True)
CHILD = quota("a", min={"cpu": 2}, max={"cpu": 4}, parent="org")
BAD = quota("bad", min={"cpu": 4}, max={"cpu": 2})


def test_child_before_parent_in_one_batch_is_not_reported() -> None:
    assert run([[CHILD, PARENT, BAD]]) == [("bad", "spec.min.cpu (4) is above spec.max.cpu (2)")]


def test_missing_parent_that_stays_missing_is_reported_once() -> None:
    assert run([[CHILD], [BAD], [PARENT]]) == [
        ("a", "parent quota org does not exist"),
        ("bad", "spec.min.cpu (4) is above spec.max.cpu (2)"),
    ]
