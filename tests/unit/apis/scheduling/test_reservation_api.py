from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.core.types import NodeSelectorTerm, Operator, SelectorRequirement, Toleration
from apis.crdgen import crd_for
from apis.scheduling import (
    OwnerTerm,
    Reservation,
    ReservationAffinity,
    ReservationRecord,
    parse_reservation,
    parse_reservation_affinity,
)
from tests.fixtures import KOORDINATOR

REPO = Path(__file__).resolve().parents[4]
OURS = REPO / "deploy" / "crds" / "scheduling.koordinator.sh_reservations.yaml"

FULL_WIRE: dict[str, Any] = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "Reservation",
    "metadata": {"name": "r1", "uid": "u1", "labels": {"pool": "a"}, "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {
        "template": {"metadata": {"namespace": "ns"}, "spec": {"containers": [{"name": "c"}]}},
        "owners": [
            {"object": {"name": "p", "namespace": "ns"}},
            {
                "controller": {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "rs",
                    "uid": "rs-1",
                    "controller": True,
                    "namespace": "ns",
                }
            },
            {
                "labelSelector": {
                    "matchLabels": {"app": "x"},
                    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}],
                }
            },
        ],
        "ttl": "1h",
        "allocateOnce": False,
        "allocatePolicy": "Restricted",
        "unschedulable": True,
        "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
        "preAllocationPolicy": {"mode": "Default", "enableMultiple": False},
    },
    "status": {
        "phase": "Available",
        "nodeName": "n1",
        "allocatable": {"cpu": "2", "memory": "4Gi"},
        "allocated": {"cpu": "500m"},
        "currentOwners": [{"namespace": "ns", "name": "p", "uid": "pu"}],
        "conditions": [
            {"type": "Scheduled", "status": "True", "reason": "Scheduled", "lastTransitionTime": "2026-01-01T00:00:01Z"}
        ],
    },
}


def test_sample_round_trips() -> None:
    raw = yaml.safe_load((KOORDINATOR / "samples" / "scheduling_v1alpha1_reservation.yaml").read_text())
    assert Reservation.model_validate(raw).to_wire() == raw


def test_full_object_round_trips() -> None:
    assert Reservation.model_validate(FULL_WIRE).to_wire() == FULL_WIRE


def test_full_object_record() -> None:
    rec = parse_reservation(FULL_WIRE)
    assert rec.is_valid and rec.is_available
    assert (rec.ttl_seconds, rec.allocate_once, rec.allocate_policy, rec.unschedulable) == (
        3600.0,
        False,
        "Restricted",
        True,
    )
    assert rec.allocatable == {"cpu": 2000, "memory": 4 * 1024**3}
    assert rec.allocated == {"cpu": 500}
    assert rec.current_owners == (("ns", "p", "pu"),)
    assert rec.owners[0] == OwnerTerm(has_object=True, object_name="p", object_namespace="ns")
    assert rec.owners[1].controller_uid == "rs-1" and rec.owners[1].controller_only
    assert rec.owners[2].label_selector is not None


def _minimal(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "template": {"spec": {"containers": [{"name": "c"}]}},
        "owners": [{"object": {"name": "p"}}],
    }
    base.update(spec)
    return {"metadata": {"name": "r"}, "spec": {k: v for k, v in base.items() if v is not None}}


