"""Kubernetes Events as kube-scheduler writes them: ``events.k8s.io/v1``, from client-go's
``tools/events`` recorder and broadcaster.

- ``reportingController`` is the profile's scheduler name, ``reportingInstance`` is
  ``<controller>-<hostname>``, the object name is ``<pod name>.<unix nanoseconds in hex>``.
- ``note`` is cut to 1024 bytes (``validation.NoteLengthLimit``), ending in ``" ..."`` when cut.
- Isomorphic events (same regarding object, reason, action, controller) within 6 minutes form a series,
  as the broadcaster does: the first is created; the second patches ``series`` (count 2); later ones only
  count, and the count is written when the series is next patched, at most every :attr:`heartbeat`
  seconds. So a pod that keeps failing produces one Event object, not one per attempt.
- Recording never blocks the caller, and Events are sent as they come, as client-go's broadcaster
  sends each one on a goroutine of its own: :attr:`EventOptions.senders` tasks take them off a queue, so
  up to that many are in flight, rate-limited only by the Events client's own token bucket
  (``clientConnection``'s qps/burst, a bucket apart from the binds'). So a ``Scheduled`` Event follows its
  bind within the API server's latency, not seconds later. The queue is bounded
  (:attr:`EventOptions.queue_size`) only to bound memory while the API server cannot be reached: an Event
  that finds it full is dropped and counted, like one that finds the broadcaster's buffered channel full.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from apis.core.types import Pod
from kubeapi import protobody
from kubeapi.errors import ClusterError, log_failure
from kubeapi.http import JSON, STRATEGIC_MERGE_PATCH, ApiHttp
from kubeapi.paths import resource_path
from kubeapi.protowire import PROTOBUF, PROTOBUF_OR_JSON

log = logging.getLogger(__name__)

EVENTS_GROUP = "events.k8s.io"

NOTE_LENGTH_LIMIT = 1024
SERIES_WINDOW_SECONDS = 6 * 60.0
SERIES_HEARTBEAT_SECONDS = 30 * 60.0


def truncate_note(message: str, limit: int = NOTE_LENGTH_LIMIT) -> str:
    """kube-scheduler's ``truncateMessage``: at most ``limit`` bytes, cut ones end in ``" ..."``."""
    raw = message.encode()
    if len(raw) <= limit:
        return message
    suffix = " ..."
    return raw[: limit - len(suffix)].decode("utf-8", "ignore") + suffix


def micro_time(seconds: float) -> str:
    """``metav1.MicroTime`` JSON: RFC3339 in UTC with exactly six fractional digits."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339(seconds: float) -> str:
    """``metav1.Time`` JSON: whole seconds, UTC."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class EventOptions:
    queue_size: int = 20000
    senders: int = 64
    """Events in flight at most: as many as the bindings the scheduler keeps in flight
    (``SchedulerOptions.max_concurrent_bindings``). A busy API server shares itself out among the requests
    in flight, so with fewer the Events would get that much less of it than the binds and fall behind."""
    heartbeat: float = SERIES_HEARTBEAT_SECONDS
    series_window: float = SERIES_WINDOW_SECONDS
    max_series: int = 20000
    hostname: str = ""
    protobuf: bool = False
    """Create Events with a protobuf body (:mod:`.protobody`), asking for a protobuf answer, as
    kube-scheduler does with its default ``clientConnection.contentType``; False: JSON. Series patches
    are strategic merge patches, JSON either way."""


@dataclass(frozen=True, slots=True)
class Regarding:
    """The object an Event is about (an ``ObjectReference``)."""

    kind: str
    api_version: str
    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""


@dataclass(slots=True)
class _Series:
    namespace: str
    name: str
    count: int
    last_observed: float
    last_written: float
    created: bool


class _NewEvent(NamedTuple):
    """What a new Event's body is built from, when it is sent (:func:`_event_body`): under load Events
    wait behind bindings, and building the body then keeps that work off the scheduling path."""

    regarding: Regarding
    namespace: str
    name: str
    time: float
    controller: str
    action: str
    reason: str
    event_type: str
    note: str


@dataclass(frozen=True, slots=True)
class _Send:
    key: tuple[str, ...]
    event: _NewEvent | None
    """A new Event; None means patch the series of ``key``."""


def _reference(regarding: Regarding) -> dict[str, str]:
    """The ``ObjectReference`` JSON of ``regarding`` (empty fields left out)."""
    ref: dict[str, str] = {"kind": regarding.kind, "apiVersion": regarding.api_version, "name": regarding.name}
    if regarding.namespace:
        ref["namespace"] = regarding.namespace
    if regarding.uid:
        ref["uid"] = regarding.uid
    if regarding.resource_version:
        ref["resourceVersion"] = regarding.resource_version
    return ref


def _event_body(event: _NewEvent, hostname: str) -> dict[str, Any]:
    """The JSON of a new Event."""
    return {
        "apiVersion": f"{EVENTS_GROUP}/v1",
        "kind": "Event",
        "metadata": {"name": event.name, "namespace": event.namespace},
        "eventTime": micro_time(event.time),
        "reportingController": event.controller,
        "reportingInstance": f"{event.controller}-{hostname}",
        "action": event.action,
        "reason": event.reason,
        "type": event.event_type,
        "note": truncate_note(event.note),
        "regarding": _reference(event.regarding),
    }


def _event_protobuf(event: _NewEvent, hostname: str) -> bytes:
    """The same Event as :func:`_event_body`, as a protobuf body (:mod:`.protobody`)."""
    return protobody.event(
        event.namespace,
        event.name,
        event_time=event.time,
        reporting_controller=event.controller,
        reporting_instance=f"{event.controller}-{hostname}",
        action=event.action,
        reason=event.reason,
        event_type=event.event_type,
        note=truncate_note(event.note),
        regarding=_reference(event.regarding),
    )


