"""The kopf side of the Reservation controller: watches Reservations, owner pods and nodes, and feeds a
:class:`~.reconciler.Reconciler`, which runs :func:`~.decide.decide` and applies it. Only the leader acts
(``is_leader``).

kopf here only watches: indexes and ``on.event`` handlers, no timers, daemons or change handlers, so it
writes no finalizer and no state annotations on Reservations (see :mod:`.reconciler` for why). Run it on
its own event loop (:class:`ReservationControllerThread`): on exit kopf cancels every task created in its
loop after it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import kopf
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from apis.scheduling import ANNOTATION_RESERVATION_ALLOCATED, GROUP, VERSION
from apis.scheduling.annotations import parse_allocated_annotation
from koord_scheduler.framework.errors import describe, log_failure
from koord_scheduler.scheduler.object_errors import ObjectErrors
from koord_scheduler.scheduler.reservation_controller.decide import (
    ControllerOptions,
    OwnerPod,
    owner_pod_from_raw,
)
from koord_scheduler.scheduler.reservation_controller.reconciler import ClusterView, Reconciler

log = logging.getLogger(__name__)

PLURAL = "reservations"
LEGACY_FINALIZER = "scheduling.koordinator.sh/pykoord-reservation-controller"
"""Written by an earlier build that used a kopf timer. Naming it as kopf's finalizer makes kopf remove it
from any Reservation it sees, since no handler here needs one."""


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """How to reach the API server: a kubeconfig file (None: the in-cluster service account)."""

    kubeconfig: str | None = None
    context: str | None = None


def _configuration(api: ApiSettings) -> k8s.Configuration:
    cfg = k8s.Configuration()
    if api.kubeconfig:
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=api.kubeconfig, context=api.context, client_configuration=cfg
        )
    else:
        k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    return cfg


def connection_info(cfg: k8s.Configuration) -> kopf.ConnectionInfo:
    """kopf's credentials from the kubernetes client's configuration, read again at every (re)login.

    The token is under ``BearerToken`` (kubernetes >= 31) with its scheme: ``Bearer <token>`` from a
    kubeconfig, ``bearer <token>`` in-cluster. kopf wants the bare token; a scheme left on it made every
    in-cluster request a 401 ("Ran out of valid credentials"). In-cluster, the client's refresh hook rereads
    the ServiceAccount token file, which kubelet rotates.
    """
    if cfg.refresh_api_key_hook is not None:
        cfg.refresh_api_key_hook(cfg)
    keys = cfg.api_key or {}
    token = str(keys.get("BearerToken") or keys.get("authorization") or "").strip()
    scheme, _, rest = token.partition(" ")
    if rest and scheme.lower() == "bearer":
        token = rest.strip()
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
        token=token or None,
    )


def build_registry(api: ApiSettings, reconciler: Reconciler) -> kopf.OperatorRegistry:
    """kopf handlers that keep ``reconciler`` informed. Index and event handlers only: no finalizers."""
    registry = kopf.OperatorRegistry()
    cfg = _configuration(api)

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(cfg)

    @kopf.index("pods", id="reservation_owners", registry=registry)
    def reservation_owners(body: kopf.Body, **_: Any) -> dict[str, OwnerPod] | None:
        annotations = body.get("metadata", {}).get("annotations") or {}
        if ANNOTATION_RESERVATION_ALLOCATED not in annotations:
            return None
        phase = (body.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed") or body.get("metadata", {}).get("deletionTimestamp"):
            return None
        ref = parse_allocated_annotation(annotations)
        if ref is None:
            return None
        try:
            return {ref[1]: owner_pod_from_raw(dict(body))}
        except Exception:  # an owner pod that cannot be read is no owner (the reconciler reports Reservations)
            return None

    @kopf.index("nodes", id="node_names", registry=registry)
    def node_names(name: str, **_: Any) -> dict[str, bool]:
        return {name: True}

    # kopf's WatchingFn protocol does not list index kwargs (reservation_owners, node_names).
    @kopf.on.event(GROUP, VERSION, PLURAL, id="reservation_events", registry=registry)  # type: ignore[arg-type]
    async def reservation_events(
        event: kopf.RawEvent,
        body: kopf.Body,
        reservation_owners: kopf.Index[str, OwnerPod],
        node_names: kopf.Index[str, bool],
        **_: Any,
    ) -> None:
        reconciler.observe_reservation(event.get("type"), body, ClusterView(reservation_owners, node_names))

    @kopf.on.event(
        "pods", id="owner_events", annotations={ANNOTATION_RESERVATION_ALLOCATED: kopf.PRESENT}, registry=registry
    )
    async def owner_events(body: kopf.Body, **_: Any) -> None:
        ref = parse_allocated_annotation(body.get("metadata", {}).get("annotations") or {})
        if ref is not None:
            reconciler.mark_dirty(ref[1])

    @kopf.on.event("nodes", id="node_events", registry=registry)
    async def node_events(event: kopf.RawEvent, **_: Any) -> None:
        if event.get("type") == "DELETED":
            reconciler.mark_all_dirty()

    return registry


class ApiWriter:
    """:class:`StatusWriter` over one kubernetes ``ApiClient`` (one connection pool), closed by :meth:`close`."""

    def __init__(self, api: ApiSettings) -> None:
        self._client = k8s.ApiClient(_configuration(api))
        self._api = k8s.CustomObjectsApi(self._client)

    def patch_status(self, name: str, patch: Mapping[str, Any]) -> None:
        try:
            # Without _content_type the generated client sends a dict body as JSON Patch.
            self._api.patch_cluster_custom_object_status(
                GROUP, VERSION, PLURAL, name, dict(patch), _content_type="application/merge-patch+json"
            )
        except k8s.ApiException as exc:
            if exc.status != 404:
                log.warning("patching reservation %s status failed: %s", name, exc.reason)

    def delete(self, name: str) -> None:
        try:
            self._api.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
            log.info("garbage-collected reservation %s", name)
        except k8s.ApiException as exc:
            if exc.status != 404:
                log.warning("deleting reservation %s failed: %s", name, exc.reason)

    def close(self) -> None:
        self._client.close()  # type: ignore[no-untyped-call]


def operator_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    # The CRDs are known up front; kopf's dynamic CRD scanning would need list/watch on
    # customresourcedefinitions cluster-wide, which least-privilege RBAC does not grant.
    settings.scanning.disabled = True
    settings.persistence.finalizer = LEGACY_FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="pykoord.koordinator.sh")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix="pykoord.koordinator.sh")
    return settings


async def run_reservation_controller(
    api: ApiSettings,
    options: ControllerOptions,
    stop: asyncio.Event,
    *,
    is_leader: Callable[[], bool] = lambda: True,
    clock: Callable[[], float] = time.time,
    object_errors: ObjectErrors | None = None,
) -> None:
    """Run until ``stop`` is set. Acts only while ``is_leader()``; the caller owns leader election.
    Reservations that cannot be decided on are reported to ``object_errors`` (the scheduler's).

    Give it an event loop of its own (:class:`ReservationControllerThread` does)."""
    writer = ApiWriter(api)
    reconciler = Reconciler(options, writer, is_leader=is_leader, clock=clock, object_errors=object_errors)
    registry = build_registry(api, reconciler)
    try:
        async with asyncio.TaskGroup() as tasks:
            # Created before kopf starts, so kopf's exit leaves it alone; it ends with reconciler.close().
            tasks.create_task(reconciler.run(), name="reservation reconciler")
            try:
                await kopf.operator(
                    registry=registry,
                    settings=operator_settings(),
                    clusterwide=True,
                    standalone=True,
                    stop_flag=stop,
                    # kopf would ask getpass for the user name, which fails for a uid without a passwd
                    # entry: the chart runs koord-scheduler as 65532, which the image does not name. (kopf's
                    # Identity is a NewType of str in a private module.)
                    identity=cast(Any, kopf_identity()),
                )
            finally:
                reconciler.close()
    finally:
        writer.close()


def kopf_identity() -> str:
    """This process's name towards kopf (its peering identity): ``koord-scheduler@<host>/<pid>``, from the
    hostname (the pod name) and never from the passwd database."""
    return f"koord-scheduler@{socket.gethostname()}/{os.getpid()}"


class ReservationControllerThread:
    """The controller on a thread and event loop of its own (kopf's embedding advice). :meth:`stop` ends
    kopf, the reconciler and the loop, and joins the thread; ``asyncio.run`` closes the loop and its
    executor, so nothing is left open."""

    def __init__(
        self,
        api: ApiSettings,
        options: ControllerOptions,
        *,
        is_leader: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.time,
        object_errors: ObjectErrors | None = None,
    ) -> None:
        self._api = api
        self._options = options
        self._is_leader = is_leader
        self._clock = clock
        self._object_errors = object_errors
        self._started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="reservation-controller", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._started.wait()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def error(self) -> BaseException | None:
        """What ended the controller, if it failed."""
        return self._error

    def stop(self, timeout: float = 30.0) -> bool:
        """Ask the controller to stop and wait; True when the thread has ended."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed in between: the thread is ending
                loop.call_soon_threadsafe(stop.set)
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The controller loop's exception handler: one line per error. When the loop ends under kopf
        (the controller stopping: a lost lease, SIGTERM), kopf's watch generators may fail to close
        ("generator didn't stop after athrow()"); nothing is lost then, so that is an info line."""
        message = str(context.get("message") or "unhandled error").splitlines()[0]
        exc = context.get("exception")
        stopping = self._stop is not None and self._stop.is_set()
        if stopping and "asynchronous generator" in message:
            log.info("reservation controller stopping: %s%s", message, f": {describe(exc)}" if exc else "")
        elif isinstance(exc, BaseException):
            log_failure(log, f"reservation controller: {message}", exc)
        else:
            log.error("reservation controller: %s", message)

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # recorded for the owner; a thread has nowhere to raise to
            self._error = exc
            log_failure(log, "reservation controller stopped with an error", exc)
        finally:
            self._started.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.set_exception_handler(self.loop_error)
        self._stop = asyncio.Event()
        self._started.set()
        await run_reservation_controller(
            self._api, self._options, self._stop, is_leader=self._is_leader, clock=self._clock,
            object_errors=self._object_errors,
        )
