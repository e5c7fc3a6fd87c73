#!/usr/bin/env python3
"""What koordlet's states informer costs against a real kube-apiserver: its watches as kubeapi reflectors on
one asyncio thread (this tree) or as blocking kubernetes-client calls, one daemon thread per watch (another
tree, e.g. an export of an older commit), side by side. No node is needed: one Node object and its pods
(``spec.nodeName`` set, nothing runs them) are what the informer watches.

    .venv/bin/python bench/koordlet_informer.py [--threads-tree DIR] [--pods 30] [--seconds 20] [--json out.json]

``--threads-tree`` is a checkout whose ``koordlet/statesinformer/kube.py`` still has the threaded
``KubeSource(api_client, informer)``, e.g. ``git archive <commit> | tar -x -C DIR``. Steps, for every
variant at once (one process each, started together):

1. A control plane (``control-plane.sh up``, no kwok nodes) and a Node ``bench-node``.
2. Idle: each process lists and watches (node, pods, NodeSLO, NodeMetric); after a settle, its CPU time
   (``/proc/PID/stat`` utime+stime) over ``--seconds`` and its RSS (``VmRSS``) and thread count.
3. Loaded: ``--pods`` pods on the node, then one pod's label changed every second (a watch event per
   second, as a busy node sees), the same samples over ``--seconds``; each process must have seen every pod.

Prints one JSON document: per variant CPU (share of one core) and RSS (MB), idle and loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "integration")]

from controlplane import ControlPlane  # noqa: E402

NODE = "bench-node"
NAMESPACE = "default"

PROBE = r"""
import sys, time
from koordlet.statesinformer.informer import RegisterType, StatesInformer
from koordlet.system.layout import CgroupDriver, CgroupLayout
from koordlet.statesinformer.kube import KubeSource
kubeconfig, node, variant = sys.argv[1:4]
informer = StatesInformer(node, CgroupLayout.for_driver(CgroupDriver.CGROUPFS))
if variant == "threads":
    from kubernetes import client, config
    from koordlet.statesinformer.apiclient import CheckedApiClient
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    source = KubeSource(CheckedApiClient(cfg), informer)
else:
    from kubeapi.connection import load_connection
    from koordlet.statesinformer.apiloop import ApiLoop
    source = KubeSource(ApiLoop(load_connection(kubeconfig)), informer)
print(__import__("koordlet").__file__, file=sys.stderr)
source.start()
while True:  # one line per change in the number of pods seen, for the parent to wait on
    seen = len(informer.get_all_pods())
    print(seen, flush=True)
    while len(informer.get_all_pods()) == seen:
        time.sleep(0.2)
"""


def proc_sample(pid: int) -> tuple[float, float, int]:
    """(CPU seconds, RSS MB, threads) of ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    rss = threads = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
        elif line.startswith("Threads:"):
            threads = int(line.split()[1])
    return cpu, rss, int(threads)


def pod(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"bench-{i}", "namespace": NAMESPACE, "labels": {"bench": "koordlet-informer"}},
        "spec": {
            "nodeName": NODE,
            "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
            ],
        },
    }


def measure(procs: dict[str, subprocess.Popen[str]], seconds: float) -> dict[str, dict[str, float]]:
    before = {name: proc_sample(p.pid) for name, p in procs.items()}
    time.sleep(seconds)
    out = {}
    for name, p in procs.items():
        cpu, rss, threads = proc_sample(p.pid)
        out[name] = {
            "cpu_cores": round((cpu - before[name][0]) / seconds, 4),
            "rss_mb": round(rss, 1),
            "threads": threads,
        }
    return out


def wait_seen(procs: dict[str, subprocess.Popen[str]], count: int, timeout: float = 60.0) -> None:
    for name, p in procs.items():
        deadline = time.monotonic() + timeout
        assert p.stdout is not None
        while True:
            line = p.stdout.readline()
            if line.strip() == str(count):
                break
            if not line or time.monotonic() > deadline:
                raise SystemExit(f"{name}: saw {line.strip() or 'nothing'} pods, not {count}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads-tree", type=Path, default=None)
    parser.add_argument("--pods", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    variants = {"kubeapi": REPO}
    if args.threads_tree is not None:
        variants["threads"] = args.threads_tree.resolve()
    with tempfile.TemporaryDirectory(prefix="koordlet-informer-") as tmp:
        plane = ControlPlane.up(Path(tmp))
        try:
            plane.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
            procs = {
                name: subprocess.Popen(
                    [sys.executable, "-c", PROBE, str(plane.kubeconfig), NODE, name],
                    env={**os.environ, "PYTHONPATH": str(tree)},
                    cwd=tree,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for name, tree in variants.items()
            }
            try:
                wait_seen(procs, 0)
                time.sleep(5)  # imports done, lists answered
                idle = measure(procs, args.seconds)
                for i in range(args.pods):
                    plane.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod(i))
                wait_seen(procs, args.pods)
                started = time.monotonic()
                before = {name: proc_sample(p.pid) for name, p in procs.items()}
                i = 0
                while time.monotonic() - started < args.seconds:
                    patch = {"metadata": {"labels": {"tick": str(i)}}}
                    plane.request(
                        "PATCH",
                        f"/api/v1/namespaces/{NAMESPACE}/pods/bench-{i % args.pods}",
                        patch,
                        content_type="application/merge-patch+json",
                    )
                    i += 1
                    time.sleep(1.0)
                seconds = time.monotonic() - started
                loaded = {}
                for name, p in procs.items():
                    cpu, rss, threads = proc_sample(p.pid)
                    loaded[name] = {
                        "cpu_cores": round((cpu - before[name][0]) / seconds, 4),
                        "rss_mb": round(rss, 1),
                        "threads": threads,
                    }
            finally:
                for p in procs.values():
                    p.kill()
                    p.wait()
        finally:
            plane.down()
    result = {
        "pods": args.pods,
        "seconds": args.seconds,
        "idle": idle,
        "loaded": loaded,
        "python": sys.version.split()[0],
        "measured": time.strftime("%Y-%m-%d"),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
