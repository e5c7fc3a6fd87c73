#!/usr/bin/env python3
"""Admission latency the ClusterColocationProfile webhook adds to pod creation, on a real kube-apiserver.

The admission server runs in a child process (as koord-scheduler runs it, with a generated CA); a
MutatingWebhookConfiguration sends pod CREATEs of namespace ``coloc-bench`` to it on loopback; a profile
like the one of Koordinator's manual selects every pod there. Pods are created one request at a time
over one keep-alive HTTPS connection, alternating between ``coloc-bench`` (through the webhook) and
``plain-bench`` (no webhook) so both see the same API server and etcd load.

Reported, in milliseconds:

- ``create_with_webhook`` / ``create_without_webhook``: p50 / p99 of the POST latency seen by the client;
- ``added``: their difference at p50 and p99 (what the webhook costs a pod creation end to end), and
  ``added_paired``: p50 / p99 of (with - without) for each pair of consecutive creations;
- ``webhook_service``: p50 / p99 of the time the webhook spent on one review (parse, mutate, patch),
  measured inside it;
- ``rejected``: POSTs that did not return 201 (must be 0), and ``unmutated``: webhook-namespace pods that
  came back without the profile's label (must be 0).

    .venv/bin/python bench/colocation_webhook_latency.py [--pods 200] [--json out.json]

Short by default (200 pods per side); ``--pods 2000`` for the figure in docs/benchmarks.md. A control
plane is started in a temp dir for the run (binaries from scripts/control-plane.sh build).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import os
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "integration"))

from colocation_webhook import PROFILES_PATH, install_api, register  # noqa: E402
from controlplane import ControlPlane, free_port, running_control_plane  # noqa: E402

from koord_scheduler.webhook.certs import generate_bundle, write_bundle  # noqa: E402

WEBHOOK_NS, PLAIN_NS = "coloc-bench", "plain-bench"
PROFILE = {
    "apiVersion": "config.koordinator.sh/v1alpha1",
    "kind": "ClusterColocationProfile",
    "metadata": {"name": "bench-colocation"},
    "spec": {
        "selector": {"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
        "qosClass": "BE",
        "priorityClassName": "koord-batch",
        "koordinatorPriority": 1000,
        "schedulerName": "koord-scheduler",
        "labels": {"koordinator.sh/mutated": "true"},
    },
}


class KeepAlive:
    """One HTTPS connection to the API server, reused for every request."""

    def __init__(self, plane: ControlPlane) -> None:
        url = urlparse(plane.server)
        self.token = plane.token
        self.conn = http.client.HTTPSConnection(
            url.hostname or "127.0.0.1", url.port, context=ssl.create_default_context(cafile=str(plane.ca_file))
        )

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, bytes, float]:
        data = json.dumps(body).encode()
        started = time.perf_counter()
        self.conn.request(
            "POST",
            path,
            body=data,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        resp = self.conn.getresponse()
        payload = resp.read()
        return resp.status, payload, time.perf_counter() - started


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"koordinator.sh/enable-colocation": "true", "app": "bench"}},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "nginx",
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                        "limits": {"cpu": "1", "memory": "256Mi"},
                    },
                }
            ]
        },
    }


def serve_webhook(kubeconfig: str, cert_dir: str, port: int, samples: str, events: tuple[Any, Any]) -> None:
    """The admission server in its own process (as koord-scheduler runs it), timing each review.
    ``events``: (ready, stop) multiprocessing Events."""
    ready, stop = events
    from prometheus_client import CollectorRegistry

    from koord_scheduler.webhook.options import WebhookOptions, WebhookRuntime
    from kubeapi import load_connection

    async def main() -> None:
        options = WebhookOptions(port=port, bind_address="127.0.0.1", cert_dir=cert_dir)
        runtime = WebhookRuntime(options, load_connection(kubeconfig), CollectorRegistry())
        service: list[float] = []
        review = runtime.mutator.review

        async def timed_review(body: Any) -> dict[str, Any]:
            started = time.perf_counter()
            try:
                return await review(body)
            finally:
                service.append(time.perf_counter() - started)

        runtime.mutator.review = timed_review  # type: ignore[method-assign]
        await runtime.start()
        while not runtime.lookup.profiles():
            await asyncio.sleep(0.05)
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.2)
        await runtime.stop()
        Path(samples).write_text(json.dumps(service))

    asyncio.run(main())


def quantiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    if not ordered:
        return {"p50": 0.0, "p99": 0.0}

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return {"p50": round(at(0.50), 3), "p99": round(at(0.99), 3), "mean": round(statistics.fmean(ordered) * 1000, 3)}


def run(plane: ControlPlane, pods: int, work: Path) -> dict[str, Any]:
    install_api(plane)
    for ns in (WEBHOOK_NS, PLAIN_NS):
        plane.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        plane.request("DELETE", f"/api/v1/namespaces/{ns}/pods")
    plane.request("DELETE", f"{PROFILES_PATH}/{PROFILE['metadata']['name']}")
    plane.request("POST", PROFILES_PATH, PROFILE)
    bundle = generate_bundle(["127.0.0.1"])
    write_bundle(bundle, work / "certs")
    port = free_port()
    spawn = multiprocessing.get_context("spawn")
    ready, stop = spawn.Event(), spawn.Event()
    samples = work / "service.json"
    child = spawn.Process(
        target=serve_webhook, args=(str(plane.kubeconfig), str(work / "certs"), port, str(samples), (ready, stop))
    )
    child.start()
    if not ready.wait(60):
        child.kill()
        raise SystemExit("the webhook process did not start")
    register(plane, "pykoord-colocation-bench", port=port, ca_pem=bundle.ca_pem, namespace=WEBHOOK_NS)
    client = KeepAlive(plane)
    with_webhook: list[float] = []
    without: list[float] = []
    rejected = unmutated = 0
    try:
        for i in range(pods):
            for ns, sink in ((WEBHOOK_NS, with_webhook), (PLAIN_NS, without)):
                status, payload, seconds = client.post(f"/api/v1/namespaces/{ns}/pods", pod(f"p-{i}"))
                if status != 201:
                    rejected += 1
                    continue
                sink.append(seconds)
                labels = json.loads(payload)["metadata"]["labels"]
                if ns == WEBHOOK_NS and labels.get("koordinator.sh/qosClass") != "BE":
                    unmutated += 1
    finally:
        stop.set()
        child.join(30)
        plane.request(
            "DELETE", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/pykoord-colocation-bench"
        )
        for ns in (WEBHOOK_NS, PLAIN_NS):
            plane.request("DELETE", f"/api/v1/namespaces/{ns}/pods")
    service = json.loads(samples.read_text()) if samples.exists() else []
    with_q, without_q = quantiles(with_webhook), quantiles(without)
    return {
        "pods_per_side": pods,
        "create_with_webhook_ms": with_q,
        "create_without_webhook_ms": without_q,
        "added_ms": {k: round(with_q[k] - without_q[k], 3) for k in ("p50", "p99")},
        "added_paired_ms": quantiles([a - b for a, b in zip(with_webhook, without, strict=False)]),
        "webhook_service_ms": quantiles(service),
        "webhook_reviews": len(service),
        "rejected": rejected,
        "unmutated": unmutated,
        "machine": {"nproc": os.cpu_count(), "python": sys.version.split()[0]},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=200, help="pods created through the webhook (and as many without)")
    parser.add_argument("--json", help="write the result here too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pykoord-webhook-bench-") as tmp:
        work = Path(tmp)
        with running_control_plane(work / "cluster") as plane:
            result = run(plane, args.pods, work)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0 if result["rejected"] == 0 and result["unmutated"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
