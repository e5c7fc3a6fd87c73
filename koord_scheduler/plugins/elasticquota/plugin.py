"""ElasticQuota (Koordinator pkg/scheduler/plugins/elasticquota): admission against a quota tree.

- **Accounting** (:mod:`.tree`, one per ``tree-id``: :mod:`.forest`): every pod (of every scheduler) is
  charged to its quota (:mod:`.mapping`): to *request* while it exists, to *used* once it is assigned
  (Reserve, or seen bound). Terminal pods are not charged. ElasticQuota objects are validated as a tree
  (:mod:`.validation`); an invalid one is reported as a ``Warning`` Event on it and skipped (its pods fall
  into the default quota).
- **PreFilter**: ``used + request <= limit`` on every resource of the limit, where the limit is the quota's
  runtime (``enableRuntimeQuota``, the default) or its max; else Unschedulable
  ``Insufficient quotas, quotaName: <q>, runtime: <limit>, used: <used>, pod's request: <req>,
  exceedDimensions: [<keys>]``. Non-preemptible pods must also fit the quota's min. With
  ``enableCheckParentQuota`` every ancestor below the root is checked too.
- **Reserve / Unreserve**: charge / uncharge the pod to used along its path.
- **PostFilter**: quota-scoped preemption (:mod:`.preemption`), executed through the cluster client
  (nominate, then delete each victim with a reason); ``preemption: `` prefixes a failure message.
  Victims are lower-priority pods of the pod's own quota (Koordinator) and, with
  ``reclaimBorrowedQuota`` (a pykoord argument, on by default), pods of other quotas whose used is above
  their runtime: borrowed resources their lender now asks back. Koordinator leaves reclaiming to its
  over-use revoke controller, which is off by default, so borrowed resources are never returned there.
- **Events**: assigned-pod deletions and ElasticQuota changes requeue the pods it rejected (with
  ``enableQueueHint``, only pod deletions that free a resource the pod asks for).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apis.config.elasticquota_args import ElasticQuotaArgs
from apis.core.types import Pod
from apis.scheduling.elasticquota import (
    API_VERSION,
    DEFAULT_QUOTA,
    GROUP,
    KIND,
    PLURAL,
    ROOT_QUOTA,
    SYSTEM_QUOTA,
    VERSION,
    QuotaRecord,
    format_resources,
    parse_elastic_quota,
)
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import (
    EnqueueExtensions,
    PostFilterPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    ReservePlugin,
)
from koord_scheduler.framework.services import ApiRoute, APIServiceProvider
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.framework.status import Code, Status, success, unschedulable
from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    EventType,
    ObjectKind,
    PostFilterResult,
    PreFilterResult,
    QueueingHint,
)
from koord_scheduler.plugins import names
from koord_scheduler.plugins.elasticquota import chain_victims, preemption, service
from koord_scheduler.plugins.elasticquota.execution import evict, node_free, victims_terminating
from koord_scheduler.plugins.elasticquota.report import quota_rows
from koord_scheduler.plugins.victim_execution import VictimTracker
from koord_scheduler.quota.forest import QuotaForest
from koord_scheduler.quota.mapping import is_preemptible, namespace_index, quota_name_for
from koord_scheduler.quota.tree import PodEntry
from koord_scheduler.quota.validation import TreeProblem, validate_tree

log = logging.getLogger(__name__)

NAME = names.ELASTIC_QUOTA
ARGS = ElasticQuotaArgs

ELASTIC_QUOTA_KIND = ObjectKind(KIND, GROUP, VERSION, PLURAL, namespaced=True, parse=parse_elastic_quota)
"""ElasticQuota objects (``scheduling.sigs.k8s.io/v1alpha1``), delivered to the plugin by the scheduler."""

REASON_INVALID_TREE = "InvalidQuotaTree"
PREEMPTION_PREFIX = "preemption: "
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
_RESOLVABLE_BY_EVICTION = frozenset({NAME, names.NODE_RESOURCES_FIT}) | chain_victims.HELD_PER_DEVICE
"""Plugins whose rejection of a node removing pods can cure (resources, devices and bound CPUs)."""

SimulationReporter = Callable[[], tuple[str, list[dict[str, Any]]]]


@dataclass(frozen=True, slots=True)
class QuotaAdmission:
    """PreFilter's finding for the pod being scheduled."""

    quota: str
    request: Mapping[str, int]


