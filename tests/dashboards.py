"""The chart's Grafana dashboards as tests read them: the PromQL of every panel, the metric names it queries,
and the metric names a ``/metrics`` page offers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

DASHBOARDS = Path(__file__).resolve().parents[1] / "charts" / "pykoord" / "dashboards"

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_KEYWORDS = frozenset({"and", "or", "unless", "offset", "bool", "by", "without", "on", "ignoring", "inf", "nan"})


def dashboard(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DASHBOARDS / name).read_text())
    return loaded


def exprs(board: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in board["panels"] for t in p.get("targets", [])]


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers that are not functions (followed by ``(``),
    keywords, label names (inside ``{}``, ``by (...)``) or durations."""
    text = _STRINGS.sub('""', expr)
    text = _MATCHERS.sub("", text)
    text = _RANGES.sub("", text)
    text = _GROUPING.sub("", text)
    names = set()
    for match in _IDENT.finditer(text):
        rest = text[match.end() :].lstrip()
        word = match.group(0)
        if rest.startswith("(") or word.lower() in _KEYWORDS:
            continue
        names.add(word)
    return names


def offered(exposition: str) -> set[str]:
    """Every series name a Prometheus text page offers, counting metrics that have no sample yet (a labelled
    metric shows only its ``# TYPE`` line until a series is recorded): histograms as ``_bucket``, ``_sum``
    and ``_count``."""
    names: set[str] = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(None, 3)
            names.add(name)
            if kind.strip() == "histogram":
                names.update({f"{name}_bucket", f"{name}_sum", f"{name}_count"})
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{\s]", line, maxsplit=1)[0])
    return names
