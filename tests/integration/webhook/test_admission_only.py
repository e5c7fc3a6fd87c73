"""koord-scheduler as an admission-only process (``--scheduling=false`` and every controller off, the
webhook on), against the real API server: ready without informers or a Lease, answers reviews over TLS,
refuses a forged one, and stops cleanly. This is how the webhook runs in a process (or Deployment) of its
own, away from the scheduler's cores (bench/webhook_flood.py's ``current-process``)."""

from __future__ import annotations

import json
import ssl
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from controlplane import ControlPlane, free_port
from kubesched import SchedulerProcess, wait_until

from koord_scheduler.webhook.certs import generate_bundle, write_bundle

pytestmark = pytest.mark.integration

CONTROLLERS_OFF = "--controllers=" + ",".join(
    f"-{c}"
    for c in (
        "reservation",
        "nodeslo",
        "noderesource",
        "nodemetric",
        "elasticquota",
        "podgroup",
        "deviceresource",
        "quotaprofile",
    )
)


def review(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "operation": "CREATE",
            "namespace": namespace,
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "object": {"metadata": {"name": "p"}, "spec": {"containers": []}},
        },
    }


def test_admission_only_process(control_plane: ControlPlane, tmp_path: Path) -> None:
    bundle = generate_bundle(["127.0.0.1"])
    write_bundle(bundle, tmp_path / "certs")
    webhook_port = free_port()
    lease_name = f"admission-only-{webhook_port}"
    proc = SchedulerProcess.start(
        control_plane,
        {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"},
        tmp_path,
        name="admission-only",
        extra_args=[
            "--scheduling=false",
            CONTROLLERS_OFF,
            "--webhook-port",
            str(webhook_port),
            "--webhook-bind-address",
            "127.0.0.1",
            "--webhook-cert-dir",
            str(tmp_path / "certs"),
            "--leader-elect-resource-name",
            lease_name,
        ],
    )
    try:
        context = ssl.create_default_context(cadata=bundle.ca_pem.decode())

        def post(body: Any) -> Any:
            request = urllib.request.Request(
                f"https://127.0.0.1:{webhook_port}/mutate-pod",
                method="POST",
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=10, context=context) as resp:
                return json.loads(resp.read())

        wait_until(lambda: proc.get("/readyz")[0] == 200, timeout=30, what="readyz")
        assert post(review("default"))["response"] == {"uid": "u-1", "allowed": True}
        denied = post(review("default/pods/x HTTP/1.1\r\n\r\nDELETE /api/v1/namespaces/default/pods/p"))
        assert denied["response"]["allowed"] is False
        assert proc.metric("koord_webhook_requests_refused_total", path="/mutate-pod", reason="Denied") == 1
        lease = control_plane.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{lease_name}")
        assert lease.status == 404, "an admission-only process takes no Lease"
        assert "serving the admission webhooks only" in proc.log_path.read_text()
    finally:
        assert proc.terminate() == 0, proc.log_tail()
    assert "Traceback" not in proc.log_path.read_text()
