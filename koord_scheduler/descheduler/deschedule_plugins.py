"""The kubernetes-sigs/descheduler plugins pykoord runs at the Deschedule point (Koordinator runs them
through its adaptor, ``pkg/descheduler/framework/plugins/kubernetes``), as pure functions of a
:class:`~.lownodeload.plugin.ClusterView`:

- **PodLifeTime**: pods older than ``maxPodLifeTimeSeconds`` (or, with ``states``/``conditions``, in one of
  those phases / with a matching condition), the oldest first;
- **RemoveFailedPods**: ``Failed`` pods older than ``minPodLifetimeSeconds`` (default 3600; pykoord counts
  from the pod's creation, upstream from its ``startTime``), not owned by one of ``excludeOwnerKinds``;
- **RemovePodsHavingTooManyRestarts**: pods whose containers (and init containers with
  ``includingInitContainers``) restarted ``podRestartThreshold`` times or more, the most restarted first
  on each node;
- **RemovePodsViolatingNodeTaints**: pods that do not tolerate a ``NoSchedule`` taint of their node
  (``PreferNoSchedule`` too with ``includePreferNoSchedule``; ``includedTaints``/``excludedTaints`` as
  ``key`` or ``key=value``);
- **RemovePodsViolatingNodeAffinity**: ``requiredDuringSchedulingIgnoredDuringExecution``: pods whose
  node no longer matches their ``nodeSelector`` and required node affinity and that fit another node;
  ``preferredDuringSchedulingIgnoredDuringExecution``: pods that fit another node and for which some node
  weighs more than theirs by their preferred terms;
- **RemovePodsViolatingInterPodAntiAffinity**: pods whose required pod anti-affinity another pod in the
  same topology domain matches, the lowest priority first.

Each plugin first applies the round's eviction filter (the DefaultEvictor's, from the MigrationController's
gates) and its own ``namespaces`` and ``labelSelector``. :mod:`.upstream_registry` lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from apis.config.descheduler_selectors import LabelSelector as ConfigLabelSelector
from apis.config.descheduler_selectors import Namespaces
from apis.config.descheduler_upstream import (
    INTER_POD_ANTI_AFFINITY,
    NODE_AFFINITY,
    NODE_TAINTS,
    POD_LIFE_TIME,
    REMOVE_FAILED_PODS,
    TOO_MANY_RESTARTS,
    PodConditionFilter,
    PodLifeTimeArgs,
    RemoveFailedPodsArgs,
    RemovePodsHavingTooManyRestartsArgs,
    RemovePodsViolatingInterPodAntiAffinityArgs,
    RemovePodsViolatingNodeAffinityArgs,
    RemovePodsViolatingNodeTaintsArgs,
)
from apis.core.parse import parse_label_selector
from apis.core.selectors import label_selector_matches, node_selector_map_matches, node_selector_matches
from apis.core.tolerations import tolerations_tolerate
from apis.core.types import Node, Pod, Taint, TaintEffect
from koord_scheduler.descheduler.lownodeload.plugin import ClusterView
from koord_scheduler.plugins.topology_index import resolve_term

REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED: Final = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True, slots=True)
class Eviction:
    pod: Pod
    node: str
    reason: str


Evictable = Callable[[Pod], bool]
Fits = Callable[[Pod, str], bool]


class DeschedulePlugin(Protocol):
    name: str

    def deschedule(self, view: ClusterView, *, evictable: Evictable, fits: Fits) -> list[Eviction]:
        """The pods to move, in the order to move them."""
        ...


@dataclass(frozen=True, slots=True)
class PodFilter:
    """A plugin's own ``namespaces`` and ``labelSelector``."""

    include: frozenset[str] = frozenset()
    exclude: frozenset[str] = frozenset()
    selector: Any = None

    @classmethod
    def of(cls, namespaces: Namespaces | None, selector: ConfigLabelSelector | None) -> PodFilter:
        parsed = (
            parse_label_selector(selector.model_dump(by_alias=True, exclude_none=True))
            if selector is not None
            else None
        )
        return cls(
            frozenset(namespaces.include or []) if namespaces else frozenset(),
            frozenset(namespaces.exclude or []) if namespaces else frozenset(),
            parsed,
        )

    def __call__(self, pod: Pod) -> bool:
        if self.include and pod.namespace not in self.include:
            return False
        if pod.namespace in self.exclude:
            return False
        return self.selector is None or label_selector_matches(self.selector, pod.labels)


