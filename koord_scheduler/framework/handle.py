"""What a plugin receives from its factory: its profile's :class:`~.runtime.Framework`, typed as :class:`Handle`.

kube-scheduler hands every plugin factory the framework being built (``frameworkImpl`` implements
``framework.Handle``); pykoord does the same. The handle has two halves:

- :class:`SchedulerServices`, the scheduler-wide services the framework passes on: the snapshot, the
  cluster client, the clock, watches, the nominated pods, pods waiting at Permit, the queue, Koordinator's
  error-handler filters and forget-pod handlers. The scheduler lends one object to every profile.
- the profile's own plugins, for a plugin that drives others (kube-scheduler's
  ``RunFilterPluginsWithNominatedPods`` and friends): preemption's dry runs, the Reservation plugin's
  reservation stages.

Plugins are built before the scheduler's queue exists, so some members are **late-bound**: present from
the start, served once the scheduler is assembled (``activate_pods``, ``enqueue_pod``, ``dequeue_pod``;
``nominator``, ``preemption_extenders``, ``waiting_pod`` and the hooks are live at once). A plugin calls
them while scheduling, never from its factory. No plugin declares a handle of its own and nothing is set on
a plugin after it is built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from prometheus_client import CollectorRegistry

from apis.core.types import Pod
from apis.feature_gates import SchedulerFeatureGates
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.interfaces import PreFilterPlugin
from koord_scheduler.framework.koordinator_stages import NUMAHintProvider, ReservationFilterPlugin
from koord_scheduler.framework.snapshot import ClusterSnapshot, NodeInfo, Positions
from koord_scheduler.framework.status import Status
from koord_scheduler.framework.types import ErrorHandlerFilter, Handler, ObjectHandler, ObjectKind, SimulationReporter
from koord_scheduler.framework.waiting_pods import WaitingPod

T = TypeVar("T")


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
        self, kind: ObjectKind[Any], name: str, patch: Mapping[str, Any], *, namespace: str = ""
    ) -> Any:
        """Merge-patch ``status`` (the status subresource) of an object of ``kind``; returns the parsed
        updated object. ``patch`` is the body, e.g. ``{"status": {"phase": "Available"}}``."""
        ...

    async def patch_object(
        self, kind: ObjectKind[Any], name: str, patch: Mapping[str, Any], *, namespace: str = ""
    ) -> Any:
        """Merge-patch the object itself (metadata, spec); returns the parsed updated object."""
        ...

    async def record_event(
        self, kind: ObjectKind[Any] | None, name: str, *, namespace: str = "", type: str, reason: str, message: str
    ) -> None:
        """An Event about an object (``kind`` None means a Pod)."""
        ...


class NominatedPods(Protocol):
    """The scheduler's nominated pods (pending pods that preemption promised a node to), read-only."""

    def nominated_pods_for_node(self, node_name: str) -> list[Pod]: ...

    def by_node(self) -> Iterator[tuple[str, Iterable[Pod]]]:
        """Node -> its nominated pods, without copying."""
        ...

    def __bool__(self) -> bool: ...


class PodNominating(NominatedPods, Protocol):
    """The nominator, for a plugin that nominates pods besides the one in its cycle (job-level preemption
    nominates every member of a gang; kube-scheduler's ``AddNominatedPod`` / ``DeleteNominatedPodIfExists``)."""

    def add(self, pod: Pod, node_name: str = "") -> None:
        """Nominate ``pod`` to ``node_name``; "" keeps only a nomination its status carries."""
        ...

    def delete(self, pod: Pod) -> None: ...


class PreemptionExtenders(Protocol):
    """The configured HTTP extenders that take part in preemption (kube-scheduler ``callExtenders``)."""

    def process_preemption(
        self, pod: Pod, candidates: Mapping[str, tuple[Sequence[Pod], int]]
    ) -> tuple[dict[str, tuple[list[Pod], int]], Status]:
        """The candidates (node -> victims, PodDisruptionBudget violations) every interested extender keeps,
        in turn. An Error status when a non-ignorable extender failed or answered inconsistently (failing
        ignorable extenders are skipped); an empty result means nothing may be preempted."""
        ...


