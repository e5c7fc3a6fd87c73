"""Generate a ``CustomResourceDefinition`` (apiextensions.k8s.io/v1) from a pydantic model.

The model is the whole object (``apiVersion``, ``kind``, ``metadata``, ``spec``, ``status``). Its JSON schema
is rewritten into a *structural* OpenAPI v3 schema, as the API server requires:

- ``$ref`` inlined, ``title`` and ``default`` dropped (no server-side defaulting behind our backs);
- ``Optional[X]`` (``anyOf [X, null]``) becomes ``X``; field-level extras (``format``) are kept;
- ``int`` becomes ``integer`` with ``format: int64`` unless the field says otherwise;
- ``dict[str, Any]`` becomes an object with ``x-kubernetes-preserve-unknown-fields``; an ``Any`` field marked
  with it stays without a type (kubebuilder's ``Schemaless``);
- int-or-string types keep their ``anyOf`` and ``x-kubernetes-int-or-string``;
- the root ``metadata`` is a bare ``object`` (the API server owns its schema).

Reused by every CRD the project ships; ``scripts/gen-crds.py`` writes the files and a test checks drift.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import BaseModel

_DROP_KEYS = frozenset({"title", "default", "examples"})


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0


@dataclass(frozen=True, slots=True)
class CRDMeta:
    """Everything about a CRD that is not in the model's schema."""

    group: str
    version: str
    kind: str
    plural: str
    scope: str = "Namespaced"
    singular: str = ""
    short_names: tuple[str, ...] = ()
    status_subresource: bool = True
    printer_columns: tuple[PrinterColumn, ...] = field(default=())
    annotations: tuple[tuple[str, str], ...] = ()
    """CRD metadata annotations, e.g. ``api-approved.kubernetes.io``, which the API server requires for
    groups under ``k8s.io`` / ``kubernetes.io`` (``scheduling.sigs.k8s.io``)."""

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.group}"


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's openAPIV3Schema, structural and with properties sorted by name."""
    raw = model.model_json_schema(by_alias=True, mode="serialization")
    defs: dict[str, Any] = raw.pop("$defs", {})
    schema = _convert(raw, defs)
    props = schema.get("properties", {})
    if "metadata" in props:
        props["metadata"] = {"type": "object"}
    schema.pop("required", None)
    return schema


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        extra = {k: v for k, v in node.items() if k != "$ref"}
        node = {**defs[name], **extra}
    return node


def _convert(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    node = _resolve(node, defs)
    if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
        options = [_resolve(o, defs) for o in node["anyOf"] if o.get("type") != "null"]
        outer = {k: v for k, v in node.items() if k != "anyOf"}
        if len(options) == 1:
            return _convert({**options[0], **{k: v for k, v in outer.items() if k not in _DROP_KEYS}}, defs)
        raise ValueError(f"non-structural union in schema: {node!r}")
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP_KEYS:
            continue
        if key == "properties":
            out["properties"] = {name: _convert(sub, defs) for name, sub in sorted(value.items())}
        elif key == "items":
            out["items"] = _convert(value, defs)
        elif key == "additionalProperties":
            if value is True or value == {}:
                out["x-kubernetes-preserve-unknown-fields"] = True
            elif value is not False:
                out["additionalProperties"] = _convert(value, defs)
        elif key == "anyOf":
            out["anyOf"] = [{"type": o["type"]} for o in value]
        elif key == "required":
            out["required"] = sorted(value)
        elif key == "enum":
            out["enum"] = list(value)
        elif key == "const":
            out["enum"] = [value]
        else:
            out[key] = value
    if out.get("type") == "integer" and "format" not in out:
        out["format"] = "int64"
    if out.get("type") == "object" and "properties" not in out and "additionalProperties" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True
    if "x-kubernetes-preserve-unknown-fields" in out and "type" in out:
        # A field typed ``Any`` stays schemaless (no type), as kubebuilder's ``Schemaless`` marker gives.
        out["type"] = "object"
    return out


def crd_for(model: type[BaseModel], meta: CRDMeta) -> dict[str, Any]:
    """The CRD object for one served, stored version."""
    version: dict[str, Any] = {
        "name": meta.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": structural_schema(model)},
    }
    if meta.status_subresource:
        version["subresources"] = {"status": {}}
    if meta.printer_columns:
        version["additionalPrinterColumns"] = [
            {
                "name": c.name,
                "type": c.type,
                "jsonPath": c.json_path,
                **({"description": c.description} if c.description else {}),
                **({"priority": c.priority} if c.priority else {}),
            }
            for c in meta.printer_columns
        ]
    names: dict[str, Any] = {
        "kind": meta.kind,
        "listKind": f"{meta.kind}List",
        "plural": meta.plural,
        "singular": meta.singular or meta.kind.lower(),
    }
    if meta.short_names:
        names["shortNames"] = list(meta.short_names)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": meta.name, **({"annotations": dict(meta.annotations)} if meta.annotations else {})},
        "spec": {"group": meta.group, "names": names, "scope": meta.scope, "versions": [version]},
    }


def render_yaml(crd: dict[str, Any]) -> str:
    """Deterministic YAML for a generated object (a header comment says it is generated)."""
    body = yaml.safe_dump(crd, sort_keys=False, default_flow_style=False, width=120)
    return "# Generated by scripts/gen-crds.py from the pydantic models. Do not edit.\n---\n" + body


def render_all(entries: Sequence[tuple[type[BaseModel], CRDMeta]]) -> dict[str, str]:
    """File name (``<group>_<plural>.yaml``, controller-gen style) → YAML text, for each entry."""
    return {f"{meta.group}_{meta.plural}.yaml": render_yaml(crd_for(model, meta)) for model, meta in entries}
