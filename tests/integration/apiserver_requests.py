"""What kube-apiserver says it served: its request counters from ``/metrics``, by verb and resource.

Two metrics of kube-apiserver (``staging/src/k8s.io/apiserver/pkg/endpoints/metrics/metrics.go``):

- ``apiserver_request_total`` counts requests when they end, by verb (``GET``, ``LIST``, ``WATCH``,
  ``POST``, ``PATCH``, ``PUT``, ``DELETE``...), group, resource and subresource. A watch counts once it
  ends, so a watch still open is not in it;
- ``apiserver_longrunning_requests`` is a gauge of the requests open now (watches), by the same labels.

A :class:`RequestCounts` is one reading of both; ``after.since(before)`` is what was served in between
(completed) and the long-running requests opened meanwhile and still open. Used by the end-to-end
benchmark (requests per bound pod, per contender) and by the integration test that bounds them. Only
the standard library, so both can use it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

REQUESTS_TOTAL = "apiserver_request_total"
LONG_RUNNING = "apiserver_longrunning_requests"

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\{(?P<labels>.*)\}\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class RequestKey(NamedTuple):
    """One row: the verb and the resource as kubectl names it (``events.events.k8s.io``, ``pods``), with
    the subresource after a slash (``pods/binding``)."""

    verb: str
    resource: str

    def __str__(self) -> str:
        return f"{self.verb} {self.resource}"


def request_key(labels: Mapping[str, str]) -> RequestKey:
    """The row of one sample's labels; requests that name no resource (``/metrics``, ``/healthz``) are
    ``(verb, "")``."""
    resource = labels.get("resource", "")
    if resource and labels.get("group"):
        resource = f"{resource}.{labels['group']}"
    if resource and labels.get("subresource"):
        resource = f"{resource}/{labels['subresource']}"
    return RequestKey(labels.get("verb", ""), resource)


def client_request_key(method: str, path: str, params: Mapping[str, str] | None = None) -> RequestKey:
    """The row a request the caller sends will be counted in: ``GET`` of a collection is ``LIST`` (``WATCH``
    with ``watch`` set), ``DELETE`` of a collection ``DELETECOLLECTION``; a path outside ``/api`` and
    ``/apis`` names no resource."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return RequestKey(method, "")
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]  # namespaces/<ns>/<resource>...; a bare namespaces/<name> is the Namespace itself
    if not rest:
        return RequestKey(method, "")
    resource = f"{rest[0]}.{group}" if group else rest[0]
    if len(rest) >= 3:
        resource = f"{resource}/{rest[2]}"
    verb = method
    if len(rest) == 1 and method == "GET":
        verb = "WATCH" if (params or {}).get("watch") in ("1", "true") else "LIST"
    elif len(rest) == 1 and method == "DELETE":
        verb = "DELETECOLLECTION"
    return RequestKey(verb, resource)


@dataclass(frozen=True, slots=True)
class RequestCounts:
    """``completed``: requests that ended, by row. ``open``: long-running requests open, by row."""

    completed: Counter[RequestKey] = field(default_factory=Counter)
    open: Counter[RequestKey] = field(default_factory=Counter)

    def since(
        self,
        before: RequestCounts,
        *,
        own: Mapping[RequestKey, int] | None = None,
        own_open: Mapping[RequestKey, int] | None = None,
    ) -> RequestCounts:
        """What happened between ``before`` and this reading: requests completed meanwhile (less ``own``,
        the caller's own requests it counted itself) and the change in open long-running requests (less
        ``own_open``, the change in the caller's own; rows whose count did not change are left out, a
        negative count is a watch that ended)."""
        completed = Counter({k: v - before.completed.get(k, 0) for k, v in self.completed.items()})
        completed.subtract(own or {})
        opened = Counter({k: self.open.get(k, 0) - before.open.get(k, 0) for k in {*self.open, *before.open}})
        opened.subtract(own_open or {})
        return RequestCounts(
            Counter({k: v for k, v in completed.items() if v > 0 and k.resource}),
            Counter({k: v for k, v in opened.items() if v and k.resource}),
        )

    @property
    def total(self) -> int:
        """Every completed request that names a resource."""
        return sum(self.completed.values())


def parse_request_counts(text: str) -> RequestCounts:
    """One reading from kube-apiserver's ``/metrics`` text (Prometheus exposition format): the two metrics
    summed over the labels :class:`RequestKey` does not keep (code, scope, version, dry_run...)."""
    completed: Counter[RequestKey] = Counter()
    opened: Counter[RequestKey] = Counter()
    for line in text.splitlines():
        if not line.startswith((REQUESTS_TOTAL + "{", LONG_RUNNING + "{")):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            raise ValueError(f"unreadable metrics line: {line[:200]!r}")
        labels = dict(_LABEL.findall(match["labels"]))
        target = completed if match["name"] == REQUESTS_TOTAL else opened
        target[request_key(labels)] += int(float(match["value"]))
    return RequestCounts(completed, opened)


def per_pod(counts: Mapping[RequestKey, int], pods: int, *, floor: float = 0.0) -> dict[str, float]:
    """``counts`` divided by ``pods``, rows of at least ``floor`` requests per pod, most first, keyed by
    ``"VERB resource"``."""
    rows = sorted(((str(k), v / pods) for k, v in counts.items()), key=lambda kv: (-kv[1], kv[0]))
    return {k: round(v, 3) for k, v in rows if v >= floor}


def format_rows(counts: Mapping[RequestKey, int], pods: int, *, floor: float = 0.005) -> Iterable[str]:
    """Human-readable lines: ``VERB resource`` and requests per pod, then the rest summed."""
    shown = per_pod(counts, pods, floor=floor)
    for key, value in shown.items():
        yield f"{key} {value:.3f}"
    rest = sum(v for k, v in counts.items() if str(k) not in shown)
    if rest:
        yield f"other {rest / pods:.3f} ({rest} requests)"
