"""The scheduler cache: nodes, bound pods and assumed (in-flight) pods, kept in the snapshot.

Events from the cluster source and assume/forget from the scheduling cycle are applied in place; the
snapshot plugins read is always current between cycles.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, fields
from operator import attrgetter

from apis.core.types import Node, ObjectMeta, Pod
from koord_scheduler.framework.errors import log_failure
from koord_scheduler.framework.snapshot import ClusterSnapshot

log = logging.getLogger(__name__)

_VOLATILE_POD_FIELDS = ("meta", "conditions", "condition_times", "phase")
"""What the API server (and then the kubelet) changes when it binds a pod: resourceVersion, the PodScheduled
condition, the phase (Pending to Running). Only a terminal phase matters to scheduling, and
:meth:`SchedulerCache.add_pod` removes terminal pods before it compares."""
_pod_inputs = attrgetter(*(f.name for f in fields(Pod) if f.compare and f.name not in _VOLATILE_POD_FIELDS))
_meta_inputs = attrgetter(*(f.name for f in fields(ObjectMeta) if f.name != "resource_version"))


def same_scheduling_inputs(a: Pod, b: Pod) -> bool:
    """Whether ``a`` and ``b`` are the same pod for every plugin: equal in every field except
    ``metadata.resourceVersion``, ``status.conditions`` and ``status.phase`` (what the bind echo of an
    assumed pod changes; callers handle terminal phases first)."""
    return a is b or (_pod_inputs(a) == _pod_inputs(b) and _meta_inputs(a.meta) == _meta_inputs(b.meta))


ForgetPodHandler = Callable[[Pod], None]


@dataclass(slots=True)
class _Assumed:
    pod: Pod
    binding_finished: bool = False
    deadline: float | None = None


class SchedulerCache:
    """Owns the :class:`ClusterSnapshot`. ``assumed_ttl`` 0 means assumed pods never expire (upstream default)."""

    def __init__(self, snapshot: ClusterSnapshot | None = None, *, assumed_ttl: float = 0.0) -> None:
        self.snapshot = snapshot or ClusterSnapshot()
        self.assumed_ttl = assumed_ttl
        self._pods: dict[str, Pod] = {}
        """Every pod accounted on a node, by key (bound and assumed)."""
        self._assumed: dict[str, _Assumed] = {}
        self._forget_handlers: list[ForgetPodHandler] = []

    # ----- nodes -----

    def add_node(self, node: Node) -> None:
        self.snapshot.upsert_node(node)

    def update_node(self, node: Node) -> None:
        self.snapshot.upsert_node(node)

    def remove_node(self, name: str) -> None:
        self.snapshot.remove_node(name)

    # ----- bound pods (from the cluster) -----

    def add_pod(self, pod: Pod) -> None:
        """A pod with ``node_name`` seen from the cluster; confirms an assumed pod of the same key."""
        if pod.is_terminal:
            self.remove_pod(pod)
            return
        old = self._pods.get(pod.key)
        assumed = self._assumed.pop(pod.key, None)
        if old is not None and assumed is not None and same_scheduling_inputs(old, pod):
            # The bind echo of a pod this scheduler assumed: only the server's bookkeeping differs, so
            # the object is swapped in place and the node's row is not touched (every per-node cache
            # would otherwise recompute it in the next cycle).
            self._pods[pod.key] = pod
            self.snapshot.swap_pod(old, pod)
            return
        if old is not None:
            self.snapshot.remove_pod(old)
        self._pods[pod.key] = pod
        self.snapshot.add_pod(pod)

    def remove_pod(self, pod: Pod) -> None:
        old = self._pods.pop(pod.key, None)
        self._assumed.pop(pod.key, None)
        if old is not None:
            self.snapshot.remove_pod(old)

    def get_pod(self, key: str) -> Pod | None:
        return self._pods.get(key)

    # ----- assumed pods (from the scheduling cycle) -----

    def assume_pod(self, pod: Pod) -> None:
        """Account ``pod`` (``node_name`` set) before it is bound. Raises if the key is already present."""
        if pod.key in self._pods:
            raise ValueError(f"pod {pod.key} is already in the cache")
        self._pods[pod.key] = pod
        self._assumed[pod.key] = _Assumed(pod)
        self.snapshot.add_pod(pod)

    def finish_binding(self, pod: Pod, now: float) -> None:
        entry = self._assumed.get(pod.key)
        if entry is not None:
            entry.binding_finished = True
            entry.deadline = now + self.assumed_ttl if self.assumed_ttl > 0 else None

    def forget_pod(self, pod: Pod) -> None:
        """Drop an assumed pod; every forget-pod handler runs, even when the cache already lost it."""
        entry = self._assumed.pop(pod.key, None)
        if entry is not None:
            current = self._pods.pop(pod.key, None)
            if current is not None:
                self.snapshot.remove_pod(current)
        for handler in self._forget_handlers:
            try:
                handler(pod)
            except Exception as exc:
                log_failure(log, f"forget-pod handler failed for {pod.key}", exc)

    def is_assumed(self, key: str) -> bool:
        return key in self._assumed

    def assumed_keys(self, *, binding: bool = False) -> list[str]:
        """Keys of the assumed pods; with ``binding``, only those whose binding has not finished."""
        return [k for k, e in self._assumed.items() if not (binding and e.binding_finished)]

    def cleanup_expired(self, now: float) -> list[Pod]:
        """Forget assumed pods whose binding finished more than ``assumed_ttl`` ago."""
        expired = [
            e.pod for e in self._assumed.values() if e.binding_finished and e.deadline is not None and now >= e.deadline
        ]
        for pod in expired:
            log.warning("assumed pod %s expired", pod.key)
            self.forget_pod(pod)
        return expired

    def register_forget_pod_handler(self, handler: ForgetPodHandler) -> None:
        self._forget_handlers.append(handler)

    # ----- introspection -----

    def counts(self) -> dict[str, int]:
        return {
            "nodes": self.snapshot.num_nodes,
            "pods": len(self._pods),
            "assumed_pods": len(self._assumed),
        }
