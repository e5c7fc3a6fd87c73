"""Every manifest in deploy/ is accepted by the real API server (server-side apply through kustomize, as
docs/install.md says), and Koordinator's own sample objects are accepted by our CRDs."""

from __future__ import annotations

import pytest
import yaml
from controlplane import ControlPlane
from stack import DEPLOY, apply_deploy, kubectl

pytestmark = pytest.mark.integration

FIXTURES = DEPLOY.parent / "tests" / "fixtures" / "koordinator"


def deploy_objects() -> list[tuple[str, str]]:
    resources = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    return [
        (d["kind"], d["metadata"]["name"])
        for rel in resources
        for d in yaml.safe_load_all((DEPLOY / rel).read_text())
        if d
    ]


def test_every_manifest_is_accepted(control_plane: ControlPlane) -> None:
    out = apply_deploy(control_plane)
    applied = [line for line in out.splitlines() if line.endswith("serverside-applied")]
    assert len(applied) == len(deploy_objects()), out
    again = kubectl(control_plane, "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-k", str(DEPLOY))
    assert again.returncode == 0, again.stderr
    for kind, name in deploy_objects():
        namespace = (
            []
            if kind in ("Namespace", "CustomResourceDefinition", "PriorityClass", "ClusterRole", "ClusterRoleBinding")
            else ["-n", "koordinator-system"]
        )
        got = kubectl(control_plane, "get", kind.lower(), name, *namespace, "-o", "name")
        assert got.returncode == 0, (kind, name, got.stderr)


@pytest.mark.parametrize(
    "sample",
    [
        "samples/scheduling_v1alpha1_reservation.yaml",
        "chart-v1.8.0/priority_koord-prod.yaml",
        "chart-v1.8.0/priority_koord-batch.yaml",
    ],
)
def test_koordinator_samples_are_accepted(control_plane: ControlPlane, sample: str) -> None:
    apply_deploy(control_plane)
    result = kubectl(
        control_plane, "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", str(FIXTURES / sample)
    )
    assert result.returncode == 0, result.stderr


def test_reservation_sample_round_trips_through_our_crd(control_plane: ControlPlane) -> None:
    """Created for real (not dry-run): nothing is pruned by our schema."""
    apply_deploy(control_plane)
    sample = yaml.safe_load((FIXTURES / "samples" / "scheduling_v1alpha1_reservation.yaml").read_text())
    sample["metadata"]["name"] = "koordinator-sample-roundtrip"
    path = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
    created = control_plane.request("POST", path, sample)
    assert created.status == 201, created.body[:300]
    try:
        assert created.json()["spec"] == sample["spec"]
    finally:
        control_plane.request("DELETE", f"{path}/koordinator-sample-roundtrip")
