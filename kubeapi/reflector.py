"""List+watch of one kind, client-go's Reflector on raw JSON.

A :class:`Reflector` lists a kind (paginated, consistent), keeps the parsed objects by key and then
watches from the list's resourceVersion with bookmarks on. It turns what it sees into ADDED / MODIFIED /
DELETED calls of its handler, with the previous parsed object as ``old``:

- a watch that ends normally (the server's timeout) is restarted from the last resourceVersion seen,
  which bookmarks keep fresh even when nothing changes;
- ``410 Gone`` (an ERROR event or an HTTP status) means that resourceVersion is too old: the kind is
  listed again and the result diffed against the store, so objects deleted meanwhile are delivered as
  DELETED and changed ones as MODIFIED; unchanged ones (same resourceVersion) produce nothing;
- connection failures (an API server restart) are retried with capped exponential backoff and jitter,
  resuming from the last resourceVersion.

An object the parser rejects (whatever it raises: ``ValueError`` naming the field, but also
``RecursionError``, ``OverflowError``, ``MemoryError``...) is reported once per resourceVersion
(:class:`Rejection`, to the ``on_invalid`` callback: the cluster source logs, counts and writes an Event)
and treated as absent: if an earlier version of it parsed, that version is delivered as DELETED, so no
stale copy (a Node's old allocatable) stays in use. An object that cannot even be decoded (nested deeper
than orjson's 1,024 levels) costs that object only: the rest of its list or watch stream is decoded one
object at a time (:mod:`apis.core.boundedjson`), and it is reported the same way, by name. A handler that
raises on an object is reported the same way and the object is then taken out as well. Everything else
carries on.

Anything that still escapes the watch loop (a bug) is reported to ``on_crash`` (the cluster source
counts it in ``koord_scheduler_task_restarts_total``), and the kind is listed and watched again after a
backoff: a watch never ends silently.

Handlers run on the event-loop thread, between scheduling cycles, never inside one.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from kubeapi import jsoncodec, protowire
from kubeapi.errors import ClusterError, describe, log_failure
from kubeapi.heap import request_trim
from kubeapi.http import JSON, ApiConnectionError, ApiError, ApiHttp, iter_lines
from kubeapi.jsoncodec import UndecodableObject
from kubeapi.kinds import EventType
from kubeapi.outage_log import SHARED as SHARED_OUTAGES
from kubeapi.outage_log import OutageLog
from kubeapi.paths import resource_path

log = logging.getLogger(__name__)

Json = dict[str, Any]
T = TypeVar("T")

Handler = Callable[[EventType, Any, Any], None]


@dataclass(frozen=True, slots=True)
class ResourceKind(Generic[T]):
    """What to list and watch, and how to turn one raw object into the ``T`` handlers receive.

    ``parser`` raises ``ValueError`` (``ParseError``) for a malformed object; anything else it raises is
    contained the same way. ``rank`` orders the objects of one list when they are delivered (lower first;
    pods use it to deliver bound pods before pending ones so the cache is complete before the queue
    fills).
    """

    kind: str
    group: str
    version: str
    plural: str
    parser: Callable[[Json], T]
    field_selector: str = ""
    label_selector: str = ""
    rank: Callable[[Json], int] | None = None
    update: Callable[[Json, T], T] | None = None
    """Parses a new version of an object given the value the previous version gave (so it may reuse
    it); raises like ``parser``. None: ``parser`` parses every version."""
    namespace: str = ""
    """Watch one namespace only (a namespaced kind); empty: every namespace."""
    protobuf: bool = False
    """``parser`` reads only what :func:`kubeapi.protodict.to_json` keeps of the object, so the kind may be
    listed and watched as protobuf (:attr:`ReflectorOptions.protobuf`) when it is one of
    :data:`kubeapi.protowire.BUILTIN_KINDS`. A parser that needs the whole object (the koordlet's) leaves
    it False: JSON."""
    from_message: Callable[[Any], T] | None = None
    """Builds the value from an object decoded from protobuf (the generated message, e.g.
    :func:`kubeapi.protoparse.pod_from_message`), giving what ``parser`` gives for its JSON; raises like
    ``parser``. None: ``parser`` reads the message's JSON (:meth:`~kubeapi.protowire.ProtoObject.as_json`)."""
    update_message: Callable[[Any, T], T] | None = None
    """``update`` for an object decoded from protobuf (its message and the previous value)."""

    @property
    def path(self) -> str:
        """The collection's path (:func:`~.paths.resource_path`)."""
        return resource_path(self.group, self.version, self.plural, namespace=self.namespace)


@dataclass(frozen=True, slots=True)
class ReflectorOptions:
    page_size: int = 500
    min_watch_timeout: float = 300.0
    """Watches ask the server to end them after a random time in [min, 2*min), as client-go does, so
    reconnections of many clients spread out."""
    initial_backoff: float = 0.8
    max_backoff: float = 30.0
    healthy_watch_seconds: float = 10.0
    """A watch that lasted this long (or delivered an event) resets the backoff."""
    protobuf: bool = True
    """List and watch the kinds marked :attr:`ResourceKind.protobuf` (the scheduler's Pods and Nodes, the
    built-in kinds its plugins and controllers watch) as ``application/vnd.kubernetes.protobuf``, as
    kube-scheduler does; other kinds (custom resources)
    are always JSON. False: JSON for everything (``clientConnection.contentType: application/json``)."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """One object that could not be used: ``reason`` is ``Invalid`` (the parser refused it) or
    ``HandlerError`` (a handler raised on it); ``message`` names the field where there is one."""

    kind: ResourceKind[Any]
    key: str
    obj: Json
    reason: str
    message: str
    exc: BaseException | None = None


def log_rejection(rejection: Rejection) -> None:
    """The default ``on_invalid``: one warning line."""
    log.warning("ignoring %s %s (%s): %s", rejection.kind.kind, rejection.key, rejection.reason, rejection.message)


def log_crash(kind: ResourceKind[Any], exc: BaseException) -> None:
    """The default ``on_crash``: one error line (the traceback at debug level)."""
    log_failure(log, f"watch of {kind.plural} failed and is restarted", exc)


class ResourceVersionGoneError(ClusterError):
    """The resourceVersion a watch asked for is no longer available: list again."""


@dataclass(slots=True)
class _Entry:
    resource_version: str
    value: Any


@dataclass(slots=True)
class Backoff:
    """Capped exponential backoff with full jitter on the upper half (client-go's ``wait.Backoff``)."""

    initial: float
    cap: float
    _next: float = 0.0
    rng: random.Random = field(default_factory=random.Random)

    def next(self) -> float:
        self._next = self.initial if self._next <= 0 else min(self.cap, self._next * 2)
        return self._next * (0.5 + 0.5 * self.rng.random())

    def reset(self) -> None:
        self._next = 0.0


class Reflector:
    """Keeps ``handler`` in step with one kind on the API server; see the module docstring."""

    def __init__(
        self,
        http: ApiHttp,
        kind: ResourceKind[Any],
        handler: Handler,
        *,
        options: ReflectorOptions | None = None,
        on_invalid: Callable[[Rejection], None] = log_rejection,
        on_listed: Callable[[], None] = request_trim,
        outages: OutageLog = SHARED_OUTAGES,
        on_crash: Callable[[ResourceKind[Any], BaseException], None] = log_crash,
    ) -> None:
        """``on_listed`` runs after every list has been applied (:meth:`replace`); by default it asks
        for the heap to be trimmed (:mod:`.heap`), since a list frees a burst of memory. ``outages``
        folds the retries of an API-server outage into one warning (:mod:`.outage_log`). ``on_crash``
        hears of every exception that escaped the watch loop before it starts again (:meth:`run`)."""
        self.http = http
        self.kind = kind
        self.handler = handler
        self.options = options or ReflectorOptions()
        self.on_invalid = on_invalid
        self.on_listed = on_listed
        self.store: dict[str, _Entry] = {}
        self.resource_version = ""
        self.relists = 0
        self.watches = 0
        self.crashes = 0
        """Exceptions that escaped the watch loop (each followed by a fresh list)."""
        self.on_crash = on_crash
        self._prepared: dict[str, tuple[str, Any]] = {}
        """key -> (resourceVersion, parsed value) of a first list, parsed page by page (:meth:`list_all`)."""
        self._rejected: dict[str, str] = {}
        """key -> resourceVersion of the last version logged as malformed (log each version once)."""
        self._backoff = Backoff(self.options.initial_backoff, self.options.max_backoff)
        self.outages = outages
        self.protobuf = (
            self.options.protobuf and kind.protobuf and protowire.supports(kind.group, kind.version, kind.plural)
        )
        """Lists and watches go as protobuf (see :attr:`ReflectorOptions.protobuf`)."""

    def get(self, key: str) -> Any:
        entry = self.store.get(key)
        return None if entry is None else entry.value

    # ----- list -----

    async def list_all(
        self, *, prepare: bool = False, on_page: Callable[[list[Json], dict[str, tuple[str, Any]]], None] | None = None
    ) -> tuple[list[Json], str]:
        """Every object (paginated, consistent read) and the list's resourceVersion.

        With ``prepare``, each page is parsed while the next one is being fetched (the API server
        serialises page k+1 on its core while this process parses page k on its own), and
        :meth:`replace` uses those values instead of parsing again: start-up then costs the larger of
        the two, not their sum. Only for a first list (an empty store): an update needs the old value.
        ``on_page`` gets each page with the values parsed from it, as soon as they are (a page of a list
        that had to start over is passed again)."""
        items: list[Json] = []
        params = {"limit": str(self.options.page_size)}
        if self.kind.field_selector:
            params["fieldSelector"] = self.kind.field_selector
        if self.kind.label_selector:
            params["labelSelector"] = self.kind.label_selector
        prepare = prepare and not self.store
        self._prepared.clear()
        fetch = self._fetch_page(params)
        try:
            while True:
                try:
                    doc = await fetch
                except ApiError as err:
                    if err.gone and "continue" in params:
                        # The continue token expired mid-list: start over.
                        items.clear()
                        self._prepared.clear()
                        params.pop("continue")
                        fetch = self._fetch_page(params)
                        continue
                    raise
                page = doc.get("items") or ()
                items.extend(page)
                meta = doc.get("metadata") or {}
                token = meta.get("continue")
                if token:
                    params["continue"] = token
                    fetch = self._fetch_page(params)
                    if prepare:
                        await asyncio.sleep(0)  # let the request go out before parsing this page
                ready = self._prepare(page) if prepare else {}
                if on_page is not None:
                    on_page(list(page), ready)
                if not token:
                    return items, str(meta.get("resourceVersion") or "")
        finally:
            if not fetch.done():  # cancelled, or a page failed, while the next one was on its way
                fetch.cancel()

    def _fetch_page(self, params: dict[str, str]) -> asyncio.Future[Json]:
        return asyncio.ensure_future(self._get_page(dict(params)))

    async def _get_page(self, params: dict[str, str]) -> Json:
        """One page, decoded so that an object orjson refuses costs that object only (it is an
        :class:`UndecodableObject` in ``items``)."""
        accept = protowire.PROTOBUF_OR_JSON if self.protobuf else JSON
        payload = await self.http.request("GET", self.kind.path, params=params, accept=accept)
        if payload.startswith(protowire.MAGIC):  # what the server chose (JSON never starts so)
            try:
                return protowire.decode_list(payload)
            except ValueError as exc:
                raise ApiError(200, "InvalidResponse", str(exc), method="GET", path=self.kind.path) from None
        try:
            doc = jsoncodec.loads_list(payload)
        except ValueError as exc:
            raise ApiError(200, "InvalidResponse", f"not JSON: {exc}", method="GET", path=self.kind.path) from None
        if not isinstance(doc, dict):
            raise ApiError(200, "InvalidResponse", "not a list", method="GET", path=self.kind.path)
        return doc

    def _prepare(self, page: Any) -> dict[str, tuple[str, Any]]:
        """Parse a first list's page ahead of :meth:`replace`; what does not parse is left for it (which
        reports it). The page's parsed values (also kept for :meth:`replace`)."""
        ready: dict[str, tuple[str, Any]] = {}
        for obj in page:
            if isinstance(obj, UndecodableObject):
                continue
            try:
                ready[object_key(obj)] = (_rv(obj), self._parse(obj, None))
            except Exception:  # reported when replace() parses it again
                continue
        self._prepared.update(ready)
        return ready

    def take_prepared(self) -> dict[str, tuple[str, Any]]:
        """The values :meth:`list_all` parsed ahead (key -> (resourceVersion, value)), handed over."""
        prepared, self._prepared = self._prepared, {}
        return prepared

    def adopt(self, items: list[Json], resource_version: str, prepared: dict[str, tuple[str, Any]]) -> None:
        """:meth:`replace` with a first list made elsewhere (:mod:`~kubeapi.prefetch`)
        and the values parsed from it."""
        # Only a first list may reuse parsed values: an update needs the old value.
        self._prepared = {} if self.store else prepared
        self.replace(items, resource_version)

    def deliver_early(self, page: list[Json], prepared: dict[str, tuple[str, Any]]) -> None:
        """One page of a first list, before the rest of it is in: the page's objects of rank 0 (bound
        pods) are delivered now with the values parsed for them; the others wait for the list's end
        (:meth:`replace`, which delivers them in rank order with the values kept here, and takes out
        whatever was delivered here but is not in the final list)."""
        rank = self.kind.rank
        for obj in page:
            key = object_key(obj)
            ready = prepared.get(key)
            entry = self.store.get(key)
            if entry is None and ready is not None:
                self._prepared[key] = ready
            if rank is not None and rank(obj) != 0:
                continue
            if entry is not None and entry.resource_version == _rv(obj) and _rv(obj):
                continue  # the same page again (the list started over)
            self._deliver_upsert(key, obj)

    def replace(self, items: list[Json], resource_version: str) -> None:
        """Make the store equal ``items`` and deliver the differences (all ADDED on the first list)."""
        seen: set[str] = set()
        if self.kind.rank is not None:
            items = sorted(items, key=self.kind.rank)
        fresh: list[tuple[str, Json]] = []
        for obj in items:
            key = object_key(obj)
            seen.add(key)
            fresh.append((key, obj))
        for key in [k for k in self.store if k not in seen]:
            self._deliver_delete(key)
        for key, obj in fresh:
            entry = self.store.get(key)
            if entry is not None and entry.resource_version == _rv(obj) and _rv(obj):
                continue
            self._deliver_upsert(key, obj)
        self._prepared.clear()
        self.resource_version = resource_version
        self.relists += 1
        self.on_listed()

    # ----- watch -----

    async def run(self) -> None:
        """Watch forever (until cancelled), listing again whenever the watch says Gone. Whatever escapes
        the loop is reported to ``on_crash``; the kind is then listed again after a backoff."""
        need_list = not self.resource_version
        while True:
            try:
                await self._list_and_watch(need_list)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.crashes += 1
                try:
                    self.on_crash(self.kind, exc)
                except Exception as report_failure:  # reporting must not stop the watch either
                    log_failure(log, f"reporting a failed watch of {self.kind.plural} failed", report_failure)
            need_list = True
            await asyncio.sleep(self._backoff.next())

    async def _list_and_watch(self, need_list: bool) -> None:
        gone_in_a_row = 0
        while True:
            if need_list:
                try:
                    items, rv = await self.list_all()
                except ClusterError as err:
                    await self._pause(f"list {self.kind.plural} failed: {err}", err)
                    continue
                self.replace(items, rv)
                need_list = False
            started = time.monotonic()
            delivered = 0
            try:
                delivered = await self.watch_once()
                gone_in_a_row = 0
            except ResourceVersionGoneError:
                log.info(
                    "watch of %s: resourceVersion %s is gone; listing again", self.kind.plural, self.resource_version
                )
                need_list = True
                gone_in_a_row += 1
                if gone_in_a_row > 1:  # a fresh list's version is already gone: do not spin
                    await self._pause(f"watch {self.kind.plural}: resourceVersion gone right after a list")
                continue
            except ClusterError as err:
                if isinstance(err, ApiError) and err.gone:
                    need_list = True
                    gone_in_a_row += 1
                    continue
                if time.monotonic() - started >= self.options.healthy_watch_seconds:
                    self._backoff.reset()
                await self._pause(f"watch {self.kind.plural} failed: {err}", err)
                continue
            if delivered or time.monotonic() - started >= self.options.healthy_watch_seconds:
                self._backoff.reset()

    async def _pause(self, message: str, err: ClusterError | None = None) -> None:
        delay = self._backoff.next()
        self.outages.failure(log, f"{message}; retrying in {delay:.1f}s", transient=_transient(err))
        await asyncio.sleep(delay)

    async def watch_once(self) -> int:
        """One watch request from :attr:`resource_version` until the server ends it. Returns the number
        of events delivered; raises :class:`ResourceVersionGoneError` on 410 and ``ClusterError`` on other failures."""
        timeout = int(self.options.min_watch_timeout * (1.0 + random.random()))
        params = {
            "watch": "1",
            "allowWatchBookmarks": "true",
            "resourceVersion": self.resource_version,
            "timeoutSeconds": str(timeout),
        }
        if self.kind.field_selector:
            params["fieldSelector"] = self.kind.field_selector
        if self.kind.label_selector:
            params["labelSelector"] = self.kind.label_selector
        delivered = 0
        self.watches += 1
        accept = protowire.PROTOBUF_OR_JSON if self.protobuf else JSON
        async with self.http.stream(self.kind.path, params, accept=accept) as content:
            stream = await protowire.peek(content)
            if stream.protobuf:  # the server chose protobuf: length-prefixed frames
                try:
                    async for frames in protowire.iter_frames(stream):
                        for frame in frames:
                            delivered += self._on_watch_frame(frame)
                except protowire.ProtoError as exc:
                    raise ClusterError(f"watch {self.kind.plural}: {exc}") from None
                return delivered
            async for lines in iter_lines(stream):  # type: ignore[arg-type]
                for line in lines:
                    delivered += self._on_watch_line(line)
        return delivered

    def _on_watch_frame(self, frame: bytes) -> int:
        try:
            kind, obj = protowire.decode_event(frame)
        except ValueError as exc:
            raise ClusterError(f"watch {self.kind.plural}: undecodable event: {exc}") from None
        return self._on_watch_event(kind, obj)

    def _on_watch_line(self, line: bytes) -> int:
        try:
            event = jsoncodec.loads_event(line)
            kind = event["type"]
            obj = event["object"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ClusterError(f"watch {self.kind.plural}: undecodable event: {exc}") from None
        return self._on_watch_event(kind, obj)

    def _on_watch_event(self, kind: Any, obj: Any) -> int:
        if kind == "ERROR":
            code = obj.get("code") if isinstance(obj, dict) else None
            message = obj.get("message", "") if isinstance(obj, dict) else str(obj)
            if code == 410:
                raise ResourceVersionGoneError(f"watch {self.kind.plural}: {message}")
            raise ClusterError(f"watch {self.kind.plural}: error event {code}: {message}")
        rv = _rv(obj)
        if kind == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return 0
        key = object_key(obj)
        if kind == "DELETED":
            self._deliver_delete(key)
        elif kind in ("ADDED", "MODIFIED"):
            self._deliver_upsert(key, obj)
        else:
            log.debug("watch %s: ignoring event type %r", self.kind.plural, kind)
        if rv:
            self.resource_version = rv
        return 1

    # ----- delivery -----

    def _deliver_upsert(self, key: str, obj: Json) -> None:
        rv = _rv(obj)
        old = self.store.get(key)
        ready = self._prepared.pop(key, None) if old is None and self._prepared else None
        if isinstance(obj, UndecodableObject):
            self._remove(key)
            self._reject(key, obj, "Invalid", obj.error, None)
            return
        try:
            value = ready[1] if ready is not None and ready[0] == rv else self._parse(obj, old)
        except Exception as err:
            # Treated as absent: a version that parsed earlier must not stay in use. A ValueError is the
            # parser's own (it names the field); anything else is named by its type.
            self._remove(key)
            own = isinstance(err, ValueError) and not isinstance(err, UnicodeError)
            self._reject(key, obj, "Invalid", str(err) if own else describe(err), None if own else err)
            return
        self._rejected.pop(key, None)
        self.store[key] = _Entry(rv, value)
        event = EventType.ADDED if old is None else EventType.MODIFIED
        failure = self._call(event, None if old is None else old.value, value)
        if failure is not None:
            # Whatever the handler managed to apply of this object is taken out again.
            self.store.pop(key, None)
            self._call(EventType.DELETED, value, None)  # best effort: the first failure is the one reported
            self._reject(key, obj, "HandlerError", f"{type(failure).__name__}: {failure}", failure)

    def _parse(self, obj: Json, old: _Entry | None) -> Any:
        """The value of ``obj`` (a new version of ``old`` when that is not None), by the kind's
        message parsers for an object decoded from protobuf, else by its JSON parsers."""
        kind = self.kind
        if type(obj) is protowire.ProtoObject:
            if kind.from_message is not None:
                if old is not None and kind.update_message is not None:
                    return kind.update_message(obj.message, old.value)
                return kind.from_message(obj.message)
            obj = obj.as_json()
        if old is not None and kind.update is not None:
            return kind.update(obj, old.value)
        return kind.parser(obj)

    def _deliver_delete(self, key: str) -> None:
        self._rejected.pop(key, None)
        self._remove(key)

    def _remove(self, key: str) -> None:
        old = self.store.pop(key, None)
        if old is not None:
            failure = self._call(EventType.DELETED, old.value, None)
            if failure is not None:
                message = f"{type(failure).__name__}: {failure}"
                self._report(Rejection(self.kind, key, {}, "HandlerError", message, failure))

    def _reject(self, key: str, obj: Json, reason: str, message: str, exc: BaseException | None) -> None:
        rv = _rv(obj)
        if self._rejected.get(key) == rv and rv:
            return
        self._rejected[key] = rv
        self._report(Rejection(self.kind, key, obj, reason, message, exc))

    def _report(self, rejection: Rejection) -> None:
        try:
            self.on_invalid(rejection)
        except Exception as exc:  # reporting must not stop the watch either
            log_failure(log, f"reporting a rejected {self.kind.kind} failed", exc)

    def _call(self, event: EventType, old: Any, new: Any) -> Exception | None:
        """Run the handler; what it raised (a handler failure must not stop the watch), else None."""
        try:
            self.handler(event, old, new)
        except Exception as exc:
            return exc
        return None


def object_key(obj: Json) -> str:
    """``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        return ""
    name = str(meta.get("name") or "")
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else name


def _rv(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return str(meta.get("resourceVersion") or "") if isinstance(meta, dict) else ""


def _transient(err: ClusterError | None) -> bool:
    """The server could not be reached, or said it is unavailable or overloaded (5xx, 429): an outage."""
    if isinstance(err, ApiConnectionError):
        return True
    return isinstance(err, ApiError) and (err.status >= 500 or err.status == 429)
