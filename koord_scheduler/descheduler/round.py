"""One descheduling round: the profiles' Balance plugins plan migrations, the eviction limits cut the plan,
and each kept migration becomes a PodMigrationJob (Koordinator's ``pkg/descheduler/descheduler.go``
``deschedulerOnce`` with the MigrationController as the Evict plugin).

:class:`Descheduler` holds what lasts between rounds (the LowNodeLoad anomaly detectors) and plans a round
from a :class:`~.lownodeload.plugin.ClusterView` without side effects; :func:`job_for` builds the job of
one planned migration. Each profile runs its Deschedule plugins (:mod:`.deschedule_plugins`: PodLifeTime,
RemoveFailedPods, RemovePodsViolatingNodeTaints, RemovePodsViolatingNodeAffinity), then its Balance plugins
(LowNodeLoad).

Limits (``maxNoOfPodsToEvictPerNode``, ``PerNamespace``, ``Total``) apply to the whole round, in plan
order, as Koordinator's eviction limiter does. ``nodeSelector`` (top level, then the profile's) narrows
the nodes a profile sees.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from apis.config.args_base import ArgsModel
from apis.config.descheduler import (
    LOW_NODE_LOAD,
    MIGRATION_CONTROLLER,
    DeschedulerConfiguration,
    DeschedulerProfile,
    LowNodeLoadArgs,
    MigrationControllerArgs,
    first_args,
)
from apis.config.descheduler_selectors import LabelSelector as ConfigLabelSelector
from apis.core.parse import parse_label_selector
from apis.core.selectors import label_selector_matches
from apis.core.types import Node, Pod
from apis.scheduling.constants import API_VERSION
from apis.scheduling.migration import KIND
from koord_scheduler.descheduler.deschedule_plugins import DeschedulePlugin, run_deschedule
from koord_scheduler.descheduler.evictor import (
    EvictionFilter,
    eviction_filter,
    fits_node,
    fits_other_node,
    node_fit_enabled,
    requested,
)
from koord_scheduler.descheduler.lownodeload.plugin import ClusterView, LowNodeLoad
from koord_scheduler.descheduler.migration.arbitration import Limits, controller_uid, expected_replicas_reason
from koord_scheduler.descheduler.migration.decide import ANNOTATION_EVICT_REASON, ANNOTATION_EVICT_TRIGGER
from koord_scheduler.descheduler.upstream_registry import DESCHEDULE_PLUGINS

DEFAULT_JOB_TTL: Final = "5m"
LABEL_CREATED_BY: Final = "app.kubernetes.io/created-by"
CREATOR: Final = "koord-descheduler"


@dataclass(frozen=True, slots=True)
class PlannedMigration:
    namespace: str
    name: str
    node: str
    target: str
    """The cool node LowNodeLoad counted the pod against (the scheduler still decides); may be empty."""
    reason: str
    plugin: str
    profile: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class RoundPlan:
    migrations: tuple[PlannedMigration, ...]
    notes: tuple[str, ...] = ()
    """Why parts of the round planned nothing (``profile/pool: reason``) or what the limits cut."""


def _selector_matches(selector: ConfigLabelSelector | None, labels: Mapping[str, str]) -> bool:
    if selector is None:
        return True
    parsed = parse_label_selector(selector.model_dump(by_alias=True, exclude_none=True))
    return parsed is None or label_selector_matches(parsed, labels)


def with_expected_replicas(
    gates: Callable[[Pod], bool], view: ClusterView, args: MigrationControllerArgs
) -> Callable[[Pod], bool]:
    """``gates`` and Koordinator's ``filterExpectedReplicas``, which its MigrationController's ``Filter``
    (the filter LowNodeLoad's and the Deschedule plugins' candidates pass) applies: a pod of a workload the
    arbitration would refuse (one replica, or ``maxMigratingPerWorkload``/``maxUnavailablePerWorkload`` at
    all its replicas) is not planned, rather than planned into a job that fails every round. The workload
    is the view's bound pods of the same controller."""
    limits = Limits.of(args)
    by_owner: dict[str, list[Pod]] | None = None
    refused: dict[str, bool] = {}  # per controller UID: the answer depends on the workload only

    def evictable(pod: Pod) -> bool:
        nonlocal by_owner
        if not gates(pod):
            return False
        uid = controller_uid(pod)
        if uid not in refused:
            if by_owner is None:
                by_owner = {}
                for pods in view.pods_by_node.values():
                    for p in pods:
                        if owner := controller_uid(p):
                            by_owner.setdefault(owner, []).append(p)
            refused[uid] = bool(expected_replicas_reason(pod, by_owner.get(uid, [pod]), limits))
        return not refused[uid]

    return evictable


