"""The runtime debug switches: ``PUT /debug/flags/s`` (``--debug-scores``) and ``PUT /debug/flags/f``
(``--debug-filters``).

They change what the scheduler logs for every pod, so they are not served with ``/metrics`` and the
probes. They are off unless ``--debug-flags-port`` is set, and then they listen on the loopback address
only, whatever ``--bind-address`` says: reachable from inside the pod (``kubectl exec``) or through
``kubectl port-forward``, both of which the API server authorizes (``pods/exec``, ``pods/portforward``),
and from nowhere else. That is the simpler of the two safe designs; delegating authentication and
authorization to the API server (TokenReview + SubjectAccessReview, as kube-scheduler's secure port
does) would need TLS serving and more RBAC for the same two switches.

Values are range-checked: ``s`` is a whole number from 0 to :data:`MAX_DEBUG_SCORES`, ``f`` a boolean.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the HTTP server loads when it starts, not when the flags are parsed
    from kubeapi.serving import Application, HardenedServer, Request, Response
    from kubeapi.serving_limits import ServingLimits

log = logging.getLogger("koord-scheduler")

LOOPBACK = "127.0.0.1"
MAX_DEBUG_SCORES = 100
"""Top-N nodes in the per-pod score table; beyond a hundred the table is no longer read, only logged."""

_TRUE = frozenset({"true", "1", "t", "yes", "y", "on"})
_FALSE = frozenset({"false", "0", "f", "no", "n", "off"})


class DebugValueError(ValueError):
    """A debug switch's value is out of range or of the wrong form."""


def parse_debug_scores(text: str) -> int:
    """``--debug-scores`` / ``PUT /debug/flags/s``: 0 (off) to :data:`MAX_DEBUG_SCORES`."""
    try:
        value = int(text.strip())
    except ValueError:
        raise DebugValueError(f"{text.strip()[:40]!r} is not a whole number") from None
    if not 0 <= value <= MAX_DEBUG_SCORES:
        raise DebugValueError(f"{value} is out of range: use 0 (off) to {MAX_DEBUG_SCORES}")
    return value


def parse_debug_filters(text: str) -> bool:
    """``--debug-filters`` / ``PUT /debug/flags/f``: true or false."""
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise DebugValueError(f"{text.strip()[:40]!r} is not a boolean (use true or false)")


SetDebug = Callable[..., None]
"""``set_debug(scores=...)`` / ``set_debug(filters=...)``."""


def debug_app(set_debug: SetDebug) -> Application:
    """The application serving ``PUT /debug/flags/{s,f}`` (tests mount it directly)."""
    from kubeapi.serving import Response, new_app

    async def debug_flag(request: Request) -> Response:
        text = (await request.text())[:100]
        flag = request.match_info["flag"]
        try:
            if flag == "s":
                scores = parse_debug_scores(text)
                set_debug(scores=scores)
                shown = str(scores)
            elif flag == "f":
                filters = parse_debug_filters(text)
                set_debug(filters=filters)
                shown = str(filters).lower()
            else:
                return Response(status=404, text=f"unknown debug flag {flag[:20]!r} (use s or f)\n")
        except DebugValueError as exc:
            return Response(status=400, text=f"bad value for debug flag {flag}: {exc}\n")
        log.warning("debug flag %s set to %s", flag, shown)
        return Response(text=f"{flag}={shown}\n")

    return new_app([("PUT", "/debug/flags/{flag}", debug_flag)], max_body_bytes=1024)


async def start_debug_server(port: int, set_debug: SetDebug, *, limits: ServingLimits | None = None) -> HardenedServer:
    """Serve the switches on ``127.0.0.1:port`` with the size, time and connection bounds of
    :mod:`kubeapi.serving_limits` (by default a 1 KiB body, 16 connections). Raises ``OSError``
    when the port is taken."""
    from kubeapi.serving import HardenedServer
    from kubeapi.serving_limits import ServingLimits

    limits = limits or ServingLimits(max_body_bytes=1024, max_connections=16)
    server = HardenedServer(debug_app(set_debug), address=LOOPBACK, port=port, ssl_context=None, limits=limits)
    await server.start()
    log.info("serving PUT /debug/flags/{s,f} on http://%s:%d (loopback only)", LOOPBACK, port)
    return server
