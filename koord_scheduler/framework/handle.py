"""The typed handles a plugin receives from its factory.

:class:`FrameworkHandle` is what every plugin may use. :class:`ExtendedHandle` adds the scheduler's
services that Koordinator's extended handle offers (watches, the queue, node accounting, error-handler
filters, forget-pod handlers, metrics). Every factory receives an ``ExtendedHandle``; a plugin's factory
and constructor declare the narrower Protocol they actually need, so a test hands in only that.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from apis.core.types import Pod
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.framework.types import ErrorHandlerFilter, ObjectHandler, ObjectKind, SimulationReporter
from koord_scheduler.framework.waiting_pods import WaitingPod


class ClusterClient(Protocol):
    """Writes plugins may make to the cluster. Implemented by the real API source and the simulator.

    Every method raises :class:`~koord_scheduler.framework.errors.ClusterError` on failure.
    """

    async def bind(self, pod: Pod, node_name: str) -> None:
        """Bind through the pods/binding subresource."""
        ...

    async def patch_pod_metadata(
        self,
        pod: Pod,
        *,
        annotations: Mapping[str, str | None] | None = None,
        labels: Mapping[str, str | None] | None = None,
    ) -> None:
        """Merge-patch labels/annotations (None deletes a key)."""
        ...

    async def delete_pod(self, pod: Pod, *, reason: str) -> None: ...

    async def set_nominated_node_name(self, pod: Pod, node_name: str) -> None:
        """Write ``status.nominatedNodeName`` of a pending pod (``""`` clears it): a merge-patch
        ``{"status": {"nominatedNodeName": ...}}`` on pods/status. A pod that is gone is not an error."""
        ...

    async def patch_object_status(
        self, kind: ObjectKind, name: str, patch: Mapping[str, Any], *, namespace: str = ""
    ) -> Any:
        """Merge-patch ``status`` (the status subresource) of an object of ``kind``; returns the parsed
        updated object. ``patch`` is the body, e.g. ``{"status": {"phase": "Available"}}``."""
        ...

    async def patch_object(
        self, kind: ObjectKind, name: str, patch: Mapping[str, Any], *, namespace: str = ""
    ) -> Any:
        """Merge-patch the object itself (metadata, spec); returns the parsed updated object."""
        ...

    async def record_event(
        self, kind: ObjectKind | None, name: str, *, namespace: str = "", type: str, reason: str, message: str
    ) -> None:
        """An Event about an object (``kind`` None means a Pod)."""
        ...


class FrameworkHandle(Protocol):
    """What every plugin may use. Koordinator's extended handle adds reservation services to this."""

    @property
    def snapshot(self) -> ClusterSnapshot: ...

    @property
    def cluster(self) -> ClusterClient: ...

    @property
    def clock(self) -> Callable[[], float]:
        """Seconds since the epoch; fixed in ``simulate --now`` and in tests."""
        ...


class WatchingHandle(FrameworkHandle, Protocol):
    """A framework handle that also delivers cluster objects of other kinds to a plugin."""

    def watch(self, kind: ObjectKind, handler: ObjectHandler) -> None:
        """Have objects of ``kind`` delivered to ``handler`` (from the API server, or a simulate file)."""
        ...


class ExtendedHandle(WatchingHandle, Protocol):
    """The scheduler's services beyond :class:`FrameworkHandle` (``SchedulerHandle`` implements them)."""

    @property
    def metrics_registry(self) -> CollectorRegistry:
        """Where plugins register their Prometheus metrics (served on ``/metrics``)."""
        ...

    def watch_pods(self, handler: ObjectHandler) -> None:
        """Every pod event (bound, pending, deleted), delivered after the scheduler's cache and queue
        have applied it: ``handler(event_type, old_pod, new_pod)``."""
        ...

    def add_simulation_report(self, reporter: SimulationReporter) -> None:
        """A section for ``koord-scheduler simulate`` output."""
        ...

    def register_forget_pod_handler(self, handler: Callable[[Pod], None]) -> None:
        """``handler(pod)`` runs whenever an assumed pod is forgotten (its binding failed)."""
        ...

    def register_error_handler_filters(self, pre: ErrorHandlerFilter | None, post: ErrorHandlerFilter | None) -> None:
        """Filters around the default handling of a scheduling failure (see :data:`ErrorHandlerFilter`)."""
        ...

    def forget_pod(self, pod: Pod) -> None:
        """Forget an assumed pod; every forget-pod handler runs even if the cache had dropped it."""
        ...

    def account_pod(self, pod: Pod) -> None:
        """Account an object that holds node resources like a pod (an Available reservation)."""
        ...

    def unaccount_pod(self, pod: Pod) -> None: ...

    def enqueue_pod(self, pod: Pod) -> None:
        """Put a synthetic pending pod (a reservation's reserve pod) through the normal pod path."""
        ...

    def dequeue_pod(self, pod: Pod) -> None: ...

    def waiting_pod(self, key: str) -> WaitingPod | None:
        """The pod with ``key`` waiting at Permit, if any."""
        ...
