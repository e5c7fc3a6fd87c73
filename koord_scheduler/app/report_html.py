"""``simulate --report FILE.html``: one self-contained HTML page of a simulation, for people who look before
they read.

- **Nodes**: one chart per resource (CPU, memory, and every GPU-like extended resource the nodes have), one
  horizontal bar per node: what was requested before the run (dark), what the run added (light), over the
  node's allocatable (the bar's full width); the percentage after the run at the end.
- **Pending pods**, grouped by the reason they were not placed (kube-scheduler's FitError text), largest
  group first; then the pods that were placed, by node.
- **Quotas**, **reservations**, **gangs** and the **node load** columns (NodeMetrics: usage and estimate
  next to requests), when the run has them: the sections ``simulate`` prints as tables.
- The input problems, if any.

Inline SVG and CSS only: no script, no font or stylesheet from the network, so the file opens offline and
anywhere. Every text from the cluster file is escaped. Bars carry ``data-node`` / ``data-resource``
attributes (tests count them).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from apis.core.quantity import format_quantity
from apis.core.types import CPU, MEMORY
from koord_scheduler.app.simulate import NodeAllocation, PodPlacement, SimulationResult

BAR_WIDTH = 420
BAR_HEIGHT = 18
ROW_HEIGHT = 26
LABEL_WIDTH = 150
VALUE_WIDTH = 230

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px; color: #1f2328;
       background: #ffffff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.sub { color: #57606a; margin: 0 0 16px; }
.tiles { display: flex; gap: 12px; flex-wrap: wrap; }
.tile { border: 1px solid #d0d7de; border-radius: 6px; padding: 10px 14px; min-width: 120px; }
.tile b { display: block; font-size: 22px; } .tile.bad b { color: #cf222e; } .tile.good b { color: #1a7f37; }
.charts { display: flex; gap: 28px; flex-wrap: wrap; }
.chart h3 { font-size: 14px; margin: 8px 0 4px; }
table { border-collapse: collapse; font-size: 13px; margin: 4px 0 8px; }
th, td { border-bottom: 1px solid #d8dee4; padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
.reason { background: #fff8c5; border-left: 4px solid #d4a72c; padding: 6px 10px; margin: 10px 0 4px;
          font-size: 13px; white-space: pre-wrap; }
.pods { font-size: 13px; margin: 0 0 8px 14px; color: #57606a; }
.legend span { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px; vertical-align: -2px; }
svg text { font-size: 12px; fill: #1f2328; }
"""

_BEFORE, _ADDED, _TRACK, _OVER = "#0969da", "#54aeff", "#eaeef2", "#cf222e"


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def chart_resources(nodes: Sequence[NodeAllocation]) -> list[str]:
    """CPU and memory, then every resource with ``gpu`` in its name that some node can allocate (their
    memory and ratio variants left out: the count or core says whether a GPU is taken), sorted."""
    names = {n for a in nodes for n, v in a.allocatable.items() if v}
    gpus = sorted(n for n in names if "gpu" in n and "memory" not in n and "ratio" not in n)
    return [CPU, MEMORY, *gpus]


def _bar_chart(resource: str, before: Sequence[NodeAllocation], after: Mapping[str, NodeAllocation]) -> str:
    rows = [b for b in before if b.allocatable.get(resource, 0) or after.get(b.name, b).requested.get(resource, 0)]
    if not rows:
        return ""
    height = ROW_HEIGHT * len(rows) + 6
    width = LABEL_WIDTH + BAR_WIDTH + VALUE_WIDTH
    parts = [
        f'<svg class="bars" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'data-resource="{_e(resource)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{_e(resource)} requested per node, before and after</title>",
    ]
    for i, b in enumerate(rows):
        a = after.get(b.name, b)
        allocatable = b.allocatable.get(resource, 0)
        was, now = b.requested.get(resource, 0), a.requested.get(resource, 0)
        y = 3 + i * ROW_HEIGHT
        scale = BAR_WIDTH / allocatable if allocatable else 0.0
        was_w = min(BAR_WIDTH, was * scale)
        now_w = min(BAR_WIDTH, now * scale)
        over = bool(allocatable) and now > allocatable
        pct = f"{100 * now / allocatable:.0f}%" if allocatable else "no allocatable"
        value = (
            f"{format_quantity(resource, was)} \u2192 {format_quantity(resource, now)} / "
            f"{format_quantity(resource, allocatable)} ({pct})"
        )
        parts.append(
            f'<g class="node-bar" data-node="{_e(b.name)}" data-resource="{_e(resource)}" '
            f'data-before="{was}" data-after="{now}" data-allocatable="{allocatable}">'
            f'<text x="0" y="{y + 13}">{_e(b.name)}</text>'
            f'<rect x="{LABEL_WIDTH}" y="{y}" width="{BAR_WIDTH}" height="{BAR_HEIGHT}" rx="3" fill="{_TRACK}"/>'
            f'<rect class="added" x="{LABEL_WIDTH}" y="{y}" width="{now_w:.1f}" height="{BAR_HEIGHT}" rx="3" '
            f'fill="{_OVER if over else _ADDED}"/>'
            f'<rect class="before" x="{LABEL_WIDTH}" y="{y}" width="{was_w:.1f}" height="{BAR_HEIGHT}" rx="3" '
            f'fill="{_BEFORE}"/>'
            f'<text x="{LABEL_WIDTH + BAR_WIDTH + 8}" y="{y + 13}">{_e(value)}</text>'
            f"<title>{_e(b.name)}: {_e(value)}</title></g>"
        )
    parts.append("</svg>")
    title = {CPU: "CPU", MEMORY: "Memory"}.get(resource, resource)
    return f'<div class="chart"><h3>{_e(title)}</h3>{"".join(parts)}</div>'