class EventRecorder:
    """Writes Events for pods through ``http``. Start with :meth:`start`, stop with :meth:`stop`."""

    def __init__(
        self,
        http: ApiHttp,
        *,
        options: EventOptions | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.http = http
        self.options = options or EventOptions()
        self.clock = clock
        self.hostname = self.options.hostname or socket.gethostname()
        self.dropped = 0
        self.written = 0
        self.failed = 0
        self._queue: asyncio.Queue[_Send] = asyncio.Queue(self.options.queue_size)
        self._series: OrderedDict[tuple[str, ...], _Series] = OrderedDict()
        self._senders: list[asyncio.Task[None]] = []

    def start(self) -> None:
        if not self._senders:
            self._senders = [
                asyncio.get_running_loop().create_task(self._send_loop(), name=f"event-sender-{i}")
                for i in range(self.options.senders)
            ]

    async def stop(self, *, flush_timeout: float = 2.0) -> None:
        """Send what is queued (for at most ``flush_timeout`` seconds), then stop the senders."""
        if self._senders and not self._queue.empty():
            try:
                await asyncio.wait_for(self._queue.join(), flush_timeout)
            except TimeoutError:
                log.info("dropping %d unsent events at shutdown", self._queue.qsize())
        for task in self._senders:
            task.cancel()
        await asyncio.gather(*self._senders, return_exceptions=True)
        self._senders = []

    @property
    def open_series(self) -> int:
        """How many Event series are remembered (each may still be counted up)."""
        return len(self._series)

    async def flush(self) -> None:
        """Wait until every queued event has been sent (tests)."""
        await self._queue.join()

    def record(
        self,
        pod: Pod,
        *,
        event_type: str,
        reason: str,
        action: str,
        note: str,
        controller: str,
    ) -> None:
        """Queue an Event about ``pod``; never blocks, never raises."""
        regarding = Regarding("Pod", "v1", pod.namespace, pod.name, pod.uid, pod.meta.resource_version)
        self.record_for(
            regarding, event_type=event_type, reason=reason, action=action, note=note, controller=controller
        )

    def record_for(
        self,
        regarding: Regarding,
        *,
        event_type: str,
        reason: str,
        action: str,
        note: str,
        controller: str,
    ) -> None:
        """Queue an Event about any object; cluster-scoped objects' Events go to ``default``."""
        now = self.clock()
        self._finish_series(now)
        identity = regarding.uid or f"{regarding.kind}/{regarding.namespace}/{regarding.name}"
        key = (identity, reason, action, controller, event_type)
        series = self._series.get(key)
        if series is not None and now - series.last_observed <= self.options.series_window:
            series.count += 1
            series.last_observed = now
            self._series.move_to_end(key)
            # The second occurrence starts the series at once; later ones ride on the heartbeat.
            if series.count == 2 or now - series.last_written >= self.options.heartbeat:
                series.last_written = now
                self._put(_Send(key, None))
            return
        namespace = regarding.namespace or "default"
        name = f"{regarding.name}.{int(now * 1e9):x}"
        self._series[key] = _Series(namespace, name, 1, now, now, created=False)
        self._series.move_to_end(key)
        while len(self._series) > self.options.max_series:
            self._series.popitem(last=False)
        self._put(_Send(key, _NewEvent(regarding, namespace, name, now, controller, action, reason, event_type, note)))

    def _finish_series(self, now: float) -> None:
        """Forget the series not observed within the window (client-go's events recorder finishes them the
        same way): the next occurrence starts a new Event anyway, and a long run must not keep one entry per
        pod it ever scheduled. The dict is in order of last observation, so the stale ones are in front."""
        series, window = self._series, self.options.series_window
        while series:
            key, oldest = next(iter(series.items()))
            if now - oldest.last_observed <= window:
                return
            del series[key]

    def _put(self, item: _Send) -> None:
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("event queue full; %d events dropped so far", self.dropped)

    async def _send_loop(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                await self._send(item)
            except ClusterError as err:
                self.failed += 1
                log.info("writing an event failed: %s", err)
            except Exception as exc:
                self.failed += 1
                log_failure(log, "writing an event failed", exc)
            finally:
                self._queue.task_done()

    async def _send(self, item: _Send) -> None:
        series = self._series.get(item.key)
        if item.event is not None:
            path = resource_path(EVENTS_GROUP, "v1", "events", namespace=item.event.namespace)
            if self.options.protobuf:
                body = _event_protobuf(item.event, self.hostname)
                await self.http.request("POST", path, body=body, content_type=PROTOBUF, accept=PROTOBUF_OR_JSON)
            else:
                await self.http.request("POST", path, body=_event_body(item.event, self.hostname), content_type=JSON)
            self.written += 1
            if series is not None:
                series.created = True
                if series.count > 1:  # repeats arrived while the create was in flight
                    await self._patch_series(series)
            return
        if series is None or not series.created:
            return  # evicted, or its create is still in flight (it patches when done) or failed
        await self._patch_series(series)

    async def _patch_series(self, series: _Series) -> None:
        patch = {"series": {"count": series.count, "lastObservedTime": micro_time(series.last_observed)}}
        await self.http.request(
            "PATCH",
            resource_path(EVENTS_GROUP, "v1", "events", namespace=series.namespace, name=series.name),
            body=patch,
            content_type=STRATEGIC_MERGE_PATCH,
        )
        self.written += 1
