"""LoadAwareScheduling's per-node rows, kept in line with the cluster snapshot.

:class:`LoadRows` owns the plugin's :class:`~.assign_cache.AssignCache` (NodeMetrics and the pods
assigned to each node) and the :class:`~.metrics_view.LoadView` rows Filter and Score read, indexed by
snapshot position. It changes them on three kinds of input:

- NodeMetric events and pod condition changes (:meth:`LoadRows.on_node_metric`,
  :meth:`LoadRows.on_pod_update`);
- Reserve, Unreserve and forgotten pods (:meth:`LoadRows.place`, :meth:`LoadRows.drop`);
- the snapshot itself, once per scheduling cycle (:meth:`LoadRows.sync`): positions after node
  changes, pods bound by others or deleted (nodes whose pod count changed since the rows last agreed
  with it: one vectorised comparison per cycle, a per-node loop only over the changed nodes),
  ``raw-allocatable`` annotations, and (at most once per second of clock time) rows whose metric went
  stale, which are touched so that the runtime's per-node result cache recomputes them.

Every row rewrite touches the row's snapshot position (``snapshot.touch``), which is what the runtime's
per-node result cache keys on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from apis.config.loadaware_args import LoadAwareSchedulingArgs
from apis.core.types import PODS, Node, Pod
from apis.slo.nodemetric_record import NodeMetricRecord
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, Positions
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.loadaware.assign_cache import AssignCache, AssignedPod
from koord_scheduler.plugins.loadaware.estimator import is_reserve_pod
from koord_scheduler.plugins.loadaware.incoming import PodEstimator
from koord_scheduler.plugins.loadaware.metrics_view import (
    ANNOTATION_CUSTOM_USAGE_THRESHOLDS,
    LoadView,
    ScorePaths,
    ThresholdProfile,
    args_profile,
    node_profile,
)
from koord_scheduler.plugins.loadaware.raw_allocatable import ANNOTATION_RAW_ALLOCATABLE, raw_allocatable_row
from koord_scheduler.plugins.loadaware.timing import assign_time, estimation_deadline

PROFILE_MEMO_LIMIT = 1024
"""Distinct ``usage-thresholds`` annotations remembered at most."""

FRESHNESS_CHECK_SECONDS = 1.0
"""How often (clock time) :meth:`LoadRows.sync` looks for rows whose metric went stale."""


class AllocatableRow(NamedTuple):
    """A node's allocatable over the plugin's resources, as read from ``node`` (the object it was read
    from: the row is valid while the snapshot holds that same object)."""

    node: Node | None
    row: list[int]


class LoadRows:
    """See the module docstring."""

    def __init__(
        self,
        args: LoadAwareSchedulingArgs,
        snapshot: ClusterSnapshot,
        clock: Callable[[], float],
        *,
        resources: tuple[str, ...],
        estimator: PodEstimator,
    ) -> None:
        self._snapshot = snapshot
        self._clock = clock
        self._resources = resources
        self._width = len(resources)
        self._estimator = estimator
        self._expiration = args.node_metric_expiration_seconds
        self.cache = AssignCache(resources, prod_usage_include_sys=args.prod_usage_include_sys)
        self.view = LoadView(resources, snapshot.capacity)
        self._profile = args_profile(args, resources)
        self._node_profiles: dict[str, ThresholdProfile] = {}
        agg = args.aggregated
        self._score_paths = ScorePaths(
            agg.score_aggregation_type if agg is not None else "",
            float(agg.score_aggregated_duration) if agg is not None else 0.0,
            args.score_according_prod_usage,
        )
        self._known_pods: list[int] = [-1] * snapshot.capacity
        """Per position, the snapshot's pod count when the rows last agreed with it (-1: never)."""
        self._recheck: set[int] = set()
        """Positions whose ``_known_pods`` Reserve/Unreserve moved (compared at the next pod sync even if
        the snapshot did not touch them)."""
        self.synced_version = -1
        """``snapshot.version`` after the last :meth:`sync` (nothing to do while it is unchanged and no
        freshness check is due; -1: compare every position)."""
        self._nodes_generation = -1
        self._pods_generation = -1
        self._position_of: dict[str, int] = {}
        """Node name -> the position its row is written at."""
        self._owner_at: dict[int, str] = {}
        """Position -> the node whose row is written there."""
        self._fresh_checked_at = float("-inf")
        self._fresh_seen = np.zeros(snapshot.capacity, dtype=np.bool_)
        """Per position, whether the row was fresh at the last check (to touch rows that expire)."""
        self._raw_allocatable: dict[int, AllocatableRow] = {}
        """Per position of a node annotated ``node.koordinator.sh/raw-allocatable``: its allocatable with
        the annotation's values in place (:mod:`.raw_allocatable`)."""
        self._raw_version = -1
        """``snapshot.version`` when the annotations were last looked at."""
        self._raw_node_objects = -1
        """``snapshot.node_objects_version`` then (nothing to look at while no node object changed)."""
        self._allocatable_rows: list[AllocatableRow | None] = [None] * snapshot.capacity
        """Per position, for the per-node Filter and Score (:meth:`allocatable_row`)."""

    # ----- inputs -----

    def on_node_metric(self, event: EventType, old: NodeMetricRecord | None, new: NodeMetricRecord | None) -> None:
        if event == EventType.DELETED or new is None:
            if old is not None:
                self.cache.delete_metric(old.name)
                self._write(old.name)
            return
        self.cache.set_metric(new)
        self._write(new.name)

    def on_pod_update(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        """A bound pod's PodScheduled/Initialized transition moves its assign time and forced-estimation
        deadline (Koordinator re-assigns on condition changes)."""
        if event != EventType.MODIFIED or old is None or new is None or not new.node_name:
            return
        if old.condition_times == new.condition_times and old.conditions == new.conditions:
            return
        load = self.cache.get(new.node_name)
        current = load.pods.get(new.key) if load is not None else None
        if current is None:
            return
        timestamp = assign_time(new, current.timestamp)
        deadline = estimation_deadline(new, timestamp, self._estimator.windows)
        if (timestamp, deadline) != (current.timestamp, current.deadline):
            self.cache.assign(new.node_name, current._replace(timestamp=timestamp, deadline=deadline))
            self._write(new.node_name)

    def place(self, node_name: str, assigned: AssignedPod) -> None:
        """Reserve: ``assigned`` (a pod this scheduler placed on ``node_name``, which the snapshot has
        just assumed there) counts on the node from now on."""
        snap = self._snapshot
        pos = snap.positions.get(node_name)
        load = self.cache.get(node_name)
        metric = load.metric if load is not None else None
        # The common case: a pod new to the node and missing from its podsMetric adds exactly its
        # estimate to node_delta, and the node's row (already written at ``pos``) takes it in place.
        key = assigned.key
        unreported = load is not None and metric is not None and key not in load.pods and key not in metric.pods
        if unreported:
            assert load is not None
            self.cache.assign_unreported(load, assigned)
        else:
            self.cache.assign(node_name, assigned)
        if pos is None:
            self._write(node_name)
            return
        known = self._known_pods
        if pos < len(known) and known[pos] >= 0:
            known[pos] += 1  # the assume that preceded Reserve
            if snap.only_pod_change_since(self._pods_generation) == pos:
                # That assume is the only pod change since the last sync (which left every count in
                # agreement): the counts agree again, and the next sync has no pods to look at.
                self._pods_generation = snap.pods_generation
            else:
                self._recheck.add(pos)
        if unreported and self._position_of.get(node_name) == pos and self.view.add_to_base(pos, assigned.estimate):
            snap.touch(pos)
        else:
            self._write(node_name)

    def drop(self, pod: Pod, node_name: str) -> None:
        """Unreserve, or a forgotten assumed pod: ``pod`` no longer counts on ``node_name``."""
        if not node_name or not self.cache.unassign(node_name, pod.key):
            return
        pos = self._snapshot.positions.get(node_name)
        known = self._known_pods
        if pos is not None and pos < len(known) and known[pos] > 0:
            known[pos] -= 1  # the snapshot drops (or has dropped) the pod too
            self._recheck.add(pos)
        self._write(node_name)

    # ----- the per-cycle sync -----

    def sync(self) -> None:
        """Bring rows in line with the snapshot (see the module docstring). While ``snapshot.version``
        has not moved and no freshness check is due, it is two comparisons."""
        snap = self._snapshot
        now = self._clock()
        fresh_due = not (0.0 <= now - self._fresh_checked_at < FRESHNESS_CHECK_SECONDS)
        if not fresh_due and snap.version == self.synced_version:
            return
        cap = snap.capacity
        if cap > self.view.capacity:
            self.view.ensure_capacity(cap)
        known = self._known_pods
        if cap > len(known):
            known.extend([-1] * (cap - len(known)))
            self._fresh_seen = np.concatenate([self._fresh_seen, np.zeros(cap - len(self._fresh_seen), bool)])
        if snap.nodes_generation != self._nodes_generation:
            self._nodes_generation = snap.nodes_generation
            self._remap()
        if snap.pods_generation != self._pods_generation:
            mismatched = self._pod_count_mismatches(cap)
            self._pods_generation = snap.pods_generation
            for pos in mismatched:
                self._reconcile(pos)
        if snap.node_objects_version != self._raw_node_objects:
            self._sync_raw_allocatable(cap)
        if fresh_due:
            self._fresh_checked_at = now
            self.view.flush()
            fresh = (now - self.view.update_time[:cap]) < self._expiration
            for pos in np.flatnonzero(fresh != self._fresh_seen[:cap]).tolist():
                snap.touch(pos)
            self._fresh_seen[:cap] = fresh
        self.synced_version = snap.version

    def _pod_count_mismatches(self, cap: int) -> list[int]:
        """Positions whose snapshot pod count differs from the rows', in ascending order.

        Only positions where the snapshot added or removed a pod since the last look (its pod log) can
        have moved, and those whose count Reserve/Unreserve moved (``_recheck``). When the log no longer
        reaches back that far, every position is compared (one vectorised comparison)."""
        snap = self._snapshot
        known = self._known_pods
        counts = snap.pod_count
        since = self._pods_generation
        changed = snap.pods_changed_since(since) if since >= 0 else None
        recheck, self._recheck = self._recheck, set()
        if changed is None:
            mismatch = np.array(known[:cap], dtype=np.int64) != counts[:cap]
            if not any(load.pods for load in self.cache):
                # No pod known anywhere (the first sync): nodes without pods already agree.
                empty = mismatch & (counts[:cap] == 0)
                for pos in np.flatnonzero(empty).tolist():
                    known[pos] = 0
                mismatch &= ~empty
            mismatched: list[int] = np.flatnonzero(mismatch).tolist()
            return mismatched
        candidates = recheck.union(changed) if recheck else set(changed)
        return sorted(pos for pos in candidates if pos < cap and known[pos] != counts[pos])

    def _remap(self) -> None:
        positions = self._snapshot.positions
        for pos, owner in list(self._owner_at.items()):
            if positions.get(owner) != pos:
                self._clear(pos)
                del self._owner_at[pos]
                self._position_of.pop(owner, None)
        self._node_profiles.clear()
        for load in self.cache:
            if load.metric is not None and self._position_of.get(load.name) != positions.get(load.name):
                self._write(load.name)

    def _reconcile(self, pos: int) -> None:
        snap = self._snapshot
        self._known_pods[pos] = int(snap.pod_count[pos])
        info = snap.infos[pos]
        if info is None or info.node is None:
            return
        name = info.name
        current = info.pods
        load = self.cache.get(name)
        known = load.pods if load is not None else {}
        changed = False
        for key in [k for k in known if k not in current]:
            changed |= self.cache.unassign(name, key)
        for key, pod in current.items():
            if key not in known and not is_reserve_pod(pod) and not pod.is_terminal:
                self.cache.assign(name, self._estimator.found(pod))
                changed = True
        if changed:
            self._write(name)

    def _sync_raw_allocatable(self, cap: int) -> None:
        """Track the nodes whose ``raw-allocatable`` annotation overrides their allocatable: only positions
        the snapshot touched since the last look (all of them when its change log no longer reaches)."""
        snap = self._snapshot
        changed = snap.changed_since(self._raw_version) if self._raw_version >= 0 else None
        positions = range(cap) if changed is None else changed.tolist()
        infos, valid = snap.infos, snap.valid
        for pos in positions:
            info = infos[pos] if pos < cap else None
            node = info.node if info is not None and valid[pos] else None
            raw = node.annotations.get(ANNOTATION_RAW_ALLOCATABLE) if node is not None else None
            if node is None or not raw:
                self._raw_allocatable.pop(pos, None)
                continue
            current = self._raw_allocatable.get(pos)
            if current is not None and current.node is node:
                continue
            base = self._node_allocatable(node)
            row = raw_allocatable_row(raw, self._resources, base)
            if row == base:
                self._raw_allocatable.pop(pos, None)
            else:
                self._raw_allocatable[pos] = AllocatableRow(node, row)
        self._raw_version = snap.version
        self._raw_node_objects = snap.node_objects_version

    # ----- rows -----

    def _write(self, name: str) -> None:
        """Rewrite the node's row from its load (:meth:`place` updates a row in place instead when it
        can: :meth:`LoadView.add_to_base`)."""
        snap = self._snapshot
        pos = snap.positions.get(name)
        load = self.cache.get(name)
        old = self._position_of.get(name)
        if old is not None and old != pos:
            self._clear(old)
            self._owner_at.pop(old, None)
            del self._position_of[name]
        if pos is None:
            return
        if load is None or load.metric is None:
            if self._owner_at.get(pos) == name:
                self._clear(pos)
                del self._owner_at[pos]
                self._position_of.pop(name, None)
            return
        if pos >= self.view.capacity:
            self.view.ensure_capacity(snap.capacity)
        self.view.write(pos, load, self._node_profile(pos), self._score_paths)
        if old != pos:
            self._position_of[name] = pos
            self._owner_at[pos] = name
        snap.touch(pos)  # a position from snapshot.positions is below its capacity

    def _clear(self, pos: int) -> None:
        self.view.clear(pos)
        if pos < self._snapshot.capacity:
            self._snapshot.touch(pos)

    def _node_profile(self, pos: int) -> ThresholdProfile:
        node = self._snapshot.infos[pos]
        annotation = node.node.annotations.get(ANNOTATION_CUSTOM_USAGE_THRESHOLDS) if node and node.node else None
        if not annotation:
            return self._profile
        profile = self._node_profiles.get(annotation)
        if profile is None:
            if len(self._node_profiles) > PROFILE_MEMO_LIMIT:
                self._node_profiles.clear()
            profile = node_profile(self._profile, annotation, self._resources)
            self._node_profiles[annotation] = profile
        return profile

    # ----- reads for Filter and Score -----

    def fresh(self, positions: Positions) -> np.ndarray:
        """Per position, whether its NodeMetric is fresh now (absent update times count as expired)."""
        self.view.flush()
        # NaN update times (absent) compare False: expired.
        age = self._clock() - self.view.update_time[positions]
        fresh: np.ndarray = age < self._expiration
        return fresh

    def allocatable(self, snapshot: ClusterSnapshot, idx: Positions) -> IntArray:
        """Allocatable over the plugin's resources at positions ``idx`` (one row each), ``raw-allocatable``
        annotations applied."""
        out = np.zeros((len(idx), self._width), dtype=np.int64)
        rows = np.take(snapshot.allocatable, idx, axis=0)
        for i, resource in enumerate(self._resources):
            col = snapshot.column(resource)
            if col is not None:
                out[:, i] = rows[:, col]
        raw_rows = self._raw_allocatable
        if raw_rows:
            overridden = np.fromiter(raw_rows, dtype=np.intp, count=len(raw_rows))
            for i in np.flatnonzero(np.isin(idx, overridden)).tolist():
                out[i] = raw_rows[int(idx[i])].row
        return out

    def allocatable_row(self, snapshot: ClusterSnapshot, pos: int) -> list[int]:
        """One row of :meth:`allocatable` as a list (what ``snapshot.allocatable`` holds for the node: the
        node object's allocatable, ``pods`` excluded, zeros once the node is gone), cached per node object."""
        info = snapshot.infos[pos]
        node = info.node if info is not None else None
        rows = self._allocatable_rows
        if pos >= len(rows):
            rows.extend([None] * (pos + 1 - len(rows)))
        cached = rows[pos]
        if cached is not None and cached.node is node:
            return cached.row
        if node is None or not snapshot.valid[pos]:
            row = [0] * self._width
        else:
            raw = self._raw_allocatable.get(pos)
            row = raw.row if raw is not None and raw.node is node else self._node_allocatable(node)
        rows[pos] = AllocatableRow(node, row)
        return row

    def _node_allocatable(self, node: Node) -> list[int]:
        allocatable = node.allocatable
        return [allocatable.get(r, 0) if r != PODS else 0 for r in self._resources]
