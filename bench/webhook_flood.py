#!/usr/bin/env python3
"""Scheduling latency while koord-scheduler's admission webhook is flooded, before and after, in one run.

A koord-scheduler process (default profile, leader election off, client limits lifted) serves its admission
webhook on loopback (``--webhook-port``, certificates from ``--webhook-cert-dir``) and schedules pods that a
driver in this process creates at a fixed rate (open loop, ``--rate`` pods/s for ``--seconds``). A separate
watch (protobuf, as the scheduler reads pods) records when each pod is first seen bound; latency = that
moment - the moment its create returned. Phases, one after the other on the same process:

1. ``quiet``: no flood;
2. ``flood-<MB>MB`` for each ``--review-mb``: ``--clients`` client processes post AdmissionReviews of that
   size to ``/mutate-pod`` back to back over TLS, as anyone who reaches the port can (a pod review padded
   with one annotation; no webhook configuration sends them, so the pods scheduled never pass the webhook).

Contenders, one after the other on the same control plane: ``baseline``, the code of ``--baseline REF``
(default 43eab96, before the webhook got its own thread and the 3 MiB limit) checked out in a temporary
``git worktree`` and run with this repository's virtualenv; ``current``, this checkout (the webhook on its
own thread in the scheduler's process); and ``current-process``, this checkout with the webhook in a second
koord-scheduler process that runs nothing else (``--scheduling=false``, every controller off), as a
separate admission Deployment would.

Reported per contender and phase: pods bound, p50 / p99 / max latency (ms), and what the flood clients got
(answers by HTTP status, connection errors, MB/s of review they managed to send); then each flood phase's
p99 over the quiet p99 of the same contender, and current over baseline.

    .venv/bin/python bench/webhook_flood.py [--nodes 50] [--rate 20] [--seconds 15] [--clients 4]
        [--review-mb 6,2.5] [--baseline 43eab96] [--only current] [--kubeconfig FILE] [--json out.json]

Everything shares the machine's cores (the API server, etcd, the scheduler, the flood clients and this
driver); run nothing else meanwhile and compare figures of the same run only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(REPO / "bench"))

from controlplane import free_port, running_control_plane  # noqa: E402
from e2e_throughput import (  # noqa: E402
    LIFTED_QPS,
    NAMESPACE,
    BindWatcher,
    delete_pods,
    ensure_namespace,
    ensure_nodes,
)

from koord_scheduler.webhook.certs import generate_bundle, write_bundle  # noqa: E402
from kubeapi import ApiHttp, HttpOptions, TokenBucket, load_connection  # noqa: E402

DEFAULT_BASELINE = "43eab96"


# ----- the flood -----

FLOOD_CLIENT = Path(__file__).resolve().parent / "webhook_flood_client.py"


class Flood:
    """``clients`` processes of bench/webhook_flood_client.py, each posting reviews until :meth:`finish`."""

    def __init__(self, port: int, megabytes: float, clients: int) -> None:
        self.procs = [
            subprocess.Popen(
                [sys.executable, str(FLOOD_CLIENT), str(port), str(megabytes)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(clients)
        ]
        for p in self.procs:
            assert p.stdout is not None
            assert p.stdout.readline().strip() == "ready"

    def finish(self) -> dict[str, Any]:
        statuses: dict[str, int] = {}
        sent, seconds = 0, 0.0
        for p in self.procs:
            out, _ = p.communicate(input="", timeout=60)
            got = json.loads(out.strip().splitlines()[-1])
            sent += got["bytes"]
            seconds = max(seconds, got["seconds"])
            for k, v in got["statuses"].items():
                statuses[k] = statuses.get(k, 0) + v
        return {"answers": statuses, "review_mb_per_s": round(sent / 1e6 / max(seconds, 0.001), 1)}


# ----- the scheduler under test -----


ADMISSION_ONLY = [
    "--scheduling=false",
    "--controllers="
    + ",".join(
        f"-{c}"
        for c in ("reservation", "nodeslo", "noderesource", "nodemetric", "elasticquota", "podgroup", "deviceresource")
    ),
]
"""A koord-scheduler that serves only the admission webhooks (the ``current-process`` contender's second one)."""


def start_scheduler(
    name: str, code: Path, kubeconfig: str, work: Path, webhook_port: int, *, role: str = "both"
) -> subprocess.Popen[bytes]:
    """``role``: ``both`` (scheduling and the webhook in one process), ``scheduler`` (no webhook) or
    ``admission`` (only the webhook)."""
    certs = work / f"{name}-certs"
    write_bundle(generate_bundle(["127.0.0.1"]), certs)
    config = work / f"{name}.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": kubeconfig, "qps": LIFTED_QPS, "burst": LIFTED_QPS},
                "leaderElection": {"leaderElect": False},
            }
        )
    )
    launcher = "import sys; from koord_scheduler.app.cli import main; sys.argv[0] = 'koord-scheduler'; main()"
    args = [sys.executable, "-c", launcher, "--config", str(config), "--metrics-port", "0"]
    if role != "scheduler":
        args += [
            "--webhook-port",
            str(webhook_port),
            "--webhook-bind-address",
            "127.0.0.1",
            "--webhook-cert-dir",
            str(certs),
        ]
    if role == "admission":
        args += ADMISSION_ONLY
    env = {**os.environ, "PYTHONPATH": str(code)}
    log = (work / f"{name}-{role}.log").open("ab")
    return subprocess.Popen(args, cwd=code, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the scheduler exited with {proc.returncode}")
        try:
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError("the webhook did not come up")


# ----- one phase -----


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "containers": [
                {
                    "name": "pause",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}},
                }
            ]
        },
    }


