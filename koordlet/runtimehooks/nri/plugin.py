"""koordlet's NRI plugin: connect to the runtime's NRI socket, register, and answer its lifecycle events.

The protocol is containerd/nri's ``pkg/stub``: dial the socket, multiplex it (:mod:`.framing`), call
``Runtime.RegisterPlugin`` (name ``koordlet_nri``, index ``00``, as Koordinator), answer ``Configure``
with the event mask, ``Synchronize`` (possibly split, ``more``) with the pods and containers that exist,
then the subscribed events until the connection closes. A closed connection (containerd restarted) is
redialled with exponential backoff; a koordlet restart simply registers again, and the runtime
synchronizes it with what runs without restarting anything.

**Failures.** Every event's decision runs under a budget (``request_budget``, below the runtime's own 2 s
request timeout, after which containerd drops the plugin). An error or a timeout is logged once per pod
with its reason and counted in ``koordlet_runtime_hook_failures_total``; then, under the default ``Ignore``
failure policy, the event is answered with no adjustment and the periodic reconciler repairs the
container, as it repairs drift; under ``Fail`` it is answered with the error, which fails the creation.
If koordlet dies mid-request, containerd sees the connection close and creates the
container without the plugin.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from koordlet.runtimehooks.failure_policy import POLICY_FAIL, POLICY_IGNORE
from koordlet.runtimehooks.hooks import ContainerResources, HookError
from koordlet.runtimehooks.nri.handlers import HookHandlers, describe_values, to_adjustment, to_update
from koordlet.runtimehooks.nri.proto import api_pb2
from koordlet.runtimehooks.nri.ttrpc import CODE_UNIMPLEMENTED, CODE_UNKNOWN, MuxedTTRPC, RPCError

log = logging.getLogger("koordlet.nri")

PLUGIN_SERVICE = "nri.pkg.api.v1alpha1.Plugin"
RUNTIME_SERVICE = "nri.pkg.api.v1alpha1.Runtime"
NRI_VERSION = "v0.12.3"
"""The containerd/nri version whose ``api.proto`` the messages are generated from."""
SUBSCRIBED_EVENTS = (
    api_pb2.RUN_POD_SANDBOX,
    api_pb2.CREATE_CONTAINER,
    api_pb2.UPDATE_CONTAINER,
    api_pb2.STOP_CONTAINER,
    api_pb2.REMOVE_POD_SANDBOX,
)


DURATION_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
"""``koordlet_runtime_hook_invoked_duration_seconds``' bounds: fine enough to read a 20 ms p99 off them."""


def event_mask(events: tuple[int, ...]) -> int:
    """NRI's ``EventMask``: bit ``event - 1`` per event."""
    mask = 0
    for event in events:
        mask |= 1 << (event - 1)
    return mask


@dataclass(frozen=True, slots=True)
class NRIOptions:
    socket_path: Path
    plugin_name: str = "koordlet_nri"
    plugin_idx: str = "00"
    connect_timeout: float = 6.0
    """Dial, register and be configured within this (Koordinator's NRI connect timeout)."""
    request_budget: float = 1.0
    """An event's decision must be ready within this, or the container gets no adjustment."""
    backoff_initial: float = 1.0
    backoff_max: float = 30.0
    failure_policy: str = POLICY_IGNORE
    """``--runtime-hooks-plugin-failure-policy``: ``Ignore`` answers a failed decision with no adjustment,
    ``Fail`` with the error (the runtime then fails the creation)."""


