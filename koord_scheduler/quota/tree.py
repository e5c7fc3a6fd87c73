"""The quota tree: request, used and runtime of every quota, kept incrementally.

Accounting follows Koordinator pkg/scheduler/plugins/elasticquota/core (group_quota_manager.go,
quota_info.go):

- a pod's request, masked to the keys of its quota's max, counts in the quota's *request* from the moment
  the pod exists (pending included), and in its *used* once it is assigned (Reserve, or seen bound);
- ``request(q)`` is what q's pods (or children) ask, raised to ``min(q)`` when q does not lend; a parent
  receives ``limited(q) = min(request(q), max(q))`` per resource, so a parent's child request is the sum of
  its children's limited requests;
- ``used`` propagates to every ancestor;
- runtime is split top-down, per parent and per resource, by :func:`.runtime.split_budget`; the root's
  budget is the cluster's allocatable minus what the system and default quotas use. The system and
  default quotas take no part in the split: their runtime is their max.

Incremental: a pod event walks only the path from its quota to the root, marking the parents whose
split is out of date; :meth:`QuotaTree.runtime` re-splits only the out-of-date parents on the path from
the root to the quota it is asked about. A quota's runtime is exact whenever no ancestor is out of date.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from apis.scheduling.elasticquota import DEFAULT_QUOTA, ROOT_QUOTA, SYSTEM_QUOTA, QuotaRecord
from koord_scheduler.quota.runtime import scale_mins, split_columns

Resources = dict[str, int]


@dataclass(slots=True, eq=False)
class QuotaNode:
    """One quota's numbers. ``child_request``: what its pods (leaf) or children (parent) ask."""

    name: str
    parent: QuotaNode | None
    min: Mapping[str, int]
    max: Mapping[str, int]
    weight: Mapping[str, int]
    allow_lent: bool
    is_parent: bool
    builtin: bool = False
    children: list[QuotaNode] = field(default_factory=list)
    child_request: Resources = field(default_factory=dict)
    request: Resources = field(default_factory=dict)
    limited: Resources = field(default_factory=dict)
    used: Resources = field(default_factory=dict)
    non_preemptible_used: Resources = field(default_factory=dict)
    runtime: Resources = field(default_factory=dict)
    stale: bool = True
    """Whether the split of this node's runtime among its children is out of date."""
    slack: Resources | None = None
    """After a split in which every child got all it asked for (no contention, no scaled mins): per
    resource, the budget left unassigned. While it stays non-negative a change of one child's request, or
    of this node's budget, is applied in O(1) instead of a re-split (None: re-split)."""
    min_sum: Resources = field(default_factory=dict)
    upward: tuple[QuotaNode, ...] = ()
    """This node and its ancestors, nearest first (set when the tree is built)."""

    def path_from_root(self) -> list[QuotaNode]:
        path: list[QuotaNode] = []
        node: QuotaNode | None = self
        while node is not None:
            path.append(node)
            node = node.parent
        path.reverse()
        return path


@dataclass(frozen=True, slots=True)
class PodEntry:
    quota: str
    request: Mapping[str, int]
    assigned: bool
    non_preemptible: bool = False