class SchedulerServices(Protocol):
    """The scheduler-wide half of :class:`Handle`: one object, lent by the scheduler to every profile's
    framework (``koord_scheduler.scheduler.services.SchedulerServices`` in a scheduler, a fake in tests)."""

    # ----- the cluster (kube-scheduler's SnapshotSharedLister, ClientSet, informers) -----

    @property
    def snapshot(self) -> ClusterSnapshot: ...

    @property
    def cluster(self) -> ClusterClient: ...

    @property
    def clock(self) -> Callable[[], float]:
        """Seconds since the epoch; fixed in ``simulate --now`` and in tests."""
        ...

    @property
    def metrics_registry(self) -> CollectorRegistry:
        """Where plugins register their Prometheus metrics (served on ``/metrics``)."""
        ...

    @property
    def feature_gates(self) -> SchedulerFeatureGates:
        """``--feature-gates``, resolved (kube-scheduler's and Koordinator's gates)."""
        ...

    def watch(self, kind: ObjectKind[T], handler: Handler[T]) -> None:
        """Have objects of ``kind`` delivered to ``handler`` (from the API server, or a simulate file)."""
        ...

    def watch_pods(self, handler: ObjectHandler) -> None:
        """Every pod event (bound, pending, deleted), delivered after the scheduler's cache and queue
        have applied it: ``handler(event_type, old_pod, new_pod)``."""
        ...

    def add_simulation_report(self, reporter: SimulationReporter) -> None:
        """A section for ``koord-scheduler simulate`` output."""
        ...

    # ----- the queue and the pods in flight (kube-scheduler's Activate, PodNominator, extenders) -----

    @property
    def nominator(self) -> PodNominating:
        """The nominated pods, which Filter must leave room for; preemption adds to them."""
        ...

    @property
    def preemption_extenders(self) -> PreemptionExtenders | None:
        """The configured extenders with a ``preemptVerb``; None when there are none."""
        ...

    def activate_pods(self, keys: Iterable[str]) -> None:
        """Move pending pods to activeQ now (kube's ``Activate``): a gang whose last member arrived.
        Late-bound: nothing happens before the scheduler is assembled."""
        ...

    def waiting_pod(self, key: str) -> WaitingPod | None:
        """The pod with ``key`` waiting at Permit, if any."""
        ...

    def is_assumed(self, key: str) -> bool:
        """Whether the pod with ``key`` is assumed on a node (its binding is in flight)."""
        ...

    # ----- Koordinator's extended handle -----

    def add_next_pod_hook(self, hook: Callable[[], str | None]) -> None:
        """Koordinator's NextPod: ``hook()`` returns the key of the pod to schedule next, or None to let
        the queue decide. The scheduler takes that pod out of the queue (wherever it waits)."""
        ...

    def register_forget_pod_handler(self, handler: Callable[[Pod], None]) -> None:
        """``handler(pod)`` runs whenever an assumed pod is forgotten (its binding failed)."""
        ...

    def register_error_handler_filters(self, pre: ErrorHandlerFilter | None, post: ErrorHandlerFilter | None) -> None:
        """Filters around the default handling of a scheduling failure (see :data:`ErrorHandlerFilter`)."""
        ...

    def account_pod(self, pod: Pod) -> None:
        """Account an object that holds node resources like a pod (an Available reservation)."""
        ...

    def unaccount_pod(self, pod: Pod) -> None: ...

    def enqueue_pod(self, pod: Pod) -> None:
        """Put a synthetic pending pod (a reservation's reserve pod) through the normal pod path.
        Late-bound: nothing happens before the scheduler is assembled."""
        ...

    def dequeue_pod(self, pod: Pod) -> None:
        """Take a synthetic pending pod out of the queue. Late-bound, as :meth:`enqueue_pod`."""
        ...


