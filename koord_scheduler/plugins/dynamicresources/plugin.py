"""DynamicResources (kube-scheduler ``dynamicresources/dynamicresources.go``, v1.35): pods with
``spec.resourceClaims`` get devices from DRA drivers' ResourceSlices.

- PreEnqueue: every claim must exist (a claim from a template once kube-controller-manager created it
  and named it in ``status.resourceClaimStatuses``), not be being deleted, and, for a generated claim,
  be owned by the pod. Otherwise the pod waits (UnschedulableAndUnresolvable, upstream's messages).
- PreFilter: Skip without claims; classes must exist; a claim whose allocation is in flight makes the
  pod wait; otherwise an :class:`~.allocator.Allocator` is prepared over the slices, classes and the
  allocated devices (in-flight allocations included).
- Filter, per node: allocated claims must be available there (their allocation's node selector); the
  unallocated ones must be allocatable there (the structured allocator, with CEL selectors).
- PostFilter: "no new claims to deallocate" for pods without claims; a claim allocated but unusable on
  every node and reserved by nobody else is deallocated, so the next attempt can choose other devices.
- Score: prioritized lists (``firstAvailable``) prefer earlier subrequests (weight 2 in the default
  profile); PreScore skips pods without them (their score is 0 everywhere upstream too).
- Reserve: the chosen allocations become in-flight allocations; Unreserve drops them and takes the pod
  out of ``reservedFor`` where PreBind had put it.
- PreBind: the finalizer, the allocation and ``reservedFor`` written to each claim (:mod:`.binding`).

Statuses are upstream's: its ``statusUnschedulable`` is UnschedulableAndUnresolvable, so DRA failures
never lead to preempting pods. Problems in a claim or class (bad CEL, a cost budget exceeded) are Error
statuses naming the claim or class and the selector, and the pod is retried with backoff.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from apis.config.dynamicresources_args import DynamicResourcesArgs
from apis.config.errors import ConfigError, forbidden
from apis.core.selectors import node_selector_matches
from apis.core.types import Node, Pod
from apis.feature_gates import SchedulerFeatureGates
from apis.resource.types import FINALIZER, AllocationResult, DeviceClass, ResourceClaim, ResourceSlice
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import (
    BatchFilterPlugin,
    EnqueueExtensions,
    FilterPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreBindPreFlight,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from koord_scheduler.framework.per_node_filter import PerNodeFilter
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, NodeInfo, Positions
from koord_scheduler.framework.status import Code, Status, error, skip, success, unresolvable, unschedulable
from koord_scheduler.framework.types import (
    ClusterEventWithHint,
    EventType,
    NodeFilterResult,
    PostFilterResult,
    PreFilterResult,
)
from koord_scheduler.plugins import names
from koord_scheduler.plugins.dynamicresources import binding, events, fastpath, kinds, report
from koord_scheduler.plugins.dynamicresources.allocator import AllocationError, Allocator, FailedOnNodeError, Features
from koord_scheduler.plugins.dynamicresources.claims import ClaimTracker
from koord_scheduler.plugins.dynamicresources.fastpath import CountNeed
from koord_scheduler.plugins.dynamicresources.policy import ClaimProblem, pod_claims, prioritized_list_score
from koord_scheduler.plugins.dynamicresources.pools import NodePoolCache, SliceIndex
from koord_scheduler.plugins.dynamicresources.selector_cache import SelectorCache
from koord_scheduler.plugins.helpers import default_normalize_score

NAME = names.DYNAMIC_RESOURCES
ARGS = DynamicResourcesArgs

log = logging.getLogger(__name__)

MSG_NO_CLAIMS_TO_DEALLOCATE = "no new claims to deallocate"
MSG_CANNOT_ALLOCATE = "cannot allocate all claims"
MSG_NOT_AVAILABLE = "resourceclaim not available on the node"
MSG_TIMED_OUT = "timed out trying to allocate devices"
_CANNOT_ALLOCATE = unresolvable(MSG_CANNOT_ALLOCATE)
_SUCCESS = success()
MSG_INFORMERS_DISABLED = (
    "DRA informers are disabled (feature gate DisableDynamicResourceAllocationInformer): pods with "
    "resourceClaims cannot be scheduled"
)


@dataclass(slots=True)
class CycleData:
    """upstream's ``stateData``: the pod's claims (1:1 with the claims the pod needs), where allocated
    ones are available, the allocator, and what Filter found per node."""

    claims: list[ResourceClaim]
    available_on: list[Any]
    allocator: Allocator | None = None
    by_node: dict[str, list[AllocationResult]] = field(default_factory=dict)
    unavailable: set[int] = field(default_factory=set)
    allocations: dict[int, AllocationResult] = field(default_factory=dict)
    """Set by Reserve: claim index -> the allocation PreBind writes."""
    need: CountNeed | None = None
    """Set when a device count decides Filter (:mod:`.fastpath`); Reserve then allocates for its node."""

    def clone(self) -> CycleData:
        return self  # shared, as upstream's stateData (preemption's dry run only reads it)

    def to_allocate(self) -> list[tuple[int, ResourceClaim]]:
        return [(i, c) for i, c in enumerate(self.claims) if c.allocation is None]


STATE_KEY: StateKey[CycleData] = StateKey(NAME)


class DynamicResources:
    name = NAME

    def __init__(self, args: DynamicResourcesArgs, handle: Handle, options: DynamicResourcesOptions) -> None:
        self.args = args
        self.handle = handle
        self.features = options.features
        self.filter_timeout = float(args.filter_timeout or 0) if options.filter_timeout else 0.0
        self.informers_disabled = options.informers_disabled
        self.slices = SliceIndex()
        self.node_pools = NodePoolCache(self.slices, partitionable_devices=self.features.partitionable_devices)
        self.classes: dict[str, DeviceClass] = {}
        self.claims = ClaimTracker()
        self.counts = fastpath.CountIndex(self.claims)
        self.selectors = SelectorCache()
        self._tasks: set[asyncio.Task[None]] = set()
        if not self.informers_disabled:
            handle.watch(kinds.DEVICE_CLASS, self._on_class)
            handle.watch(kinds.RESOURCE_SLICE, self._on_slice)
            handle.watch(kinds.RESOURCE_CLAIM, self._on_claim)
            handle.watch(kinds.RESOURCE_CLAIM_TEMPLATE, _ignore)
        handle.add_simulation_report(lambda: report.claims_report(self.claims.all()))

    # ----- watches -----

    def _on_class(self, event: EventType, old: Any, new: Any) -> None:
        if event == EventType.DELETED:
            if isinstance(old, DeviceClass):
                self.classes.pop(old.name, None)
        elif isinstance(new, DeviceClass):
            self.classes[new.name] = new

    def _on_slice(self, event: EventType, old: Any, new: Any) -> None:
        if event == EventType.DELETED:
            if isinstance(old, ResourceSlice):
                self.slices.remove(old.name)
        elif isinstance(new, ResourceSlice):
            self.slices.upsert(new)

    def _on_claim(self, event: EventType, old: Any, new: Any) -> None:
        if event == EventType.DELETED:
            if isinstance(old, ResourceClaim):
                self.claims.on_watched(old, None)
        elif isinstance(new, ResourceClaim):
            self.claims.on_watched(old if isinstance(old, ResourceClaim) else None, new)

    # ----- PreEnqueue -----

    def pre_enqueue(self, pod: Pod) -> Status:
        if not pod.resource_claims:
            return success()
        if self.informers_disabled:
            return unresolvable(MSG_INFORMERS_DISABLED)
        found = pod_claims(pod, self.claims.get)
        if isinstance(found, ClaimProblem):
            return unresolvable(found.message)
        return success()

    # ----- PreFilter -----

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.resource_claims:
            return None, skip()
        found = pod_claims(pod, self.claims.get)
        if isinstance(found, ClaimProblem):
            return None, unresolvable(found.message)
        if not found:
            return None, skip()
        data = CycleData(
            claims=list(found), available_on=[c.allocation.node_selector if c.allocation else None for c in found]
        )
        to_allocate = data.to_allocate()
        for _, claim in to_allocate:
            if self.claims.has_pending_allocation(claim.uid):
                return None, unresolvable(f"resource claim {claim.key} is in the process of being allocated")
            for request in claim.spec.requests:
                subs = (request.exactly,) if request.exactly is not None else request.first_available
                if request.first_available and not self.features.prioritized_list:
                    return None, unresolvable(
                        f"resource claim {claim.key}, request {request.name}: has subrequests, but the "
                        "DRAPrioritizedList feature is disabled"
                    )
                for sub in subs:
                    if sub is None:
                        continue
                    if sub.device_class_name not in self.classes:
                        qualified = request.name if request.exactly is not None else f"{request.name}/{sub.name}"
                        return None, unresolvable(
                            f"request {qualified}: device class {sub.device_class_name} does not exist"
                        )
        if to_allocate:
            data.allocator = Allocator(
                self.node_pools, self.classes, self.claims, features=self.features, selectors=self.selectors
            )
            data.need = fastpath.count_need(
                [c for _, c in to_allocate], self.classes, device_taints=self.features.device_taints
            )
        state.write(STATE_KEY, data)
        return None, success()

    def pre_filter_extensions(self) -> None:
        return None

    # ----- Filter -----

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        data = state.get(STATE_KEY)
        node = node_info.node
        if data is None or node is None:
            return success()
        return self.filter_node(data, node)

    def filter_node(self, data: CycleData, node: Node) -> Status:
        """Filter on one node with the full search (the allocation is kept for Reserve and Score). In
        upstream's order: the allocation first (its failure is the node's reason), then the allocated claims
        that are not available on the node (remembered for PostFilter)."""
        unavailable = [
            i
            for i, selector in enumerate(data.available_on)
            if selector is not None and not node_selector_matches(selector, node.labels, node.name)
        ]
        results = None
        if data.allocator is not None:
            claims = [c for _, c in data.to_allocate()]
            deadline = time.monotonic() + self.filter_timeout if self.filter_timeout else None
            try:
                results = data.allocator.allocate(node, claims, deadline=deadline)
            except FailedOnNodeError as err:
                return unresolvable(str(err))
            except TimeoutError:
                return unresolvable(MSG_TIMED_OUT)
            except AllocationError as err:
                return error(str(err))
            if results is None or len(results) != len(claims):
                return unresolvable(MSG_CANNOT_ALLOCATE)
        if unavailable:
            data.unavailable.update(unavailable)
            return unresolvable(MSG_NOT_AVAILABLE)
        if results is not None:
            data.by_node[node.name] = results
        return success()

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        data = state.get(STATE_KEY)
        if data is None:
            return NodeFilterResult.all_pass(len(positions))
        if data.need is None or data.allocator is None or any(s is not None for s in data.available_on):
            return PerNodeFilter(self).filter_nodes(state, pod, snapshot, positions)
        return self._count_filter_nodes(data, data.need, data.allocator, snapshot, positions)

    def _count_filter_nodes(
        self, data: CycleData, need: CountNeed, allocator: Allocator, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        """Filter through :mod:`.fastpath`: a count of free matching devices per node."""
        answer = self.counts.answerer(allocator, need)
        failures: list[tuple[int, Status]] = []
        infos = snapshot.infos
        for i, pos in enumerate(positions.tolist()):
            info = infos[pos]
            node = info.node if info is not None else None
            if node is None:
                continue
            try:
                enough = answer(node)
            except AllocationError as err:
                failures.append((i, error(str(err))))
                continue
            if enough is None:
                status = self.filter_node(data, node)  # an invalid pool: the search words the reason
                if status.code is not Code.SUCCESS:
                    failures.append((i, status))
            elif not enough:
                failures.append((i, _CANNOT_ALLOCATE))
        if not failures:
            return NodeFilterResult.all_pass(len(positions))
        passed = np.ones(len(positions), dtype=np.bool_)
        reason_ids = np.zeros(len(positions), dtype=np.int32)
        statuses: list[Status] = []
        ids: dict[str, int] = {}
        for i, status in failures:
            k = ids.get(status.message)
            if k is None:
                k = ids[status.message] = len(statuses)
                statuses.append(status)
            passed[i] = False
            reason_ids[i] = k
        return NodeFilterResult(passed, reason_ids, tuple(statuses))

    # ----- PostFilter -----

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Any) -> tuple[PostFilterResult | None, Status]:
        data = state.get(STATE_KEY)
        if data is None or not data.claims:
            return None, unschedulable(MSG_NO_CLAIMS_TO_DEALLOCATE)
        for index in sorted(data.unavailable):
            claim = data.claims[index]
            reserved = claim.reserved_for
            if not reserved or (len(reserved) == 1 and reserved[0].uid == pod.uid):
                self._spawn(self._deallocate(claim))
                return None, unschedulable("deallocation of ResourceClaim completed")
        return None, unschedulable("still not schedulable")

    async def _deallocate(self, claim: ResourceClaim) -> None:
        try:
            self.claims.assume(await binding.deallocate_claim(self.handle.cluster, claim))
        except binding.ClaimWriteError as err:
            log.warning("DynamicResources: %s", err)

    # ----- Score -----

    def pre_score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> Status:
        data = state.get(STATE_KEY)
        if data is None or not any(r.first_available for _, c in data.to_allocate() for r in c.spec.requests):
            return skip()
        return success()

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        data = state.get(STATE_KEY)
        if data is None:
            return 0
        results = data.by_node.get(node_info.name)
        if results is None:
            return 0
        return prioritized_list_score(data.claims, results)

    def score_extensions(self) -> DynamicResources:
        return self

    def normalize_score(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        default_normalize_score(100, False, scores)
        return success()

    # ----- Reserve -----

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        data = state.get(STATE_KEY)
        if data is None or data.allocator is None:
            return success()
        to_allocate = data.to_allocate()
        results = data.by_node.get(node_name)
        if results is None and data.need is not None:
            # Filter only counted (:mod:`.fastpath`): the search allocates on the chosen node.
            info = self.handle.snapshot.node_info(node_name)
            if info is not None and info.node is not None and self.filter_node(data, info.node).is_success:
                results = data.by_node.get(node_name)
        if results is None:
            return error("claim allocation not found for node")
        if len(results) != len(to_allocate):
            return error(f"internal error, have {len(results)} allocations, {len(to_allocate)} claims to allocate")
        for (index, claim), allocation in zip(to_allocate, results, strict=True):
            data.allocations[index] = allocation
            finalizers = claim.finalizers if FINALIZER in claim.finalizers else (*claim.finalizers, FINALIZER)
            self.claims.signal_pending_allocation(_with(claim, allocation=allocation, finalizers=finalizers))
        return success()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        data = state.get(STATE_KEY)
        if data is None:
            return
        for claim in data.claims:
            if self.claims.remove_pending_allocation(claim.uid):
                self.claims.restore(claim.key)
            if claim.allocation is not None and claim.reserved_for_pod(pod.uid):
                self._spawn(self._unreserve(claim, pod))

    async def _unreserve(self, claim: ResourceClaim, pod: Pod) -> None:
        try:
            updated = await binding.unreserve_claim(self.handle.cluster, claim, pod, self._latest)
        except binding.ClaimWriteError as err:
            log.warning("DynamicResources: %s", err)  # retried with the pod's next attempt, as upstream
            return
        if updated is not None:
            self.claims.assume(updated)

    # ----- PreBind -----

    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """``PreBindPreFlight``: PreBind writes claims whenever the pod has any."""
        data = state.get(STATE_KEY)
        return success() if data is not None and data.claims else skip()

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        data = state.get(STATE_KEY)
        if data is None:
            return success()
        for index, claim in enumerate(data.claims):
            if claim.reserved_for_pod(pod.uid):
                continue
            allocation = data.allocations.get(index)
            try:
                written = await binding.bind_claim(self.handle.cluster, claim, pod, allocation, self._latest)
            except binding.ClaimWriteError as err:
                return error(str(err))
            finally:
                if allocation is not None:
                    self.claims.remove_pending_allocation(claim.uid)
            self.claims.assume(written)
            data.claims[index] = written
        return success()

    def _latest(self, key: str) -> ResourceClaim | None:
        return self.claims.watched.get(key)

    # ----- queueing -----

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return events.dynamic_resources_events(self.claims.get)

    # ----- background API calls -----

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            coro.close()
            return
        task = loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for the claim writes Unreserve and PostFilter started."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


def _ignore(event: EventType, old: Any, new: Any) -> None:
    return None


def _with(claim: ResourceClaim, **changes: Any) -> ResourceClaim:
    return replace(claim, **changes)


@dataclass(frozen=True, slots=True)
class DynamicResourcesOptions:
    """What the feature gates decide for this plugin (kube-scheduler's ``feature.Features``)."""

    features: Features = field(default_factory=Features)
    filter_timeout: bool = True
    """DRASchedulerFilterTimeout."""
    informers_disabled: bool = False
    """Koordinator's DisableDynamicResourceAllocationInformer."""

    @classmethod
    def from_gates(cls, gates: SchedulerFeatureGates) -> DynamicResourcesOptions:
        return cls(
            features=Features(
                admin_access=gates.enabled("DRAAdminAccess"),
                prioritized_list=gates.enabled("DRAPrioritizedList"),
                device_taints=gates.enabled("DRADeviceTaints"),
            ),
            filter_timeout=gates.enabled("DRASchedulerFilterTimeout"),
            informers_disabled=gates.enabled("DisableDynamicResourceAllocationInformer"),
        )


def new(args: DynamicResourcesArgs | None, handle: Handle) -> DynamicResources:
    options = DynamicResourcesOptions.from_gates(handle.feature_gates)
    if args is not None and "filter_timeout" in args.model_fields_set and not options.filter_timeout:
        # upstream's ValidateDynamicResourcesArgs with the gate off
        raise ConfigError(
            [forbidden("DynamicResourcesArgs.filterTimeout", "DRASchedulingFilterTimeout feature gate is disabled")]
        )
    return DynamicResources(args or DynamicResourcesArgs(), handle, options)


def declared_capabilities(
    plugin: DynamicResources,
) -> tuple[
    PreEnqueuePlugin,
    PreFilterPlugin,
    FilterPlugin,
    BatchFilterPlugin,
    PostFilterPlugin,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    PreBindPreFlight,
    EnqueueExtensions,
]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin
