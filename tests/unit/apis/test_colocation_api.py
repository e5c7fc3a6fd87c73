"""apis.colocation: probability, profile checks, Go-canonical quantity strings, the generated CRD."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.colocation import canonical_quantity, probability_percent, resolve_profile
from apis.colocation.profile import ProfileError

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("1000", "1k", id="decimal-thousand"),
        pytest.param("500", "500", id="decimal-small"),
        pytest.param("1500", "1500", id="decimal-not-round"),
        pytest.param("500m", "500m", id="milli"),
        pytest.param("0.5", "500m", id="fraction"),
        pytest.param("1.5G", "1500M", id="decimal-si-fraction"),
        pytest.param("1024Mi", "1Gi", id="binary-up"),
        pytest.param("1536Mi", "1536Mi", id="binary-not-round"),
        pytest.param("512Ki", "512Ki", id="binary-ki"),
        pytest.param("100Ki", "100Ki", id="binary-small-mantissa"),
        pytest.param("0.5Ki", "512", id="binary-under-1024-is-decimal"),
        pytest.param("1e3", "1e3", id="exponent"),
        pytest.param("0", "0", id="zero"),
    ],
)
def test_canonical_quantity(text: str, want: str) -> None:
    assert canonical_quantity(text) == want


@pytest.mark.parametrize(
    ("value", "want"),
    [
        pytest.param(None, 100, id="absent"),
        pytest.param(0, 0, id="zero"),
        pytest.param(100, 100, id="int"),
        pytest.param("50%", 50, id="percent"),
        pytest.param("0%", 0, id="zero-percent"),
    ],
)
def test_probability_percent(value: Any, want: int) -> None:
    assert probability_percent(value) == want


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(101, id="over"),
        pytest.param(-1, id="negative"),
        pytest.param("50", id="no-percent-sign"),
        pytest.param("150%", id="over-pct"),
    ],
)
def test_probability_refused(value: Any) -> None:
    with pytest.raises(ValueError):
        probability_percent(value)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param({"probability": "half"}, "spec.probability", id="probability"),
        pytest.param(
            {"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
            "spec.selector.matchExpressions[0]: operator In needs values",
            id="in-without-values",
        ),
        pytest.param(
            {"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}},
            "spec.namespaceSelector.matchExpressions[0]: operator Exists takes no values",
            id="exists-with-values",
        ),
        pytest.param(
            {"selector": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}},
            "spec.selector.matchExpressions.0.operator",
            id="operator-not-for-labels",
        ),
        pytest.param({"qosClass": "GOLD"}, "spec.qosClass", id="qos-class"),
        pytest.param({"patch": [1]}, "spec.patch: must be an object", id="patch-not-object"),
    ],
)
def test_resolve_profile_names_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ProfileError, match="ClusterColocationProfile 'p'") as info:
        resolve_profile({"metadata": {"name": "p"}, "spec": spec})
    assert message in str(info.value)


def test_empty_selectors_match_everything_without_a_namespace_lookup() -> None:
    profile = resolve_profile(
        {
            "metadata": {"name": "p", "annotations": {"config.koordinator.sh/skip-update-resources": ""}},
            "spec": {"namespaceSelector": {}, "selector": {}},
        }
    )
    assert profile.namespace_selector is None and profile.selector is None
    assert profile.skip_update_resources is True


def test_generated_crd_keeps_koordinators_shape() -> None:
    crd = yaml.safe_load((REPO / "deploy/crds/config.koordinator.sh_clustercolocationprofiles.yaml").read_text())
    assert crd["spec"]["scope"] == "Cluster"
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert spec["patch"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert spec["qosClass"]["enum"] == ["LSE", "LSR", "LS", "BE", "SYSTEM"]
    assert spec["koordinatorPriority"] == {"type": "integer", "format": "int32"}
    assert spec["probability"]["x-kubernetes-int-or-string"] is True
