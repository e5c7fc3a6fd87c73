"""Reading upstream kube-scheduler's decisions from its klog text output at ``-v=10``.

The lines come from ``pkg/scheduler/schedule_one.go`` (v1.35.8): ``prioritizeNodes`` logs, at V(10),
``"Plugin scored node for pod"`` for every (node, plugin) with the weighted, normalised score, then
``"Calculated node's final score for pod"`` per node. ``schedulePod`` skips scoring when exactly one
node is feasible, so the bound node (``"Successfully bound pod to node"``, V(2), with ``feasibleNodes``)
is then the feasible set.
"""

from __future__ import annotations

import re
from pathlib import Path

from koord_side import Decision

_PLUGIN_SCORE = re.compile(
    r'"Plugin scored node for pod" pod="(?P<pod>[^"]+)" plugin="(?P<plugin>[^"]+)" '
    r'node="(?P<node>[^"]+)" score=(?P<score>-?\d+)'
)
_FINAL_SCORE = re.compile(
    r'"Calculated node\'s final score for pod" pod="(?P<pod>[^"]+)" node="(?P<node>[^"]+)" score=(?P<score>-?\d+)'
)
_BOUND = re.compile(
    r'"Successfully bound pod to node" pod="(?P<pod>[^"]+)" node="(?P<node>[^"]+)" '
    r"evaluatedNodes=(?P<evaluated>\d+) feasibleNodes=(?P<feasible>\d+)"
)


def bound_line_seen(log_path: Path, offset: int, pod_key: str) -> bool:
    return any(m["pod"] == pod_key for m in _BOUND.finditer(_read_from(log_path, offset)))


def upstream_decision(log_path: Path, offset: int, pod_key: str, *, message: str = "") -> Decision:
    """The decision logged for ``pod_key`` after byte ``offset`` of the log (one scheduling attempt)."""
    text = _read_from(log_path, offset)
    out = Decision(message=message)
    for m in _PLUGIN_SCORE.finditer(text):
        if m["pod"] == pod_key:
            out.plugin_scores.setdefault(m["node"], {})[m["plugin"]] = int(m["score"])
    for m in _FINAL_SCORE.finditer(text):
        if m["pod"] == pod_key:
            out.totals[m["node"]] = int(m["score"])
    for m in _BOUND.finditer(text):
        if m["pod"] == pod_key:
            out.node = m["node"]
            if int(m["feasible"]) == 1:
                out.feasible = {m["node"]}
    if out.totals:
        out.feasible = set(out.totals)
    return out


def _read_from(log_path: Path, offset: int) -> str:
    with log_path.open("rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")
