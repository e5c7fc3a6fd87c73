"""The third tier of the plugin contract: fast paths, optional Protocols that let the runtime do less work.

None changes what a plugin answers; each lets the runtime skip work it can prove unneeded: answers cached
per node for pods with equal signatures (:class:`SignedPlugin`, :mod:`.node_cache`), normalised scores
reused (:class:`ScoresOnlyNormalizer`), a heap of sort keys instead of ``less`` calls
(:class:`QueueSortKey`), one batch recheck with nominated pods instead of the chain node by node
(:class:`AddedPodsFilter`), and per-plugin state prepared before the first cycle or once per cycle
(:class:`WarmUpPlugin`, :class:`CyclePreparer`). Each fast path has an equivalence test that runs with it
on and off. The first tier is :mod:`.interfaces`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Protocol, runtime_checkable

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import FailureChunk
from koord_scheduler.framework.interfaces import Plugin, ScoreExtensions
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.framework.types import QueuedPodInfo


@runtime_checkable
class SignedPlugin(Protocol):
    """Optional, on a Filter or Score plugin: what its per-node answer depends on besides the node's row.

    Pods with equal signatures get equal answers on an unchanged node, so the runtime caches answers per
    node (:mod:`~koord_scheduler.framework.node_cache`). ``None`` means "do not cache for this pod"."""

    def sign_pod(self, pod: Pod) -> Hashable | None: ...


@runtime_checkable
class ScoresOnlyNormalizer(ScoreExtensions, Protocol):
    """Optional, on a ScoreExtensions object: ``normalize_reads_only_scores = True`` declares that the
    result depends on nothing but the scores it is given (as with ``default_normalize_score``). For a
    signed plugin the runtime then reuses the last normalised scores while the raw scores and the scored
    nodes are unchanged."""

    normalize_reads_only_scores: bool


@runtime_checkable
class QueueSortKey(Protocol):
    """Optional, on a QueueSort plugin: a key equivalent to ``less`` (``a`` before ``b`` exactly when
    ``sort_key(a) < sort_key(b)``), which lets the queue keep a heap of keys instead of calling ``less``."""

    def sort_key(self, qpi: QueuedPodInfo) -> object: ...


@runtime_checkable
class AddedPodsFilter(Plugin, Protocol):
    """Optional, on a Filter plugin: answer for many nodes at once as if extra pods ran there, without
    editing the snapshot (Filtering with nominated pods otherwise runs the whole chain node by node)."""

    def added_pods_check(self, state: CycleState, active_filters: Sequence[str]) -> AddedPodsCheck | None:
        """A check exact for this cycle, or None. Exact means that among ``active_filters`` (the Filter
        plugins running this cycle, by name) this plugin is the only one whose answer depends on the pods
        on a node, so no other plugin's answer can change when pods are added. The runtime asks only
        when no active PreFilter plugin has PreFilterExtensions."""
        ...


class AddedPodsCheck(Protocol):
    """One cycle's batch recheck of a Filter answer with extra pods added to some nodes."""

    def rejections(self, snapshot: ClusterSnapshot, added: Sequence[tuple[int, Sequence[Pod]]]) -> FailureChunk | None:
        """The nodes among ``added`` (position, pods to add there) where the pod no longer fits with those
        pods counted, with statuses stamped with the plugin; None when every node fits. A pod already
        accounted on its node (assumed) is not counted twice."""
        ...


@runtime_checkable
class CyclePreparer(Plugin, Protocol):
    """Optional, any plugin: bring per-plugin state up to date with the snapshot, once per cycle."""

    def prepare_cycle(self, snapshot: ClusterSnapshot) -> None:
        """Called once per scheduling cycle, before PreFilter, with the cycle's snapshot. Queries
        (``sign_pod``, Filter, Score) then only read. An exception aborts the cycle as an Error naming
        the plugin."""
        ...


@runtime_checkable
class WarmUpPlugin(Plugin, Protocol):
    """Optional, any plugin: prepare per-node state before the first scheduling cycle."""

    def warm_up(self) -> None:
        """Called once when the scheduler starts, after its caches are listed and before the first cycle.
        Work done here (a full pass over the snapshot, say) is then not part of the first pod's
        scheduling latency. A plugin must still be correct if it is never called. An exception is
        logged and ignored."""
        ...
