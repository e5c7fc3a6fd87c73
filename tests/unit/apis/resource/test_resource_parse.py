"""``resource.k8s.io/v1`` parsing and validation (apis/resource), and a pod's DRA fields (apis/core): good
objects become the typed records, bad ones a ParseError naming the object and the field."""

from __future__ import annotations

from typing import Any

import pytest

from apis.core.errors import ParseError
from apis.core.parse import parse_pod
from apis.core.types import PodResourceClaim
from apis.resource import (
    AllocationMode,
    AttributeKind,
    DeviceAttribute,
    allocation_json,
    parse_device_class,
    parse_resource_claim,
    parse_resource_claim_template,
    parse_resource_slice,
)
from apis.resource.semver import normalize_version, parse_version
from tests import dra_builders as dra
from tests.builders import make_pod


def test_slice_devices_attributes_and_capacity() -> None:
    s = parse_resource_slice(
        dra.resource_slice(
            "s1",
            "n1",
            [
                dra.device(
                    "gpu-0",
                    capacity={"memory": "40Gi"},
                    model="a100",
                    numa=1,
                    fast=True,
                    driverVersion=("version", "1.2.3"),
                )
            ],
        )
    )
    (device,) = s.devices
    assert (s.driver, s.pool, s.node_name, s.resource_slice_count) == (dra.DRIVER, "n1", "n1", 1)
    assert device.attributes == {
        "model": DeviceAttribute(AttributeKind.STRING, "a100"),
        "numa": DeviceAttribute(AttributeKind.INT, 1),
        "fast": DeviceAttribute(AttributeKind.BOOL, True),
        "driverVersion": DeviceAttribute(AttributeKind.VERSION, "1.2.3"),
    }
    assert device.capacity["memory"].nanos == 40 * 2**30 * 10**9


def test_claim_requests_constraints_and_subrequests() -> None:
    claim = parse_resource_claim(
        dra.claim(
            "c",
            dra.request("gpu", dra.DRIVER, "device.driver == 'x'", count=2, admin=True),
            dra.first_available("alt", dra.request("a", dra.DRIVER), dra.request("b", dra.DRIVER, all_devices=True)),
            constraints=[{"requests": ["gpu", "alt/b"], "matchAttribute": f"{dra.DRIVER}/numa"}],
        )
    )
    gpu, alt = claim.spec.requests
    assert gpu.exactly is not None
    assert (gpu.exactly.count, gpu.exactly.selectors, gpu.exactly.admin_access) == (2, ("device.driver == 'x'",), True)
    assert [(s.name, s.allocation_mode, s.count) for s in alt.first_available] == [
        ("a", AllocationMode.EXACT_COUNT, 1),
        ("b", AllocationMode.ALL, 0),
    ]
    assert claim.spec.constraints[0].requests == ("gpu", "alt/b")


def claim_with(**devices: Any) -> dict[str, Any]:
    return {"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": devices}}


@pytest.mark.parametrize(
    ("parse", "raw", "want"),
    [
        pytest.param(
            parse_resource_claim,
            claim_with(requests=[{"name": "gpu"}]),
            "ResourceClaim ns/c: spec.devices.requests[0]: exactly one of exactly or firstAvailable must be set",
            id="request-without-kind",
        ),
        pytest.param(
            parse_resource_claim,
            claim_with(requests=[{"name": "gpu", "exactly": {"deviceClassName": "g", "count": 0}}]),
            "ResourceClaim ns/c: spec.devices.requests[0].exactly.count: must be greater than zero",
            id="count-zero",
        ),
        pytest.param(
            parse_resource_claim,
            claim_with(requests=[{"name": "gpu", "exactly": {"deviceClassName": "g", "allocationMode": "Some"}}]),
            "ResourceClaim ns/c: spec.devices.requests[0].exactly.allocationMode: must be ExactCount or "
            "All, not 'Some'",
            id="bad-mode",
        ),
        pytest.param(
            parse_resource_claim,
            claim_with(requests=[dra.request("a"), dra.request("a")]),
            "ResourceClaim ns/c: spec.devices.requests[1].name: duplicate value 'a'",
            id="duplicate-request",
        ),
        pytest.param(
            parse_resource_claim,
            claim_with(requests=[dra.request("a")], constraints=[{"requests": ["b"], "matchAttribute": "x/y"}]),
            "ResourceClaim ns/c: spec.devices.constraints[0].requests[0]: must be the name of a request in "
            "the claim, not 'b'",
            id="constraint-unknown-request",
        ),
        pytest.param(
            parse_resource_claim,
            claim_with(requests=[dra.request("a")], constraints=[{"matchAttribute": "numa"}]),
            "ResourceClaim ns/c: spec.devices.constraints[0].matchAttribute: 'numa' must be a fully "
            "qualified name (domain/name)",
            id="constraint-short-name",
        ),
        pytest.param(
            parse_resource_claim,
            claim_with(requests=[{"name": "a", "exactly": {"deviceClassName": "g", "selectors": [{"cel": {}}]}}]),
            "ResourceClaim ns/c: spec.devices.requests[0].exactly.selectors[0].cel.expression: required",
            id="empty-selector",
        ),
        pytest.param(
            parse_resource_slice,
            dra.resource_slice("s", "n1", [{"name": "gpu-0", "attributes": {"x": {"int": 1, "string": "1"}}}]),
            "ResourceSlice s: spec.devices[0].attributes.x: exactly one of int, bool, string or version must be set",
            id="two-attribute-values",
        ),
        pytest.param(
            parse_resource_slice,
            dra.resource_slice("s", "n1", [dra.device("gpu-0", v=("version", "1.2"))]),
            "ResourceSlice s: spec.devices[0].attributes.v.version: '1.2' is not a semantic version "
            "(MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD])",
            id="bad-version",
        ),
        pytest.param(
            parse_resource_slice,
            dra.resource_slice("s", "n1", [dra.device("gpu-0", capacity={"mem": "12x"})]),
            'ResourceSlice s: spec.devices[0].capacity.mem.value: invalid quantity "12x": unknown suffix "x"',
            id="bad-capacity",
        ),
        pytest.param(
            parse_resource_slice,
            dra.resource_slice("s", devices=[dra.device("gpu-0")]),
            "ResourceSlice s: spec: exactly one of nodeName, nodeSelector, allNodes or "
            "perDeviceNodeSelection must be set",
            id="no-node-choice",
        ),
        pytest.param(
            parse_resource_slice,
            {"metadata": {"name": "s"}, "spec": {"driver": "d.example.com", "nodeName": "n", "pool": {}}},
            "ResourceSlice s: spec.pool.name: required",
            id="no-pool",
        ),
        pytest.param(
            parse_device_class,
            {"metadata": {"name": "k"}, "spec": {"config": [{"requests": []}]}},
            "DeviceClass k: spec.config[0].opaque: required (the only configuration type)",
            id="class-config-without-opaque",
        ),
    ],
)
def test_bad_objects_name_the_field(parse: Any, raw: dict[str, Any], want: str) -> None:
    with pytest.raises(ParseError) as err:
        parse(raw)
    assert str(err.value) == want