def _table(rows: Sequence[Mapping[str, Any]], *, css_class: str = "") -> str:
    if not rows:
        return ""
    keys = list(rows[0].keys())
    head = "".join(f"<th>{_e(k)}</th>" for k in keys)
    body = "".join("<tr>" + "".join(f"<td>{_e(_cell(r.get(k)))}</td>" for k in keys) + "</tr>" for r in rows)
    return f'<table class="{css_class}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _cell(value: Any) -> str:
    if value is None:
        return "\u2014"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value) or "\u2014"
    return str(value)


def _pending(placements: Sequence[PodPlacement]) -> str:
    groups: dict[str, list[str]] = {}
    for p in placements:
        if p.node is None:
            groups.setdefault(p.message or "not attempted", []).append(f"{p.namespace}/{p.name}")
    if not groups:
        return "<p>Every pending pod was placed.</p>"
    out = []
    for reason, pods in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0])):
        out.append(
            f'<div class="pending-group" data-pods="{len(pods)}"><div class="reason">'
            f"<b>{len(pods)} pod{'s' if len(pods) != 1 else ''}</b>: {_e(reason)}</div>"
            f'<div class="pods">{_e(", ".join(pods))}</div></div>'
        )
    return "".join(out)


def _placed(placements: Sequence[PodPlacement]) -> str:
    by_node: dict[str, list[str]] = {}
    for p in placements:
        if p.node is not None:
            by_node.setdefault(p.node, []).append(f"{p.namespace}/{p.name}")
    rows = [{"node": n, "pods placed": ", ".join(pods)} for n, pods in sorted(by_node.items())]
    return _table(rows)


def _section(title: str, body: str) -> str:
    return f"<section><h2>{_e(title)}</h2>{body}</section>" if body else ""


def render_report(result: SimulationResult, *, source: str, now: float) -> str:
    """The page for ``result`` (``source``: what was simulated, shown in the header; ``now``: the
    simulation's time)."""
    placed = sum(1 for p in result.placements if p.node)
    pending = len(result.placements) - placed
    after = {a.name: a for a in result.after}
    charts = "".join(_bar_chart(r, result.before, after) for r in chart_resources(result.before))
    legend = (
        f'<p class="legend"><span style="background:{_BEFORE}"></span>requested before this run'
        f'<span style="background:{_ADDED}"></span>added by this run'
        f'<span style="background:{_OVER}"></span>over allocatable'
        " \u2014 a bar's full width is the node's allocatable</p>"
    )
    tiles = (
        f'<div class="tiles"><div class="tile good"><b>{placed}</b>placed</div>'
        f'<div class="tile{" bad" if pending else ""}"><b>{pending}</b>not placed</div>'
        f'<div class="tile"><b>{len(result.before)}</b>nodes</div>'
        f'<div class="tile{" bad" if result.problems else ""}"><b>{len(result.problems)}</b>input problems</div></div>'
    )
    extra = []
    for title, rows in result.extra_sections.items():
        if isinstance(rows, list) and rows and isinstance(rows[0], Mapping):
            extra.append(_section(_pretty(title), _table(rows)))
    problems = "".join(f"<li>{_e(p)}</li>" for p in result.problems)
    when = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>koord-scheduler simulate: {_e(source)}</title><style>{_CSS}</style></head><body>"
        f'<h1>koord-scheduler simulate</h1><p class="sub">{_e(source)} \u2014 simulated at {_e(when)}</p>'
        f"{tiles}"
        + _section("Nodes: requested before \u2192 after", legend + f'<div class="charts">{charts}</div>')
        + _section("Pending pods by reason", _pending(result.placements))
        + _section("Placed pods", _placed(result.placements))
        + "".join(extra)
        + _section("Problems in the input", f"<ul>{problems}</ul>" if problems else "")
        + "</body></html>\n"
    )


_TITLES = {"ElasticQuotas": "Quotas (ElasticQuota)", "Reservations": "Reservations", "gangs": "Gangs (Coscheduling)"}


def _pretty(title: str) -> str:
    return _TITLES.get(title, title[:1].upper() + title[1:])
