"""Render the few Helm template constructs Koordinator's chart files use, so tests can parse them.

Supported: ``{{ .Values.a.b }}``, ``{{- if COND }}`` / ``{{- else }}`` / ``{{- end }}`` where COND is
``.Values.path``, ``contains "S" .Values.path`` or ``semverCompare ...`` (false: we target recent
Kubernetes), ``{{- with .Values.path }}`` and ``toYaml X | indent N`` / ``nindent N``. Anything else
raises, so a chart change cannot be silently mis-rendered.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[2] / "fixtures" / "koordinator" / "chart-v1.8.0"
FIXTURES = CHART.parent
_ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}")


def chart_values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    return values


def _lookup(path: str, values: dict[str, Any], dot: Any) -> Any:
    if path == ".":
        return dot
    if not path.startswith(".Values."):
        raise ValueError(f"unsupported reference {path!r}")
    node: Any = values
    for key in path.removeprefix(".Values.").split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _to_yaml(value: Any, pipe: str) -> str:
    text = yaml.safe_dump(value, sort_keys=False).rstrip("\n")
    match = re.fullmatch(r"(n?indent)\s+(\d+)", pipe.strip())
    if not match:
        raise ValueError(f"unsupported pipe {pipe!r}")
    pad = " " * int(match.group(2))
    body = "\n".join(pad + line for line in text.splitlines())
    return ("\n" + body) if match.group(1) == "nindent" else body


def _condition(expr: str, values: dict[str, Any], dot: Any) -> bool:
    if expr.startswith("semverCompare"):
        return False
    contains = re.fullmatch(r'contains\s+"([^"]*)"\s+(\S+)', expr)
    if contains:
        return contains.group(1) in str(_lookup(contains.group(2), values, dot) or "")
    return bool(_lookup(expr, values, dot))


def _substitute(match: re.Match[str], *, values: dict[str, Any], dot: Any) -> str:
    return _expression(match.group(1), values, dot)


def _expression(expr: str, values: dict[str, Any], dot: Any) -> str:
    if expr.startswith("toYaml"):
        arg, _, pipe = expr.removeprefix("toYaml").partition("|")
        return _to_yaml(_lookup(arg.strip(), values, dot), pipe)
    value = _lookup(expr, values, dot)
    if value is None:
        raise ValueError(f"{expr!r} is not set in values.yaml")
    return str(value)


def render(text: str, values: dict[str, Any] | None = None) -> str:
    """The template with control lines evaluated and expressions substituted."""
    values = chart_values() if values is None else values
    out: list[str] = []
    # stack of (emitting, branch taken, previous dot)
    stack: list[tuple[bool, bool, Any]] = []
    emitting, dot = True, None
    for line in text.splitlines():
        control = re.fullmatch(r"\s*\{\{-?\s*(if|else|end|with)\b\s*(.*?)\s*-?\}\}\s*", line)
        if control:
            word, expr = control.groups()
            if word in ("if", "with"):
                value = _condition(expr, values, dot) if word == "if" else _lookup(expr, values, dot)
                stack.append((emitting, bool(value), dot))
                if word == "with" and value:
                    dot = value
                emitting = emitting and bool(value)
            elif word == "else":
                parent, taken, _ = stack[-1]
                emitting = parent and not taken
            else:
                emitting, _, dot = stack.pop()
            continue
        if emitting:
            out.append(_ACTION.sub(partial(_substitute, values=values, dot=dot), line))
    if stack:
        raise ValueError("unbalanced if/with/end")
    return "\n".join(out) + "\n"


def chart_scheduler_config() -> dict[str, Any]:
    """The KubeSchedulerConfiguration inside the chart's koord-scheduler-config ConfigMap, rendered."""
    configmap = yaml.safe_load(render((CHART / "koord-scheduler-config.yaml").read_text()))
    config: dict[str, Any] = yaml.safe_load(configmap["data"]["koord-scheduler-config"])
    return config
