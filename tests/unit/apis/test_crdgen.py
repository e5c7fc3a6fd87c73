import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, Field

from apis.crdgen import CRDMeta, crd_for, render_all, structural_schema
from apis.slo.quantity import Quantity
from tests.fixtures import KOORDINATOR_CRDS

REPO = Path(__file__).resolve().parents[3]


def _load_gen_script() -> Any:
    spec = importlib.util.spec_from_file_location("gen_crds", REPO / "scripts" / "gen-crds.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_crds"] = module
    spec.loader.exec_module(module)
    return module


def test_deploy_crds_do_not_drift() -> None:
    gen = _load_gen_script()
    for name, text in render_all(gen.CRDS).items():
        path = REPO / "deploy" / "crds" / name
        assert path.exists(), f"{path} missing: run scripts/gen-crds.py"
        assert path.read_text() == text, f"{path} drifted from the models: run scripts/gen-crds.py"


class _Inner(BaseModel):
    count: int | None = None
    small: int | None = Field(default=None, json_schema_extra={"format": "int32"})


class _Spec(BaseModel):
    name: str
    inner: _Inner | None = None
    amounts: dict[str, Quantity] | None = None
    free_form: dict[str, Any] | None = None
    items: list[_Inner] | None = None


class _Thing(BaseModel):
    apiVersion: str = "x/v1"  # noqa: N815
    kind: str = "Thing"
    metadata: dict[str, Any] = {}
    spec: _Spec | None = None


def test_structural_schema_rules() -> None:
    schema = structural_schema(_Thing)
    spec = schema["properties"]["spec"]
    assert schema["properties"]["metadata"] == {"type": "object"}
    assert spec["required"] == ["name"]
    assert spec["properties"]["inner"]["properties"]["count"] == {"type": "integer", "format": "int64"}
    assert spec["properties"]["inner"]["properties"]["small"] == {"type": "integer", "format": "int32"}
    amount = spec["properties"]["amounts"]["additionalProperties"]
    assert amount["x-kubernetes-int-or-string"] is True
    assert amount["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert spec["properties"]["free_form"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert spec["properties"]["items"]["items"]["type"] == "object"
    assert "title" not in str(schema) and "$ref" not in str(schema)


def test_crd_for_meta() -> None:
    crd = crd_for(_Thing, CRDMeta(group="x.io", version="v1", kind="Thing", plural="things", scope="Cluster"))
    assert crd["metadata"] == {"name": "things.x.io"}
    assert crd["spec"]["names"] == {
        "kind": "Thing",
        "listKind": "ThingList",
        "plural": "things",
        "singular": "thing",
    }
    assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}


def _paths(schema: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield prefix or "/", schema
    for name, sub in schema.get("properties", {}).items():
        yield from _paths(sub, f"{prefix}.{name}")
    if "items" in schema:
        yield from _paths(schema["items"], f"{prefix}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _paths(schema["additionalProperties"], prefix + "{}")


def _lookup(schema: dict[str, Any], path: str) -> dict[str, Any] | str:
    """Our node at ``path``, or "open" if an ancestor preserves unknown fields, or "" if missing."""
    for candidate_path, node in _paths(schema):
        if candidate_path == path:
            return node
    parts = path.replace("[]", ".[]").replace("{}", ".{}").split(".")
    for i in range(len(parts), 0, -1):
        ancestor = ".".join(parts[:i]).replace(".[]", "[]").replace(".{}", "{}") or "/"
        for candidate_path, node in _paths(schema):
            if candidate_path == ancestor and node.get("x-kubernetes-preserve-unknown-fields"):
                return "open"
    return ""


def _kind(node: dict[str, Any]) -> tuple[Any, ...]:
    if node.get("x-kubernetes-int-or-string"):
        return ("int-or-string",)
    return node.get("type"), node.get("format")


@pytest.mark.parametrize(
    "crd_file",
    [
        "slo.koordinator.sh_nodemetrics.yaml",
        "slo.koordinator.sh_nodeslos.yaml",
        "config.koordinator.sh_clustercolocationprofiles.yaml",
        "scheduling.sigs.k8s.io_elasticquotas.yaml",
        "scheduling.sigs.k8s.io_podgroups.yaml",
        "scheduling.koordinator.sh_clusternetworktopologies.yaml",
        "quota.koordinator.sh_elasticquotaprofiles.yaml",
        "scheduling.koordinator.sh_podmigrationjobs.yaml",
    ],
)
def test_compatible_with_koordinator_crd(crd_file: str) -> None:
    theirs = yaml.safe_load((KOORDINATOR_CRDS / crd_file).read_text())
    ours = yaml.safe_load((REPO / "deploy" / "crds" / crd_file).read_text())
    assert ours["spec"]["group"] == theirs["spec"]["group"]
    assert ours["spec"]["names"]["plural"] == theirs["spec"]["names"]["plural"]
    assert ours["spec"]["scope"] == theirs["spec"]["scope"]
    their_version, our_version = theirs["spec"]["versions"][0], ours["spec"]["versions"][0]
    assert our_version["name"] == their_version["name"]
    assert our_version.get("subresources") == their_version.get("subresources")
    our_schema = our_version["schema"]["openAPIV3Schema"]
    problems = []
    for path, their_node in _paths(their_version["schema"]["openAPIV3Schema"]):
        our_node = _lookup(our_schema, path)
        if our_node == "open":
            continue
        if our_node == "":
            problems.append(f"missing {path}")
            continue
        assert isinstance(our_node, dict)
        want, got = _kind(their_node), _kind(our_node)
        # int64 accepts every int32 value: more permissive is fine, less is not.
        if want != got and not (want == ("integer", "int32") and got == ("integer", "int64")):
            problems.append(f"{path}: theirs {want}, ours {got}")
        extra_required = set(our_node.get("required", [])) - set(their_node.get("required", []))
        if extra_required:
            problems.append(f"{path}: we require more: {sorted(extra_required)}")
    assert problems == []
