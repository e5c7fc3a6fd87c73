"""Several quota trees, one per ``quota.scheduling.koordinator.sh/tree-id`` (Koordinator's multi-quota-tree,
pkg/scheduler/plugins/elasticquota quota_handler.go: one GroupQuotaManager per tree id).

- Quotas without a tree id, and the system and default quotas, form the default tree (id ``""``); a quota
  without a tree id below a parent that has one belongs to its parent's tree.
- Every other tree's budget is the ``total-resource`` annotation of its root quota (the one labelled
  ``is-root: "true"``); none yet means an empty budget. The default tree's budget is the cluster's
  allocatable minus the totals of the other trees, except those whose root quota is labelled
  ``ignore-default-tree: "true"``.
- A pod is charged in the tree of its quota; pods of the system and default quotas in the default tree.

:class:`QuotaForest` answers the same questions as :class:`~.tree.QuotaTree` (quota names are cluster-wide),
so the plugin and the status controller use it in its place. With no tree id anywhere it is one tree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from apis.scheduling.elasticquota import BUILTIN_QUOTAS, ROOT_QUOTA, QuotaRecord
from koord_scheduler.quota.tree import PodEntry, QuotaNode, QuotaTree, Resources

DEFAULT_TREE = ""


def tree_ids(records: Mapping[str, QuotaRecord]) -> dict[str, str]:
    """Each quota's tree: its own ``tree-id``, else the nearest ancestor's, else the default tree."""
    out: dict[str, str] = {}
    for name in records:
        walk: str | None = name
        seen: set[str] = set()
        tree = DEFAULT_TREE
        while walk is not None and walk not in seen and walk not in BUILTIN_QUOTAS:
            seen.add(walk)
            record = records.get(walk)
            if record is None:
                break
            if record.tree_id:
                tree = record.tree_id
                break
            walk = record.parent
        out[name] = DEFAULT_TREE if name in BUILTIN_QUOTAS else tree
    return out


def tree_totals(records: Iterable[QuotaRecord], trees: Mapping[str, str]) -> dict[str, tuple[Resources, bool]]:
    """Per tree other than the default one: its root quota's ``total-resource`` and whether the default
    tree keeps it (``ignore-default-tree``). The first root quota by name that carries a total counts."""
    out: dict[str, tuple[Resources, bool]] = {}
    for record in sorted(records, key=lambda r: r.name):
        tree = trees.get(record.name, DEFAULT_TREE)
        if tree == DEFAULT_TREE or not record.is_root or record.total_resource is None or tree in out:
            continue
        out[tree] = (dict(record.total_resource), record.ignore_default_tree)
    return out


class QuotaForest:
    """The quota trees of the cluster, behind :class:`~.tree.QuotaTree`'s interface."""

    def __init__(self, *, scale_min: bool = True, builtin_max: Mapping[str, Mapping[str, int]] | None = None):
        self._scale_min = scale_min
        self._builtin_max = dict(builtin_max or {})
        self.trees: dict[str, QuotaTree] = {DEFAULT_TREE: self._new_tree()}
        self._tree_of_quota: dict[str, str] = {}
        self._tree_of_pod: dict[str, str] = {}
        self._totals: dict[str, tuple[Resources, bool]] = {}
        self._cluster_total: Resources = {}
        self._base_version = 0
        self.nodes: dict[str, QuotaNode] = dict(self.trees[DEFAULT_TREE].nodes)
        """Every quota's node (the built-in ones from the default tree), by name."""
        self.keys: tuple[str, ...] = self.trees[DEFAULT_TREE].keys

    def _new_tree(self) -> QuotaTree:
        return QuotaTree(scale_min=self._scale_min, builtin_max=self._builtin_max)

    @property
    def version(self) -> int:
        """Moves whenever a runtime in any tree may have changed (see :attr:`.tree.QuotaTree.version`)."""
        if len(self.trees) == 1:
            return self._base_version + self.trees[DEFAULT_TREE].version
        return self._base_version + sum(t.version for t in self.trees.values())

    def tree_of(self, quota: str) -> QuotaTree:
        return self.trees.get(self._tree_of_quota.get(quota, DEFAULT_TREE)) or self.trees[DEFAULT_TREE]

    def tree_id(self, quota: str) -> str:
        return self._tree_of_quota.get(quota, DEFAULT_TREE)

    # ----- structure -----

    def set_quotas(self, records: Iterable[QuotaRecord]) -> None:
        """Rebuild every tree from valid quota records; pods stay and are charged again."""
        before = self.version
        by_name = {r.name: r for r in records}
        trees = tree_ids(by_name)
        grouped: dict[str, list[QuotaRecord]] = {DEFAULT_TREE: []}
        for name, record in by_name.items():
            grouped.setdefault(trees[name], []).append(record)
        pods = {key: entry for tree in self.trees.values() for key, entry in tree.pods().items()}
        self.trees = {}
        for tree_id, members in sorted(grouped.items()):
            tree = self._new_tree()
            tree.set_quotas(members)
            self.trees[tree_id] = tree
        self._tree_of_quota = trees
        self._totals = tree_totals(by_name.values(), trees)
        nodes = dict(self.trees[DEFAULT_TREE].nodes)
        keys: set[str] = set()
        for tree_id, tree in self.trees.items():
            keys.update(tree.keys)
            if tree_id != DEFAULT_TREE:
                nodes.update((n, x) for n, x in tree.nodes.items() if not x.builtin)
        self.nodes = nodes
        self.keys = tuple(sorted(keys))
        self._base_version = before + 1
        self._tree_of_pod = {}
        for key, entry in pods.items():
            self.upsert_pod(key, entry)
        self._apply_totals()

    def set_total(self, total: Mapping[str, int]) -> None:
        """The cluster's allocatable; shared out as the module docstring says."""
        self._cluster_total = dict(total)
        self._apply_totals()

    def _apply_totals(self) -> None:
        default = dict(self._cluster_total)
        for tree_id, tree in self.trees.items():
            if tree_id == DEFAULT_TREE:
                continue
            total, keep_default = self._totals.get(tree_id, ({}, True))
            tree.set_total(total)
            if not keep_default:
                for k, v in total.items():
                    default[k] = default.get(k, 0) - v
        self.trees[DEFAULT_TREE].set_total(default)

    def has(self, name: str) -> bool:
        return name in self.nodes and name != ROOT_QUOTA

    def node(self, name: str) -> QuotaNode:
        return self.nodes[name]

    # ----- pods -----

    def pod(self, key: str) -> PodEntry | None:
        tree = self.trees.get(self._tree_of_pod.get(key, DEFAULT_TREE))
        return tree.pod(key) if tree is not None else None

    def pods_of(self, quota: str) -> list[tuple[str, PodEntry]]:
        """The pods charged to ``quota`` (a scan of its tree's pods)."""
        return [(k, e) for k, e in self.tree_of(quota).pods().items() if e.quota == quota]

    def upsert_pod(self, key: str, entry: PodEntry) -> None:
        tree_id = self._tree_of_quota.get(entry.quota, DEFAULT_TREE)
        if tree_id not in self.trees:
            tree_id = DEFAULT_TREE
        old = self._tree_of_pod.get(key)
        if old is not None and old != tree_id:
            self.trees[old].remove_pod(key)
        self._tree_of_pod[key] = tree_id
        self.trees[tree_id].upsert_pod(key, entry)

    def remove_pod(self, key: str) -> PodEntry | None:
        tree_id = self._tree_of_pod.pop(key, None)
        if tree_id is None:
            return None
        return self.trees[tree_id].remove_pod(key)

    def set_assigned(self, key: str, assigned: bool) -> bool:
        tree = self.trees.get(self._tree_of_pod.get(key, DEFAULT_TREE))
        return tree is not None and tree.set_assigned(key, assigned)

    # ----- runtime -----

    def runtime(self, name: str) -> Resources:
        return self.tree_of(name).runtime(name)

    def refresh_all(self) -> None:
        for tree in self.trees.values():
            tree.refresh_all()
