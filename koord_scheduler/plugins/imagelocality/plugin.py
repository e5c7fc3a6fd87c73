"""ImageLocality (kube-scheduler ``imagelocality/image_locality.go``): Score only, default weight 1.

The scheduler cache of kube-scheduler keeps, per image name in ``node.status.images``, its size (as the
first node reporting it gave it) and the nodes that have it. :class:`ImageIndex` is that summary, kept
from the snapshot's change log: PreScore brings it up to date (the explicit per-cycle step) and returns
Skip when none of the pod's images is on any node, where every node would score 0 anyway. Score then
sums :func:`.scoring.scaled_image_score` over the pod's containers found on the node.

The answer for a node depends on the pod's images, the node's images, and two cluster-wide numbers
(how many nodes have each image, how many nodes there are), so ``sign_pod`` carries the index's
generation and the node count: per-node caches are reused only while neither moved.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np

from apis.core.types import Node, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.fast_paths import SignedPlugin
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import BatchScorePlugin, PreScorePlugin, ScorePlugin
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, NodeInfo, Positions
from koord_scheduler.framework.status import Status, skip, success
from koord_scheduler.plugins import names
from koord_scheduler.plugins.imagelocality import scoring

NAME = names.IMAGE_LOCALITY
ARGS = None


@dataclass(slots=True)
class ImageState:
    size_bytes: int
    positions: set[int] = field(default_factory=set)


class ImageIndex:
    """Image name -> (size, positions of the nodes that have it), kept in step with the snapshot."""

    def __init__(self) -> None:
        self.images: dict[str, ImageState] = {}
        self.generation = 0
        """Bumped whenever any node's set of images changes."""
        self._nodes: dict[int, tuple[Node, frozenset[str]]] = {}
        self._snapshot: ClusterSnapshot | None = None
        self._version = -1
        self._node_objects = -1

    def sync(self, snapshot: ClusterSnapshot) -> None:
        if snapshot is self._snapshot and snapshot.node_objects_version == self._node_objects:
            return
        changed = snapshot.changed_since(self._version) if snapshot is self._snapshot else None
        if changed is None:
            self._rebuild(snapshot)
        else:
            for position in changed.tolist():
                info = snapshot.infos[position]
                node = info.node if info is not None and snapshot.valid[position] else None
                self._update(position, node)
        self._snapshot = snapshot
        self._version = snapshot.version
        self._node_objects = snapshot.node_objects_version

    def _rebuild(self, snapshot: ClusterSnapshot) -> None:
        for position in list(self._nodes):
            self._update(position, None)
        for position in snapshot.node_order().tolist():
            info = snapshot.infos[position]
            self._update(position, info.node if info is not None else None)

    def _update(self, position: int, node: Node | None) -> None:
        held = self._nodes.get(position)
        if held is not None and held[0] is node:
            return
        new_names = frozenset(n for image in node.images for n in image.names) if node is not None else frozenset()
        old_names = held[1] if held is not None else frozenset()
        if node is None:
            self._nodes.pop(position, None)
        else:
            self._nodes[position] = (node, new_names)
        if new_names == old_names:
            return
        self.generation += 1
        for name in old_names - new_names:
            state = self.images[name]
            state.positions.discard(position)
            if not state.positions:
                del self.images[name]
        if node is not None:
            for image in node.images:
                for name in image.names:
                    if name in old_names:
                        continue
                    known = self.images.get(name)
                    if known is None:
                        self.images[name] = ImageState(image.size_bytes, {position})
                    else:
                        known.positions.add(position)


class ImageLocality:
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self.index = ImageIndex()
        self._names: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        """(pod images, their normalised names) of the last pod asked about."""

    def _normalized(self, pod: Pod) -> tuple[str, ...]:
        images, normalized = self._names
        if images is not pod.images and images != pod.images:
            normalized = tuple(scoring.normalized_image_name(i) for i in pod.images)
            self._names = (pod.images, normalized)
        return normalized

    def pre_score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> Status:
        self.index.sync(snapshot)
        images = self.index.images
        if not images:
            return skip()
        for name in self._normalized(pod):
            if name in images:
                return success()
        return skip()

    def sign_pod(self, pod: Pod) -> Hashable:
        return (self._normalized(pod), self.index.generation, self.handle.snapshot.num_nodes)

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        total_nodes = self.handle.snapshot.num_nodes
        position = node_info.position
        sum_scores = 0
        for name in self._normalized(pod):
            image = self.index.images.get(name)
            if image is not None and position in image.positions:
                sum_scores += scoring.scaled_image_score(image.size_bytes, len(image.positions), total_nodes)
        return scoring.calculate_priority(sum_scores, len(pod.images))

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        total_nodes = snapshot.num_nodes
        sums = np.zeros(len(positions), dtype=np.int64)
        for name in self._normalized(pod):
            image = self.index.images.get(name)
            if image is None:
                continue
            has = np.isin(positions, np.fromiter(image.positions, dtype=np.intp, count=len(image.positions)))
            sums[has] += scoring.scaled_image_score(image.size_bytes, len(image.positions), total_nodes)
        return scoring.calculate_priorities(sums, len(pod.images))

    def score_extensions(self) -> None:
        return None


def new(args: None, handle: Handle) -> ImageLocality:
    return ImageLocality(handle)


def declared_capabilities(plugin: ImageLocality) -> tuple[PreScorePlugin, ScorePlugin, BatchScorePlugin, SignedPlugin]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin
