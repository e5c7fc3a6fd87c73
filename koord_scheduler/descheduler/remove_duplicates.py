"""RemoveDuplicates, the kubernetes-sigs/descheduler Balance plugin (``pkg/framework/plugins/removeduplicates``):
spreads the pods of one owner that run the same images over the nodes they may run on.

On each node, a pod whose owners and images equal those of an earlier pod on that node is a duplicate.
For each owner (namespace, kind, name and the pod's images), the nodes the owner's pods may run on are
those whose ``NoSchedule``/``NoExecute`` taints they tolerate and whose labels match their ``nodeSelector``
and required node affinity (from each distinct placement constraint, counted when it allows more than one
node). With fewer than two such nodes nothing moves; otherwise a node keeps at most
``ceil(pods of the owner / those nodes)`` of them, and its duplicates beyond that move.

Pods that the eviction filter refuses, in namespaces ``namespaces`` excludes, or owned by a kind in
``excludeOwnerKinds`` are not counted. pykoord compares a pod's images including its init containers'
(upstream: its containers' only).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final

from apis.config.descheduler_upstream import REMOVE_DUPLICATES, RemoveDuplicatesArgs
from apis.core.tolerations import find_untolerated_taint
from apis.core.types import Node, Pod, TaintEffect
from koord_scheduler.descheduler.deschedule_plugins import Evictable, Eviction, Fits, PodFilter, matches_node
from koord_scheduler.descheduler.lownodeload.plugin import ClusterView

HARD_EFFECTS: Final = (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)
OwnerKey = tuple[str, str, str, str]
"""(namespace, owner kind, owner name, the pod's images joined)."""


def _placement(pod: Pod) -> tuple[object, ...]:
    affinity = pod.affinity.node_affinity if pod.affinity is not None else None
    required = affinity.required if affinity is not None else None
    return (tuple(sorted(map(repr, pod.tolerations))), repr(required), tuple(sorted((pod.node_selector or {}).items())))


def _may_run_on(pod: Pod, node: Node) -> bool:
    return find_untolerated_taint(node.taints, pod.tolerations, HARD_EFFECTS) is None and matches_node(pod, node)


class RemoveDuplicates:
    name = REMOVE_DUPLICATES

    def __init__(self, args: RemoveDuplicatesArgs) -> None:
        self.args = args
        self.own = PodFilter.of(args.namespaces, None)

    def deschedule(self, view: ClusterView, *, evictable: Evictable, fits: Fits) -> list[Eviction]:
        excluded = set(self.args.exclude_owner_kinds or [])
        duplicates: dict[OwnerKey, dict[str, list[Pod]]] = {}
        occurrences: dict[OwnerKey, int] = {}
        for node in view.nodes:
            seen: set[tuple[str, ...]] = set()
            for pod in view.pods_by_node.get(node.name, ()):
                owners = pod.meta.owner_references
                if not owners or not self.own(pod) or not evictable(pod) or any(o.kind in excluded for o in owners):
                    continue
                images = sorted(pod.images)
                keys = [(pod.namespace, o.kind, o.name, "#".join(images)) for o in owners]
                for key in keys:
                    occurrences[key] = occurrences.get(key, 0) + 1
                signature = tuple(
                    sorted(f"{ns}/{kind}/{name}/{image}" for ns, kind, name, _ in keys for image in images)
                )
                if signature in seen:
                    for key in keys:
                        duplicates.setdefault(key, {}).setdefault(node.name, []).append(pod)
                else:
                    seen.add(signature)
        out: list[Eviction] = []
        for key, by_node in duplicates.items():
            targets = self._target_nodes(by_node, view.nodes)
            if len(targets) < 2:
                continue
            upper = math.ceil(occurrences[key] / len(targets))
            for node_name, pods in by_node.items():
                if len(pods) + 1 > upper:
                    out += [
                        Eviction(
                            p, node_name, f"{len(pods) + 1} pods of {key[1]} {key[2]} on the node, at most {upper}"
                        )
                        for p in pods[upper - 1 :]
                    ]
        return out

    @staticmethod
    def _target_nodes(by_node: Mapping[str, list[Pod]], nodes: Sequence[Node]) -> set[str]:
        distinct: dict[tuple[object, ...], Pod] = {}
        for pods in by_node.values():
            for pod in pods:
                distinct.setdefault(_placement(pod), pod)
        out: set[str] = set()
        for pod in distinct.values():
            matching = {n.name for n in nodes if _may_run_on(pod, n)}
            if len(matching) > 1:
                out |= matching
        return out