def _candidates(view: ClusterView, evictable: Evictable, own: PodFilter) -> Iterator[tuple[Node, Pod]]:
    for node in view.nodes:
        for pod in view.pods_by_node.get(node.name, ()):
            if own(pod) and evictable(pod):
                yield node, pod


def _age(pod: Pod, now: float) -> float | None:
    return None if pod.meta.creation_timestamp is None else now - pod.meta.creation_timestamp


def _condition_matches(pod: Pod, wanted: PodConditionFilter, now: float) -> bool:
    for type_, status in pod.conditions.items():
        if wanted.type and type_ != wanted.type:
            continue
        if wanted.status and status != wanted.status:
            continue
        if wanted.min_time_since_last_transition_seconds is not None:
            since = pod.condition_times.get(type_)
            if since is None or now - since < wanted.min_time_since_last_transition_seconds:
                continue
        return True
    return False


class PodLifeTime:
    name = POD_LIFE_TIME

    def __init__(self, args: PodLifeTimeArgs) -> None:
        self.args = args
        self.own = PodFilter.of(args.namespaces, args.label_selector)

    def _owner_kinds_allow(self, pod: Pod) -> bool:
        kinds = self.args.owner_kinds
        if kinds is None:
            return True
        owned = {o.kind for o in pod.meta.owner_references}
        if kinds.include:
            return bool(owned & set(kinds.include))
        return not owned & set(kinds.exclude or [])

    def matches(self, pod: Pod, now: float) -> bool:
        limit = self.args.max_pod_life_time_seconds
        if limit is not None:
            age = _age(pod, now)
            if age is None or age < 0 or int(age) <= limit:
                return False
        if self.args.states and pod.phase not in self.args.states:
            return False
        if self.args.conditions and not any(_condition_matches(pod, c, now) for c in self.args.conditions):
            return False
        return self._owner_kinds_allow(pod)

    def deschedule(self, view: ClusterView, *, evictable: Evictable, fits: Fits) -> list[Eviction]:
        found = [(node, pod) for node, pod in _candidates(view, evictable, self.own) if self.matches(pod, view.now)]
        found.sort(key=lambda np: np[1].meta.creation_timestamp or 0.0)  # the oldest first (stable)
        limit = self.args.max_pod_life_time_seconds
        what = f"older than {limit}s" if limit is not None else "in a state PodLifeTime selects"
        return [Eviction(pod, node.name, f"pod is {what}") for node, pod in found]


class RemoveFailedPods:
    name = REMOVE_FAILED_PODS

    def __init__(self, args: RemoveFailedPodsArgs) -> None:
        self.args = args
        self.own = PodFilter.of(args.namespaces, args.label_selector)

    def deschedule(self, view: ClusterView, *, evictable: Evictable, fits: Fits) -> list[Eviction]:
        excluded = set(self.args.exclude_owner_kinds or [])
        out = []
        for node, pod in _candidates(view, evictable, self.own):
            if pod.phase != "Failed":
                continue
            if excluded and any(o.kind in excluded for o in pod.meta.owner_references):
                continue
            age = _age(pod, view.now)
            if age is None or age < self.args.min_pod_lifetime_seconds:
                continue
            out.append(Eviction(pod, node.name, "pod has failed"))
        return out


