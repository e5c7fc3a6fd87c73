#!/usr/bin/env python3
"""What one Binding + ``Scheduled`` Event pair costs kube-apiserver + etcd, by client transport.

An A/B harness for the API server's CPU per bound pod (bench/e2e_throughput.py's
``server_cpu_seconds_per_1000``) with nothing but the per-pod writes: a control plane is started (or
``--kubeconfig`` used), ``--pods`` pending pods are created in namespace ``apiserver-cost``, then a client
variant, run as its own process, posts for every pod its ``v1.Binding`` (protobuf, as koord-scheduler
sends it) and, once that succeeded, its ``events.k8s.io/v1`` ``Scheduled`` Event (protobuf),
``--concurrency`` pairs in flight (default 64). kube-apiserver's and etcd's CPU (user+system from /proc of
their pids) and the client's own CPU are read right before the first request and right after the last
answer, after a warm-up that opens the client's connections; pod
creation and deletion are outside the window. Variants (``--variants``):

* ``http1-N``: today's path, :class:`kubeapi.http1.Http1Pool` through :class:`kubeapi.ApiHttp` with
  ``pool_size`` N (koord-scheduler: 256 for binds, Event senders + 2 for Events);
* ``http1-N-json``: the same with JSON bodies and ``Accept: application/json`` (the old encoding);
* ``h2``: one HTTP/2 connection, :class:`kubeapi.http2.Http2Client` through ``HttpOptions(http2=True)``
  (the ``h2`` package, sans-io, on an asyncio protocol), the same protobuf bodies and headers;
  ``h2-nocoalesce``: the same with each request written on its own;
* ``httpx-h2``: httpx with ``http2=True`` (one connection), for comparison (needs ``pip install
  'httpx[http2]'``, not a pykoord dependency);
* ``go``: a client-go program (bench/apiserver_cost_go, built with ``go build`` on first use): the
  kube-scheduler floor (protobuf over one HTTP/2 connection, client certificate); ``go-http1``: the
  same client held to HTTP/1.1 (ALPN ``http/1.1`` only: client-go's keep-alive pool), to tell the
  protocol from the client.

Every variant authenticates with the kubeconfig's client certificate (as both schedulers in the e2e
bench do). Rounds run the variants interleaved (``--repeat`` rounds, the order rotating each round);
the summary gives each variant's median per 1,000 pairs and its ratio to the first variant.

    .venv/bin/python bench/apiserver_cost.py [--pods 3000] [--repeat 3] [--variants http1-16,h2]
        [--kubeconfig FILE] [--json out.json]

Caveats: everything shares the machine's cores; report the load (``uptime``) and prefer the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(REPO / "bench"))

NAMESPACE = "apiserver-cost"
GO_DIR = REPO / "bench" / "apiserver_cost_go"


def pod_body(i: int) -> bytes:
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"cost-{i}", "namespace": NAMESPACE},
        "spec": {
            "schedulerName": "nobody",
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}},
                }
            ],
        },
    }
    return json.dumps(doc).encode()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------- the client process


def binding_body(ns: str, name: str, uid: str, node: str, *, protobuf: bool) -> bytes:
    from kubeapi import jsoncodec, protobody

    if protobuf:
        return protobody.binding(ns, name, uid=uid, node_name=node)
    return jsoncodec.dumps(
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": ns, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
    )


def event_body(ns: str, name: str, uid: str, node: str, *, protobuf: bool) -> bytes:
    from kubeapi import jsoncodec, protobody
    from kubeapi.events import micro_time

    now = time.time()
    ev_name = f"{name}.{int(now * 1e9):x}"
    host = socket.gethostname()
    regarding = {"kind": "Pod", "apiVersion": "v1", "name": name, "namespace": ns, "uid": uid}
    note = f"Successfully assigned {ns}/{name} to {node}"
    if protobuf:
        return protobody.event(
            ns,
            ev_name,
            event_time=now,
            reporting_controller="default-scheduler",
            reporting_instance=f"default-scheduler-{host}",
            action="Binding",
            reason="Scheduled",
            event_type="Normal",
            note=note,
            regarding=regarding,
        )
    return jsoncodec.dumps(
        {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": ev_name, "namespace": ns},
            "eventTime": micro_time(now),
            "reportingController": "default-scheduler",
            "reportingInstance": f"default-scheduler-{host}",
            "action": "Binding",
            "reason": "Scheduled",
            "type": "Normal",
            "note": note,
            "regarding": regarding,
        }
    )


async def post_pairs(
    variant: str, kubeconfig: str, pods: list[tuple[str, str]], pids: list[int], *, concurrency: int
) -> dict[str, Any]:
    """Post every pod's Binding then Event with ``variant``; the CPU figures of the window."""
    from kubeapi import load_connection
    from kubeapi.protowire import PROTOBUF, PROTOBUF_OR_JSON

    connection = load_connection(kubeconfig)
    protobuf = not variant.endswith("-json")
    ctype = PROTOBUF if protobuf else "application/json"
    accept = PROTOBUF_OR_JSON if protobuf else "application/json"
    send, close = await _sender(variant, connection)

    async def pair(ns: str, name: str, uid: str, node: str) -> None:
        status = await send(
            "POST",
            f"/api/v1/namespaces/{ns}/pods/{name}/binding",
            binding_body(ns, name, uid, node, protobuf=protobuf),
            ctype,
            accept,
        )
        if status >= 300:
            raise RuntimeError(f"bind {name}: {status}")
        status = await send(
            "POST",
            f"/apis/events.k8s.io/v1/namespaces/{ns}/events",
            event_body(ns, name, uid, node, protobuf=protobuf),
            ctype,
            accept,
        )
        if status >= 300:
            raise RuntimeError(f"event {name}: {status}")

    # Warm-up: open the connections the run will use (up to 64 at once).
    await asyncio.gather(*(send("GET", f"/api/v1/namespaces/{NAMESPACE}", None, "", accept) for _ in range(64)))
    sem = asyncio.Semaphore(concurrency)

    async def bounded(i: int, name: str, uid: str) -> None:
        async with sem:
            await pair(NAMESPACE, name, uid, f"node-{i % 1000}")

    server0 = sum(cpu_seconds(p) for p in pids)
    client0 = time.process_time()
    t0 = time.perf_counter()
    await asyncio.gather(*(bounded(i, name, uid) for i, (name, uid) in enumerate(pods)))
    wall = time.perf_counter() - t0
    client = time.process_time() - client0
    server = sum(cpu_seconds(p) for p in pids) - server0
    await close()
    return {"pairs": len(pods), "wall": wall, "client_cpu": client, "server_cpu": server}