def test_template_keeps_the_claim_spec_and_metadata() -> None:
    raw = dra.template("t", dra.request())
    raw["spec"]["metadata"] = {"labels": {"team": "ml"}}
    template = parse_resource_claim_template(raw)
    assert template.claim_labels == {"team": "ml"}
    assert template.spec.requests[0].name == "gpu"


def test_allocation_round_trips_through_json() -> None:
    raw = dra.claim("c", dra.request())
    raw["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": dra.DRIVER, "pool": "n1", "device": "gpu-0", "adminAccess": True}
                ],
                "config": [
                    {
                        "source": "FromClass",
                        "requests": ["gpu"],
                        "opaque": {"driver": dra.DRIVER, "parameters": {"a": 1}},
                    }
                ],
            },
            "nodeSelector": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
            },
        },
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}],
    }
    claim = parse_resource_claim(raw)
    assert claim.allocation is not None and claim.reserved_for_pod("u1")
    assert allocation_json(claim.allocation) == raw["status"]["allocation"]


def test_pod_resource_claims_and_statuses() -> None:
    pod = (
        make_pod("p")
        .resource_claim("gpu", template="t")
        .resource_claim("nic", claim="shared-nic")
        .claim_status("gpu", "p-gpu-abcde")
        .build()
    )
    assert pod.resource_claims == (
        PodResourceClaim("gpu", template_name="t"),
        PodResourceClaim("nic", claim_name="shared-nic"),
    )
    assert pod.resource_claim_statuses == {"gpu": "p-gpu-abcde"}


@pytest.mark.parametrize(
    ("spec_patch", "want"),
    [
        pytest.param(
            {"resourceClaims": [{"name": "gpu"}]},
            "spec.resourceClaims[0]: exactly one of resourceClaimName or resourceClaimTemplateName must be set",
            id="neither",
        ),
        pytest.param(
            {"resourceClaims": [{"name": "Bad_Name", "resourceClaimName": "c"}]},
            "spec.resourceClaims[0].name: 'Bad_Name' is not a DNS label",
            id="bad-name",
        ),
        pytest.param(
            {"resourceClaims": [{"name": "a", "resourceClaimName": "c"}, {"name": "a", "resourceClaimName": "d"}]},
            "spec.resourceClaims[1].name: duplicate value 'a'",
            id="duplicate",
        ),
        pytest.param(
            {"containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}]},
            "spec.containers[0].resources.claims[0].name: must be the name of an entry in "
            "pod.spec.resourceClaims, not 'gpu'",
            id="container-claim-unknown",
        ),
    ],
)
def test_bad_pod_claims_are_refused_naming_the_field(spec_patch: dict[str, Any], want: str) -> None:
    raw = make_pod("p").obj()
    raw["spec"].update(spec_patch)
    with pytest.raises(ParseError) as err:
        parse_pod(raw)
    assert str(err.value) == f"Pod default/p: {want}"


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        pytest.param("1.2.3", "1.2.4", -1, id="patch"),
        pytest.param("1.10.0", "1.9.0", 1, id="numeric-not-lexical"),
        pytest.param("1.0.0-alpha", "1.0.0", -1, id="prerelease-first"),
        pytest.param("1.0.0-alpha.1", "1.0.0-alpha.beta", -1, id="numeric-identifier-first"),
        pytest.param("1.0.0+build.1", "1.0.0+build.2", 0, id="build-ignored"),
    ],
)
def test_semver_order(a: str, b: str, want: int) -> None:
    assert parse_version(a).compare(parse_version(b)) == want


def test_semver_normalization() -> None:
    assert normalize_version("v01.2") == "1.2.0"
    with pytest.raises(ValueError, match="not a semantic version"):
        parse_version("01.2.3")
