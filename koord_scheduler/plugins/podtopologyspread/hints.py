"""PodTopologySpread queueing hints (``podtopologyspread/plugin.go``, v1.35). Pure.

A pod this plugin rejected failed a ``DoNotSchedule`` constraint (its own, or a default one), so the
hints look only at those (``getConstraints``):

- :func:`after_pod_change`: Queue when an assigned pod of the waiting pod's namespace that a constraint's
  selector matches is added or deleted, when an assigned pod's label change flips whether some selector
  matches it, or when the waiting pod itself gained a toleration and a constraint honours taints.
- :func:`after_node_change`: Queue when a node carrying every constraint's key is added or deleted, when
  an update makes a node carry them all or no longer, or changes a key's value or the taints of a node
  that carries them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from apis.core.selectors import label_selector_matches
from apis.core.types import Node, Pod
from koord_scheduler.framework.types import QueueingHint
from koord_scheduler.plugins.podtopologyspread.policy import HONOR, Constraint

QUEUE = QueueingHint.QUEUE
SKIP = QueueingHint.SKIP


def involved_in_spreading(changed: Pod, waiting: Pod) -> bool:
    """``involvedInTopologySpreading``: the waiting pod itself, or an assigned pod of its namespace."""
    return changed.uid == waiting.uid or (bool(changed.node_name) and changed.namespace == waiting.namespace)


def labels_match_any(constraints: Sequence[Constraint], labels: Mapping[str, str]) -> bool:
    """``podLabelsMatchSpreadConstraints``."""
    return any(label_selector_matches(c.selector, labels) for c in constraints)


def node_has_all_keys(constraints: Sequence[Constraint], labels: Mapping[str, str]) -> bool:
    """``nodeLabelsMatchSpreadConstraints``."""
    return all(c.topology_key in labels for c in constraints)


def after_pod_change(waiting: Pod, constraints: Sequence[Constraint], old: Pod | None, new: Pod | None) -> QueueingHint:
    """``isSchedulableAfterPodChange`` for ``waiting`` and its hard ``constraints``."""
    if (new is not None and not involved_in_spreading(new, waiting)) or (
        old is not None and not involved_in_spreading(old, waiting)
    ):
        return SKIP
    if old is not None and new is not None:
        if (
            new.uid == waiting.uid
            and new.tolerations != old.tolerations
            and any(c.node_taints_policy == HONOR for c in constraints)
        ):
            return QUEUE
        if new.labels == old.labels:
            return SKIP
        flipped = any(
            label_selector_matches(c.selector, old.labels) != label_selector_matches(c.selector, new.labels)
            for c in constraints
        )
        return QUEUE if flipped else SKIP
    changed = new if new is not None else old
    if changed is None:
        return QUEUE
    return QUEUE if labels_match_any(constraints, changed.labels) else SKIP


def after_node_change(constraints: Sequence[Constraint], old: Node | None, new: Node | None) -> QueueingHint:
    """``isSchedulableAfterNodeChange``."""
    old_matching = old is not None and node_has_all_keys(constraints, old.labels)
    new_matching = new is not None and node_has_all_keys(constraints, new.labels)
    if old is not None and new is not None:
        if old_matching != new_matching:
            return QUEUE
        if new_matching and (
            any(old.labels.get(c.topology_key) != new.labels.get(c.topology_key) for c in constraints)
            or old.taints != new.taints
        ):
            return QUEUE
        return SKIP
    if new is not None:
        return QUEUE if new_matching else SKIP
    return QUEUE if old_matching else SKIP