async def _sender(variant: str, connection: Any) -> tuple[Any, Any]:
    if variant.startswith("http1-"):
        from kubeapi import ApiHttp, HttpOptions, TokenBucket
        from kubeapi.http import ApiError

        size = int(variant.split("-")[1])
        http = ApiHttp(connection, TokenBucket(0, 1), options=HttpOptions(pool_size=size))

        async def send1(method: str, path: str, body: bytes | None, ctype: str, accept: str) -> int:
            try:
                await http.request(method, path, body=body, content_type=ctype or "application/json", accept=accept)
            except ApiError as err:
                return err.status
            return 200

        return send1, http.close
    if variant in ("h2", "h2-nocoalesce"):
        from kubeapi import ApiHttp, HttpOptions, TokenBucket, http2
        from kubeapi.http import ApiError

        http2.COALESCE_WRITES = variant == "h2"

        http = ApiHttp(connection, TokenBucket(0, 1), options=HttpOptions(http2=True))

        async def send2(method: str, path: str, body: bytes | None, ctype: str, accept: str) -> int:
            try:
                await http.request(method, path, body=body, content_type=ctype or "application/json", accept=accept)
            except ApiError as err:
                return err.status
            return 200

        return send2, http.close
    if variant == "httpx-h2":
        import httpx

        client = httpx.AsyncClient(
            http2=True, verify=connection.ssl_context, base_url=connection.server, headers={"User-Agent": "pykoord"}
        )

        async def send3(method: str, path: str, body: bytes | None, ctype: str, accept: str) -> int:
            headers = {"Accept": accept}
            if ctype:
                headers["Content-Type"] = ctype
            resp = await client.request(method, path, content=body, headers=headers)
            return resp.status_code

        return send3, client.aclose
    raise SystemExit(f"unknown variant {variant!r}")


def client_main(argv: list[str]) -> None:
    variant, kubeconfig, pods_file, pids = argv[0], argv[1], argv[2], [int(p) for p in argv[3].split(",")]
    concurrency = int(argv[4])
    pods = [tuple(line.split()) for line in Path(pods_file).read_text().splitlines() if line]
    from e2e_round_robin import contender_loop_factory

    with asyncio.Runner(loop_factory=contender_loop_factory()) as runner:
        result = runner.run(post_pairs(variant, kubeconfig, pods, pids, concurrency=concurrency))  # type: ignore[arg-type]
    print(json.dumps(result), flush=True)


# ---------------------------------------------------------------- the harness


def build_go() -> Path:
    out = GO_DIR / "apiserver-cost-go"
    if not out.exists():
        subprocess.run(
            ["go", "build", "-o", str(out), "."], cwd=GO_DIR, check=True, env={**os.environ, "GOWORK": "off"}
        )
    return out


