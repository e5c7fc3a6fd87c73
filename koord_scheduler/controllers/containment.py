"""One object's failure in a controller's reconcile costs that object only.

A controller decides and writes per object (a node, a PodGroup, a quota). Whatever one of those steps
raises, be it a bug or an exception nobody foresaw on odd input (``RecursionError``, ``OverflowError``...),
is reported to :class:`~koord_scheduler.scheduler.object_errors.ObjectErrors` (logged once per distinct
problem, counted in ``koord_scheduler_object_errors_total{kind,reason="ReconcileError"}``) and the object
is skipped until it changes; the other objects are reconciled as usual. What escapes a controller's loop
anyway is restarted by :func:`~koord_scheduler.scheduler.task_restarts.supervise`.

A write the API server refuses for good (400 Bad Request, 413, 422 Invalid: the request itself is wrong,
so sending it again cannot help) is likewise reported once and not retried until the object changes
(:func:`permanent`); outages and conflicts are retried as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from koord_scheduler.framework.errors import describe
from koord_scheduler.scheduler.object_errors import RECONCILE_ERROR, ObjectErrors
from kubeapi.http import ApiError

T = TypeVar("T")

PERMANENT_STATUSES = frozenset({400, 413, 422})
"""Answers that say the request itself is wrong: the same request will always fail."""


def permanent(err: BaseException) -> bool:
    """The API server refused the request for good (see :data:`PERMANENT_STATUSES`)."""
    return isinstance(err, ApiError) and err.status in PERMANENT_STATUSES


class Containment:
    """Runs one object's step of ``controller`` and reports what it raises (see the module docstring)."""

    def __init__(self, controller: str, object_errors: ObjectErrors | None = None) -> None:
        self.controller = controller
        self.object_errors = object_errors if object_errors is not None else ObjectErrors()
        self.failures = 0
        """Steps that raised (each object's, however often)."""

    def call(self, kind: str, key: str, step: Callable[[], T]) -> T | None:
        """``step()``, or None when it raised (reported against ``kind`` ``key``)."""
        try:
            return step()
        except Exception as exc:
            self.report(kind, key, exc)
            return None

    def report(self, kind: str, key: str, exc: BaseException) -> None:
        """``kind`` ``key`` failed with ``exc`` in this controller."""
        self.failures += 1
        self.object_errors.report(kind, key, RECONCILE_ERROR, f"{self.controller}: {describe(exc)}", exc=exc)

    def clear(self, kind: str, key: str) -> None:
        """``kind`` ``key`` works again: a later failure is reported afresh."""
        self.object_errors.clear(kind, key)