class QuotaTree:
    """The tree of valid quotas and the pods charged to them.

    ``set_quotas`` replaces the quotas (pods stay, and are charged again); ``upsert_pod`` / ``remove_pod``
    move one pod's numbers along one path; ``runtime`` answers for one quota, refreshing only its path.
    """

    def __init__(self, *, scale_min: bool = True, builtin_max: Mapping[str, Mapping[str, int]] | None = None):
        self.scale_min = scale_min
        self._builtin_max = dict(builtin_max or {})
        self._pods: dict[str, PodEntry] = {}
        self._total: Resources = {}
        self._root_budget_dirty = True
        self.nodes: dict[str, QuotaNode] = {}
        self.keys: tuple[str, ...] = ()
        self.version = 0
        """Bumped whenever something a runtime depends on changes (quotas, total, requests, builtin used):
        runtimes read at one version hold until it moves."""
        self.set_quotas(())

    # ----- structure -----

    def set_quotas(self, records: Iterable[QuotaRecord]) -> None:
        """Rebuild from valid quota records (see :func:`.validation.validate_tree`); re-charges every pod."""
        by_name = {r.name: r for r in records}
        root = QuotaNode(ROOT_QUOTA, None, {}, {}, {}, allow_lent=False, is_parent=True, builtin=True)
        nodes: dict[str, QuotaNode] = {ROOT_QUOTA: root}
        for name in (SYSTEM_QUOTA, DEFAULT_QUOTA):
            record = by_name.get(name)
            max_ = dict(record.max) if record is not None else dict(self._builtin_max.get(name, {}))
            nodes[name] = QuotaNode(name, root, {}, max_, {}, allow_lent=False, is_parent=False, builtin=True)
        for name, record in by_name.items():
            if name not in nodes:
                nodes[name] = QuotaNode(
                    name,
                    None,
                    record.min,
                    record.max,
                    record.shared_weight,
                    allow_lent=record.allow_lent,
                    is_parent=record.is_parent,
                )
        for name, node in nodes.items():
            if node.builtin:
                continue
            parent = nodes.get(by_name[name].parent, root)
            node.parent = parent
            parent.children.append(node)
        for node in nodes.values():
            node.children.sort(key=lambda n: n.name)
            node.upward = tuple(reversed(node.path_from_root()))
        self._initial_requests(root)
        keys: set[str] = set()
        for node in nodes.values():
            if not node.builtin:
                keys.update(node.max)
        self.nodes = nodes
        self.keys = tuple(sorted(keys))
        self._root_budget_dirty = True
        self.version += 1
        pods = self._pods
        self._pods = {}
        for key, entry in pods.items():
            self.upsert_pod(key, entry)

    def _initial_requests(self, node: QuotaNode) -> None:
        """Before any pod: non-lenders ask their min, and parents the sum of their children's limits."""
        child_request: Resources = {}
        for child in node.children:
            self._initial_requests(child)
            _add(child_request, child.limited, 1)
        if not node.builtin:
            node.child_request = child_request
            self._set_request(node, child_request)

    def set_total(self, total: Mapping[str, int]) -> None:
        """The cluster's allocatable (sum over nodes), the root's budget before builtin usage."""
        if dict(total) != self._total:
            self._total = dict(total)
            self.nodes[ROOT_QUOTA].stale = True
            self._root_budget_dirty = True
            self.version += 1

    def has(self, name: str) -> bool:
        return name in self.nodes and name != ROOT_QUOTA

    def node(self, name: str) -> QuotaNode:
        return self.nodes[name]

    # ----- pods -----

    def pod(self, key: str) -> PodEntry | None:
        return self._pods.get(key)

    def pods(self) -> Mapping[str, PodEntry]:
        return self._pods

    def upsert_pod(self, key: str, entry: PodEntry) -> None:
        """Charge a pod (replacing its previous charge). ``entry.quota`` must be a quota of the tree."""
        old = self._pods.get(key)
        if old == entry:
            return
        if old is not None:
            self._charge(old, -1)
        node = self.nodes.get(entry.quota)
        if node is None:
            node = self.nodes[DEFAULT_QUOTA]
            entry = PodEntry(DEFAULT_QUOTA, entry.request, entry.assigned, entry.non_preemptible)
        masked = {k: v for k, v in entry.request.items() if k in node.max and v}
        entry = PodEntry(entry.quota, masked, entry.assigned, entry.non_preemptible)
        self._pods[key] = entry
        self._charge(entry, +1)

    def remove_pod(self, key: str) -> PodEntry | None:
        old = self._pods.pop(key, None)
        if old is not None:
            self._charge(old, -1)
        return old

    def set_assigned(self, key: str, assigned: bool) -> bool:
        """Mark a charged pod assigned (Reserve) or not (Unreserve); False if the pod is unknown."""
        old = self._pods.get(key)
        if old is None:
            return False
        if old.assigned != assigned:
            entry = PodEntry(old.quota, old.request, assigned, old.non_preemptible)
            self._pods[key] = entry
            self._charge_used(entry, 1 if assigned else -1)
        return True

    def _charge(self, entry: PodEntry, sign: int) -> None:
        node = self.nodes[entry.quota]
        if entry.request:
            self.version += 1
        if node.builtin:
            _add(node.child_request, entry.request, sign)
            node.request = dict(node.child_request)
        else:
            self._add_child_request(node, entry.request, sign)
        if entry.assigned:
            self._charge_used(entry, sign)

    def _charge_used(self, entry: PodEntry, sign: int) -> None:
        node = self.nodes[entry.quota]
        if entry.quota in (SYSTEM_QUOTA, DEFAULT_QUOTA):
            self._root_budget_dirty = True  # their used is taken off the root's budget
            self.version += 1
        request = entry.request
        for walk in node.upward:
            used = walk.used
            for k, v in request.items():
                value = used.get(k, 0) + sign * v
                if value:
                    used[k] = value
                else:
                    del used[k]
            if entry.non_preemptible:
                _add(walk.non_preemptible_used, request, sign)

    def _add_child_request(self, node: QuotaNode, delta: Mapping[str, int], sign: int) -> None:
        step: Mapping[str, int] = {k: sign * v for k, v in delta.items()}
        walk: QuotaNode | None = node
        patches: list[tuple[QuotaNode, QuotaNode, Mapping[str, int]]] = []
        while walk is not None and walk.name != ROOT_QUOTA and step:
            before = walk.limited
            _add(walk.child_request, step, 1)
            self._set_request(walk, walk.child_request)
            step = {k: v - before.get(k, 0) for k, v in walk.limited.items() if v != before.get(k, 0)}
            step.update({k: -v for k, v in before.items() if k not in walk.limited and v})
            parent = walk.parent
            if step and parent is not None:
                patches.append((parent, walk, step))
                if parent.name == ROOT_QUOTA:
                    break
            walk = parent
        # A growing request is patched top-down (a parent's budget grows before its child takes from it),
        # a shrinking one bottom-up (a child gives back before its parent's budget shrinks); either way
        # the slack never dips below zero on the way.
        shrinking = sign < 0 or all(v <= 0 for v in delta.values())
        for parent, child, change in patches if shrinking else reversed(patches):
            self._patch_child(parent, child, change)

    def _patch_child(self, parent: QuotaNode, child: QuotaNode, step: Mapping[str, int]) -> None:
        """``child``'s limited request moved by ``step``: update its runtime in place if the parent's
        last split was contention-free and stays so, else mark the parent for a re-split."""
        if parent.stale or parent.slack is None:
            parent.stale = True
            return
        slack = dict(parent.slack)
        changes: list[tuple[str, int, int]] = []
        for key in step:
            if key not in slack:
                continue
            limited = child.limited.get(key, 0)
            minimum = child.min.get(key, 0)
            if limited > minimum and child.weight.get(key, 0) <= 0:
                parent.stale = True
                return
            want = limited if (limited > minimum or child.allow_lent) else minimum
            delta = want - child.runtime.get(key, 0)
            if delta:
                slack[key] -= delta
                if slack[key] < 0:
                    parent.stale = True
                    return
                changes.append((key, want, delta))
        parent.slack = slack
        for key, want, delta in changes:
            child.runtime[key] = want
            if child.children:
                self._budget_changed(child, key, delta)

    def _budget_changed(self, node: QuotaNode, key: str, delta: int) -> None:
        """``node``'s runtime (its children's budget) moved by ``delta`` in ``key``."""
        if node.stale or node.slack is None or key not in node.slack:
            node.stale = True
            return
        left = node.slack[key] + delta
        if left < 0 or node.min_sum.get(key, 0) > node.runtime.get(key, 0):
            node.stale = True
            return
        node.slack[key] = left

    @staticmethod
    def _set_request(node: QuotaNode, child_request: Mapping[str, int]) -> None:
        request = {k: v for k, v in child_request.items() if v}
        if not node.allow_lent:
            for k, v in node.min.items():
                if request.get(k, 0) < v:
                    request[k] = v
        node.request = request
        node.limited = {k: min(request.get(k, 0), m) for k, m in node.max.items() if min(request.get(k, 0), m)}

    # ----- runtime -----

    def root_budget(self) -> Resources:
        system, default = self.nodes[SYSTEM_QUOTA].used, self.nodes[DEFAULT_QUOTA].used
        return {k: self._total.get(k, 0) - system.get(k, 0) - default.get(k, 0) for k in self.keys}

    def runtime(self, name: str) -> Resources:
        """The quota's runtime for every resource of the tree, refreshing only its path."""
        node = self.nodes[name]
        if node.builtin:
            return dict(node.max)
        self._refresh_root()
        ancestor = node.parent
        while ancestor is not None and not ancestor.stale:
            ancestor = ancestor.parent
        if ancestor is not None:  # some split on the path is out of date: redo those, top-down
            for on_path in node.path_from_root()[:-1]:
                if on_path.stale:
                    self._split(on_path)
        return node.runtime

    def refresh_all(self) -> None:
        """Bring every quota's runtime up to date (top-down over out-of-date parents only)."""
        self._refresh_root()
        todo = [self.nodes[ROOT_QUOTA]]
        while todo:
            node = todo.pop()
            if node.stale:
                self._split(node)
            todo.extend(c for c in node.children if c.children)

    def _refresh_root(self) -> None:
        if not self._root_budget_dirty:
            return
        self._root_budget_dirty = False
        root = self.nodes[ROOT_QUOTA]
        budget = self.root_budget()
        if budget != root.runtime:
            before = root.runtime
            root.runtime = budget
            for key, amount in budget.items():
                if amount != before.get(key, 0):
                    self._budget_changed(root, key, amount - before.get(key, 0))

    def _split(self, parent: QuotaNode) -> None:
        children = parent.children
        names = [c.name for c in children]
        lends = [c.allow_lent for c in children]
        new_runtime: list[Resources] = [{} for _ in children]
        slack: Resources | None = {}
        for key in self.keys:
            budget = parent.runtime.get(key, 0)
            mins = [c.min.get(key, 0) for c in children]
            min_sum = sum(mins)
            if self.scale_min:
                mins = scale_mins(budget, mins)
            requests = [c.limited.get(key, 0) for c in children]
            weights = [c.weight.get(key, 0) for c in children]
            amounts = split_columns(budget, names, mins=mins, requests=requests, weights=weights, lends=lends)
            for rt, amount in zip(new_runtime, amounts, strict=True):
                rt[key] = amount
            # Contention-free: every child holds its request (or its min, not lending). A later change
            # is then patched in O(1) while the slack lasts. Lenders that all have a share get their
            # request whatever their (scaled) min, so for them a budget below the mins does not matter.
            if all(lends[i] and weights[i] > 0 for i in range(len(children))):
                min_sum = 0
            parent.min_sum[key] = min_sum
            satisfied = all(amounts[i] == requests[i] for i in range(len(children)) if requests[i] > mins[i])
            left = budget - sum(amounts)
            if slack is not None and satisfied and left >= 0 and min_sum <= budget:
                slack[key] = left
            else:
                slack = None
        parent.slack = slack
        for child, rt in zip(children, new_runtime, strict=True):
            if rt != child.runtime:
                child.runtime = rt
                if child.children:
                    child.stale = True
        parent.stale = False


def _add(target: Resources, delta: Mapping[str, int], sign: int) -> None:
    for k, v in delta.items():
        value = target.get(k, 0) + sign * v
        if value:
            target[k] = value
        else:
            target.pop(k, None)
