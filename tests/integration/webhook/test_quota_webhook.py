"""The ElasticQuota validating webhook behind a real kube-apiserver, over real TLS.

``koord-scheduler --webhook-port`` makes its self-signed certificate and writes the CA into the
ValidatingWebhookConfiguration (registered here as the chart's, on loopback and limited to this test's
namespace). Then: a valid three-quota tree is created; max below min is refused with Koordinator's
message; a child whose min would overflow its parent's min is refused; a parent with children cannot be
deleted. With the server stopped (failurePolicy Ignore, the chart's default) an invalid quota slips
through, and the ElasticQuota plugin still reports it as an Event and schedules around it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, BinaryIO

import pytest
import yaml
from colocation_webhook import REPO, VWC_PATH, register_quota_webhook
from controlplane import ControlPlane, free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

CRD = REPO / "deploy" / "crds" / "scheduling.sigs.k8s.io_elasticquotas.yaml"
GROUP_PATH = "/apis/scheduling.sigs.k8s.io/v1alpha1"
PREFIX = "quota.scheduling.koordinator.sh/"
DENIED = 'admission webhook "velasticquota.koordinator.sh" denied the request: '


def install_crd(plane: ControlPlane) -> None:
    doc = next(d for d in yaml.safe_load_all(CRD.read_text()) if d)
    result = plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
    assert result.status in (201, 409), result.body[:300]
    wait_until(
        lambda: plane.request("GET", f"{GROUP_PATH}/elasticquotas").status == 200,
        timeout=30,
        what="ElasticQuota CRD served",
    )


def quota(
    namespace: str, name: str, *, min_: dict[str, Any], max_: dict[str, Any], parent: str = "", is_parent: bool = False
) -> dict[str, Any]:
    labels = {PREFIX + "is-parent": "true" if is_parent else "false"}
    if parent:
        labels[PREFIX + "parent"] = parent
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"min": min_, "max": max_},
    }


def post(plane: ControlPlane, body: dict[str, Any]) -> tuple[int, str]:
    result = plane.request("POST", f"{GROUP_PATH}/namespaces/{body['metadata']['namespace']}/elasticquotas", body)
    message = "" if result.status < 300 else str(result.json().get("message", ""))
    return result.status, message


def start_webhook(
    plane: ControlPlane, namespace: str, configuration: str, port: int, log: BinaryIO
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            str(REPO / ".venv" / "bin" / "koord-scheduler"),
            "--kubeconfig",
            str(plane.kubeconfig),
            "--leader-elect=false",
            "--metrics-port",
            "0",
            "--controllers=-elasticquota",
            "--webhook-port",
            str(port),
            "--webhook-bind-address",
            "127.0.0.1",
            "--webhook-namespace",
            namespace,
            "--webhook-configuration-name",
            f"{configuration}-none",
            "--webhook-validating-configuration-name",
            configuration,
            "--webhook-cert-hosts",
            "127.0.0.1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )


def test_quota_webhook_refuses_invalid_trees_and_the_plugin_reports_what_slips_through(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    install_crd(control_plane)
    scope = Scope.create(control_plane, "quota-webhook")
    ns = scope.namespace
    configuration = f"pykoord-{ns}"
    port = free_port()
    register_quota_webhook(control_plane, configuration, port=port, ca_pem=b"", namespace=ns, failure_policy="Ignore")
    log = tmp_path / "koord-scheduler.log"
    log_file = log.open("wb")
    process = start_webhook(control_plane, ns, configuration, port, log_file)
    scheduler: SchedulerProcess | None = None
    try:
        # Ready when the CA is in the configuration and a probe quota is refused (the server answers).
        def refusing() -> bool:
            assert process.poll() is None, log.read_text()[-3000:]
            vwc = control_plane.request("GET", f"{VWC_PATH}/{configuration}").json()
            if not vwc["webhooks"][0]["clientConfig"].get("caBundle"):
                return False
            status, _ = post(control_plane, quota(ns, "probe", min_={"cpu": 2}, max_={"cpu": 1}))
            if status == 201:
                control_plane.request("DELETE", f"{GROUP_PATH}/namespaces/{ns}/elasticquotas/probe")
            return status == 400

        wait_until(refusing, timeout=60, what="the quota webhook serving with its CA injected")

        # A valid tree: a parent quota and two children filling its min exactly; created back to back.
        assert post(control_plane, quota(ns, f"{ns}-org", min_={"cpu": 4}, max_={"cpu": 8}, is_parent=True))[0] == 201
        for child in ("a", "b"):
            status, message = post(
                control_plane, quota(ns, f"{ns}-{child}", min_={"cpu": 2}, max_={"cpu": 4}, parent=f"{ns}-org")
            )
            assert status == 201, message

        # max below min: refused, with Koordinator's message.
        status, message = post(control_plane, quota(ns, f"{ns}-bad", min_={"cpu": 4}, max_={"cpu": 2}))
        assert (status, message) == (400, f"{DENIED}resourceKey cpu of quota {ns}-bad min 4 > max 2")

        # A third child would take the children's min to 5 cpu, above the parent's 4.
        status, message = post(
            control_plane, quota(ns, f"{ns}-c", min_={"cpu": 1}, max_={"cpu": 2}, parent=f"{ns}-org")
        )
        assert (status, message) == (
            400,
            f"{DENIED}checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: {ns}-org",
        )

        # The parent cannot be deleted while it has child quotas; a status-only update is let through.
        deleted = control_plane.request("DELETE", f"{GROUP_PATH}/namespaces/{ns}/elasticquotas/{ns}-org")
        assert deleted.status == 400
        assert f"delete quota failed, quota {ns}-org has 2 child quotas" in str(deleted.json()["message"])
        org = control_plane.request("GET", f"{GROUP_PATH}/namespaces/{ns}/elasticquotas/{ns}-org").json()
        org["status"] = {"used": {"cpu": "1"}}
        assert control_plane.request("PUT", f"{GROUP_PATH}/namespaces/{ns}/elasticquotas/{ns}-org", org).status == 200

        # The webhook down: failurePolicy Ignore admits the invalid quota; the plugin reports and skips it.
        process.send_signal(signal.SIGTERM)
        assert process.wait(20) == 0, log.read_text()[-3000:]
        status, message = post(control_plane, quota(ns, f"{ns}-bad", min_={"cpu": 4}, max_={"cpu": 2}))
        assert status == 201, message
        config = scheduler_config(scope)
        config["profiles"][0]["plugins"] = {
            "preFilter": {"enabled": [{"name": "ElasticQuota"}]},
            "postFilter": {"disabled": [{"name": "*"}], "enabled": [{"name": "ElasticQuota"}]},
            "reserve": {"enabled": [{"name": "ElasticQuota"}]},
        }
        scheduler = SchedulerProcess.start(control_plane, config, tmp_path, extra_args=("--controllers=elasticquota",))

        def about_bad() -> list[dict[str, Any]]:
            return [e for e in scope.events(reason="InvalidQuotaTree") if e["regarding"]["name"] == f"{ns}-bad"]

        wait_until(lambda: bool(about_bad()), timeout=30, what="InvalidQuotaTree event on the invalid quota")
        assert [e["note"] for e in about_bad()] == ["spec.min.cpu (4) is above spec.max.cpu (2)"]
        # The valid tree is not reported, although its children are listed before their parent.
        assert {e["regarding"]["name"] for e in scope.events(reason="InvalidQuotaTree")} == {f"{ns}-bad"}
        scope.add_node("n1", cpu="4")
        pod = scope.pod_body("in-bad-quota", cpu="100m")
        pod["metadata"]["labels"] = {PREFIX + "name": f"{ns}-bad"}
        scope.add_pods([pod])
        scope.wait_all_bound(1, timeout=60)
    except AssertionError:
        if scheduler is not None:
            print(scheduler.log_tail())
        print(log.read_text()[-3000:] if log.exists() else "")
        raise
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(20)
        log_file.close()
        if scheduler is not None:
            scheduler.terminate()
        control_plane.request("DELETE", f"{VWC_PATH}/{configuration}")
        control_plane.request("DELETE", f"{GROUP_PATH}/namespaces/{ns}/elasticquotas")
        scope.cleanup()
