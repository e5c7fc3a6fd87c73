"""Extenders, both sides, over loopback HTTP.

1. Calling: SchedulingBasic (4 CPU / 32Gi nodes, 100m / 500Mi pods) in-process, without and then with one
   extender (filter + prioritize, nodeCacheCapable) that accepts every node and scores it 5; the
   extender is a trivial aiohttp server in another process, so its CPU is not the scheduler's.
2. Serving: ``koord-scheduler extender-server``'s service (the default profile over an in-memory cluster
   of the same nodes) in another process; the scheduler's own extender client posts filter and
   prioritize requests with all node names, one at a time as kube-scheduler does, and the requests/s
   and latency percentiles are reported.

    python bench/extender_throughput.py                       # 1000 nodes, 500 pods, 300 requests
    python bench/extender_throughput.py --nodes 1000 --pods 2000 --requests 1000 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import time
from typing import Any

import numpy as np
import orjson
import yaml
from aiohttp import web
from measure import measure  # bench/ is the script directory
from scheduler_throughput import FULL_CONFIG, node_obj, pod_obj

from apis.config import KubeSchedulerConfiguration, parse_scheduler_config
from apis.config.extender import Extender
from apis.core.parse import parse_node, parse_pod
from koord_scheduler.app.extender_http import make_app
from koord_scheduler.app.extender_server import build_extender_scheduler, service_for
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.extenders import HTTPExtender
from koord_scheduler.scheduler.memory_source import MemoryCluster


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cluster(nodes: int, placed: int, pending: int) -> MemoryCluster:
    node_list = [parse_node(node_obj(i)) for i in range(nodes)]
    placed_pods = [parse_pod(pod_obj(i, f"node-{i % nodes}")) for i in range(placed)]
    pending_pods = [parse_pod(pod_obj(placed + i)) for i in range(pending)]
    return MemoryCluster.from_objects(node_list, placed_pods + pending_pods)


# ----- servers (child processes) -----


async def serve_trivial(port: int) -> None:
    def reply(value: Any) -> web.Response:
        return web.Response(body=orjson.dumps(value), content_type="application/json")

    async def filter_handler(request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        return reply({"NodeNames": body["NodeNames"], "FailedNodes": {}, "Error": ""})

    async def prioritize_handler(request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        return reply([{"Host": n, "Score": 5} for n in body["NodeNames"]])

    app = web.Application()
    app.router.add_post("/filter", filter_handler)
    app.router.add_post("/prioritize", prioritize_handler)
    await _run_app(app, port)


async def serve_koord(port: int, nodes: int, placed: int) -> None:
    mem = cluster(nodes, placed, 0)
    scheduler = build_extender_scheduler(KubeSchedulerConfiguration(), build_registry(use_entry_points=False), mem)
    await mem.start(scheduler, list(scheduler.watched_kinds.values()))

    async def get_pod(namespace: str, name: str) -> Any:
        return mem.pods.get(f"{namespace}/{name}")

    await _run_app(make_app(service_for(scheduler), mem, synced=lambda: True, get_pod=get_pod), port)


async def _run_app(app: web.Application, port: int) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print("ready", flush=True)
    await asyncio.Event().wait()


def start_server(*args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


# ----- measurements -----


async def scheduling(nodes: int, placed: int, pods: int, extender_url: str | None) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(FULL_CONFIG.format(pct=100))
    if extender_url:
        doc["extenders"] = [
            {
                "urlPrefix": extender_url,
                "filterVerb": "filter",
                "prioritizeVerb": "prioritize",
                "weight": 1,
                "nodeCacheCapable": True,
            }
        ]
    config = parse_scheduler_config(doc, source="bench")
    mem = cluster(nodes, placed, pods)
    scheduler = build_scheduler(config, build_registry(use_entry_points=False), mem)
    await mem.start(scheduler)
    m = await measure(scheduler, mem, pending=pods, placed=placed)
    return {
        "extender": bool(extender_url),
        "bound": m.bound,
        "pods_per_second": m.pods_per_second,
        "p50_ms": m.p50_ms,
        "p99_ms": m.p99_ms,
        "scheduler_cpu_ms_per_pod": round(m.cpu_seconds / max(m.bound, 1) * 1e3, 3),
    }


def serving(url: str, nodes: int, requests: int) -> list[dict[str, Any]]:
    node_list = [parse_node(node_obj(i)) for i in range(nodes)]
    pod = parse_pod(pod_obj(10**6))
    ext = HTTPExtender(
        Extender(url_prefix=url, filter_verb="filter", prioritize_verb="prioritize", weight=1, node_cache_capable=True)
    )
    out = []
    for verb, call in (("filter", ext.filter), ("prioritize", ext.prioritize)):
        call(pod, node_list)  # warm the connection and the server's caches
        lat = np.empty(requests)
        started = time.perf_counter()
        for i in range(requests):
            t = time.perf_counter()
            call(pod, node_list)
            lat[i] = time.perf_counter() - t
        elapsed = time.perf_counter() - started
        out.append(
            {
                "verb": verb,
                "nodes": nodes,
                "requests": requests,
                "requests_per_second": round(requests / elapsed, 1),
                "p50_ms": round(float(np.percentile(lat, 50)) * 1e3, 2),
                "p99_ms": round(float(np.percentile(lat, 99)) * 1e3, 2),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--placed", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--serve", choices=("trivial", "koord"), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.serve == "trivial":
        asyncio.run(serve_trivial(args.port))
        return
    if args.serve == "koord":
        asyncio.run(serve_koord(args.port, args.nodes, args.placed))
        return

    port = free_port()
    trivial = start_server("--serve", "trivial", "--port", str(port))
    try:
        calling = [
            asyncio.run(scheduling(args.nodes, args.placed, args.pods, None)),
            asyncio.run(scheduling(args.nodes, args.placed, args.pods, f"http://127.0.0.1:{port}")),
        ]
    finally:
        trivial.terminate()
        trivial.wait()
    port = free_port()
    koord = start_server(
        "--serve", "koord", "--port", str(port), "--nodes", str(args.nodes), "--placed", str(args.placed)
    )
    try:
        served = serving(f"http://127.0.0.1:{port}", args.nodes, args.requests)
    finally:
        koord.terminate()
        koord.wait()
    if args.json:
        print(json.dumps({"calling": calling, "serving": served}, indent=2))
        return
    print(f"SchedulingBasic, {args.nodes} nodes, {args.pods} pods (in-process scheduler):")
    for r in calling:
        print(
            f"  extender={r['extender']!s:5}  {r['pods_per_second']:>8.1f} pods/s  p50 {r['p50_ms']:.2f} ms"
            f"  p99 {r['p99_ms']:.2f} ms  scheduler CPU {r['scheduler_cpu_ms_per_pod']:.2f} ms/pod"
            f"  bound {r['bound']}"
        )
    print(f"extender-server, default profile, {args.nodes} node names per request:")
    for r in served:
        print(
            f"  {r['verb']:<10} {r['requests_per_second']:>8.1f} req/s  p50 {r['p50_ms']:.2f} ms"
            f"  p99 {r['p99_ms']:.2f} ms"
        )


if __name__ == "__main__":
    main()
