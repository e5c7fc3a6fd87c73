"""The API-server :class:`~koord_scheduler.scheduler.source.ClusterSource`.

Pods and Nodes are listed and watched as raw JSON (:mod:`.reflector`), parsed with
:mod:`apis.core.parse` and handed to the sink; further kinds (Reservations, NodeMetrics...) are added
with :meth:`KubeClusterSource.watch_kind` and reach the sink's ``on_object``. Pods in a terminal phase
are filtered out by the server (``status.phase!=Succeeded,status.phase!=Failed``, as kube-scheduler's
informer does); a pod that reaches one is therefore delivered as DELETED.

Everything runs as tasks on the caller's event loop. Watch events are parsed and delivered by the
watch task between scheduling cycles (the cycle is synchronous, so nothing interleaves with it); all
events that are already buffered are handled in one go.

Bindings and new Events are sent as protobuf when the lists and watches are
(:attr:`~kubeapi.reflector.ReflectorOptions.protobuf`, from ``clientConnection.contentType``), as
kube-scheduler sends them; patches are JSON either way.

Two connection pools with their own token buckets, as kube-scheduler has separate clientsets: one
for watches, binds and status patches (``clientConnection.qps/burst``), one for Events (same limits), so
a burst of Events never waits for a token a bind needs.

Failure reporting follows kube-scheduler's ``handleSchedulingFailure``: the ``PodScheduled`` condition
becomes ``False`` with the reason and the full message, patched only when it differs from what the pod
already has (so a pod that keeps failing for the same reason costs no writes); ``nominatedNodeName``
follows the scheduler's view of the pod; a ``FailedScheduling`` Warning Event carries the message cut to
1024 bytes. Success is a ``Scheduled`` Normal Event, ``Successfully assigned <ns>/<name> to <node>``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from apis.core.types import Node, Pod
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.handle import ClusterClient
from koord_scheduler.framework.types import ObjectKind
from koord_scheduler.scheduler.source import EventSink, EventType
from kubeapi import protowire
from kubeapi.client import KubeClusterClient
from kubeapi.connection import Connection
from kubeapi.core_kinds import NODE_KIND, POD_KIND
from kubeapi.events import EventOptions, EventRecorder, Regarding, rfc3339
from kubeapi.http import STRATEGIC_MERGE_PATCH, ApiError, ApiHttp, HttpOptions
from kubeapi.paths import pod_path
from kubeapi.pod_watch import (
    PodEntry,
    PodScheduledCondition,
)
from kubeapi.prefetch import Listed, Prefetch
from kubeapi.ratelimit import TokenBucket
from kubeapi.reflector import (
    Backoff,
    Reflector,
    ReflectorOptions,
    Rejection,
    ResourceKind,
    log_crash,
)

if TYPE_CHECKING:
    from koord_scheduler.scheduler.task_restarts import TaskRestarts

log = logging.getLogger(__name__)
startup_log = logging.getLogger("koord_scheduler.startup")
"""Start-up time-line lines, shown from ``-v 2``."""

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class KubeSourceOptions:
    """``qps``/``burst``: ``clientConnection``'s (zero or less, or huge, means unlimited).
    ``scheduler_names``: the profiles' names; Events name the pod's profile as their controller."""

    qps: float = 50.0
    burst: int = 100
    scheduler_names: Collection[str] = ("default-scheduler",)
    http: HttpOptions = field(default_factory=HttpOptions)
    reflector: ReflectorOptions = field(default_factory=ReflectorOptions)
    events: EventOptions = field(default_factory=EventOptions)


class KubeClusterSource:
    """List+watch from, and writes to, one API server. See the module docstring."""

    def __init__(
        self,
        connection: Connection,
        *,
        options: KubeSourceOptions | None = None,
        clock: Callable[[], float] = time.time,
        prefetch: Prefetch | None = None,
        restarts: TaskRestarts | None = None,
    ) -> None:
        """``prefetch``: the first lists of Nodes and Pods, already under way
        (:mod:`~kubeapi.prefetch`). ``restarts`` counts watches that failed and were
        started again (``watch-<plural>``); without it they are logged only."""
        self.connection = connection
        self.options = options or KubeSourceOptions()
        self.clock = clock
        opts = self.options
        self.http = ApiHttp(connection, TokenBucket(opts.qps, opts.burst), options=opts.http)
        self.events_http = ApiHttp(
            connection, TokenBucket(opts.qps, opts.burst), options=HttpOptions(pool_size=opts.events.senders + 2)
        )
        # clientConnection's content type (ReflectorOptions.protobuf) is also that of the per-pod writes.
        protobuf = opts.reflector.protobuf
        self.events = EventRecorder(self.events_http, options=replace(opts.events, protobuf=protobuf), clock=clock)
        default_controller = next(iter(opts.scheduler_names), "default-scheduler")
        self._client = KubeClusterClient(self.http, self.events, controller=default_controller, protobuf=protobuf)
        self._sink: EventSink | None = None
        self._kinds: list[tuple[ResourceKind[Any], Callable[[EventSink], Callable[[EventType, Any, Any], None]]]] = [
            (NODE_KIND, _node_handler),
        ]
        self._optional: set[str] = set()
        self._pod_kind = POD_KIND
        self._prefetch = prefetch
        self.restarts = restarts
        self.reflectors: dict[str, Reflector] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._written: dict[str, tuple[str, PodScheduledCondition, str]] = {}
        """pod key -> (uid, condition, nominatedNodeName) this process last patched; the watch may lag."""
        self.synced = False

    # ----- configuration -----

    def watch_kind(
        self,
        group: str,
        version: str,
        plural: str,
        parser: Callable[[Json], Any],
        kind_name: str,
        *,
        label_selector: str = "",
        field_selector: str = "",
        namespace: str = "",
        optional: bool = False,
    ) -> None:
        """Also list+watch ``group/version/plural`` and deliver parsed objects to ``sink.on_object(kind_name,
        ...)``. ``parser`` raises ``ValueError`` for a malformed object (it is logged and skipped). Call
        before :meth:`start`; these kinds are delivered after Nodes and before Pods. ``namespace`` limits
        the watch to one namespace (and the RBAC it needs to a Role there). An ``optional`` kind does not
        hold up :meth:`start` when it cannot be listed (a missing CRD, missing RBAC): it keeps retrying in
        the background, and :meth:`listed` says when it has been listed. A built-in kind
        (:data:`kubeapi.protowire.BUILTIN_KINDS`) is read as protobuf unless ``clientConnection`` says
        JSON; ``parser`` then reads the object's dict as :func:`kubeapi.protodict.to_json` builds it."""
        if self._sink is not None:
            raise RuntimeError("watch_kind() must be called before start()")
        kind = ResourceKind(
            kind_name,
            group,
            version,
            plural,
            parser,
            field_selector=field_selector,
            label_selector=label_selector,
            namespace=namespace,
            protobuf=protowire.supports(group, version, plural),
        )

        def handler_for(sink: EventSink) -> Callable[[EventType, Any, Any], None]:
            return lambda event, old, new: sink.on_object(kind_name, event, old, new)

        self._kinds.append((kind, handler_for))
        if optional:
            self._optional.add(kind_name)

    def listed(self, kind_name: str) -> bool:
        """``kind_name`` has been listed at least once (its objects are all known)."""
        reflector = self.reflectors.get(kind_name)
        return reflector is not None and bool(reflector.resource_version)

    def watches(self, kind_name: str) -> bool:
        """Whether ``kind_name`` is already listed and watched (registered with :meth:`watch_kind`)."""
        return any(kind.kind == kind_name for kind, _ in self._kinds)

    def watch_optional_once(
        self,
        group: str,
        version: str,
        plural: str,
        parser: Callable[[Json], Any],
        kind_name: str,
        *,
        scheduler_kinds: Collection[str] = (),
    ) -> None:
        """:meth:`watch_kind` as ``optional``, unless the scheduler's profiles (``scheduler_kinds``, registered
        later) or another reader already watch ``kind_name``: what a controller that shares a kind calls."""
        if kind_name not in scheduler_kinds and not self.watches(kind_name):
            self.watch_kind(group, version, plural, parser, kind_name, optional=True)

    # ----- ClusterSource -----

    @property
    def client(self) -> ClusterClient:
        return self._client

    async def start(self, sink: EventSink, kinds: Sequence[ObjectKind[Any]] = ()) -> None:
        """List every kind (retrying with backoff until the API server answers), deliver the lists in
        order (Nodes, other kinds, bound Pods, pending Pods), then start the watches. ``kinds`` are
        added as :meth:`watch_kind` would (the plugins' subscriptions). Each page is parsed while the
        next is fetched (:meth:`Reflector.list_all`); pending Pods are delivered last, so the cache is
        whole before the first pending pod reaches the queue. With lists made early (``prefetch``), the
        bound Pods are delivered page by page while the rest of the Pod list comes in."""
        for extra in kinds:
            if all(k.kind != extra.kind for k, _ in self._kinds):
                self.watch_kind(
                    extra.group,
                    extra.version,
                    extra.plural,
                    extra.parse,
                    extra.kind,
                    namespace=extra.namespace,
                    field_selector=extra.field_selector,
                    optional=extra.optional,
                )
        self._sink = sink
        self.events.start()
        watched = [*((kind, make(sink)) for kind, make in self._kinds), (self._pod_kind, self._pod_handler(sink))]
        for resource, handler in watched:
            self.reflectors[resource.kind] = Reflector(
                self.http,
                resource,
                handler,
                options=self.options.reflector,
                on_invalid=self._on_invalid,
                on_crash=self._on_crash,
            )
        reflectors = [r for r in self.reflectors.values() if r.kind.kind not in self._optional]
        optional = [r for r in self.reflectors.values() if r.kind.kind in self._optional]
        prefetch, self._prefetch = self._prefetch, None
        pods = self.reflectors[self._pod_kind.kind]
        # With early lists, the Pods' pages are delivered as they come, after every other kind.
        first = [r for r in reflectors if prefetch is None or r is not pods]
        started = time.monotonic()
        lists = await self._list_until_answered(first, prefetch)
        optional_lists = await asyncio.gather(*(r.list_all(prepare=True) for r in optional), return_exceptions=True)
        for reflector, (items, rv, early) in zip(first, lists, strict=True):
            if early is not None:
                reflector.adopt(early.items, early.resource_version, early.prepared)
            else:
                reflector.replace(items, rv)
        if prefetch is not None:
            await self._deliver_pods_as_listed(pods, prefetch)
            prefetch.release()
        for reflector, result in zip(optional, optional_lists, strict=True):
            if isinstance(result, BaseException):
                log.warning("cannot list %s yet (%s); retrying in the background", reflector.kind.plural, result)
            else:
                reflector.replace(*result)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(r.run(), name=f"watch-{r.kind.plural}") for r in self.reflectors.values()]
        self.synced = True
        log.info(
            "synced from %s: %s",
            self.connection.server,
            ", ".join(f"{len(r.store)} {r.kind.plural}" for r in reflectors),
        )
        startup_log.info(
            "start-up: every kind listed and delivered %.3fs after start() (%.2f CPU-s since start)",
            time.monotonic() - started,
            time.process_time(),
        )

    async def _list_until_answered(
        self, reflectors: Sequence[Reflector], prefetch: Prefetch | None
    ) -> list[tuple[list[Json], str, Listed | None]]:
        """Each reflector's first list (the early one where there is one), retrying with backoff until
        the API server answers."""
        backoff = Backoff(self.options.reflector.initial_backoff, self.options.reflector.max_backoff)
        while True:
            try:
                return list(await asyncio.gather(*(_first_list(r, prefetch) for r in reflectors)))
            except ClusterError as err:
                delay = backoff.next()
                log.warning("initial list from %s failed: %s; retrying in %.1fs", self.connection.server, err, delay)
                await asyncio.sleep(delay)

    async def _deliver_pods_as_listed(self, pods: Reflector, prefetch: Prefetch) -> None:
        """The early Pod list, page by page as it comes: bound pods are delivered at once (the API server
        encodes the next pages meanwhile), pending ones when the list is complete. Should the early
        list fail, the Pods are listed here and diffed against what was delivered."""
        async for page, prepared in prefetch.pod_pages():
            pods.deliver_early(page, prepared)
        early = await prefetch.listed(pods.kind.kind)
        if early is not None:
            startup_log.info("start-up: %d Pods listed early in %.3fs", len(early.items), early.seconds)
            pods.replace(early.items, early.resource_version)
            return
        ((items, rv, _),) = await self._list_until_answered([pods], None)
        pods.replace(items, rv)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        await self.events.stop()
        await self.http.close()
        await self.events_http.close()
        self._sink = None

    async def report_unschedulable(self, pod: Pod, *, reason: str, message: str) -> None:
        current = self._current_pod(pod)
        if current is None or current.pod.node_name or (pod.uid and current.pod.uid != pod.uid):
            return  # deleted or bound meanwhile: kube-scheduler drops the failure too
        self.events.record(
            pod,
            event_type="Warning",
            reason="FailedScheduling",
            action="Scheduling",
            note=message,
            controller=pod.scheduler_name,
        )
        want = PodScheduledCondition("False", reason, message)
        written = self._written.get(pod.key)
        have_condition, have_nominated = current.condition, current.pod.nominated_node_name
        if written is not None and written[0] == current.pod.uid:
            have_condition, have_nominated = written[1], written[2]
        want_nominated = pod.nominated_node_name
        if have_condition == want and have_nominated == want_nominated:
            return
        cond: Json = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
        if have_condition is None or have_condition.status != "False":
            cond["lastTransitionTime"] = rfc3339(self.clock())
        if pod.meta.generation:
            cond["observedGeneration"] = pod.meta.generation
        status: Json = {"conditions": [cond]}
        if have_nominated != want_nominated:
            status["nominatedNodeName"] = want_nominated or None
        body: Json = {"status": status}
        if pod.uid:
            body["metadata"] = {"uid": pod.uid}
        try:
            await self.http.request("PATCH", pod_path(pod, "status"), body=body, content_type=STRATEGIC_MERGE_PATCH)
        except ApiError as err:
            if err.not_found or err.conflict:
                return  # gone or replaced
            raise
        self._written[pod.key] = (current.pod.uid, want, want_nominated)

    async def report_scheduled(self, pod: Pod, node_name: str) -> None:
        self._written.pop(pod.key, None)
        self.events.record(
            pod,
            event_type="Normal",
            reason="Scheduled",
            action="Binding",
            note=f"Successfully assigned {pod.key} to {node_name}",
            controller=pod.scheduler_name,
        )

    def _on_crash(self, kind: ResourceKind[Any], exc: BaseException) -> None:
        if self.restarts is not None:
            self.restarts.record(f"watch-{kind.plural}", exc)
        else:
            log_crash(kind, exc)

    def _on_invalid(self, rejection: Rejection) -> None:
        """A watched object the scheduler cannot use: logged and counted once by the sink, and a Warning
        Event on the object, where ``kubectl describe`` shows it."""
        sink = self._sink
        kind = rejection.kind
        meta = rejection.obj.get("metadata") if isinstance(rejection.obj, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        # Each version is reported once (the reflector sees it again on every relist); a later version
        # with the same problem is reported again.
        version = str(meta.get("resourceVersion") or "")
        message = f"{rejection.message} (resourceVersion {version})" if version else rejection.message
        if sink is None:
            return
        if not sink.on_invalid_object(kind.kind, rejection.key, rejection.reason, message, rejection.exc):
            return
        namespace, _, name = rejection.key.rpartition("/")
        api_version = f"{kind.group}/{kind.version}" if kind.group else kind.version
        regarding = Regarding(
            kind.kind, api_version, namespace, name, str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")
        )
        note = f"ignored by the scheduler: {rejection.message}"
        self.events.record_for(
            regarding,
            event_type="Warning",
            reason=_EVENT_REASONS.get(rejection.reason, "Failed"),
            action="Validating",
            note=note,
            controller=self._client.controller,
        )

    # ----- pods -----

    def _current_pod(self, pod: Pod) -> PodEntry | None:
        reflector = self.reflectors.get("Pod")
        if reflector is None:
            return None
        entry: PodEntry | None = reflector.get(pod.key)
        return entry

    def _pod_handler(self, sink: EventSink) -> Callable[[EventType, Any, Any], None]:
        written = self._written

        def handle(event: EventType, old: PodEntry | None, new: PodEntry | None) -> None:
            if event == EventType.DELETED or (new is not None and new.pod.node_name):
                key = (old or new).pod.key  # type: ignore[union-attr]
                written.pop(key, None)
            elif new is not None and (mine := written.get(new.pod.key)) is not None and mine[1] != new.condition:
                # Someone else (a plugin: Coscheduling's pending-member condition) wrote the condition, or
                # this is a version from before our write: compare with the watch's copy next time.
                written.pop(new.pod.key, None)
            sink.on_pod(event, None if old is None else old.pod, None if new is None else new.pod)

        return handle


def _node_handler(sink: EventSink) -> Callable[[EventType, Any, Any], None]:
    def handle(event: EventType, old: Node | None, new: Node | None) -> None:
        sink.on_node(event, old, new)

    return handle


_EVENT_REASONS = {"Invalid": "InvalidObject", "HandlerError": "FailedHandling"}


async def _first_list(reflector: Reflector, prefetch: Prefetch | None) -> tuple[list[Json], str, Listed | None]:
    """``reflector``'s first list: the one made early (:mod:`~kubeapi.prefetch`) when
    there is one, else its own."""
    early = await prefetch.listed(reflector.kind.kind) if prefetch is not None else None
    if early is not None:
        startup_log.info("start-up: %d %ss listed early in %.3fs", len(early.items), reflector.kind.kind, early.seconds)
        return early.items, early.resource_version, early
    items, rv = await reflector.list_all(prepare=True)
    return items, rv, None
