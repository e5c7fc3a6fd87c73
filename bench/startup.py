#!/usr/bin/env python3
"""Start-up and takeover: time from process start to the first bind, on a real kube-apiserver + etcd.

The cluster: ``--nodes`` (default 5,000) kwok nodes (4 CPU, 32Gi, 110 pods, kept Ready by kwok) and
``--pods`` (default 50,000) pods created already bound (``spec.nodeName`` round-robin at creation, 100m /
200Mi each, so no scheduler is involved; kwok marks them Running). The cluster is started for the run
(``scripts/control-plane.sh``'s binaries) unless ``--kubeconfig`` names a running one with kwok nodes.

First bind, one contender at a time on the same control plane: one pending pod is created while no
scheduler runs, the contender is started (leader election off, client rate limits lifted), and a
watch in this process (protobuf; JSON for ``koord-scheduler-json``) records when the pod gets its
``spec.nodeName``. Reported: seconds from ``Popen`` to that moment, and the contender's CPU-seconds by
then. Contenders: ``koord-scheduler`` (``.venv/bin/koord-scheduler``, default profile) and
``kube-scheduler`` (v1.35 from ``scripts/control-plane.sh build``, default profile). For
koord-scheduler the log's lifecycle lines also split the time: until the profiles are built (imports
and configuration), until the caches are synced (list and snapshot), and the rest (first cycle, bind,
the watch that sees it).

Takeover: two koord-scheduler replicas with leader election on (``--lease-duration``, renew deadline 2/3
of it, retry period 2 s as kube-scheduler's defaults). The first is started and becomes leader (it binds
a pending pod); the second is started and waits until its ``/readyz`` says its caches are synced; then
the leader is killed with SIGKILL (no Lease release) and a pending pod is created at once. Reported:
seconds from the kill to that pod's bind; the target is ``lease duration + 1 s``.

    .venv/bin/python bench/startup.py [--nodes 5000] [--pods 50000] [--repeat 1]
        [--only koord-scheduler,kube-scheduler] [--no-takeover] [--lease-duration 15]
        [--kubeconfig FILE] [--json out.json] [--work-dir DIR]
    .venv/bin/python bench/startup.py --nodes 500 --pods 5000 --lease-duration 6   # a quick run

Bytecode: an installed koord-scheduler (``pip install``, the image) runs from compiled ``.pyc`` files;
a checkout with ``PYTHONDONTWRITEBYTECODE`` set compiles every module on every start (0.6 CPU-s here).
The bench therefore compiles this checkout's ``apis`` and ``koord_scheduler`` first (``compileall``, into
the ignored ``__pycache__`` folders), unless ``--no-compile``; a ``--koord-scheduler`` elsewhere is
compiled by whoever names it.

With ``-v 2`` in ``--koord-scheduler`` (``".venv/bin/koord-scheduler -v 2"``) its log has the start-up
time-line: ``start-up: ...`` lines with the CPU-seconds spent by then.

Caveats: everything (etcd, kube-apiserver, kwok, the contender, this watcher) shares the machine's
cores; run nothing else meanwhile and compare the contenders of the same run only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from e2e_throughput import (  # also puts the repository and tests/integration on sys.path
    LIFTED_QPS,
    REPO,
    BindWatcher,
    bounded,
    cpu_seconds,
    ensure_namespace,
    watcher_protobuf,
)

from kubeapi import ApiHttp, HttpOptions, TokenBucket, load_connection
from kubeapi.http import ApiError

NAMESPACE = "startup"
CONTENDERS = ("koord-scheduler", "koord-scheduler-json", "kube-scheduler")
"""``koord-scheduler-json``: koord-scheduler with ``clientConnection.contentType: application/json`` (Pods and
Nodes listed and watched as JSON, as before protobuf was the default)."""
KWOK_NODE = "kwok-node-{}"
LEASE_NAME = "bench-startup"
RUN_ID = f"{int(time.time()) % 1_000_000:06d}"
"""In the probe pods' names, so runs on the same cluster (``--kubeconfig``) do not collide."""


@dataclass
class FirstBind:
    contender: str
    seconds_to_first_bind: float
    cpu_seconds_at_first_bind: float
    apiserver_cpu_seconds: float = float("nan")
    """kube-apiserver's CPU-seconds from the contender's start to the first bind (its lists and watches)."""
    seconds_to_profiles_built: float | None = None
    """koord-scheduler only: its log line saying the profiles are built (imports, configuration)."""
    seconds_to_synced: float | None = None
    """koord-scheduler only: its log line saying every kind is listed and delivered."""


