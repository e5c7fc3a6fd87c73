"""One place where a bad object is reported, so that it stays one object's problem.

Whatever fails on one object (a watch event the parser refuses, a handler that raises on it, a
Reservation the controller cannot decide on, a pod whose scheduling cycle raised) is handed to
:meth:`ObjectErrors.report` with the object's kind and key, a short ``reason`` (the metric label) and a
message that names the field. The report is

- logged once per (kind, key, message) at warning level, without a traceback (the traceback, when
  there is one, goes to debug level), so a bad object re-read every few seconds does not flood the log;
- counted once per (kind, key, message) in ``koord_scheduler_object_errors_total{kind,reason}``.

The caller then treats the object as absent (the informers) or as failed (the Reservation controller);
the Event a user sees is written by whoever has an API client (the cluster source, the controller).
Safe to call from any thread (the Reservation controller has its own).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from prometheus_client import CollectorRegistry, Counter

log = logging.getLogger("koord_scheduler.object_errors")

INVALID = "Invalid"
"""The object cannot be read (a field out of range, of the wrong type, missing)."""
HANDLER_ERROR = "HandlerError"
"""Reading it worked; acting on it raised (treated as absent)."""
SCHEDULING_ERROR = "SchedulingError"
"""A pod's scheduling cycle raised outside the plugins' error handling."""
RECONCILE_ERROR = "ReconcileError"
"""The Reservation controller could not decide on or apply a change to it."""

_REMEMBERED = 10_000


class ObjectErrors:
    """Log-once and count bad objects (see the module docstring)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.counter = Counter(
            "koord_scheduler_object_errors",
            "Objects that could not be used, by kind and reason (each distinct problem counted once).",
            ["kind", "reason"],
            registry=self.registry,
        )
        self._seen: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._lock = threading.Lock()

    def report(self, kind: str, key: str, reason: str, message: str, *, exc: BaseException | None = None) -> bool:
        """Record one problem with ``kind`` ``key``. True when it is new (logged and counted now)."""
        with self._lock:
            if self._seen.get((kind, key)) == message:
                return False
            self._seen[(kind, key)] = message
            self._seen.move_to_end((kind, key))
            while len(self._seen) > _REMEMBERED:
                self._seen.popitem(last=False)
        self.counter.labels(kind, reason).inc()
        log.warning("%s %s ignored (%s): %s", kind, key, reason, message)
        if exc is not None:
            log.debug("%s %s: traceback", kind, key, exc_info=exc)
        return True

    def clear(self, kind: str, key: str) -> None:
        """``kind`` ``key`` is fine again (or gone): a later problem is reported afresh."""
        with self._lock:
            self._seen.pop((kind, key), None)

    def count(self, kind: str, reason: str) -> float:
        """The counter's value (tests, ``simulate``)."""
        value = self.registry.get_sample_value("koord_scheduler_object_errors_total", {"kind": kind, "reason": reason})
        return value or 0.0