async def prepare(http: Any, n: int) -> list[tuple[str, str]]:
    from e2e_throughput import delete_pods

    from kubeapi.http import ApiError

    try:
        await http.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NAMESPACE}})
    except ApiError as err:
        if not err.conflict:
            raise
    await delete_pods(http, NAMESPACE)  # with gracePeriodSeconds=0: bound pods have no kubelet to confirm
    sem = asyncio.Semaphore(32)
    out: list[tuple[str, str]] = []

    async def create(i: int) -> None:
        async with sem:
            doc = await http.request_json("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=pod_body(i))
            out.append((doc["metadata"]["name"], doc["metadata"]["uid"]))

    await asyncio.gather(*(create(i) for i in range(n)))
    return out


def run_variant(
    variant: str,
    kubeconfig: str,
    pods: list[tuple[str, str]],
    pids: list[int],
    work: Path,
    *,
    concurrency: int,
    pprof: Path | None = None,
) -> dict[str, Any]:
    pods_file = work / "pods.txt"
    pods_file.write_text("".join(f"{name} {uid}\n" for name, uid in pods))
    pid_arg = ",".join(map(str, pids))
    env = None
    if variant in ("go", "go-http1"):
        cmd = [str(build_go()), kubeconfig, str(pods_file), pid_arg, str(concurrency)]
        env = {**os.environ, "APISERVER_COST_HTTP1": "1" if variant == "go-http1" else "0"}
    else:
        cmd = [sys.executable, __file__, "--client", variant, kubeconfig, str(pods_file), pid_arg, str(concurrency)]
    profiler = None
    if pprof is not None:
        profiler = threading.Thread(target=fetch_profile, args=(kubeconfig, pprof, variant), daemon=True)
        profiler.start()
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, env=env)
    if profiler is not None:
        profiler.join()
    return json.loads(out.stdout.strip().splitlines()[-1])


PPROF_SECONDS = 5


def fetch_profile(kubeconfig: str, out_dir: Path, variant: str) -> None:
    """kube-apiserver's CPU profile (``/debug/pprof/profile``, ``--profiling=true``) over ``PPROF_SECONDS``
    from 2 s after the client starts, to ``out_dir/<variant>.<n>.pprof`` (read with ``go tool pprof -top``)."""
    import urllib.request

    from kubeapi import load_connection

    connection = load_connection(kubeconfig)
    time.sleep(2)
    url = f"{connection.server}/debug/pprof/profile?seconds={PPROF_SECONDS}"
    with urllib.request.urlopen(url, context=connection.ssl_context, timeout=60) as resp:
        data = resp.read()
    n = len(list(out_dir.glob(f"{variant}.*.pprof")))
    (out_dir / f"{variant}.{n}.pprof").write_bytes(data)


async def harness(args: argparse.Namespace, kubeconfig: str, pids: list[int], work: Path) -> list[dict[str, Any]]:
    from kubeapi import ApiHttp, HttpOptions, TokenBucket, load_connection

    http = ApiHttp(load_connection(kubeconfig), TokenBucket(0, 1), options=HttpOptions(pool_size=32))
    variants = args.variants.split(",")
    rows: list[dict[str, Any]] = []
    try:
        for rnd in range(args.repeat):
            order = variants[rnd % len(variants) :] + variants[: rnd % len(variants)]
            for variant in order:
                pods = await prepare(http, args.pods)
                await asyncio.sleep(2)  # let etcd and the API server settle after the creates
                run = functools.partial(run_variant, concurrency=args.concurrency, pprof=args.pprof)
                res = await asyncio.to_thread(run, variant, kubeconfig, pods, pids, work)
                per = 1000 / res["pairs"]
                row = {
                    "round": rnd,
                    "variant": variant,
                    "server_cpu_per_1000": res["server_cpu"] * per,
                    "client_cpu_per_1000": res["client_cpu"] * per,
                    "pairs_per_s": res["pairs"] / res["wall"],
                    "load": os.getloadavg()[0],
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
    finally:
        await http.close()
    return rows


def summarize(rows: list[dict[str, Any]], variants: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for v in variants:
        mine = [r for r in rows if r["variant"] == v]
        out[v] = {
            k: round(statistics.median(r[k] for r in mine), 3)
            for k in ("server_cpu_per_1000", "client_cpu_per_1000", "pairs_per_s")
        }
    base = out[variants[0]]
    for v in variants:
        out[v]["server_to_first"] = round(out[v]["server_cpu_per_1000"] / base["server_cpu_per_1000"], 3)
        out[v]["client_to_first"] = round(out[v]["client_cpu_per_1000"] / base["client_cpu_per_1000"], 3)
    return out


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        client_main(sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--variants", default="http1-1,http1-4,http1-16,h2")
    parser.add_argument("--concurrency", type=int, default=64, help="pairs in flight (default 64)")
    parser.add_argument("--pprof", type=Path, help="a directory: kube-apiserver's CPU profile of each run")
    parser.add_argument("--kubeconfig")
    parser.add_argument("--json")
    args = parser.parse_args()
    from e2e_throughput import server_pids

    with tempfile.TemporaryDirectory(prefix="apiserver-cost-") as tmp:
        work = Path(tmp)
        if args.kubeconfig:
            kubeconfig = args.kubeconfig
            rows = asyncio.run(harness(args, kubeconfig, server_pids(kubeconfig), work))
        else:
            from controlplane import running_control_plane

            with running_control_plane(work / "cluster") as plane:
                kubeconfig = str(plane.kubeconfig)
                rows = asyncio.run(harness(args, kubeconfig, server_pids(kubeconfig), work))
    summary = summarize(rows, args.variants.split(","))
    print(json.dumps({"summary": summary, "load_end": os.getloadavg()}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