class RemovePodsHavingTooManyRestarts:
    name = TOO_MANY_RESTARTS

    def __init__(self, args: RemovePodsHavingTooManyRestartsArgs) -> None:
        self.args = args
        self.own = PodFilter.of(args.namespaces, args.label_selector)

    def restarts(self, pod: Pod) -> int:
        return pod.restart_count + (pod.init_restart_count if self.args.including_init_containers else 0)

    def deschedule(self, view: ClusterView, *, evictable: Evictable, fits: Fits) -> list[Eviction]:
        out: list[Eviction] = []
        for node in view.nodes:
            found = [
                pod
                for pod in view.pods_by_node.get(node.name, ())
                if self.own(pod)
                and evictable(pod)
                and self.restarts(pod) >= self.args.pod_restart_threshold
                and (not self.args.states or pod.phase in self.args.states)
            ]
            found.sort(key=lambda p: -self.restarts(p))  # the most restarted first, per node (stable)
            out += [
                Eviction(
                    p,
                    node.name,
                    f"containers restarted {self.restarts(p)} times, the threshold is "
                    f"{self.args.pod_restart_threshold}",
                )
                for p in found
            ]
        return out


def _taint_text(taint: Taint) -> str:
    return f"{taint.key}={taint.value}:{taint.effect}" if taint.value else f"{taint.key}:{taint.effect}"


class RemovePodsViolatingNodeTaints:
    name = NODE_TAINTS

    def __init__(self, args: RemovePodsViolatingNodeTaintsArgs) -> None:
        self.args = args
        self.own = PodFilter.of(args.namespaces, args.label_selector)
        self.effects = {TaintEffect.NO_SCHEDULE} | (
            {TaintEffect.PREFER_NO_SCHEDULE} if args.include_prefer_no_schedule else set()
        )

    def counts(self, taint: Taint) -> bool:
        """Upstream's taint filter: the effect, then ``includedTaints``/``excludedTaints``."""
        if taint.effect not in self.effects:
            return False
        names = {taint.key} | ({f"{taint.key}={taint.value}"} if taint.value else set())
        if names & set(self.args.excluded_taints or []):
            return False
        return self.args.included_taints is None or bool(names & set(self.args.included_taints))

    def deschedule(self, view: ClusterView, *, evictable: Evictable, fits: Fits) -> list[Eviction]:
        out = []
        for node in view.nodes:
            taints = [t for t in node.taints if self.counts(t)]
            if not taints:
                continue
            for pod in view.pods_by_node.get(node.name, ()):
                if not (self.own(pod) and evictable(pod)):
                    continue
                untolerated = next((t for t in taints if not tolerations_tolerate(pod.tolerations, t)), None)
                if untolerated is not None:
                    out.append(
                        Eviction(pod, node.name, f"pod does not tolerate taint {_taint_text(untolerated)} of its node")
                    )
        return out


def preferred_weight(pod: Pod, node: Node) -> int:
    """The sum of the weights of the pod's preferred node-affinity terms ``node`` matches."""
    affinity = pod.affinity.node_affinity if pod.affinity is not None else None
    if affinity is None:
        return 0
    return sum(
        term.weight
        for term in affinity.preferred
        if node_selector_matches((term.preference,), node.meta.labels, node.name)
    )


def matches_node(pod: Pod, node: Node) -> bool:
    """The pod's ``nodeSelector`` and required node affinity (``PodMatchNodeSelector``)."""
    if not node_selector_map_matches(pod.node_selector, node.meta.labels):
        return False
    affinity = pod.affinity.node_affinity if pod.affinity is not None else None
    return (
        affinity is None
        or affinity.required is None
        or node_selector_matches(affinity.required, node.meta.labels, node.name)
    )