@dataclass
class Takeover:
    lease_duration: float
    seconds_kill_to_bind: float
    target: float


# ----- the cluster -----


def bound_pod_body(i: int, nodes: int) -> bytes:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"bound-{i}", "namespace": NAMESPACE, "labels": {"app": f"app-{i % 50}"}},
            "spec": {
                "nodeName": KWOK_NODE.format(i % nodes),
                "containers": [
                    {
                        "name": "pause",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "100m", "memory": "200Mi"}},
                    }
                ],
            },
        }
    ).encode()


def pending_pod_body(name: str) -> bytes:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "containers": [
                    {
                        "name": "pause",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "100m", "memory": "200Mi"}},
                    }
                ]
            },
        }
    ).encode()


async def ensure_bound_pods(http: ApiHttp, pods: int, nodes: int) -> None:
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    doc = await http.request_json("GET", path, params={"limit": "1"})
    have = len(doc.get("items") or ()) + int((doc.get("metadata") or {}).get("remainingItemCount") or 0)
    if have >= pods:
        return

    async def create(i: int) -> None:
        try:
            await http.request("POST", path, body=bound_pod_body(i, nodes))
        except ApiError as err:
            if not err.conflict:
                raise

    await bounded(pods, 64, create)


async def create_pending(http: ApiHttp, name: str) -> float:
    """Create one pending pod; the monotonic time it was accepted."""
    await http.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=pending_pod_body(name))
    return time.monotonic()


async def watch_from_now(
    http: ApiHttp, prefix: str, *, protobuf: bool = True
) -> tuple[BindWatcher, asyncio.Future[None]]:
    """A bind watch of the probe pods from now; ``protobuf`` as for :class:`BindWatcher` (the contender's
    encoding, so the watch adds no encoding of its own)."""
    listing = await http.request_json("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", params={"limit": "1"})
    watcher = BindWatcher(
        http, listing["metadata"]["resourceVersion"], 1, namespace=NAMESPACE, name_prefix=prefix, protobuf=protobuf
    )
    return watcher, asyncio.ensure_future(watcher.run())


# ----- contenders -----


def apiserver_cpu(server: str) -> float:
    """CPU-seconds of the kube-apiserver serving ``server`` (its URL: the process whose command line has
    ``--secure-port=<its port>``); other engineers' clusters on the same machine are not counted."""
    port = urlsplit(server).port
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if not Path(argv[0].decode(errors="replace")).name.startswith("kube-apiserver"):
                continue
            if f"--secure-port={port}".encode() not in argv:
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def scheduler_config(work: Path, name: str, kubeconfig: str, *, lease: float = 0.0, json_wire: bool = False) -> Path:
    election: dict[str, Any] = {"leaderElect": False}
    if lease:
        election = {
            "leaderElect": True,
            "leaseDuration": f"{lease:g}s",
            "renewDeadline": f"{lease * 2 / 3:g}s",
            "retryPeriod": "2s",
            "resourceName": LEASE_NAME,
            "resourceNamespace": "kube-system",
        }
    path = work / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {
                    "kubeconfig": kubeconfig,
                    "qps": LIFTED_QPS,
                    "burst": LIFTED_QPS,
                    **({"contentType": "application/json"} if json_wire else {}),
                },
                "leaderElection": election,
            }
        )
    )
    return path


def start(name: str, args: list[str], work: Path) -> subprocess.Popen[bytes]:
    log = (work / f"{name}.log").open("ab")
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


KOORD_SCHEDULER = [str(REPO / ".venv" / "bin" / "koord-scheduler")]
"""The koord-scheduler command (``--koord-scheduler`` replaces it, e.g. with another checkout's)."""


def koord_args(config: Path, metrics_port: int = 0) -> list[str]:
    return [
        *KOORD_SCHEDULER,
        "--config",
        str(config),
        "--metrics-port",
        str(metrics_port),
        "--bind-address",
        "127.0.0.1",
    ]


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def log_offset(log: Path, needle: str, started_wall: float) -> float | None:
    """Seconds from ``started_wall`` to the first log line containing ``needle`` (logging's asctime)."""
    for line in log.read_text(errors="replace").splitlines():
        match = _LOG_TIME.match(line)
        if match and needle in line:
            stamp = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            return round(stamp - started_wall, 3)
    return None


