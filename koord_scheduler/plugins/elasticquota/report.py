"""The quota table ``koord-scheduler simulate`` prints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from apis.scheduling.elasticquota import ROOT_QUOTA, format_resources
from koord_scheduler.quota.forest import QuotaForest
from koord_scheduler.quota.validation import TreeProblem


def quota_rows(
    tree: QuotaForest, before: Mapping[str, Mapping[str, int]] | None, problems: Sequence[TreeProblem]
) -> list[dict[str, Any]]:
    """One row per quota (min, max, runtime, used ``before -> now``; built-in quotas only when used),
    then one per skipped quota with its problem. ``before`` None means nothing changed."""
    if before is None:
        before = {n: dict(x.used) for n, x in tree.nodes.items()}
    rows: list[dict[str, Any]] = []
    for name, node in sorted(tree.nodes.items()):
        if name == ROOT_QUOTA or (node.builtin and not node.used and not before.get(name)):
            continue
        rows.append(
            {
                "quota": name,
                "parent": node.parent.name if node.parent is not None else "",
                "min": format_resources(node.min),
                "max": "unlimited" if node.builtin else format_resources(node.max),
                "runtime": "max" if node.builtin else format_resources(node.runtime),
                "used": f"{format_resources(before.get(name, {}))} -> {format_resources(node.used)}",
            }
        )
    for problem in problems:
        rows.append(
            {
                "quota": problem.quota,
                "parent": "",
                "min": "",
                "max": "",
                "runtime": "",
                "used": f"skipped: {problem.message}",
            }
        )
    return rows