class Handle(SchedulerServices, Protocol):
    """What every plugin factory receives: ``new(args, handle)``. The profile's
    :class:`~koord_scheduler.framework.runtime.Framework` implements it (mypy checks it, and every
    in-tree factory, through the registry's typed lines)."""

    @property
    def pre_filter_plugins(self) -> Sequence[PreFilterPlugin]:
        """The profile's PreFilter plugins, in order (their PreFilterExtensions replay dry runs)."""
        ...

    @property
    def filter_plugin_names(self) -> Sequence[str]:
        """The Filter plugins of the profile, in order."""
        ...

    @property
    def reservation_filter_plugins(self) -> Sequence[ReservationFilterPlugin]: ...

    @property
    def numa_hint_providers(self) -> Sequence[NUMAHintProvider]:
        """The profile's NUMA hint providers, in order (Koordinator's topology manager aligns their
        resources with CPUs and memory)."""
        ...

    def filter_nodes_uncached(
        self, state: CycleState, pod: Pod, positions: Positions, diagnosis: Diagnosis
    ) -> Positions:
        """The Filter chain over ``positions`` without the per-node cache (answers that depend on more
        than the node's row: dry runs that edit the snapshot). Returns the feasible positions."""
        ...

    def run_reservation_filter_plugins(
        self, state: CycleState, pod: Pod, reservation: object, node_info: NodeInfo
    ) -> Status: ...

    async def run_pre_bind_reservation(self, state: CycleState, reservation: object, node_name: str) -> Status: ...

    def preemption_refusal(self, state: CycleState, pod: Pod) -> Status | None:
        """The first :class:`~.interfaces.PreemptionGate` refusal for ``pod`` (an Unschedulable status
        naming the plugin), or None when every gate allows it to preempt on its own."""
        ...


class ServicesView:
    """The :class:`SchedulerServices` half of :class:`Handle`, passed on to ``services`` member by member
    (the framework's base class; kept apart so that :mod:`.runtime` reads as the extension points)."""

    __slots__ = ("services",)

    def __init__(self, services: SchedulerServices) -> None:
        self.services = services

    @property
    def snapshot(self) -> ClusterSnapshot:
        return self.services.snapshot

    @property
    def cluster(self) -> ClusterClient:
        return self.services.cluster

    @property
    def clock(self) -> Callable[[], float]:
        return self.services.clock

    @property
    def metrics_registry(self) -> CollectorRegistry:
        return self.services.metrics_registry

    @property
    def feature_gates(self) -> SchedulerFeatureGates:
        return self.services.feature_gates

    @property
    def nominator(self) -> PodNominating:
        return self.services.nominator

    @property
    def preemption_extenders(self) -> PreemptionExtenders | None:
        return self.services.preemption_extenders

    def watch(self, kind: ObjectKind[T], handler: Handler[T]) -> None:
        self.services.watch(kind, handler)

    def watch_pods(self, handler: ObjectHandler) -> None:
        self.services.watch_pods(handler)

    def add_simulation_report(self, reporter: SimulationReporter) -> None:
        self.services.add_simulation_report(reporter)

    def activate_pods(self, keys: Iterable[str]) -> None:
        self.services.activate_pods(keys)

    def waiting_pod(self, key: str) -> WaitingPod | None:
        return self.services.waiting_pod(key)

    def is_assumed(self, key: str) -> bool:
        return self.services.is_assumed(key)

    def add_next_pod_hook(self, hook: Callable[[], str | None]) -> None:
        self.services.add_next_pod_hook(hook)

    def register_forget_pod_handler(self, handler: Callable[[Pod], None]) -> None:
        self.services.register_forget_pod_handler(handler)

    def register_error_handler_filters(self, pre: ErrorHandlerFilter | None, post: ErrorHandlerFilter | None) -> None:
        self.services.register_error_handler_filters(pre, post)

    def account_pod(self, pod: Pod) -> None:
        self.services.account_pod(pod)

    def unaccount_pod(self, pod: Pod) -> None:
        self.services.unaccount_pod(pod)

    def enqueue_pod(self, pod: Pod) -> None:
        self.services.enqueue_pod(pod)

    def dequeue_pod(self, pod: Pod) -> None:
        self.services.dequeue_pod(pod)
