"""charts/pykoord on the real API server: what `helm template` renders (default values and Koordinator's
v1.8 values.yaml unchanged) passes server-side dry-run, and the release goes through its life on a
control plane of its own: `helm install` (CRDs from crds/), both binaries run with the installed
configuration as their own ServiceAccounts, a pod is bound, koordlet reports its NodeMetric,
`helm upgrade` with a changed value rolls the workloads, and `helm uninstall` leaves the CRDs only.

No kubelet and no kube-controller-manager run: workloads get no pods (the binaries run here instead),
and the uninstalled namespace stays Terminating for want of the namespace controller.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import ControlPlane, session_control_plane
from stack import (
    FakeNodeRoot,
    apply_deploy,
    kubectl,
    service_account_kubeconfig,
    start_koord_scheduler,
    start_koordlet,
    wait_for,
)

from tests.helmchart import CHART, KOORDINATOR_VALUES, RELEASE, helm, helm_path, objects, template

pytestmark = pytest.mark.integration

NAMESPACE = "koordinator-system"
NODE = "helm-node"
CRDS = sorted(p.name for p in (CHART / "crds").glob("*.yaml"))


@pytest.mark.parametrize("values", [[], ["-f", str(KOORDINATOR_VALUES)]], ids=["defaults", "koordinator-v1.8"])
def test_rendered_objects_pass_server_side_dry_run(
    control_plane: ControlPlane, tmp_path: Path, values: list[str]
) -> None:
    apply_deploy(control_plane)  # the namespace and CRDs the namespaced objects and dry-run need
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(template(*values, include_crds=True))
    result = kubectl(
        control_plane, "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", str(rendered)
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("serverside-applied (server dry run)") == len(objects(rendered.read_text()))


def ok(plane: ControlPlane, method: str, path: str, body: Any = None) -> Any:
    result = plane.request(method, path, body)
    assert result.status < 300, f"{method} {path}: {result.status} {result.body[:300]!r}"
    return result.json() if result.body else None


def exists(plane: ControlPlane, path: str) -> bool:
    status = plane.request("GET", path).status
    assert status in (200, 404), f"GET {path}: {status}"
    return status == 200


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane of its own: uninstalling deletes cluster-wide objects other tests use."""
    helm_path()  # skip before starting a cluster when helm cannot be built
    # Its CRDs come from the chart, not from control-plane.sh.
    with session_control_plane(tmp_path_factory.mktemp("helm-cluster"), crds=False) as plane:
        assert not ok(plane, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")["items"]
        yield plane


def test_install_run_upgrade_uninstall(plane: ControlPlane, tmp_path: Path) -> None:
    installed = helm("install", RELEASE, str(CHART), "--namespace", "default", kubeconfig=plane.kubeconfig)
    assert "Pods opt in with spec.schedulerName: koord-scheduler." in installed.stdout  # NOTES.txt
    for crd in CRDS:
        name = yaml.safe_load(next(d for d in (CHART / "crds" / crd).read_text().split("---\n") if "kind:" in d))[
            "metadata"
        ]["name"]
        assert exists(plane, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"), crd
    apps = f"/apis/apps/v1/namespaces/{NAMESPACE}"
    daemonset = ok(plane, "GET", f"{apps}/daemonsets/koordlet")
    assert ok(plane, "GET", f"{apps}/deployments/koord-scheduler")["spec"]["replicas"] == 2

    # Both binaries with the configuration Helm installed, as their ServiceAccounts.
    configmaps = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
    scheduler_config = tmp_path / "koord-scheduler-config"
    scheduler_config.write_text(
        ok(plane, "GET", f"{configmaps}/koord-scheduler-config")["data"]["koord-scheduler-config"]
    )
    koordlet_config = tmp_path / "koordlet-config.yaml"
    koordlet_config.write_text(ok(plane, "GET", f"{configmaps}/koordlet-config")["data"]["koordlet-config.yaml"])
    scheduler_kubeconfig, _ = service_account_kubeconfig(plane, "koord-scheduler", tmp_path / "scheduler.kubeconfig")
    koordlet_kubeconfig, _ = service_account_kubeconfig(plane, "koordlet", tmp_path / "koordlet.kubeconfig")
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    ok(
        plane,
        "POST",
        "/api/v1/nodes",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}},
            "status": {"capacity": resources, "allocatable": resources},
        },
    )
    root = FakeNodeRoot(tmp_path / "node").start()
    scheduler, _ = start_koord_scheduler(plane, tmp_path, kubeconfig=scheduler_kubeconfig, config=scheduler_config)
    koordlet = start_koordlet(NODE, root, tmp_path, kubeconfig=koordlet_kubeconfig, config=koordlet_config)
    try:
        # The `helm test` pod that checks binding, created as a plain pod.
        hook = next(d for d in objects(template()) if d["metadata"]["name"] == "pykoord-test-scheduler-binds")
        hook["metadata"].pop("annotations")
        ok(plane, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", hook)
        pod = f"/api/v1/namespaces/{NAMESPACE}/pods/{hook['metadata']['name']}"
        wait_for(
            lambda: ok(plane, "GET", pod)["spec"].get("nodeName") == NODE,
            timeout=60,
            what=f"koord-scheduler binding the test pod\n{scheduler.log_tail()}",
        )
        wait_for(
            lambda: (
                exists(plane, f"/apis/slo.koordinator.sh/v1alpha1/nodemetrics/{NODE}")
                and ok(plane, "GET", f"/apis/slo.koordinator.sh/v1alpha1/nodemetrics/{NODE}")
                .get("status", {})
                .get("nodeMetric")
            ),
            timeout=60,
            what=f"koordlet's NodeMetric\n{koordlet.log_tail()}",
        )
        assert scheduler.alive and koordlet.alive
    finally:
        scheduler.stop()
        koordlet.stop()
        root.stop()
    ok(plane, "DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{hook['metadata']['name']}?gracePeriodSeconds=0")

    # A changed value rolls the workload whose configuration it changes.
    helm(
        "upgrade",
        RELEASE,
        str(CHART),
        "--namespace",
        "default",
        "--reuse-values",
        "--set",
        "koordlet.features=CPUEvict=true",
        "--set",
        "scheduler.replicas=3",
        kubeconfig=plane.kubeconfig,
    )
    upgraded = ok(plane, "GET", f"{apps}/daemonsets/koordlet")
    assert upgraded["metadata"]["generation"] > daemonset["metadata"]["generation"]
    annotation = "checksum/config"
    assert (
        upgraded["spec"]["template"]["metadata"]["annotations"][annotation]
        != daemonset["spec"]["template"]["metadata"]["annotations"][annotation]
    )
    gates = yaml.safe_load(ok(plane, "GET", f"{configmaps}/koordlet-config")["data"]["koordlet-config.yaml"])
    assert gates["featureGates"]["CPUEvict"] is True
    assert ok(plane, "GET", f"{apps}/deployments/koord-scheduler")["spec"]["replicas"] == 3
    assert "REVISION: 2" in helm("status", RELEASE, "--namespace", "default", kubeconfig=plane.kubeconfig).stdout

    # Uninstall: every object of the release is gone but the CRDs (Helm never deletes crds/).
    helm("uninstall", RELEASE, "--namespace", "default", kubeconfig=plane.kubeconfig)
    left = []
    for doc in objects(template()):
        if doc["metadata"].get("annotations", {}).get("helm.sh/hook"):
            continue
        group = doc["apiVersion"].rpartition("/")[0]
        kind = f"{doc['kind']}.{group}" if group else doc["kind"]
        namespace = ["-n", NAMESPACE] if "namespace" in doc["metadata"] else []
        got = kubectl(plane, "get", kind, doc["metadata"]["name"], *namespace, "-o", "json")
        # The namespace stays Terminating here: no namespace controller runs to empty it.
        if got.returncode == 0 and not (
            doc["kind"] == "Namespace" and json.loads(got.stdout)["metadata"].get("deletionTimestamp")
        ):
            left.append((doc["kind"], doc["metadata"]["name"]))
    assert left == []
    crds = kubectl(plane, "get", "crd", "-o", "name")
    assert len(crds.stdout.split()) == len(CRDS)