def _with_node_fit(
    gates: Callable[[Pod], bool], nodes: Sequence[Node], node_requested: Mapping[str, Mapping[str, int]]
) -> Callable[[Pod], bool]:
    """The MigrationController's ``nodeFit``: the gates, and the pod fits some other node."""

    def evictable(pod: Pod) -> bool:
        return gates(pod) and fits_other_node(pod, nodes, node_requested)

    return evictable


def _upstream_plugins(
    profile: DeschedulerProfile, args: Mapping[str, list[ArgsModel]], point: str
) -> list[DeschedulePlugin]:
    """The profile's upstream plugins enabled at ``point`` (``deschedule`` or ``balance``), each with the
    profile's pluginConfig args (else the first profile's, else the defaults), in the order enabled."""
    plugin_set = getattr(profile.plugins, point) if profile.plugins is not None else None
    out = []
    for ref in (plugin_set.enabled or []) if plugin_set is not None else []:
        spec = DESCHEDULE_PLUGINS.get(ref.name)
        if spec is None:
            continue
        model = spec.args_model
        own = next((pc.args or {} for pc in profile.plugin_config or [] if pc.name == ref.name), None)
        plugin_args = (
            model.model_validate(own, by_alias=True, by_name=False)
            if own is not None
            else first_args(args, ref.name, model)
        )
        out.append(spec.factory(plugin_args))
    return out


def _balance_plugins(profile: DeschedulerProfile) -> list[str]:
    plugin_set = profile.plugins.balance if profile.plugins is not None else None
    return [p.name for p in (plugin_set.enabled or [])] if plugin_set is not None else []


