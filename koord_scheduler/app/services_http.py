"""``/apis/v1/...`` on koord-scheduler's HTTP port (``--metrics-port``, next to ``/metrics``): the plugin
services of :mod:`koord_scheduler.scheduler.plugin_services`, so the ``curl`` commands of Koordinator's gang,
capacity and device manuals work against pykoord.

Read-only ``GET`` (and ``HEAD``); any other method is 405. Like Koordinator, only the leader answers
(another replica: 503 ``{"message": "the instance is not leader"}``); with scheduling off, 503 as well.
The server is the metrics port's :class:`~kubeapi.serving.HardenedServer` (a 64 KiB body
limit, header and connection bounds), and every path parameter is checked before it is used
(:func:`~koord_scheduler.scheduler.plugin_services.param_problem`).

What they show (pod names, quotas, device allocations) is readable by anyone who can reach
``--bind-address:--metrics-port``: ``--plugin-services=false`` turns them off (404), or keep the port
behind a NetworkPolicy.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import unquote

from koord_scheduler.framework.errors import log_failure

if TYPE_CHECKING:
    from koord_scheduler.scheduler.plugin_services import ServiceTable
    from kubeapi.serving import Request, Response, Route

log = logging.getLogger("koord-scheduler")

PREFIX = "/apis/v1/"
NOT_LEADER = {"message": "the instance is not leader"}
SCHEDULING_OFF = {"message": "scheduling is off in this replica (--scheduling=false): no plugin services"}


def _json(status: int, body: object) -> Response:
    from kubeapi.serving import Response

    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    return Response(status=status, text=text, content_type="application/json", charset="utf-8")


def service_routes(table: Callable[[], ServiceTable | None], *, is_leader: Callable[[], bool]) -> list[Route]:
    """The route of ``/apis/v1/...`` to ``table()`` (None: scheduling is off), leader only."""

    async def serve(request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return _json(405, {"message": f"{request.method} is not allowed: the services are read-only"})
        if not is_leader():
            return _json(503, NOT_LEADER)
        services = table()
        if services is None:
            return _json(503, SCHEDULING_OFF)
        raw = request.raw_path.split("?", 1)[0]
        segments = [unquote(s) for s in raw[len(PREFIX) :].split("/")] if raw.startswith(PREFIX) else []
        try:
            status, body = services.answer(["apis", "v1", *segments], dict(request.query))
        except Exception as exc:  # a plugin's view failed: this request only, logged as one line
            log_failure(log, f"GET {request.path[:200]!r}", exc, level=logging.WARNING)
            return _json(500, {"message": f"internal error: {type(exc).__name__}"})
        return _json(status, body)

    return [("*", PREFIX + r"{tail:[\s\S]*}", serve)]  # decoded CR/LF too: refused with a 400