async def first_bind(
    name: str, http: ApiHttp, *, kubeconfig: str, kube_scheduler: str, work: Path, round_index: int, timeout: float
) -> FirstBind:
    probe = f"first-{name}-{RUN_ID}-{round_index}"
    await create_pending(http, probe)
    watcher, watch = await watch_from_now(http, probe, protobuf=watcher_protobuf(name))
    await asyncio.sleep(0.5)
    koord = name.startswith("koord-scheduler")
    config = scheduler_config(work, f"{name}-{round_index}", kubeconfig, json_wire=name.endswith("-json"))
    args = koord_args(config) if koord else [kube_scheduler, f"--config={config}", "--secure-port=0", "--v=1"]
    log = work / f"{name}-{round_index}.log"
    server = http.connection.server
    started_wall, started, apiserver0 = time.time(), time.monotonic(), apiserver_cpu(server)
    proc = start(f"{name}-{round_index}", args, work)
    try:
        await asyncio.wait_for(watcher.done.wait(), timeout)
        cpu = cpu_seconds(proc.pid) if proc.poll() is None else float("nan")
        apiserver = apiserver_cpu(server) - apiserver0
    except TimeoutError:
        raise RuntimeError(f"{name}: the pending pod was not bound within {timeout:.0f}s (log: {log})") from None
    finally:
        stop(proc)
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    result = FirstBind(name, round(watcher.bound[probe] - started, 3), round(cpu, 3), round(apiserver, 3))
    if koord:
        result.seconds_to_profiles_built = log_offset(log, "koord-scheduler: profiles", started_wall)
        result.seconds_to_synced = log_offset(log, "synced from", started_wall)
    return result


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


async def wait_until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


async def takeover(
    http: ApiHttp, *, kubeconfig: str, work: Path, lease: float, round_index: int, timeout: float
) -> Takeover:
    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{LEASE_NAME}"
    try:
        await http.request("DELETE", lease_path)
    except ApiError as err:
        if not err.not_found:
            raise
    config = scheduler_config(work, f"takeover-{round_index}", kubeconfig, lease=lease)
    ports = free_port(), free_port()
    leader = start(f"takeover-{round_index}-a", koord_args(config, ports[0]), work)
    standby: subprocess.Popen[bytes] | None = None
    try:
        probe = f"leader-{RUN_ID}-{round_index}"
        watcher, watch = await watch_from_now(http, probe)
        await create_pending(http, probe)
        await asyncio.wait_for(watcher.done.wait(), timeout)
        watch.cancel()
        standby = start(f"takeover-{round_index}-b", koord_args(config, ports[1]), work)
        await wait_until(lambda: ready(ports[1]), timeout, "the standby's /readyz")
        await asyncio.sleep(1.0)  # the standby's first retry of the Lease has happened
        probe = f"takeover-{RUN_ID}-{round_index}"
        watcher, watch = await watch_from_now(http, probe)
        leader.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        leader.wait()
        await create_pending(http, probe)
        try:
            await asyncio.wait_for(watcher.done.wait(), lease + timeout)
        finally:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)
        return Takeover(lease, round(watcher.bound[probe] - killed, 3), lease + 1.0)
    finally:
        stop(leader)
        if standby is not None:
            stop(standby)


# ----- main -----


async def run_bench(args: argparse.Namespace, kubeconfig: str, kube_scheduler: str, work: Path) -> dict[str, Any]:
    http = ApiHttp(
        load_connection(kubeconfig), TokenBucket(0, 1), options=HttpOptions(pool_size=96, request_timeout=120)
    )
    try:
        await ensure_namespace(http, NAMESPACE)
        t = time.monotonic()
        await ensure_bound_pods(http, args.pods, args.nodes)
        print(f"# {args.pods} bound pods on {args.nodes} nodes ({time.monotonic() - t:.1f}s)", file=sys.stderr)
        await asyncio.sleep(args.settle)
        firsts: list[FirstBind] = []
        takeovers: list[Takeover] = []
        for k in range(args.repeat):
            for name in args.only:
                result = await first_bind(
                    name,
                    http,
                    kubeconfig=kubeconfig,
                    kube_scheduler=kube_scheduler,
                    work=work,
                    round_index=k,
                    timeout=args.timeout,
                )
                print(
                    f"# {name}: first bind {result.seconds_to_first_bind:.2f}s after start "
                    f"({result.cpu_seconds_at_first_bind:.2f} CPU-s)",
                    file=sys.stderr,
                )
                firsts.append(result)
            if args.takeover:
                result_t = await takeover(
                    http,
                    kubeconfig=kubeconfig,
                    work=work,
                    lease=args.lease_duration,
                    round_index=k,
                    timeout=args.timeout,
                )
                print(
                    f"# takeover: {result_t.seconds_kill_to_bind:.2f}s from SIGKILL to bind "
                    f"(lease {result_t.lease_duration:g}s)",
                    file=sys.stderr,
                )
                takeovers.append(result_t)
        return {"first_bind": [asdict(r) for r in firsts], "takeover": [asdict(r) for r in takeovers]}
    finally:
        await http.close()