class Descheduler:
    """The configured profiles; :meth:`plan` is one round."""

    def __init__(
        self, config: DeschedulerConfiguration, args: Mapping[str, list[ArgsModel]], *, clock: Callable[[], float]
    ) -> None:
        self.config = config
        self.migration_args: MigrationControllerArgs = first_args(args, MIGRATION_CONTROLLER, MigrationControllerArgs)
        self.profiles: list[tuple[DeschedulerProfile, list[LowNodeLoad]]] = []
        self.deschedulers: list[tuple[list[DeschedulePlugin], list[DeschedulePlugin]]] = []
        """Per profile, its upstream Deschedule plugins and Balance plugins: the Deschedule ones run first, as
        Koordinator's loop, then the upstream Balance ones, then LowNodeLoad."""
        for profile in config.profiles or [DeschedulerProfile(name="koord-descheduler")]:
            plugins = []
            if LOW_NODE_LOAD in _balance_plugins(profile):
                plugin_args = next(
                    (
                        LowNodeLoadArgs.model_validate(pc.args or {}, by_alias=True, by_name=False)
                        for pc in profile.plugin_config or []
                        if pc.name == LOW_NODE_LOAD
                    ),
                    first_args(args, LOW_NODE_LOAD, LowNodeLoadArgs),
                )
                plugins.append(LowNodeLoad(plugin_args, clock=clock))
            self.profiles.append((profile, plugins))
            self.deschedulers.append(
                (_upstream_plugins(profile, args, "deschedule"), _upstream_plugins(profile, args, "balance"))
            )

    @property
    def dry_run(self) -> bool:
        """The top-level ``dryRun`` or the MigrationController's (Koordinator's ``Evict`` then only logs)."""
        return self.config.dry_run or self.migration_args.dry_run

    def eviction_filter(self, migrating: Collection[str]) -> EvictionFilter:
        return eviction_filter(self.migration_args, migrating)

    def plan(self, view: ClusterView, *, migrating: Collection[str] = ()) -> RoundPlan:
        """Plan one round; ``migrating``: pods unfinished PodMigrationJobs already move."""
        gates = with_expected_replicas(self.eviction_filter(migrating), view, self.migration_args)
        nodes = {n.name: n for n in view.nodes}
        node_requested = {name: requested(view.pods_by_node.get(name, ())) for name in nodes}

        def fits(pod: Pod, node_name: str) -> bool:
            node = nodes.get(node_name)
            return node is not None and fits_node(pod, node, node_requested[node_name])

        evictable: Callable[[Pod], bool] = gates
        if node_fit_enabled(self.migration_args):
            evictable = _with_node_fit(gates, view.nodes, node_requested)

        planned: list[PlannedMigration] = []
        notes: list[str] = []
        for (profile, plugins), (deschedulers, balancers) in zip(self.profiles, self.deschedulers, strict=True):
            name = profile.name or "koord-descheduler"
            scoped = [
                n
                for n in view.nodes
                if _selector_matches(self.config.node_selector, n.meta.labels)
                and _selector_matches(profile.node_selector, n.meta.labels)
            ]
            profile_view = replace(view, nodes=scoped)
            upstream = [*deschedulers, *balancers]
            for plugin_name, ev in run_deschedule(upstream, profile_view, evictable=evictable, fits=fits):
                planned.append(
                    PlannedMigration(ev.pod.namespace, ev.pod.name, ev.node, "", ev.reason, plugin_name, name)
                )
            for plugin in plugins:
                for result in plugin.balance(profile_view, evictable=evictable, fits=fits):
                    if result.idle_reason:
                        notes.append(f"{name}/{LOW_NODE_LOAD}/{result.pool or '-'}: {result.idle_reason}")
                    for e in result.planned:
                        if plugin.args.dry_run:
                            notes.append(f"{name}/{LOW_NODE_LOAD}: dryRun: would migrate {e.pod.key} from {e.node}")
                            continue
                        planned.append(
                            PlannedMigration(
                                e.pod.namespace, e.pod.name, e.node, e.target, e.reason, LOW_NODE_LOAD, name
                            )
                        )
        kept, cut = self._limit(planned)
        notes += cut
        return RoundPlan(tuple(kept), tuple(notes))

    def _limit(self, planned: Sequence[PlannedMigration]) -> tuple[list[PlannedMigration], list[str]]:
        c = self.config
        per_node: dict[str, int] = {}
        per_ns: dict[str, int] = {}
        kept: list[PlannedMigration] = []
        seen: set[str] = set()
        cut: list[str] = []
        for m in planned:
            if m.key in seen:
                continue
            if c.max_no_of_pods_to_evict_total is not None and len(kept) >= c.max_no_of_pods_to_evict_total:
                cut.append(f"{m.key}: maxNoOfPodsToEvictTotal ({c.max_no_of_pods_to_evict_total}) reached")
                continue
            if (
                c.max_no_of_pods_to_evict_per_node is not None
                and per_node.get(m.node, 0) >= c.max_no_of_pods_to_evict_per_node
            ):
                cut.append(
                    f"{m.key}: maxNoOfPodsToEvictPerNode ({c.max_no_of_pods_to_evict_per_node}) reached on {m.node}"
                )
                continue
            if (
                c.max_no_of_pods_to_evict_per_namespace is not None
                and per_ns.get(m.namespace, 0) >= c.max_no_of_pods_to_evict_per_namespace
            ):
                cut.append(
                    f"{m.key}: maxNoOfPodsToEvictPerNamespace ({c.max_no_of_pods_to_evict_per_namespace}) reached"
                )
                continue
            seen.add(m.key)
            per_node[m.node] = per_node.get(m.node, 0) + 1
            per_ns[m.namespace] = per_ns.get(m.namespace, 0) + 1
            kept.append(m)
        return kept, cut


def job_for(migration: PlannedMigration, args: MigrationControllerArgs, *, name: str) -> dict[str, Any]:
    """The PodMigrationJob for ``migration``: mode and ttl from the MigrationController's args
    (``defaultJobMode``, ``defaultJobTTL``, 5 minutes by default), its ``defaultDeleteOptions``, and the
    reason and trigger annotations Koordinator's evictor reads."""
    from apis.config.duration import format_go_duration

    spec: dict[str, Any] = {
        "podRef": {"namespace": migration.namespace, "name": migration.name},
        "mode": args.default_job_mode or "ReservationFirst",
        "ttl": format_go_duration(args.default_job_ttl) if args.default_job_ttl is not None else DEFAULT_JOB_TTL,
    }
    if args.default_delete_options:
        spec["deleteOptions"] = dict(args.default_delete_options)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name,
            "labels": {LABEL_CREATED_BY: CREATOR},
            "annotations": {ANNOTATION_EVICT_TRIGGER: migration.plugin, ANNOTATION_EVICT_REASON: migration.reason},
        },
        "spec": spec,
    }


def describe(plan: RoundPlan) -> list[str]:
    """The plan as lines for a person: one per migration, then the notes."""
    lines = [
        f"migrate {m.key} from {m.node}"
        + (f" (room counted on {m.target})" if m.target else "")
        + f": {m.reason} [{m.profile}/{m.plugin}]"
        for m in plan.migrations
    ]
    if not plan.migrations:
        lines.append("no migration planned")
    lines += [f"note: {n}" for n in plan.notes]
    return lines
