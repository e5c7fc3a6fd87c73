"""Shared pieces of the in-tree plugins: kube-scheduler's DefaultNormalizeScore, the required node
selector match (NodeAffinity's Filter and PodTopologySpread's nodeAffinityPolicy), and the per-snapshot
cache the node-property filters keep their masks in."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Generic, TypeVar

import numpy as np

from apis.core.selectors import node_selector_map_matches, node_selector_matches
from apis.core.types import Node, NodeSelectorTerm
from koord_scheduler.framework.snapshot import BoolArray, ClusterSnapshot, IntArray

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def default_normalize_score(max_priority: int, reverse: bool, scores: IntArray) -> None:
    """kube-scheduler's ``helper.DefaultNormalizeScore``, over a whole score vector, in place.

    ``max = max(0, scores)``. When ``max == 0`` every score becomes ``max_priority`` if ``reverse``, and
    is left alone otherwise. Else ``s = max_priority * s / max`` with Go's truncating division, then
    ``max_priority - s`` when ``reverse``.
    """
    if len(scores) == 0:
        return
    top = max(int(scores.max()), 0)
    if top == 0:
        if reverse:
            scores.fill(max_priority)
        return
    if int(scores.min()) >= 0:
        # The common case, done in place: floor division equals Go's truncation for s >= 0.
        np.multiply(scores, max_priority, out=scores)
        np.floor_divide(scores, top, out=scores)
    else:
        scaled = scores * max_priority
        # Go truncates toward zero; numpy's // floors, which differs for negative numerators.
        scores[:] = np.where(scaled < 0, -(-scaled // top), scaled // top)
    if reverse:
        np.subtract(max_priority, scores, out=scores)


class SnapshotCache(Generic[K, V]):
    """A small LRU of values derived from a snapshot's node properties (labels, taints, spec).

    Entries are valid for one ``(snapshot, nodes_generation)``; any other snapshot or generation empties
    the cache first, so a node label or taint change is never answered from a stale entry. Values are
    shared between callers and must be treated as read-only.
    """

    __slots__ = ("_entries", "_generation", "_max_entries", "_snapshot")

    def __init__(self, max_entries: int = 256) -> None:
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._max_entries = max_entries
        self._snapshot: ClusterSnapshot | None = None
        self._generation = -1

    def get(self, snapshot: ClusterSnapshot, key: K, compute: Callable[[], V]) -> V:
        if snapshot is not self._snapshot or snapshot.nodes_generation != self._generation:
            self._entries.clear()
            self._snapshot = snapshot
            self._generation = snapshot.nodes_generation
        try:
            value = self._entries[key]
        except KeyError:
            value = compute()
            self._entries[key] = value
            if len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)
            return value
        self._entries.move_to_end(key)
        return value

    def __len__(self) -> int:
        return len(self._entries)


def live_nodes(snapshot: ClusterSnapshot) -> list[tuple[int, Node]]:
    """``(position, node)`` for every live node: the one O(nodes) pass index builders make."""
    infos = snapshot.infos
    out: list[tuple[int, Node]] = []
    for pos in snapshot.positions.values():
        info = infos[pos]
        if info is not None and info.node is not None:
            out.append((pos, info.node))
    return out


RequiredSelector = tuple[Mapping[str, str] | None, tuple[NodeSelectorTerm, ...] | None]
"""``(spec.nodeSelector, required node affinity terms)``: kube-scheduler's ``RequiredNodeAffinity``."""


def matches_required(selector: RequiredSelector, node: Node) -> bool:
    """``GetRequiredNodeAffinity(pod).Match(node)``: every nodeSelector label matches, and (when present)
    one of the required terms matches. Present-but-empty terms match no node."""
    node_selector, terms = selector
    labels = node.labels
    if not node_selector_map_matches(node_selector, labels):
        return False
    return terms is None or node_selector_matches(terms, labels, node.name)


def required_mask(selector: RequiredSelector, nodes: Iterable[tuple[int, Node]], capacity: int) -> BoolArray:
    """``mask[pos]``: the node at ``pos`` satisfies ``selector`` (positions not given stay False)."""
    mask = np.zeros(capacity, dtype=np.bool_)
    matching = [pos for pos, node in nodes if matches_required(selector, node)]
    mask[matching] = True
    return mask