def summarize(runs: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for name in CONTENDERS:
        mine = [r for r in runs["first_bind"] if r["contender"] == name]
        if mine:
            summary[name] = {
                key: round(statistics.median(r[key] for r in mine), 3)
                for key in (
                    "seconds_to_first_bind",
                    "cpu_seconds_at_first_bind",
                    "apiserver_cpu_seconds",
                    "seconds_to_profiles_built",
                    "seconds_to_synced",
                )
                if all(r.get(key) is not None for r in mine)
            }
    if "koord-scheduler" in summary and "kube-scheduler" in summary:
        summary["koord_to_kube_scheduler_first_bind"] = round(
            summary["koord-scheduler"]["seconds_to_first_bind"] / summary["kube-scheduler"]["seconds_to_first_bind"], 2
        )
    if "koord-scheduler" in summary and "koord-scheduler-json" in summary:
        proto, json_ = summary["koord-scheduler"], summary["koord-scheduler-json"]
        summary["protobuf_to_json"] = {
            key: round(proto[key] / json_[key], 2)
            for key in ("seconds_to_first_bind", "cpu_seconds_at_first_bind", "apiserver_cpu_seconds")
            if json_.get(key)
        }
    if runs["takeover"]:
        summary["takeover_seconds"] = round(statistics.median(r["seconds_kill_to_bind"] for r in runs["takeover"]), 3)
        summary["takeover_target_seconds"] = runs["takeover"][0]["target"]
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000, help="bound pods")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--only",
        default=list(CONTENDERS),
        type=lambda s: s.split(","),
        help="first-bind contenders (default: koord-scheduler,kube-scheduler)",
    )
    parser.add_argument("--no-takeover", dest="takeover", action="store_false")
    parser.add_argument("--lease-duration", type=float, default=15.0, help="seconds (kube-scheduler's default 15)")
    parser.add_argument(
        "--settle", type=float, default=5.0, help="seconds to wait after creating the pods (kwok marks them Running)"
    )
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--kubeconfig", help="a running cluster with --nodes kwok nodes (default: start one)")
    parser.add_argument("--kube-scheduler", help="kube-scheduler binary (default: from control-plane.sh build)")
    parser.add_argument("--koord-scheduler", help="koord-scheduler command (default: .venv/bin/koord-scheduler)")
    parser.add_argument(
        "--no-compile",
        dest="compile",
        action="store_false",
        help="do not compile this checkout's modules to bytecode first",
    )
    parser.add_argument("--json", help="write raw results and the summary here")
    parser.add_argument("--work-dir", help="keep configs and logs here (default: a temp dir)")
    args = parser.parse_args()
    unknown = [c for c in args.only if c not in CONTENDERS]
    if unknown:
        parser.error(f"--only: unknown contenders {unknown}; choose from {list(CONTENDERS)}")
    if args.nodes <= 0 or args.pods < 0:
        parser.error("--nodes must be positive and --pods not negative")
    if args.lease_duration < 3:
        parser.error("--lease-duration: at least 3 (seconds), so the renew deadline stays above the 2 s retry period")
    if args.koord_scheduler:
        KOORD_SCHEDULER[:] = args.koord_scheduler.split()
    if args.compile:
        import compileall

        for package in ("apis", "kubeapi", "koord_scheduler"):
            compileall.compile_dir(str(REPO / package), quiet=1)
    from controlplane import Binaries, running_control_plane

    kube_scheduler = args.kube_scheduler or str(Binaries.build().kube_scheduler)
    with tempfile.TemporaryDirectory(prefix="pykoord-startup-") as tmp:
        work = Path(args.work_dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        if args.kubeconfig:
            runs = asyncio.run(run_bench(args, args.kubeconfig, kube_scheduler, work))
        else:
            with running_control_plane(work / "cluster", kwok_nodes=args.nodes) as plane:
                runs = asyncio.run(run_bench(args, str(plane.kubeconfig), kube_scheduler, work))
    head = {
        "machine": {"nproc": os.cpu_count(), "python": sys.version.split()[0], "load": os.getloadavg()},
        "nodes": args.nodes,
        "bound_pods": args.pods,
    }
    summary = summarize(runs)
    print(json.dumps({**head, "summary": summary}, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps({**head, "summary": summary, "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