STATE_KEY: StateKey[QuotaAdmission] = StateKey("ElasticQuota/admission")


class ElasticQuota:
    name = NAME

    def __init__(self, args: ElasticQuotaArgs, handle: Handle) -> None:
        self.args = args
        self._handle = handle
        self.tree = QuotaForest(
            scale_min=args.enable_min_quota_scale,
            builtin_max={DEFAULT_QUOTA: args.builtin_max("default"), SYSTEM_QUOTA: args.builtin_max("system")},
        )
        self._objects: dict[str, QuotaRecord] = {}
        """Every ElasticQuota seen, by ``namespace/name`` (valid or not)."""
        self.quotas: dict[str, QuotaRecord] = {}
        """The valid ones, by name."""
        self.problems: list[TreeProblem] = []
        self._by_namespace: dict[str, str] = {}
        self._pods: dict[str, Pod] = {}
        self._assumed: set[str] = set()
        self._reported: set[tuple[str, str, str]] = set()
        self._victims = VictimTracker(handle, what="ElasticQuota")
        self._total_version = -1
        self._limits: dict[str, dict[str, int]] = {}
        self._limits_at = (-1, -1)
        """The (tree version, node objects version) the cached limits were computed at."""
        self.initial_used: dict[str, dict[str, int]] | None = None
        """``used`` of every quota before the first scheduling cycle (simulate reports before → after)."""

    # ----- informer -----

    def on_quota(self, event: EventType, old: QuotaRecord | None, new: QuotaRecord | None) -> None:
        record = new if event != EventType.DELETED else old
        if record is None:
            return
        key = f"{record.meta.namespace}/{record.name}"
        before = self._objects.get(key)
        if event == EventType.DELETED:
            self._objects.pop(key, None)
        else:
            assert new is not None
            self._objects[key] = new
            if before is not None and before.tree_key() == new.tree_key():
                return  # status or annotation writes: the tree is unchanged
        self._rebuild()

    def _rebuild(self) -> None:
        valid, problems = validate_tree(self._objects.values())
        self.quotas = valid
        self.problems = problems
        self._by_namespace = namespace_index(valid)
        self.tree.set_quotas(r for r in valid.values() if r.name != ROOT_QUOTA)
        self._total_version = -1  # the tree's resource keys may have changed
        for key, pod in self._pods.items():
            self._charge(key, pod)
        for problem in problems:
            ident = (problem.namespace, problem.quota, problem.message)
            if ident not in self._reported:
                self._reported.add(ident)
                log.warning("ElasticQuota %s/%s skipped: %s", problem.namespace, problem.quota, problem.message)
                self._victims.spawn(self._report(problem))

    async def _report(self, problem: TreeProblem) -> None:
        if problem not in self.problems:
            # Gone before the event could be sent: a child delivered before its parent in one batch (the
            # first list, in name order), not a problem of the tree. Reported if it comes back.
            self._reported.discard((problem.namespace, problem.quota, problem.message))
            return
        try:
            await self._handle.cluster.record_event(
                ELASTIC_QUOTA_KIND,
                problem.quota,
                namespace=problem.namespace,
                type="Warning",
                reason=REASON_INVALID_TREE,
                message=problem.message,
            )
        except Exception as exc:
            log.debug("recording an event for quota %s failed: %s", problem.quota, exc)

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        if event == EventType.DELETED or new is None or new.is_terminal:
            pod = new or old
            if pod is not None:
                self._pods.pop(pod.key, None)
                self._assumed.discard(pod.key)
                self.tree.remove_pod(pod.key)
            return
        key = new.key
        if new.node_name:
            self._assumed.discard(key)
        self._pods[key] = new
        entry = self.tree.pod(key)
        if (
            entry is not None
            and old is not None
            and old.meta.labels == new.meta.labels
            and old.requests == new.requests
            and entry.assigned == (bool(new.node_name) or key in self._assumed)
        ):
            return  # the quota and the charge depend only on these (a binding after Reserve lands here)
        self._charge(key, new)

    def on_forget_pod(self, pod: Pod) -> None:
        if pod.key in self._assumed:
            self._assumed.discard(pod.key)
            self.tree.set_assigned(pod.key, False)

    def _charge(self, key: str, pod: Pod) -> None:
        quota = quota_name_for(pod, self.quotas, self._by_namespace)
        assigned = bool(pod.node_name) or key in self._assumed
        self.tree.upsert_pod(key, PodEntry(quota, pod.requests, assigned, not is_preemptible(pod)))

    def quota_of(self, pod: Pod) -> str:
        return quota_name_for(pod, self.quotas, self._by_namespace)

    # ----- cluster total -----

    def _refresh_total(self) -> None:
        snapshot = self._handle.snapshot
        version = snapshot.node_objects_version  # allocatable changes only with the node object
        if version == self._total_version:
            return
        total: dict[str, int] = {}
        n = snapshot.capacity
        for key in self.tree.keys:
            column = snapshot.column(key)
            if column is not None:
                total[key] = int(snapshot.allocatable[:n, column].sum())
        self.tree.set_total(total)
        self._total_version = version

    def refresh_total(self) -> None:
        """Take the cluster's allocatable again if the nodes changed (before reading runtimes)."""
        self._refresh_total()

    def limit(self, quota: str) -> dict[str, int]:
        """What admission compares against: runtime (masked to the quota's max keys) or max."""
        return dict(self._limit(quota))

    def _limit(self, quota: str) -> Mapping[str, int]:
        """:meth:`limit`, cached until the tree or the nodes change (not to be mutated)."""
        node = self.tree.node(quota)
        if not self.args.enable_runtime_quota or node.builtin:
            return node.max
        self._refresh_total()
        at = (self.tree.version, self._total_version)
        if at != self._limits_at:
            self._limits.clear()
            self._limits_at = at
        cached = self._limits.get(quota)
        if cached is None:
            runtime = self.tree.runtime(quota)
            cached = self._limits[quota] = {k: runtime.get(k, 0) for k in node.max}
        return cached

    # ----- PreFilter -----

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if self.initial_used is None:
            self.initial_used = {name: dict(node.used) for name, node in self.tree.nodes.items()}
        entry = self.tree.pod(pod.key)
        if entry is None:
            self._pods[pod.key] = pod
            self._charge(pod.key, pod)
            entry = self.tree.pod(pod.key)
            assert entry is not None
        quota, request = entry.quota, entry.request
        state.write(STATE_KEY, QuotaAdmission(quota, request))
        node = self.tree.nodes[quota]
        limit = self._limit(quota)
        exceeded = _exceeded(node.used, request, limit)
        if exceeded:
            return None, unschedulable(
                f"Insufficient quotas, quotaName: {quota}, runtime: {format_resources(limit)}, "
                f"used: {format_resources(node.used)}, pod's request: {format_resources(request)}, "
                f"exceedDimensions: [{' '.join(exceeded)}]"
            )
        if entry.non_preemptible and not node.builtin:
            floor = {k: node.min.get(k, 0) for k in node.max}
            exceeded = _exceeded(node.non_preemptible_used, request, floor)
            if exceeded:
                return None, unschedulable(
                    f"Insufficient non-preemptible quotas, quotaName: {quota}, min: {format_resources(floor)}, "
                    f"nonPreemptibleUsed: {format_resources(node.non_preemptible_used)}, "
                    f"pod's request: {format_resources(request)}, exceedDimensions: [{' '.join(exceeded)}]"
                )
        if self.args.enable_check_parent_quota and not node.builtin:
            path = node.path_from_root()[1:]
            for ancestor in path[:-1]:
                anc_limit = {k: v for k, v in self._limit(ancestor.name).items() if k in request}
                exceeded = _exceeded(ancestor.used, request, anc_limit)
                if exceeded:
                    topo = " ".join(n.name for n in path)
                    return None, unschedulable(
                        f"Insufficient quotas, quotaNameTopo: [{topo}], runtime: {format_resources(anc_limit)}, "
                        f"used: {format_resources(ancestor.used)}, pod's request: {format_resources(request)}, "
                        f"exceedDimensions: [{' '.join(exceeded)}]"
                    )
        return None, success()

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    # ----- Reserve -----

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        key = pod.key
        self._assumed.add(key)
        if not self.tree.set_assigned(key, True):  # not charged yet: charge it, assigned
            self._pods[key] = pod
            self._charge(key, pod)
        return success()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        if pod.key in self._assumed:
            self._assumed.discard(pod.key)
            self.tree.set_assigned(pod.key, False)

    # ----- PostFilter -----

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status]:
        admission = state.get(STATE_KEY)
        if admission is None:
            return None, unschedulable()  # PreFilter did not run for this pod: nothing to preempt for
        if pod.preemption_policy == "Never":
            return None, unschedulable(PREEMPTION_PREFIX + "not eligible due to preemptionPolicy=Never.")
        snapshot = self._handle.snapshot
        statuses = diagnosis.node_statuses(snapshot)
        self._victims.forget_gone()
        quota = admission.quota
        if victims_terminating(self._victims, snapshot, pod, statuses, lambda other: self._quota_of(other) == quota):
            return None, unschedulable(PREEMPTION_PREFIX + NOT_ELIGIBLE_TERMINATING)
        limit = self.limit(quota)
        used = self.tree.node(quota).used
        fwk = self._handle
        by_filter = chain_victims.needs_filter_chain(fwk, state)
        options: dict[str, list[preemption.Victim]] = {}
        reasons: list[str] = []
        for node_name, status in sorted(statuses.items()):
            if status.code != Code.UNSCHEDULABLE or status.plugin not in _RESOLVABLE_BY_EVICTION:
                continue
            info = snapshot.node_info(node_name)
            if info is None:
                continue
            candidates = self._candidates(pod, quota, info.pods.values())
            if not candidates:
                reasons.append(f"No victims found on node {node_name} for preemptor pod {pod.name}")
                continue
            free = node_free(snapshot, info.position, pod.requests)
            # Pods promised a node by an earlier preemption hold its room here, as they do in Filter.
            for held in self._handle.nominator.nominated_pods_for_node(node_name):
                if held.key != pod.key and held.priority >= pod.priority:
                    for k in free:
                        free[k] -= held.requests.get(k, 0)
            victims = preemption.select_victims_on_node(
                request=pod.requests,
                quota_request=admission.request,
                node_free=free,
                candidates=candidates,
                quota_used=used,
                quota_limit=limit,
            )
            if victims is not None and by_filter:
                nominated = self._handle.nominator.nominated_pods_for_node(node_name)
                victims = chain_victims.select_victims_by_filter(
                    fwk, snapshot, state, pod, info, candidates=candidates, nominated=nominated,
                    quota_request=admission.request, quota_used=used, quota_limit=limit,
                )  # fmt: skip
            if victims:
                options[node_name] = victims
        best = preemption.pick_node(options)
        if best is None:
            message = (
                reasons[0] if len(reasons) == 1 else f"0/{snapshot.num_nodes} nodes are available for quota preemption"
            )
            return None, unschedulable(PREEMPTION_PREFIX + message)
        victims = options[best]
        log.info("pod %s preempts %s on node %s (quota %s)", pod.key, [v.key for v in victims], best, quota)
        chosen = [v for v in (self._pods.get(victim.key) for victim in victims) if v is not None]
        for victim_pod in chosen:
            self._victims.track(victim_pod, best)
        self._victims.spawn(evict(self._victims, self._handle, pod, best, chosen, plugin=NAME))
        return PostFilterResult(best), success()

    def _quota_of(self, pod: Pod) -> str | None:
        entry = self.tree.pod(pod.key)
        return None if entry is None else entry.quota

    def _candidates(self, pod: Pod, quota: str, pods: Any) -> list[preemption.Victim]:
        out: list[preemption.Victim] = []
        over_runtime: dict[str, bool] = {}
        for other in pods:
            entry = self.tree.pod(other.key)
            if entry is None or other.key == pod.key or not entry.assigned:
                continue
            if entry.quota == DEFAULT_QUOTA and self.args.disable_default_quota_preemption:
                continue
            if not is_preemptible(other):
                continue
            same = entry.quota == quota
            if same:
                if other.priority >= pod.priority:
                    continue
            else:
                if not self.args.reclaim_borrowed_quota or entry.quota in (DEFAULT_QUOTA, SYSTEM_QUOTA):
                    continue
                borrowing = over_runtime.get(entry.quota)
                if borrowing is None:
                    used = self.tree.node(entry.quota).used
                    borrowing = bool(_exceeded(used, {}, self._limit(entry.quota)))
                    over_runtime[entry.quota] = borrowing
                if not borrowing:
                    continue
            start = other.meta.creation_timestamp or 0.0
            charged = entry.request if same else {}
            out.append(preemption.Victim(other.key, other.priority, dict(other.requests), charged, start))
        return out

    async def drain(self) -> None:
        """Wait for the API calls already decided (tests, simulate)."""
        await self._victims.drain()

    # ----- events -----

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        pod_hint = self._pod_deleted_hint if self.args.enable_queue_hint else None
        return (
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE), pod_hint),
            ClusterEventWithHint(
                ClusterEvent(EventResource.ELASTIC_QUOTA, ActionType.ADD | ActionType.UPDATE | ActionType.DELETE)
            ),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE)),
        )

    @staticmethod
    def _pod_deleted_hint(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        if not isinstance(old, Pod):
            return QueueingHint.QUEUE
        if any(old.requests.get(k, 0) for k, v in pod.requests.items() if v):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    # ----- simulate -----

    def simulation_report(self) -> tuple[str, list[dict[str, Any]]]:
        """One row per quota: min, max, runtime, used before → after (see :func:`.report.quota_rows`)."""
        self._refresh_total()
        self.tree.refresh_all()
        return "ElasticQuotas", quota_rows(self.tree, self.initial_used, self.problems)

    def api_routes(self) -> Sequence[ApiRoute]:
        """``/apis/v1/plugins/ElasticQuota/quotas[/:name]`` (:mod:`.service`)."""
        return service.routes(self)


def _exceeded(used: Mapping[str, int], request: Mapping[str, int], limit: Mapping[str, int]) -> list[str]:
    out = [k for k, cap in limit.items() if used.get(k, 0) + request.get(k, 0) > cap]
    if len(out) > 1:
        out.sort()
    return out


def new(args: ElasticQuotaArgs | None, handle: Handle) -> ElasticQuota:
    plugin = ElasticQuota(args or ElasticQuotaArgs(), handle)
    handle.watch(ELASTIC_QUOTA_KIND, plugin.on_quota)
    handle.watch_pods(plugin.on_pod)
    handle.register_forget_pod_handler(plugin.on_forget_pod)
    handle.add_simulation_report(plugin.simulation_report)
    return plugin


_: type[PreFilterPlugin] = ElasticQuota
_r: type[ReservePlugin] = ElasticQuota
_p: type[PostFilterPlugin] = ElasticQuota
_e: type[EnqueueExtensions] = ElasticQuota
_services: type[APIServiceProvider] = ElasticQuota
__all__ = ["API_VERSION", "ARGS", "ELASTIC_QUOTA_KIND", "NAME", "ElasticQuota", "new"]


def declared_capabilities(
    plugin: ElasticQuota,
) -> tuple[
    PreFilterPlugin,
    PostFilterPlugin,
    ReservePlugin,
    EnqueueExtensions,
]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin
