"""``ReservationArgs.reservationSelectorIndex`` (Koordinator ``pkg/scheduler/plugins/reservation``,
``FilterByReservationSelector``).

A white-list of reservation label keys (exact ``keys``, and ``keyPrefixes``) that narrows the nodes an
owner pod with a ``reservationSelector`` looks at. For each selector key: an exact white-listed key
selects the bucket of nodes holding a reservation labelled ``key=value``; otherwise the first configured
prefix the key starts with selects the bucket of nodes holding a reservation with a label key under that
prefix. No selector key white-listed: a *miss*, every node is looked at. Otherwise a *hit*: the smallest
bucket is the candidate node set (an empty bucket means none). Reservation matching then still decides
on those nodes.

Only reservation labels are indexed: a selector term satisfied by a *node* label alone (matching looks at
reservation labels over node labels) finds nothing once its key is white-listed, as in Koordinator.
pykoord keeps no separate inverted index: owner matching already narrows the reservations to the pod's,
and :func:`candidate_nodes` answers from the reservations' labels. Buckets of equal size are taken in
sorted order (Koordinator takes Go's map order).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Histogram

from apis.config.reservation_args import ReservationSelectorIndex
from koord_scheduler.plugins.reservation.cache import ReservationCache, Rows
from koord_scheduler.plugins.reservation.matching import PodReservationIntent


@dataclass(frozen=True, slots=True)
class SelectorIndex:
    prefixes: tuple[str, ...]
    keys: frozenset[str]

    @staticmethod
    def from_args(args: ReservationSelectorIndex) -> SelectorIndex | None:
        """None when disabled or when nothing (after trimming blanks) is white-listed."""
        if not args.enabled:
            return None
        prefixes = tuple(dict.fromkeys(p.strip() for p in args.key_prefixes if p.strip()))
        keys = frozenset(k.strip() for k in args.keys if k.strip())
        if not prefixes and not keys:
            return None
        return SelectorIndex(prefixes, keys)

    def matched_prefix(self, key: str) -> str:
        return next((p for p in self.prefixes if key.startswith(p)), "")


def candidate_nodes(
    index: SelectorIndex, selector: Mapping[str, str], reservations: Iterable[tuple[Mapping[str, str], str]]
) -> frozenset[str] | None:
    """The candidate node names for ``selector`` (None on a miss). ``reservations`` are (labels, node)
    of the reservations placed on nodes."""
    kvs: dict[str, str] = {}
    prefixes: list[str] = []
    for key, value in sorted(selector.items()):
        if key in index.keys:
            kvs[key] = value
            continue
        prefix = index.matched_prefix(key)
        if prefix and prefix not in prefixes:
            prefixes.append(prefix)
    if not kvs and not prefixes:
        return None
    by_prefix: dict[str, set[str]] = {p: set() for p in prefixes}
    by_kv: dict[tuple[str, str], set[str]] = {kv: set() for kv in kvs.items()}
    for labels, node in reservations:
        if not node:
            continue
        for key, value in labels.items():
            bucket = by_kv.get((key, value))
            if bucket is not None:
                bucket.add(node)
            prefix = index.matched_prefix(key)
            if prefix in by_prefix:
                by_prefix[prefix].add(node)
    buckets: list[set[str]] = [by_prefix[p] for p in prefixes] + [by_kv[kv] for kv in kvs.items()]
    sizes = [len(b) for b in buckets]
    return frozenset(buckets[sizes.index(min(sizes))])


class IndexMetrics:
    """``scheduler_reservation_selector_index_query_total{result}`` (hit / miss) and
    ``scheduler_reservation_selector_index_candidates_count`` (candidate nodes of a non-empty hit)."""

    def __init__(self, registry: object) -> None:
        reg = registry if isinstance(registry, CollectorRegistry) else CollectorRegistry()
        self.queries = Counter(
            "scheduler_reservation_selector_index_query_total",
            "Total number of reservationSelector index queries, labeled by index hit/miss result.",
            ["result"],
            registry=reg,
        )
        self.candidates = Histogram(
            "scheduler_reservation_selector_index_candidates_count",
            "The number of candidate nodes returned by the reservationSelector white-list index for an "
            "index-hit query.",
            buckets=[float(2**i) for i in range(16)],
            registry=reg,
        )


@dataclass(frozen=True, slots=True)
class IndexedNarrowing:
    """What the plugin holds when the index is enabled."""

    index: SelectorIndex
    metrics: IndexMetrics

    @staticmethod
    def from_args(args: ReservationSelectorIndex, registry: object) -> IndexedNarrowing | None:
        index = SelectorIndex.from_args(args)
        return None if index is None else IndexedNarrowing(index, IndexMetrics(registry))

    def narrow(self, intent: PodReservationIntent, cache: ReservationCache, rows: Rows) -> Rows:
        return narrow(self.index, intent, cache, rows, self.metrics)


def narrow(
    index: SelectorIndex, intent: PodReservationIntent, cache: ReservationCache, rows: Rows, metrics: IndexMetrics
) -> Rows:
    """The owner-matched ``rows`` of a pod with a ``reservationSelector`` (and no reservation name), kept
    to the index's candidate nodes."""
    affinity = intent.affinity
    if affinity is None or affinity.name or not affinity.reservation_selector:
        return rows
    placed = ((e.record.labels, e.record.node_name) for e in cache if e.record.node_name)
    nodes = candidate_nodes(index, affinity.reservation_selector, placed)
    if nodes is None:
        metrics.queries.labels("miss").inc()
        return rows
    metrics.queries.labels("hit").inc()
    if nodes:
        metrics.candidates.observe(len(nodes))
    keep = [r for r in rows.tolist() if cache.row_node[r] in nodes]
    return np.asarray(keep, dtype=np.intp)