class RemovePodsViolatingNodeAffinity:
    name = NODE_AFFINITY

    def __init__(self, args: RemovePodsViolatingNodeAffinityArgs) -> None:
        self.args = args
        self.own = PodFilter.of(args.namespaces, args.label_selector)

    def deschedule(self, view: ClusterView, *, evictable: Evictable, fits: Fits) -> list[Eviction]:
        out: list[Eviction] = []
        seen: set[str] = set()
        for kind in self.args.node_affinity_type or []:
            for node, pod in _candidates(view, evictable, self.own):
                if pod.key in seen:
                    continue
                affinity = pod.affinity.node_affinity if pod.affinity is not None else None
                if affinity is None:
                    continue
                others = [n for n in view.nodes if n.name != node.name]
                if kind == REQUIRED:
                    if affinity.required is None or matches_node(pod, node):
                        continue
                    if not any(fits(pod, n.name) for n in others):
                        continue
                    reason = "pod's required node affinity no longer matches its node"
                elif kind == PREFERRED:
                    if not affinity.preferred:
                        continue
                    here = preferred_weight(pod, node)
                    if max((preferred_weight(pod, n) for n in view.nodes), default=0) <= here:
                        continue
                    if not any(fits(pod, n.name) for n in others):
                        continue
                    reason = "another node weighs more by the pod's preferred node affinity"
                else:
                    continue
                seen.add(pod.key)
                out.append(Eviction(pod, node.name, reason))
        return out


def _same_domain(a: Node, b: Node, key: str) -> bool:
    """Upstream's ``hasSameLabelValue``: the same node, or both labelled ``key`` with one value."""
    if a.name == b.name:
        return True
    value = a.meta.labels.get(key)
    return value is not None and b.meta.labels.get(key) == value


class RemovePodsViolatingInterPodAntiAffinity:
    """Pods whose required pod anti-affinity another pod in the same topology domain matches, the lowest
    priority first on each node; a pod moved no longer counts against the pods after it (upstream's
    ``CheckPodsWithAntiAffinityExist``, with the scheduler's term resolution and matching,
    :func:`koord_scheduler.plugins.topology_index.resolve_term`). A term's ``namespaceSelector`` is read
    against no namespace labels: only an empty selector (every namespace) matches."""

    name = INTER_POD_ANTI_AFFINITY

    def __init__(self, args: RemovePodsViolatingInterPodAntiAffinityArgs) -> None:
        self.args = args
        self.own = PodFilter.of(args.namespaces, args.label_selector)

    def deschedule(self, view: ClusterView, *, evictable: Evictable, fits: Fits) -> list[Eviction]:
        nodes = {n.name: n for n in view.nodes}
        remaining = {p.key: p for n in view.nodes for p in view.pods_by_node.get(n.name, ()) if self.own(p)}
        out: list[Eviction] = []
        for node in view.nodes:
            pods = sorted(
                (p for p in view.pods_by_node.get(node.name, ()) if p.key in remaining), key=lambda p: p.priority
            )
            for pod in pods:
                other = self._violated_by(pod, node, remaining.values(), nodes)
                if other is not None and evictable(pod):
                    del remaining[pod.key]
                    out.append(Eviction(pod, node.name, f"pod's required anti-affinity matches pod {other.key}"))
        return out

    @staticmethod
    def _violated_by(pod: Pod, node: Node, others: Iterable[Pod], nodes: Mapping[str, Node]) -> Pod | None:
        anti = pod.affinity.pod_anti_affinity if pod.affinity is not None else None
        if anti is None or not anti.required:
            return None
        terms = [resolve_term(pod, t) for t in anti.required]
        for other in others:
            if other.key == pod.key:
                continue
            other_node = nodes.get(other.node_name)
            if other_node is None:
                continue
            for term in terms:
                if term.matches(other, None) and _same_domain(node, other_node, term.topology_key):
                    return other
        return None


def run_deschedule(
    plugins: Sequence[DeschedulePlugin], view: ClusterView, *, evictable: Evictable, fits: Fits
) -> list[tuple[str, Eviction]]:
    """Each plugin's evictions, in plugin order, tagged with the plugin's name."""
    return [(p.name, e) for p in plugins for e in p.deschedule(view, evictable=evictable, fits=fits)]
