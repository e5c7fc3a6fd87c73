"""The NetworkPolicies in deploy/ are accepted by the real API server (created, read back, deleted)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.integration

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
NAMESPACE = "koordinator-system"
POLICIES = "/apis/networking.k8s.io/v1/namespaces/koordinator-system/networkpolicies"


@pytest.mark.parametrize("component", ["koord-scheduler", "koordlet"])
def test_network_policy_is_accepted(control_plane: Any, component: str) -> None:
    body = yaml.safe_load((DEPLOY / component / "networkpolicy.yaml").read_text())
    ns = control_plane.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    assert ns.status in (201, 409), ns.body[:300]
    # Under a name of its own: deploy/ may already be applied on this cluster (the deploy tests do).
    name = f"{body['metadata']['name']}-check"
    body["metadata"]["name"] = name
    dry = control_plane.request("POST", f"{POLICIES}?dryRun=All&fieldValidation=Strict", body)
    assert dry.status == 201, dry.body[:500]
    assert control_plane.request("GET", f"{POLICIES}/{name}").status == 404, "a dry run stores nothing"
    created = control_plane.request("POST", f"{POLICIES}?fieldValidation=Strict", body)
    assert created.status == 201, created.body[:500]
    stored = control_plane.request("GET", f"{POLICIES}/{name}").json()
    assert stored["spec"]["ingress"] == body["spec"]["ingress"]
    assert control_plane.request("DELETE", f"{POLICIES}/{name}").status == 200
