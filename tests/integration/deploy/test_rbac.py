"""deploy/'s RBAC on the real API server, with the ServiceAccounts' own tokens (TokenRequest API):
every rule is granted, and what is outside the roles is refused with 403.

That the binaries do all their work with exactly these permissions (list/watch, bind, Reservation and
NodeMetric status, events, leases, evictions) is proven by tests/e2e/test_koordinator_loop.py, which runs
both with these tokens.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from controlplane import ControlPlane
from stack import DEPLOY, apply_deploy, service_account_token

pytestmark = pytest.mark.integration


def rules(rel: str) -> list[tuple[str, str, str, str, str]]:
    """(namespace, group, resource, verb, name) for every rule of the Roles/ClusterRoles in ``rel``."""
    out = []
    for doc in yaml.safe_load_all((DEPLOY / rel).read_text()):
        if doc and doc["kind"] in ("ClusterRole", "Role"):
            namespace = doc["metadata"].get("namespace", "")
            for rule in doc["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        for verb in rule["verbs"]:
                            for name in rule.get("resourceNames", [""]):
                                out.append((namespace, group, resource, verb, name))
    return out


def allowed(
    plane: ControlPlane, token: str, *, namespace: str, group: str, resource: str, verb: str, name: str = ""
) -> bool:
    resource, _, subresource = resource.partition("/")
    attributes = {
        "namespace": namespace,
        "group": group,
        "resource": resource,
        "subresource": subresource,
        "verb": verb,
        "name": name,
    }
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    result = plane.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body, token=token)
    assert result.status == 201, result.body[:300]
    return bool(result.json()["status"].get("allowed"))


@pytest.fixture(scope="module")
def tokens(control_plane: ControlPlane) -> dict[str, str]:
    apply_deploy(control_plane)
    return {sa: service_account_token(control_plane, sa) for sa in ("koord-scheduler", "koordlet")}


@pytest.mark.parametrize(
    "sa, rel", [("koord-scheduler", "koord-scheduler/rbac.yaml"), ("koordlet", "koordlet/rbac.yaml")]
)
def test_every_rule_is_granted_to_its_service_account(
    control_plane: ControlPlane, tokens: dict[str, str], sa: str, rel: str
) -> None:
    denied = [
        r
        for r in rules(rel)
        if not allowed(control_plane, tokens[sa], namespace=r[0], group=r[1], resource=r[2], verb=r[3], name=r[4])
    ]
    assert denied == []


OUTSIDE: list[Any] = [
    pytest.param("koord-scheduler", "GET", "/api/v1/secrets", None, id="scheduler-reads-secrets"),
    pytest.param(
        "koord-scheduler",
        "POST",
        "/api/v1/nodes",
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "rbac-not-allowed"}},
        id="scheduler-creates-node",
    ),
    pytest.param(
        "koord-scheduler",
        "GET",
        "/api/v1/namespaces/default/configmaps",
        None,
        id="scheduler-reads-configmaps-elsewhere",
    ),
    # Node labels are patched (the deviceresource controller's GPU labels); deleting a node is not granted.
    pytest.param("koord-scheduler", "DELETE", "/api/v1/nodes/any-node", None, id="scheduler-deletes-node"),
    pytest.param(
        "koord-scheduler",
        "PATCH",
        "/apis/slo.koordinator.sh/v1alpha1/nodemetrics/any/status",
        {"status": {}},
        id="scheduler-writes-nodemetric-status",
    ),
    pytest.param(
        "koord-scheduler",
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
        None,
        id="scheduler-reads-leases-elsewhere",
    ),
    pytest.param("koordlet", "DELETE", "/api/v1/nodes/any-node", None, id="koordlet-deletes-node"),
    pytest.param("koordlet", "GET", "/api/v1/secrets", None, id="koordlet-reads-secrets"),
    pytest.param(
        "koordlet",
        "PATCH",
        "/api/v1/namespaces/default/pods/any",
        {"metadata": {"labels": {"a": "b"}}},
        id="koordlet-patches-pod",
    ),
    pytest.param("koordlet", "DELETE", "/api/v1/namespaces/default/pods/any", None, id="koordlet-deletes-pod"),
    pytest.param(
        "koordlet",
        "POST",
        "/api/v1/namespaces/default/pods/any/binding",
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "any"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "n"},
        },
        id="koordlet-binds",
    ),
    pytest.param(
        "koordlet",
        "PATCH",
        "/apis/scheduling.koordinator.sh/v1alpha1/reservations/any/status",
        {"status": {}},
        id="koordlet-writes-reservation-status",
    ),
]


@pytest.mark.parametrize("sa, method, path, body", OUTSIDE)
def test_outside_the_role_is_refused(
    control_plane: ControlPlane, tokens: dict[str, str], sa: str, method: str, *, path: str, body: Any
) -> None:
    content_type = "application/merge-patch+json" if method == "PATCH" else "application/json"
    result = control_plane.request(method, path, body, token=tokens[sa], content_type=content_type)
    assert result.status == 403, (result.status, result.body[:300])
    assert f"system:serviceaccount:koordinator-system:{sa}" in result.body.decode()
