"""Coscheduling: gang scheduling (Koordinator ``pkg/scheduler/plugins/coscheduling``).

A gang is a set of pods that run together or not at all: at least ``min-available`` of them (a
PodGroup's ``minMember``) must be placed at once. Gangs may be tied into a *gang group* (``groups``),
which is satisfied only when every gang in it is.

- **PreEnqueue** keeps a member out of activeQ until every gang of its group exists, is initialised and
  has at least min-available pods. When the last one arrives, the plugin activates the pending members.
- **PreFilter** starts a *round* for the group with the first member that gets here; **NextPod** then
  feeds the group's other pending members to the scheduler back to back, ahead of the queue, so a gang's
  members are tried together whatever the queue order. After the first member of a round fails, the rest
  of the round fails fast with the cached reason (UnschedulableAndUnresolvable: no preemption for it).
- **Permit** holds each assumed member (Wait, for the gang's waiting time) until every gang of the group
  has enough waiting (per its match policy), then allows all of them together.
- **Failure**: when a member fails in a round, Strict gangs reject every waiting member of the group at
  once (their assumed resources are released); NonStrict gangs keep them waiting until the round ends and
  are then rejected unless the group was satisfied meanwhile. A Strict member's Unreserve (bind failure,
  Permit timeout) rejects its waiting siblings as well. The scheduler releases rejected members before
  it tries another pod, and the members of a round (the pods NextPod picked) back off as a group.
- **Once satisfied** (policy ``once-satisfied``, the default): after one member of the group has bound,
  later members are scheduled as plain pods.
- **PostFilter** with ``enablePreemption``: job-level preemption for the round's whole gang group, or for
  the pod alone when it has no gang (:mod:`.job_preemption`); without it, nothing.
- **PreBind** writes ``bind-gang-group-id`` / ``bind-gang-member-count`` on the members allowed together.
- **Network topology** (``awareNetworkTopology``, for gangs with a ``network-topology-spec``): the first
  member of a round plans a node for every pending member (FindOneNode, :mod:`.network_topology`); the
  others are pinned to theirs through their PreFilterResult; job preemption plans by topology as well.
  PreScore/Score rank nodes by topology for pods with a ``network-topology-selector``.

Differences from Koordinator, on purpose: present-but-bad gang annotations reject the pod with a message
and an Event instead of falling back silently (:mod:`.spec`); gated members get an Event saying why; a
round that ends without a failure (some members could not be tried: scheduling gates) keeps the waiting
members until their waiting time rather than rejecting them, so ``waiting-time`` means what it says.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from apis.config.coscheduling_args import CoschedulingArgs
from apis.core.types import Pod
from apis.scheduling import podgroup as pg
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import (
    BatchScorePlugin,
    EnqueueExtensions,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
)
from koord_scheduler.framework.koordinator_stages import JobNodeFinder, PreemptionGate
from koord_scheduler.framework.pod_patch import patch_at_pre_bind
from koord_scheduler.framework.services import ApiRoute, APIServiceProvider
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, Positions
from koord_scheduler.framework.status import Code, Status, error, skip, success, unresolvable, unschedulable
from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    EventType,
    ObjectKind,
    PostFilterResult,
    PreFilterResult,
    QueuedPodInfo,
)
from koord_scheduler.plugins import names
from koord_scheduler.plugins.coscheduling import preemption_policy, service
from koord_scheduler.plugins.coscheduling.events import PodEvents
from koord_scheduler.plugins.coscheduling.gang_cache import Gang, GangCache, Round
from koord_scheduler.plugins.coscheduling.job_preemption import JobPreemption, Preemptor
from koord_scheduler.plugins.coscheduling.messages import (
    all_attempted,
    gang_cannot_complete,
    gang_group_rejected,
    gang_not_found,
    not_collect_enough,
    not_init,
    unreserve_rejected,
)
from koord_scheduler.plugins.coscheduling.network_topology import (
    CLUSTER_NETWORK_TOPOLOGY_KIND,
    NetworkTopology,
)
from koord_scheduler.plugins.coscheduling.pending_condition import PendingConditions
from koord_scheduler.plugins.coscheduling.spec import (
    GangRef,
    GangSpec,
    GangSpecError,
    SpecDefaults,
    bind_annotations,
    gang_ref,
    spec_from_pod,
)
from koord_scheduler.plugins.coscheduling.topology_plan import (
    INVALID_PLAN,
    NO_CLUSTER_NETWORK_TOPOLOGY,
    NO_PLANNED_PODS,
)

log = logging.getLogger(__name__)

NAME = names.COSCHEDULING
ARGS = CoschedulingArgs

POD_GROUP_KIND = ObjectKind(
    kind=pg.KIND, group=pg.GROUP, version=pg.VERSION, plural=pg.PLURAL, namespaced=True, parse=pg.parse_pod_group
)

GANG_PENDING_PODS_CONDITION_PATCH = "GangPendingPodsConditionPatch"
EVENT_REASON_INVALID = "InvalidGang"
EVENT_REASON_WAITING = "GangNotReady"


class Coscheduling:
    """See the module docstring."""

    name = NAME

    def __init__(self, args: CoschedulingArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.cache = GangCache(SpecDefaults(args.default_timeout, args.default_match_policy))
        self.round: Round | None = None
        self.round_spec: GangSpec | None = None
        self._pod_errors: dict[str, str] = {}
        """Pod key -> why the pod's own gang annotations are unusable."""
        self._events = PodEvents(handle)
        self._ready_groups: set[str] = set()
        self.job_preemption = JobPreemption(handle)
        self.network = NetworkTopology(handle)
        self.conditions = PendingConditions(
            handle, enabled=handle.feature_gates.enabled(GANG_PENDING_PODS_CONDITION_PATCH)
        )

    def start(self) -> None:
        h = self.handle
        h.watch(POD_GROUP_KIND, self.on_pod_group)
        h.watch_pods(self.on_pod)
        h.register_error_handler_filters(self.on_scheduling_failure, None)
        h.add_next_pod_hook(self.next_pod)
        h.add_simulation_report(self.simulation_report)
        if self.args.enable_preemption:
            h.add_simulation_report(self.job_preemption.simulation_report)
        if self.args.aware_network_topology:
            h.watch(CLUSTER_NETWORK_TOPOLOGY_KIND, self.network.on_topology)

    # ----- events -----

    def on_pod_group(self, event: EventType, old: Any, new: Any) -> None:
        record = None if event == EventType.DELETED else new
        key = (new or old).key
        gang = self.cache.on_pod_group(record, key)
        if gang is not None and gang.spec is not None:
            self._maybe_activate(gang.spec)

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        old_ref = gang_ref(old) if old is not None else None
        new_ref = gang_ref(new) if new is not None and event != EventType.DELETED else None
        if old_ref is not None and old is not None and (new_ref is None or new_ref != old_ref):
            self.cache.remove_pod(old_ref, old)
        if new_ref is None or new is None:
            if old is not None:
                self._pod_errors.pop(old.key, None)
                self._events.forget(old.key)
                self.conditions.forget(old.key)
            if old_ref is not None and old_ref.gang_id not in self.cache.gangs:
                self._ready_groups = {g for g in self._ready_groups if g in self.cache.groups}
            return
        gang = self.cache.add_pod(new_ref, new)
        self._check_pod_spec(new_ref, new, gang)
        if new.node_name:
            self.conditions.forget(new.key)
            return
        if gang.spec is not None:
            self._maybe_activate(gang.spec)
        reason = self._gate_reason(new, new_ref)
        if reason:
            invalid = new.key in self._pod_errors or gang.spec is None
            if self._events.record(
                new, EVENT_REASON_INVALID if invalid else EVENT_REASON_WAITING, reason, warning=invalid
            ) and (new.key in self._pod_errors or gang.pod_group is not None):
                # The pod's gang annotations, or its PodGroup, cannot be read: it stays Pending until fixed.
                log.warning("pod %s stays pending: %s", new.key, reason)
            self.conditions.write((new,), self._gate_reason(new, new_ref, counts=False))

    def _check_pod_spec(self, ref: GangRef, pod: Pod, gang: Gang) -> None:
        if ref.from_pod_group:
            return
        try:
            spec_from_pod(pod, ref, self.cache.defaults)
        except GangSpecError as exc:
            self._pod_errors[pod.key] = str(exc)
        else:
            self._pod_errors.pop(pod.key, None)

    def _maybe_activate(self, spec: GangSpec) -> None:
        """Activate the group's pending members when it becomes complete (once per transition)."""
        gid = spec.group_id
        if self.cache.basic_check(spec):
            self._ready_groups.discard(gid)
            return
        if gid in self._ready_groups:
            return
        self._ready_groups.add(gid)
        self.cache.group(gid)  # the state lives as long as the group's gangs (pruned with them)
        self.handle.activate_pods([k for gang in self.cache.members(spec) for k in gang.pending()])

    # ----- checks shared by PreEnqueue and PreFilter -----

    def _gate_reason(self, pod: Pod, ref: GangRef, *, counts: bool = True) -> str:
        """Why the pod cannot be tried now ("" if it can); ``counts``: see :meth:`.GangCache.basic_check`."""
        problem = self._pod_errors.get(pod.key)
        if problem:
            return f"invalid gang annotations on pod {pod.key}: {problem}"
        gang = self.cache.gangs.get(ref.gang_id)
        if gang is None:
            return gang_not_found(ref.gang_id, pod.key)
        spec = gang.spec
        if spec is None:
            return not_init(ref.gang_id, pod.key, gang.not_ready)
        if self._plain(spec):
            return ""
        problems = self.cache.basic_check(spec, counts=counts)
        if problems:
            return not_collect_enough(spec.groups, problems, ref.gang_id, pod.key)
        return ""

    def _plain(self, spec: GangSpec) -> bool:
        """Once-satisfied groups schedule their later members like plain pods."""
        return spec.match_policy == pg.MATCH_POLICY_ONCE_SATISFIED and self.cache.group(spec.group_id).once_satisfied

    def _spec_of(self, pod: Pod) -> tuple[GangRef, Gang, GangSpec] | None:
        ref = gang_ref(pod)
        if ref is None:
            return None
        gang = self.cache.gangs.get(ref.gang_id)
        if gang is None or gang.spec is None:
            return None
        return ref, gang, gang.spec

    # ----- PreEnqueue -----

    def pre_enqueue(self, pod: Pod) -> Status:
        ref = gang_ref(pod)
        if ref is None:
            return success()
        reason = self._gate_reason(pod, ref)
        return unresolvable(reason) if reason else success()

    # ----- PreFilter and NextPod: rounds -----

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        ref = gang_ref(pod)
        if ref is None:
            return None, success()
        reason = self._gate_reason(pod, ref)
        if reason:
            return None, unresolvable(reason)
        found = self._spec_of(pod)
        assert found is not None
        _, _, spec = found
        if self._plain(spec):
            return None, success()
        current = self.round
        if current is None or current.group_id != spec.group_id:
            if current is not None:
                self._end_round()
            if self._topology_aware(spec) and self.network.topology is None:
                return None, unresolvable(NO_CLUSTER_NETWORK_TOPOLOGY)  # no round starts
            self.round = Round(spec.group_id, {pod.key}, first=pod.key)
            self.round_spec = spec
            return None, success()
        if current.failed_message:
            current.attempted.add(pod.key)
            current.quick_failed = pod.key
            return None, unresolvable(current.failed_message)
        current.attempted.add(pod.key)
        if self._topology_aware(spec) and len(current.attempted) > 1:
            node = current.planned.get(pod.key)
            if not node:
                return None, error(NO_PLANNED_PODS)
            return PreFilterResult(frozenset({node})), success()
        return None, success()

    def _topology_aware(self, spec: GangSpec) -> bool:
        return self.args.aware_network_topology and spec.network_topology is not None

    def find_one_node(self, state: CycleState, pod: Pod, result: PreFilterResult | None) -> tuple[str, Status]:
        """FindOneNode for the members of a network-topology round (:meth:`.NetworkTopology.find_one_node`)."""
        found = self._spec_of(pod)
        current = self.round
        if found is None or current is None or current.group_id != found[2].group_id:
            return "", skip()
        spec = found[2]
        topology = spec.network_topology
        if not self.args.aware_network_topology or topology is None:
            return "", skip()
        return self.network.find_one_node(
            state,
            pod,
            current=current,
            spec=topology,
            pending=lambda: self._pending_pods(spec, pod),
            snapshot=self.handle.snapshot,
            result=result,
        )

    def pre_filter_extensions(self) -> None:
        return None

    def next_pod(self) -> str | None:
        """The next member of the current round to try, or None (the round is over)."""
        current, spec = self.round, self.round_spec
        if current is None or spec is None:
            return None
        for gang in self.cache.members(spec):
            for key in gang.pending():
                if key in current.attempted or key in self._pod_errors or self.handle.is_assumed(key):
                    continue
                current.attempted.add(key)
                return key
        self._end_round()
        return None

    def _end_round(self) -> None:
        current, spec = self.round, self.round_spec
        self.round, self.round_spec = None, None
        if current is None or spec is None or not current.failed_message:
            return
        if not self.cache.group_satisfied(spec):
            self._reject_waiting(spec, all_attempted())

    def on_scheduling_failure(self, qpi: QueuedPodInfo, status: Status) -> bool:
        """A member failed a scheduling attempt (Koordinator's AfterPostFilter): cache the round's failure;
        Strict gangs reject every waiting member of the group. Never takes over the failure."""
        found = self._spec_of(qpi.pod)
        if found is None:
            return False
        _, _, spec = found
        if self.cache.group(spec.group_id).once_satisfied:
            return False
        current = self.round
        if current is None or current.group_id != spec.group_id:
            return False
        if not current.failed_message:
            waiting = len(self.cache.waiting_in_group(spec))
            current.failed_message = gang_group_rejected(spec.group_id, qpi.pod.key, status.message, waiting)
        elif qpi.pod.key == current.quick_failed and not current.conditions_written:
            # A member failed because the round had already failed: tell the members not tried yet now.
            current.conditions_written = True
            self.conditions.write(self._untried(spec, current, qpi.pod.key), status.message)
        if spec.mode == pg.MODE_STRICT:
            self._reject_waiting(spec, current.failed_message)
        return False

    def _untried(self, spec: GangSpec, current: Round, failed_key: str) -> list[Pod]:
        """The group's pending members the round has not tried, ``failed_key`` aside."""
        return [
            gang.children[key]
            for gang in self.cache.members(spec)
            for key in gang.pending()
            if key != failed_key and key not in current.attempted
        ]

    def _reject_waiting(self, spec: GangSpec, message: str) -> None:
        for key in self.cache.waiting_in_group(spec):
            waiting = self.handle.waiting_pod(key)
            if waiting is not None:
                waiting.reject(NAME, message)

    # ----- PostFilter, PreScore/Score (network topology) -----

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Any) -> tuple[PostFilterResult | None, Status]:
        """Unschedulable without ``enablePreemption``; with it, job-level preemption (:mod:`.job_preemption`),
        decided once per round."""
        if not self.args.enable_preemption:
            return None, Status(Code.UNSCHEDULABLE)
        preemptor, current = self._preemptor(pod)
        if current is not None and current.preemption_message:
            return None, unschedulable(preemption_policy.MESSAGE_PREFIX + current.preemption_message)
        topology = self.round_spec.network_topology if current is not None and self.round_spec else None
        placer = None
        if current is not None and topology is not None and self.args.aware_network_topology:
            if len(current.attempted) > 1:  # a planned member no longer fits: wait for the next round
                return None, unschedulable(preemption_policy.MESSAGE_PREFIX + INVALID_PLAN)
            placer = self.network.preemption_placer(topology, self.handle.snapshot)
        result, status = self.job_preemption.preempt(state, preemptor, diagnosis, placer=placer)
        if current is not None and status.code != Code.ERROR:
            everyone = len(preemptor.pending) + len(preemptor.waiting)
            done = preemption_policy.PREEMPT_SUCCESS.format(len(preemptor.waiting), everyone)
            current.preemption_message = preemption_policy.ALREADY_ATTEMPTED.format(pod.key, status.message or done)
        if status.message:
            status = Status(status.code, (preemption_policy.MESSAGE_PREFIX + status.message,))
        return result, status

    def refuse_preemption(self, state: CycleState, pod: Pod) -> str | None:
        """A gang member may preempt on its own (DefaultPreemption) only when its gang group would be
        satisfied with it, so no pod is evicted for a gang that cannot complete."""
        found = self._spec_of(pod)
        if found is None or self._plain(found[2]):
            return None
        ref, _, spec = found
        if self.cache.group_satisfied_with(spec, ref.gang_id, pod.key):
            return None
        return gang_cannot_complete(spec.group_id)

    def _preemptor(self, pod: Pod) -> tuple[Preemptor, Round | None]:
        """The gang group of the current round (pending and waiting members), or the pod alone."""
        found = self._spec_of(pod)
        current = self.round
        if found is None or current is None or current.group_id != found[2].group_id or self._plain(found[2]):
            return Preemptor(pod.key, pod, (pod,), ()), None
        spec = found[2]
        pending = self._pending_pods(spec, pod)
        waiting = [w.pod for k in self.cache.waiting_in_group(spec) if (w := self.handle.waiting_pod(k)) is not None]
        return Preemptor(spec.group_id, pod, tuple(pending), tuple(waiting)), current

    def _pending_pods(self, spec: GangSpec, pod: Pod) -> list[Pod]:
        """The group's members still to place (``pod`` itself as given)."""
        return [
            pod if key == pod.key else gang.children[key]
            for gang in self.cache.members(spec)
            for key in gang.pending()
            if key not in self._pod_errors and (key == pod.key or not self.handle.is_assumed(key))
        ]

    def pre_score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> Status:
        return self.network.pre_score(state, pod, snapshot, positions)

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        return self.network.score_nodes(state, snapshot, positions)

    def score_extensions(self) -> NetworkTopology:
        return self.network

    # ----- Reserve / Permit -----

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return success()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        found = self._spec_of(pod)
        if found is None:
            return
        ref, gang, spec = found
        gang.waiting.discard(pod.key)
        if spec.mode == pg.MODE_STRICT and not self.cache.group(spec.group_id).once_satisfied:
            self._reject_waiting(spec, unreserve_rejected(ref.gang_id, pod.name))

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        ref = gang_ref(pod)
        if ref is None:
            return success(), 0.0
        found = self._spec_of(pod)
        if found is None:
            return unschedulable("Gang not found"), 0.0
        _, gang, spec = found
        gang.waiting.add(pod.key)
        if not self.cache.group_satisfied(spec):
            return Status(Code.WAIT), spec.wait_seconds
        group = self.cache.group(spec.group_id)
        members = self.cache.waiting_in_group(spec)
        if not group.binding_members:
            group.binding_members = tuple(members)
        for key in members:
            waiting = self.handle.waiting_pod(key)
            if waiting is not None:
                waiting.allow(NAME)
        if self.round is not None and self.round.group_id == spec.group_id:
            self.round, self.round_spec = None, None
        return success(), 0.0

    # ----- PreBind / PostBind -----

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        found = self._spec_of(pod)
        group = None if found is None else found[2].group_id
        members = () if group is None else self.cache.group(group).binding_members
        patch = bind_annotations(pod, group or "", members)
        if not patch:
            return success()
        try:
            await patch_at_pre_bind(state, self.handle.cluster, pod, annotations=patch)
        except ClusterError as exc:
            return error(f"writing gang annotations of pod {pod.key}: {exc}")
        return success()

    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        found = self._spec_of(pod)
        if found is None:
            return
        _, gang, spec = found
        gang.waiting.discard(pod.key)
        gang.bound.add(pod.key)
        self.cache.group(spec.group_id).once_satisfied = True

    # ----- queueing hints -----

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        """Members rejected by this plugin (quick-failed or rejected while waiting) come back when
        capacity may have appeared. Gated members are activated by the plugin itself."""
        node = ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE | ActionType.UPDATE_NODE_LABEL
        node |= ActionType.UPDATE_NODE_TAINT
        return (
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, node)),
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE)),
        )

    # ----- reporting -----

    def simulation_report(self) -> tuple[str, list[dict[str, Any]]]:
        return "gangs", self.cache.report_rows()

    def api_routes(self) -> Sequence[ApiRoute]:
        """``/apis/v1/plugins/Coscheduling/gang/:namespace/:name`` and ``/gangs`` (:mod:`.service`)."""
        return service.routes(self)


def new(args: CoschedulingArgs | None, handle: Handle) -> Coscheduling:
    """Factory: the plugin watches PodGroups, pods and (with ``awareNetworkTopology``) the
    ClusterNetworkTopology, and registers its NextPod hook and error-handler filter."""
    args = args if args is not None else CoschedulingArgs()
    plugin = Coscheduling(args, handle)
    plugin.start()
    return plugin


def declared_capabilities(
    plugin: Coscheduling,
) -> tuple[
    PreEnqueuePlugin,
    PreFilterPlugin,
    PostFilterPlugin,
    PreScorePlugin,
    BatchScorePlugin,
    ReservePlugin,
    PermitPlugin,
    PreBindPlugin,
    PostBindPlugin,
    EnqueueExtensions,
    JobNodeFinder,
    PreemptionGate,
]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin


_services: type[APIServiceProvider] = Coscheduling
"""The ``/apis/v1`` routes (not one of the framework's extension points, so not in the list above)."""