class HookMetrics:
    """``koordlet_runtime_hook_*``: events handled (by event and result), their duration, and whether the
    plugin is connected."""

    def __init__(self, registry: Any, node: str) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        self.node = node
        self.duration = Histogram(
            "koordlet_runtime_hook_invoked_duration_seconds",
            "Time koordlet took to answer an NRI event",
            ["node", "event"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.failures = Counter(
            "koordlet_runtime_hook_failures_total",
            "NRI events whose decision failed or ran out of time "
            "(answered without adjustment, or with the error under Fail)",
            ["node", "event", "reason"],
            registry=registry,
        )
        self.connected = Gauge(
            "koordlet_runtime_hook_nri_connected",
            "1 while koordlet's NRI plugin is registered",
            ["node"],
            registry=registry,
        )


@dataclass(slots=True)
class PluginStats:
    """Counts for tests and the status line."""

    connections: int = 0
    events: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    synchronized_containers: int = 0


class NRIPlugin:
    """Run with :meth:`run` in a thread of its own; :meth:`stop` ends it."""

    def __init__(
        self,
        options: NRIOptions,
        handlers: HookHandlers,
        *,
        metrics: HookMetrics | None = None,
        on_synchronized: Callable[[], None] | None = None,
    ) -> None:
        self.options = options
        self.handlers = handlers
        self.metrics = metrics
        self.on_synchronized = on_synchronized
        self.stats = PluginStats()
        self.configured = threading.Event()
        self.synchronized = threading.Event()
        self._stop = threading.Event()
        self._conn: MuxedTTRPC | None = None
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="nri-hook")
        self._sync_pods: list[api_pb2.PodSandbox] = []
        self._sync_containers: list[api_pb2.Container] = []
        self._failing: set[str] = set()

    # -- lifecycle ----------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()
        conn = self._conn
        if conn is not None:
            conn.close("koordlet stopping")

    def run(self) -> None:
        """Connect, serve, and reconnect with backoff until :meth:`stop`. Never raises."""
        delay = self.options.backoff_initial
        announced_missing = False
        try:
            while not self._stop.is_set():
                if not self.options.socket_path.exists():
                    announced_missing = True
                    self._stop.wait(delay)
                    delay = min(delay * 2, self.options.backoff_max)
                    continue
                try:
                    reason = self.serve_once()
                except (OSError, TimeoutError, RPCError) as err:
                    log.warning("NRI: cannot register at %s: %s; retrying in %gs", self.options.socket_path, err, delay)
                else:
                    if self._stop.is_set():
                        break
                    log.warning("NRI: connection lost (%s); reconnecting", reason)
                    delay = self.options.backoff_initial
                    announced_missing = False
                self._stop.wait(delay)
                delay = min(delay * 2, self.options.backoff_max)
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)
            if announced_missing:
                log.debug("NRI socket %s never appeared", self.options.socket_path)

    def serve_once(self) -> str:
        """One connection: dial, register, wait to be configured, serve until it closes. Returns why it
        closed; raises when registration fails."""
        opts = self.options
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(opts.connect_timeout)
        try:
            sock.connect(str(opts.socket_path))
        except OSError:
            sock.close()
            raise
        sock.settimeout(None)
        self.configured.clear()
        self.synchronized.clear()
        conn = MuxedTTRPC(sock, self.handle)
        self._conn = conn
        conn.start()
        try:
            request = api_pb2.RegisterPluginRequest(
                plugin_name=opts.plugin_name, plugin_idx=opts.plugin_idx, NRI_version=NRI_VERSION
            )
            conn.call(RUNTIME_SERVICE, "RegisterPlugin", request.SerializeToString(), timeout=opts.connect_timeout)
            if not self.configured.wait(opts.connect_timeout):
                raise TimeoutError(f"the runtime did not configure the plugin within {opts.connect_timeout:g}s")
            self.stats.connections += 1
            if self.metrics is not None:
                self.metrics.connected.labels(node=self.metrics.node).set(1)
            log.info("NRI: registered as %s-%s at %s", opts.plugin_idx, opts.plugin_name, opts.socket_path)
            while not conn.closed.wait(1.0):
                if self._stop.is_set():
                    conn.close("koordlet stopping")
            return conn.close_reason
        finally:
            conn.close()
            conn.join(2.0)
            self._conn = None
            if self.metrics is not None:
                self.metrics.connected.labels(node=self.metrics.node).set(0)

    # -- the plugin service -------------------------------------------------------------------

    def handle(self, service: str, method: str, payload: bytes) -> bytes:
        """The ttrpc handler of ``nri.pkg.api.v1alpha1.Plugin``."""
        if service != PLUGIN_SERVICE:
            raise RPCError(CODE_UNIMPLEMENTED, f"unknown service {service}")
        if method == "Configure":
            request = api_pb2.ConfigureRequest.FromString(payload)
            log.info(
                "NRI: configured by %s %s (NRI %s, request timeout %d ms)",
                request.runtime_name,
                request.runtime_version,
                request.NRI_version or "unknown",
                request.request_timeout,
            )
            self.configured.set()
            return api_pb2.ConfigureResponse(events=event_mask(SUBSCRIBED_EVENTS)).SerializeToString()
        if method == "Synchronize":
            return self._synchronize(api_pb2.SynchronizeRequest.FromString(payload)).SerializeToString()
        if method == "Shutdown":
            log.info("NRI: the runtime is shutting down")
            return api_pb2.Empty().SerializeToString()
        if method == "RunPodSandbox":
            pod_request = api_pb2.RunPodSandboxRequest.FromString(payload)
            self._guarded("RunPodSandbox", pod_request.pod, lambda: self.handlers.run_pod_sandbox(pod_request.pod))
            return api_pb2.RunPodSandboxResponse().SerializeToString()
        if method == "CreateContainer":
            create = api_pb2.CreateContainerRequest.FromString(payload)
            values = self._guarded(
                "CreateContainer",
                create.pod,
                lambda: self.handlers.decide(create.pod, create.container),
                now=lambda: self.handlers.decide_now(create.pod, create.container),
            )
            response = api_pb2.CreateContainerResponse()
            if isinstance(values, ContainerResources):
                response.adjust.CopyFrom(to_adjustment(values))
            return response.SerializeToString()
        if method == "UpdateContainer":
            update = api_pb2.UpdateContainerRequest.FromString(payload)
            values = self._guarded(
                "UpdateContainer",
                update.pod,
                lambda: self.handlers.decide(update.pod, update.container, update.linux_resources),
                now=lambda: self.handlers.decide_now(update.pod, update.container, update.linux_resources),
            )
            response_update = api_pb2.UpdateContainerResponse()
            if isinstance(values, ContainerResources):
                container_update = to_update(update.container.id, values)
                if container_update.linux.resources.ByteSize():
                    response_update.update.append(container_update)
            return response_update.SerializeToString()
        if method == "StopContainer":
            self._count("StopContainer")
            return api_pb2.StopContainerResponse().SerializeToString()
        if method == "RemovePodSandbox":
            removed = api_pb2.RemovePodSandboxRequest.FromString(payload)
            self._count("RemovePodSandbox")
            self._failing.discard(removed.pod.uid)
            return api_pb2.RemovePodSandboxResponse().SerializeToString()
        empty = {"StateChange": api_pb2.Empty, "StopPodSandbox": api_pb2.StopPodSandboxResponse}
        if method in empty:  # not subscribed; answer anyway, as the stub does
            return empty[method]().SerializeToString()
        raise RPCError(CODE_UNIMPLEMENTED, f"{PLUGIN_SERVICE}/{method} is not implemented by koordlet")

    def _synchronize(self, request: api_pb2.SynchronizeRequest) -> api_pb2.SynchronizeResponse:
        """Collect split requests (``more``); on the last one, note what exists and let the reconciler run
        (it brings containers created while koordlet was away to their values). No container is touched
        here, so nothing restarts."""
        self._sync_pods += request.pods
        self._sync_containers += request.containers
        if request.more:
            return api_pb2.SynchronizeResponse(more=True)
        pods, containers = len(self._sync_pods), len(self._sync_containers)
        self._sync_pods, self._sync_containers = [], []
        self.stats.synchronized_containers = containers
        log.info("NRI: synchronized with the runtime: %d pods, %d containers", pods, containers)
        self.synchronized.set()
        if self.on_synchronized is not None:
            with contextlib.suppress(Exception):
                self.on_synchronized()
        return api_pb2.SynchronizeResponse(more=False)

    def _count(self, event: str) -> None:
        self.stats.events[event] = self.stats.events.get(event, 0) + 1

    def _fail(self, event: str, pod: api_pb2.PodSandbox, reason: str, detail: str, outcome: str) -> None:
        """Count a failure; log it once per pod (until the pod is removed or an event of it succeeds)."""
        self.stats.failures[reason] = self.stats.failures.get(reason, 0) + 1
        if self.metrics is not None:
            self.metrics.failures.labels(node=self.metrics.node, event=event, reason=reason).inc()
        if pod.uid not in self._failing:
            self._failing.add(pod.uid)
            log.warning(
                "NRI %s of pod %s/%s: %s: %s; %s (logged once per pod)",
                event,
                pod.namespace,
                pod.name,
                reason,
                detail,
                outcome,
            )

    def _guarded(
        self,
        event: str,
        pod: api_pb2.PodSandbox,
        decide: Callable[[], object],
        *,
        now: Callable[[], object | None] | None = None,
    ) -> object | None:
        """``decide()`` within the budget. On an error or a timeout: ``None`` (no adjustment) under the
        ``Ignore`` policy; :class:`RPCError` (the runtime fails the creation with its message) under ``Fail``,
        also when only some gates failed.

        ``now``, when given, is tried first on this (the connection's) thread: a decision that reads no file
        and cannot block (the node-wide rules are current), so most events skip the hop to the worker pool
        and the GIL hand-overs it costs; it returns ``None`` when it cannot decide, and ``decide`` then runs
        in the pool under the budget."""
        self._count(event)
        started = time.perf_counter()
        who = f"{pod.namespace}/{pod.name}"
        reason = ""
        result: object | None = None
        try:
            result = now() if now is not None else None
            if result is None:
                future = self._pool.submit(decide)
                result = future.result(timeout=self.options.request_budget)
        except FutureTimeout:
            reason = "timeout"
            detail = f"no decision within {self.options.request_budget:g}s"
        except HookError as err:
            reason, detail = "error", str(err)
        except Exception as err:
            reason, detail = "error", f"{type(err).__name__}: {err}"
        elapsed = time.perf_counter() - started
        if self.metrics is not None:
            self.metrics.duration.labels(node=self.metrics.node, event=event).observe(elapsed)
        partial = getattr(result, "errors", ())
        failing = self.options.failure_policy == POLICY_FAIL
        if not reason and partial:  # some gates failed, the others' values apply (Ignore)
            reason, detail = "error", "; ".join(partial)
            if not failing:
                self._fail(event, pod, reason, detail, "those gates' values are left out, the reconciler retries them")
                return result
        if reason and failing:
            self._fail(event, pod, reason, detail, "failing the request (--runtime-hooks-plugin-failure-policy=Fail)")
            raise RPCError(CODE_UNKNOWN, f"koordlet: {event} of pod {who}: {reason}: {detail}")
        if reason:
            self._fail(event, pod, reason, detail, "no adjustment, the reconciler applies the values later")
            return None
        self._failing.discard(pod.uid)
        if isinstance(result, ContainerResources) and log.isEnabledFor(logging.DEBUG):
            log.debug("NRI %s of pod %s in %.1f ms: %s", event, who, elapsed * 1000, describe_values(result))
        return result
