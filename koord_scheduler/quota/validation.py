"""Quota-tree validation: which ElasticQuotas form a usable tree, and why the others do not.

A pure function over the quota records, used by the plugin and the status controller (an admission
webhook can call it too). Invalid quotas are skipped rather than fatal: the caller reports each problem as
an Event on the quota and schedules its pods as if the quota did not exist (they fall into the default
quota, as Koordinator does for an unknown quota name).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from apis.core.quantity import format_quantity
from apis.scheduling.elasticquota import BUILTIN_QUOTAS, ROOT_QUOTA, QuotaRecord


@dataclass(frozen=True, slots=True)
class TreeProblem:
    """Why ``quota`` (in ``namespace``) was left out of the tree."""

    quota: str
    namespace: str
    message: str


def validate_tree(records: Iterable[QuotaRecord]) -> tuple[dict[str, QuotaRecord], list[TreeProblem]]:
    """The quotas that form a valid tree (by name), and a problem for each one left out.

        Rules (those of Koordinator's quota webhook that concern the tree's shape and numbers): names are
        unique cluster-wide; min and max are non-negative and ``min <= max`` per resource; the parent exists,
        is a parent quota (``is-parent: "true"``) and is itself valid; a quota with a ``tree-id`` has its parent's
    (one without inherits it, as Koordinator's webhook fills it in); no cycles; below the root, the
        children's mins add up to at most the parent's min (children are admitted in name order, and the one
        that would break the sum is left out). Built-in quotas (root, system, default) are kept as given.
    """
    problems: list[TreeProblem] = []
    by_name: dict[str, QuotaRecord] = {}
    for record in sorted(records, key=lambda r: (r.name, r.meta.namespace)):
        if record.name in by_name:
            problems.append(
                _problem(
                    record,
                    f"another quota named {record.name} exists in namespace "
                    f"{by_name[record.name].meta.namespace}; quota names are cluster-wide",
                )
            )
            continue
        message = numbers_problem(record)
        if message:
            problems.append(_problem(record, message))
            continue
        by_name[record.name] = record

    valid: dict[str, QuotaRecord] = {}
    state: dict[str, str] = {}  # name -> "ok" | "bad"
    for name in sorted(by_name):
        _resolve(name, by_name, state, problems)
    for name, verdict in state.items():
        if verdict == "ok":
            valid[name] = by_name[name]

    children: dict[str, list[QuotaRecord]] = {}
    for record in valid.values():
        if record.name not in BUILTIN_QUOTAS:
            children.setdefault(record.parent, []).append(record)
    dropped: set[str] = set()
    for parent_name in sorted(children):
        if parent_name == ROOT_QUOTA or parent_name not in valid:
            continue
        parent = valid[parent_name]
        running: dict[str, int] = {}
        for child in sorted(children[parent_name], key=lambda r: r.name):
            over = min_sum_over(parent, (running, child.min))
            if over is not None:
                problems.append(_problem(child, min_sum_message(parent, *over)))
                dropped.add(child.name)
                continue
            for k, v in child.min.items():
                running[k] = running.get(k, 0) + v
    if dropped:
        valid = _without_subtrees(valid, dropped, problems)
    return valid, problems


def min_sum_over(parent: QuotaRecord, child_mins: Iterable[Mapping[str, int]]) -> tuple[str, int] | None:
    """The first resource (by name) whose sum over ``child_mins`` is above ``parent``'s min, and that sum.

    Every resource named in a child's min counts; one missing from the parent's min is 0 there (Koordinator's
    webhook: ``LessThanOrEqualCompletely(sum of children's min, parent's min)``). None: the children fit."""
    total: dict[str, int] = {}
    for mins in child_mins:
        for key, amount in mins.items():
            total[key] = total.get(key, 0) + amount
    for key in sorted(total):
        if total[key] > parent.min.get(key, 0):
            return key, total[key]
    return None


def min_sum_message(parent: QuotaRecord, key: str, total: int) -> str:
    return (
        f"children's min of {key} would add up to {format_quantity(key, total)}, above the min of parent quota "
        f"{parent.name} ({format_quantity(key, parent.min.get(key, 0))})"
    )


def numbers_problem(record: QuotaRecord) -> str:
    """What is wrong with the quota's own numbers (negative, or min above max), or ``""``."""
    for label, resources in (("min", record.min), ("max", record.max)):
        for key, amount in sorted(resources.items()):
            if amount < 0:
                return f"spec.{label}.{key} must be non-negative, got {format_quantity(key, amount)}"
    for key, amount in sorted(record.min.items()):
        if key in record.max and amount > record.max[key]:
            return (
                f"spec.min.{key} ({format_quantity(key, amount)}) is above spec.max.{key} "
                f"({format_quantity(key, record.max[key])})"
            )
    return ""


def _resolve(name: str, by_name: Mapping[str, QuotaRecord], state: dict[str, str], problems: list[TreeProblem]) -> str:
    """Walk up from ``name`` and decide every quota on the way (cycles, missing or bad parents)."""
    chain: list[str] = []
    seen: set[str] = set()
    current = name
    verdict = "ok"
    reason = ""
    while True:
        if current in state:
            verdict = state[current]
            if verdict == "bad":
                reason = f"parent quota {current} is invalid"
            break
        record = by_name[current]
        if current in BUILTIN_QUOTAS or record.parent == ROOT_QUOTA:
            chain.append(current)
            break
        if current in seen:
            cycle = [*chain[chain.index(current) :], current]
            for member in set(cycle):
                state[member] = "bad"
                problems.append(_problem(by_name[member], f"quota parents form a cycle: {' -> '.join(cycle)}"))
            chain = [c for c in chain if c not in set(cycle)]
            verdict, reason = "bad", f"parent quota {current} is in a cycle"
            break
        seen.add(current)
        chain.append(current)
        parent = by_name.get(record.parent)
        if parent is None:
            state[current] = "bad"
            problems.append(_problem(record, f"parent quota {record.parent} does not exist"))
            chain.pop()
            verdict, reason = "bad", f"parent quota {current} is invalid"
            break
        if not parent.is_parent:
            state[current] = "bad"
            problems.append(_problem(record, f'parent quota {record.parent} is not labelled is-parent="true"'))
            chain.pop()
            verdict, reason = "bad", f"parent quota {current} is invalid"
            break
        if record.tree_id and record.tree_id != parent.tree_id:
            state[current] = "bad"
            problems.append(
                _problem(
                    record,
                    f"tree id {record.tree_id!r} is different from that of parent quota {record.parent} "
                    f"({parent.tree_id!r})",
                )
            )
            chain.pop()
            verdict, reason = "bad", f"parent quota {current} is invalid"
            break
        current = record.parent
    for member in reversed(chain):
        if member in state:
            continue
        state[member] = verdict
        if verdict == "bad":
            problems.append(_problem(by_name[member], reason))
            reason = f"parent quota {member} is invalid"
    return state[name]


def _without_subtrees(
    valid: dict[str, QuotaRecord], dropped: set[str], problems: list[TreeProblem]
) -> dict[str, QuotaRecord]:
    kept: dict[str, QuotaRecord] = {}
    for name, record in sorted(valid.items()):
        if name in dropped:
            continue
        ancestor = record.parent
        bad = ""
        while ancestor and ancestor != ROOT_QUOTA and ancestor in valid:
            if ancestor in dropped:
                bad = ancestor
                break
            ancestor = valid[ancestor].parent
        if bad:
            problems.append(_problem(record, f"ancestor quota {bad} is invalid"))
            continue
        kept[name] = record
    return kept


def _problem(record: QuotaRecord, message: str) -> TreeProblem:
    return TreeProblem(record.name, record.meta.namespace, message)
