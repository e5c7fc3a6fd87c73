#!/usr/bin/env python3
"""Admission latency the pod validating webhook (``/validate-pod``) adds to pod creation, on a real
kube-apiserver. Same method as ``bench/colocation_webhook_latency.py``.

The admission server runs in a child process (as koord-scheduler runs it, with a generated CA, watching
the ElasticQuotas); a ValidatingWebhookConfiguration (``vpod.koordinator.sh``) sends pod CREATEs of
namespace ``vpod-bench`` to it on loopback. ``--quotas`` ElasticQuotas (a parent and its leaves) exist, and
every pod names a leaf quota and a QoS class, so each review runs every rule: the reserve-pod annotation,
the QoS and priority rules (the pod's requests parsed), and the quota lookup. Pods are created one
request at a time over one keep-alive HTTPS connection, alternating between ``vpod-bench`` (through the
webhook) and ``plain-bench`` (no webhook) so both see the same API server and etcd load.

Reported, in milliseconds:

- ``create_with_validation`` / ``create_without_webhook``: p50 / p99 of the POST latency seen by the client;
- ``added``: their difference at p50 and p99, and ``added_paired``: p50 / p99 of (with - without) for each
  pair of consecutive creations;
- ``webhook_service``: p50 / p99 of the time the webhook spent on one review, measured inside it;
- ``rejected``: POSTs that did not return 201 (must be 0), ``refused_probe``: whether a pod breaking a rule
  (BE with koord-prod priority) was refused (must be true).

    .venv/bin/python bench/pod_validation_latency.py [--pods 200] [--quotas 50] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(REPO / "bench"))

from colocation_webhook_latency import KeepAlive, quantiles  # noqa: E402
from controlplane import ControlPlane, free_port, running_control_plane  # noqa: E402

from koord_scheduler.webhook.certs import generate_bundle, write_bundle  # noqa: E402

WEBHOOK_NS, PLAIN_NS = "vpod-bench", "plain-bench"
VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
QUOTAS = "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/quota-bench/elasticquotas"
PREFIX = "quota.scheduling.koordinator.sh/"


def pod(name: str, leaf: int, *, labels: dict[str, str] | None = None, priority_class: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "app",
                "image": "nginx",
                "resources": {"requests": {"cpu": "1", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}},
            }
        ]
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": labels or {"koordinator.sh/qosClass": "LS", PREFIX + "name": f"leaf-{leaf}"},
        },
        "spec": spec,
    }


def serve_webhook(
    kubeconfig: str, cert_dir: str, port: int, samples: str, events: tuple[Any, Any], *, quotas: int
) -> None:
    """The admission server in its own process, timing each pod review. ``events``: (ready, stop)."""
    ready, stop = events
    from prometheus_client import CollectorRegistry

    from koord_scheduler.webhook.options import WebhookOptions, WebhookRuntime
    from kubeapi import load_connection

    async def main() -> None:
        options = WebhookOptions(port=port, bind_address="127.0.0.1", cert_dir=cert_dir)
        runtime = WebhookRuntime(options, load_connection(kubeconfig), CollectorRegistry())
        service: list[float] = []
        review = runtime.pods.review

        async def timed_review(body: Any) -> dict[str, Any]:
            started = time.perf_counter()
            try:
                return await review(body)
            finally:
                service.append(time.perf_counter() - started)

        runtime.pods.review = timed_review  # type: ignore[method-assign]
        await runtime.start()
        while len(runtime.quota_lookup.quotas()) < quotas + 1:
            await asyncio.sleep(0.05)
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.2)
        await runtime.stop()
        Path(samples).write_text(json.dumps(service))

    asyncio.run(main())


def register(plane: ControlPlane, port: int, ca_pem: bytes) -> None:
    import base64

    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "pykoord-vpod-bench"},
        "webhooks": [
            {
                "name": "vpod.koordinator.sh",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Ignore",
                "timeoutSeconds": 5,
                "clientConfig": {
                    "url": f"https://127.0.0.1:{port}/validate-pod",
                    "caBundle": base64.b64encode(ca_pem).decode(),
                },
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": WEBHOOK_NS}},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    }
                ],
            }
        ],
    }
    plane.request("DELETE", f"{VWC}/pykoord-vpod-bench")
    result = plane.request("POST", VWC, body)
    if result.status != 201:
        raise SystemExit(f"cannot register the webhook: {result.status} {result.body[:300]!r}")


def quota(name: str, *, parent: str = "", is_parent: bool = False) -> dict[str, Any]:
    labels = {PREFIX + "is-parent": "true" if is_parent else "false"}
    if parent:
        labels[PREFIX + "parent"] = parent
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": "quota-bench", "labels": labels},
        "spec": {"min": {"cpu": "1"}, "max": {"cpu": "1000"}},
    }


def run(plane: ControlPlane, pods: int, quotas: int, work: Path) -> dict[str, Any]:
    for ns in (WEBHOOK_NS, PLAIN_NS, "quota-bench"):
        plane.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        plane.request("DELETE", f"/api/v1/namespaces/{ns}/pods")
    plane.request(
        "POST",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "bench-prod"},
            "value": 9500,
        },
    )
    plane.request(
        "POST", QUOTAS, {**quota("org", is_parent=True), "spec": {"min": {"cpu": str(quotas)}, "max": {"cpu": "1000"}}}
    )
    for i in range(quotas):
        plane.request("POST", QUOTAS, quota(f"leaf-{i}", parent="org"))
    bundle = generate_bundle(["127.0.0.1"])
    write_bundle(bundle, work / "certs")
    port = free_port()
    spawn = multiprocessing.get_context("spawn")
    ready, stop = spawn.Event(), spawn.Event()
    samples = work / "service.json"
    child = spawn.Process(
        target=serve_webhook,
        args=(str(plane.kubeconfig), str(work / "certs"), port, str(samples), (ready, stop)),
        kwargs={"quotas": quotas},
    )
    child.start()
    if not ready.wait(120):
        child.kill()
        raise SystemExit("the webhook process did not start")
    register(plane, port, bundle.ca_pem)
    client = KeepAlive(plane)
    with_webhook: list[float] = []
    without: list[float] = []
    rejected = 0
    try:
        # Until the API server calls the webhook: a BE pod of koord-prod priority is refused.
        deadline = time.monotonic() + 30
        refused_probe = False
        while time.monotonic() < deadline and not refused_probe:
            bad = pod(
                f"probe-{int(time.monotonic() * 1000)}",
                0,
                labels={"koordinator.sh/qosClass": "BE"},
                priority_class="bench-prod",
            )
            status, payload, _ = client.post(f"/api/v1/namespaces/{WEBHOOK_NS}/pods", bad)
            refused_probe = status == 400 and b"vpod.koordinator.sh" in payload
            time.sleep(0.1)
        for i in range(pods):
            for ns, sink in ((WEBHOOK_NS, with_webhook), (PLAIN_NS, without)):
                status, _, seconds = client.post(f"/api/v1/namespaces/{ns}/pods", pod(f"p-{i}", i % max(quotas, 1)))
                if status != 201:
                    rejected += 1
                    continue
                sink.append(seconds)
    finally:
        stop.set()
        child.join(30)
        plane.request("DELETE", f"{VWC}/pykoord-vpod-bench")
        for ns in (WEBHOOK_NS, PLAIN_NS):
            plane.request("DELETE", f"/api/v1/namespaces/{ns}/pods")
    service = json.loads(samples.read_text()) if samples.exists() else []
    with_q, without_q = quantiles(with_webhook), quantiles(without)
    return {
        "pods_per_side": pods,
        "quotas": quotas,
        "create_with_validation_ms": with_q,
        "create_without_webhook_ms": without_q,
        "added_ms": {k: round(with_q[k] - without_q[k], 3) for k in ("p50", "p99")},
        "added_paired_ms": quantiles([a - b for a, b in zip(with_webhook, without, strict=False)]),
        "webhook_service_ms": quantiles(service),
        "webhook_reviews": len(service),
        "rejected": rejected,
        "refused_probe": refused_probe,
        "machine": {"nproc": os.cpu_count(), "python": sys.version.split()[0], "load": os.getloadavg()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=200, help="pods created through the webhook (and as many without)")
    parser.add_argument("--quotas", type=int, default=50, help="leaf ElasticQuotas the pods are spread over")
    parser.add_argument("--json", help="write the result here too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pykoord-vpod-bench-") as tmp:
        work = Path(tmp)
        with running_control_plane(work / "cluster") as plane:
            result = run(plane, args.pods, args.quotas, work)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0 if result["rejected"] == 0 and result["refused_probe"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