@pytest.mark.parametrize(
    ("raw", "want_invalid"),
    [
        pytest.param(_minimal(), "", id="valid-default-ttl"),
        pytest.param(_minimal(owners=[]), "spec.owners must name at least one owner", id="no-owners"),
        pytest.param(_minimal(template=None), "spec.template is required", id="no-template"),
        pytest.param(
            {"metadata": {"name": "r"}, "spec": {"template": {"a": 1}, "owners": [{"object": {}}], "ttl": None}},
            "one of spec.ttl and spec.expires is required",
            id="null-ttl-no-expires",
        ),
        pytest.param(
            _minimal(allocatePolicy="Weird"),
            "spec.allocatePolicy 'Weird' must be Aligned or Restricted",
            id="bad-policy",
        ),
        pytest.param(_minimal(owners=[{}]), "invalid Reservation", id="empty-owner"),
        pytest.param(_minimal(ttl="forever"), "invalid Reservation", id="bad-ttl"),
    ],
)
def test_invalid_reservations_are_reported_not_raised(raw: dict[str, Any], want_invalid: str) -> None:
    rec = parse_reservation(raw)
    assert rec.name == "r"
    if want_invalid:
        assert want_invalid in rec.invalid
    else:
        assert rec.invalid == "" and rec.ttl_seconds == 86400.0


def test_unnamed_reservation_raises() -> None:
    with pytest.raises(ValueError):
        parse_reservation({"spec": {}})


def test_affinity_annotation() -> None:
    text = (
        '{"name": "r1", "reservationSelector": {"pool": "a"}, "tolerations": [{"key": "k", "operator": "Exists"}],'
        ' "requiredDuringSchedulingIgnoredDuringExecution": {"reservationSelectorTerms": ['
        '{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]}}'
    )
    assert parse_reservation_affinity(text) == ReservationAffinity(
        name="r1",
        required_terms=(NodeSelectorTerm((SelectorRequirement("pool", Operator.IN, ("a",)),)),),
        reservation_selector={"pool": "a"},
        tolerations=(Toleration(key="k", operator="Exists"),),
    )


def test_record_defaults() -> None:
    rec = ReservationRecord(name="x")
    assert rec.is_pending and not rec.is_available and rec.allocate_once


def _paths(schema: dict[str, Any], prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = [(prefix, schema)]
    for name, sub in (schema.get("properties") or {}).items():
        out += _paths(sub, f"{prefix}.{name}")
    if "items" in schema:
        out += _paths(schema["items"], f"{prefix}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        out += _paths(schema["additionalProperties"], f"{prefix}{{}}")
    return out


def test_generated_crd_accepts_what_koordinator_accepts() -> None:
    theirs = yaml.safe_load((KOORDINATOR / "crd" / "scheduling.koordinator.sh_reservations.yaml").read_text())
    ours = yaml.safe_load(OURS.read_text())
    assert ours == crd_for(Reservation, _meta()) or ours["spec"]["names"] == theirs["spec"]["names"]
    assert ours["spec"]["scope"] == theirs["spec"]["scope"] == "Cluster"
    their_version, our_version = theirs["spec"]["versions"][0], ours["spec"]["versions"][0]
    assert our_version["subresources"] == their_version["subresources"]
    assert [c["name"] for c in our_version["additionalPrinterColumns"]] == [
        c["name"] for c in their_version["additionalPrinterColumns"]
    ]
    our_paths = dict(_paths(our_version["schema"]["openAPIV3Schema"]))
    problems = []
    for path, node in _paths(their_version["schema"]["openAPIV3Schema"]):
        if path.startswith(".spec.template") or path.startswith(".metadata"):
            continue
        mine = our_paths.get(path)
        if mine is None:
            problems.append(f"missing {path}")
            continue
        if node.get("x-kubernetes-int-or-string") != mine.get("x-kubernetes-int-or-string"):
            problems.append(f"{path}: int-or-string differs")
        elif "type" in node and node["type"] != mine.get("type"):
            problems.append(f"{path}: type {node['type']} vs {mine.get('type')}")
        extra = set(mine.get("required", [])) - set(node.get("required", []))
        if extra:
            problems.append(f"{path}: requires more {sorted(extra)}")
    assert problems == []


def _meta() -> Any:
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("gen_crds_reservation", REPO / "scripts" / "gen-crds.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_crds_reservation"] = module
    spec.loader.exec_module(module)
    return next(meta for model, meta in module.CRDS if model is Reservation)
