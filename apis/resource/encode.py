""":mod:`apis.resource.types` -> the JSON the API server takes (what the scheduler writes into a claim's
status at PreBind). Pure functions; the inverse of :mod:`apis.resource.parse` for these fragments."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from apis.core.types import NodeSelectorTerm, SelectorRequirement
from apis.resource.types import AllocationResult, DeviceConfig, DeviceResult, DeviceToleration


def _requirement(r: SelectorRequirement) -> dict[str, Any]:
    out: dict[str, Any] = {"key": r.key, "operator": str(r.operator)}
    if r.values:
        out["values"] = list(r.values)
    return out


def node_selector_json(terms: tuple[NodeSelectorTerm, ...]) -> dict[str, Any]:
    out = []
    for term in terms:
        entry: dict[str, Any] = {}
        if term.match_expressions:
            entry["matchExpressions"] = [_requirement(r) for r in term.match_expressions]
        if term.match_fields:
            entry["matchFields"] = [_requirement(r) for r in term.match_fields]
        out.append(entry)
    return {"nodeSelectorTerms": out}


def _toleration(t: DeviceToleration) -> dict[str, Any]:
    out: dict[str, Any] = {"operator": t.operator}
    for key, value in (("key", t.key), ("value", t.value), ("effect", t.effect)):
        if value:
            out[key] = value
    if t.toleration_seconds is not None:
        out["tolerationSeconds"] = t.toleration_seconds
    return out


def _result(r: DeviceResult) -> dict[str, Any]:
    out: dict[str, Any] = {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
    if r.admin_access is not None:
        out["adminAccess"] = r.admin_access
    if r.tolerations:
        out["tolerations"] = [_toleration(t) for t in r.tolerations]
    if r.binding_conditions:
        out["bindingConditions"] = list(r.binding_conditions)
    if r.binding_failure_conditions:
        out["bindingFailureConditions"] = list(r.binding_failure_conditions)
    return out


def _config(c: DeviceConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"source": c.source, "opaque": json.loads(c.opaque_json)}
    if c.requests:
        out["requests"] = list(c.requests)
    return out


def allocation_json(allocation: AllocationResult) -> dict[str, Any]:
    """``status.allocation`` for ``allocation``."""
    devices: dict[str, Any] = {"results": [_result(r) for r in allocation.results]}
    if allocation.config:
        devices["config"] = [_config(c) for c in allocation.config]
    out: dict[str, Any] = {"devices": devices}
    if allocation.node_selector is not None:
        out["nodeSelector"] = node_selector_json(allocation.node_selector)
    if allocation.allocation_timestamp is not None:
        out["allocationTimestamp"] = datetime.fromtimestamp(allocation.allocation_timestamp, UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
    return out