async def phase(http: ApiHttp, name: str, *, rate: float, seconds: float) -> dict[str, Any]:
    """Create ``rate * seconds`` pods at a fixed rate; their bind latencies."""
    n = int(rate * seconds)
    listing = await http.request_json("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", params={"limit": "1"})
    watcher = BindWatcher(http, listing["metadata"]["resourceVersion"], n, name_prefix=f"{name}-")
    watch = asyncio.ensure_future(watcher.run())
    created: dict[str, float] = {}
    started = time.monotonic()

    async def create(i: int) -> None:
        await asyncio.sleep(max(0.0, started + i / rate - time.monotonic()))
        pod_name = f"{name}-{i}"
        await http.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=pod(pod_name))
        created[pod_name] = time.monotonic()

    await asyncio.gather(*(create(i) for i in range(n)))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(watcher.done.wait(), timeout=seconds + 60)
    watch.cancel()
    await asyncio.gather(watch, return_exceptions=True)
    latencies = sorted((watcher.bound[p] - created[p]) * 1000 for p in created if p in watcher.bound)
    last = max(watcher.bound.values(), default=started)
    return {
        "phase": name,
        "pods": n,
        "bound": len(latencies),
        "bound_per_s": round(len(latencies) / max(0.001, last - started), 1),
        "p50_ms": round(statistics.median(latencies), 1) if latencies else None,
        "p99_ms": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], 1) if latencies else None,
        "max_ms": round(latencies[-1], 1) if latencies else None,
    }


async def run_contender(
    name: str, code: Path, *, args: argparse.Namespace, kubeconfig: str, work: Path, http: ApiHttp
) -> list[dict[str, Any]]:
    port = free_port()
    separate = name.endswith("-process")
    proc = start_scheduler(name, code, kubeconfig, work, port, role="scheduler" if separate else "both")
    admission = start_scheduler(name, code, kubeconfig, work, port, role="admission") if separate else None
    results = []
    try:
        await asyncio.to_thread(wait_listening, port, admission or proc)
        await delete_pods(http)
        warm = await phase(http, f"{name}-warm", rate=args.rate, seconds=2)  # first lists and warm-up out of the way
        print(f"# {name}: warm-up bound {warm['bound']}/{warm['pods']}", file=sys.stderr)
        for mb in [None, *args.review_mb]:
            await delete_pods(http)
            label = "quiet" if mb is None else f"flood-{mb:g}MB"
            flood = await asyncio.to_thread(Flood, port, mb, args.clients) if mb is not None else None
            if flood is not None:
                await asyncio.sleep(2)  # the flood is under way before the first pod
            result = await phase(
                http, f"{name}-{label}".lower().replace(".", "-"), rate=args.rate, seconds=args.seconds
            )
            result.update({"contender": name, "phase": label})
            if flood is not None:
                result["flood"] = await asyncio.to_thread(flood.finish)
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited during {label}")
            results.append(result)
            print(json.dumps(result), file=sys.stderr)
    finally:
        for p in (proc, admission):
            if p is None:
                continue
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
    return results


def baseline_tree(ref: str, work: Path) -> Path:
    tree = work / "baseline"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), ref], check=True, capture_output=True
    )
    return tree


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    by = {(r["contender"], r["phase"]): r for r in results}
    out: dict[str, Any] = {}
    for (contender, ph), r in by.items():
        quiet = by.get((contender, "quiet"))
        if ph != "quiet" and quiet and quiet["p99_ms"] and r["p99_ms"]:
            out[f"{contender} {ph} p99 / quiet p99"] = round(r["p99_ms"] / quiet["p99_ms"], 2)
        base = by.get(("baseline", ph))
        if contender != "baseline" and base and base["p99_ms"] and r["p99_ms"]:
            out[f"{ph}: {contender} p99 / baseline p99"] = round(r["p99_ms"] / base["p99_ms"], 2)
    return out


async def bench(args: argparse.Namespace, kubeconfig: str, work: Path) -> dict[str, Any]:
    http = ApiHttp(load_connection(kubeconfig), TokenBucket(0, 1), options=HttpOptions(pool_size=64))
    try:
        await ensure_nodes(http, args.nodes)
        await ensure_namespace(http)
        results: list[dict[str, Any]] = []
        for name in args.only:
            if name not in ("baseline", "current", "current-process"):
                raise SystemExit(f"--only: unknown contender {name!r}")
            code = baseline_tree(args.baseline, work) if name == "baseline" else REPO
            results += await run_contender(name, code, args=args, kubeconfig=kubeconfig, work=work, http=http)
        return {
            "results": results,
            "summary": summarize(results),
            "settings": {k: v for k, v in vars(args).items() if k != "json"},
        }
    finally:
        await http.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--rate", type=float, default=20.0, help="pods created per second")
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each phase")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--review-mb", type=lambda s: [float(x) for x in s.split(",")], default=[6.0, 2.5])
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="git ref of the code before")
    parser.add_argument("--only", type=lambda s: s.split(","), default=["baseline", "current", "current-process"])
    parser.add_argument("--kubeconfig", default="")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="webhook-flood-") as tmp:
        work = Path(tmp)
        try:
            if args.kubeconfig:
                report = asyncio.run(bench(args, args.kubeconfig, work))
            else:
                with running_control_plane(work / "cluster") as plane:
                    report = asyncio.run(bench(args, str(plane.kubeconfig), work))
        finally:
            if (work / "baseline").exists():
                subprocess.run(
                    ["git", "-C", str(REPO), "worktree", "remove", "--force", str(work / "baseline")],
                    check=False,
                    capture_output=True,
                )
    print(json.dumps(report["summary"], indent=2))
    for r in report["results"]:
        flood = r.get("flood") or {}
        print(
            f"{r['contender']:9} {r['phase']:12} bound {r['bound']:4}/{r['pods']:<4} p50 {r['p50_ms']} ms  "
            f"p99 {r['p99_ms']} ms  max {r['max_ms']} ms  {flood}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
