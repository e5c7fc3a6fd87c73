#!/usr/bin/env python3
"""koordlet as the chart's DaemonSet pod on the real node (tests/node): its cost with 30 pods of mixed QoS,
and how long a new container runs before its QoS cgroup values are in place.

    .venv/bin/python bench/koordlet_node.py [--pods 30] [--minutes 5] [--idle-minutes 1] [--json out.json]

(root; the first run builds the node and the images, see docs/real-node.md). Steps:

1. A cluster with a real node (``control-plane.sh up --node``), pykoord's chart installed with its defaults
   (koordlet limited to 200m CPU, 256 Mi).
2. Idle: koordlet's CPU (its container's ``cpuacct.usage``) and RSS (``VmRSS`` of its process) every 5 s
   for ``--idle-minutes`` with no pod but its own: the same-run baseline.
3. ``--pods`` pods at once, a third each: LS (Burstable), Guaranteed, and BE (``koordinator.sh/qosClass=BE``
   with ``kubernetes.io/batch-memory``). For each BE container, a 50 ms poller records when its cgroup
   directory first appears (the container's start, as kubelet and runc create it) and when its
   ``memory.limit_in_bytes`` becomes the batch-memory limit (BatchResource's value, which only koordlet
   writes): today's periodic reconcile, before runtime hooks.
4. Loaded: the same CPU and RSS samples for ``--minutes``.

Prints one JSON document: CPU in cores (share of one core) and RSS in MB, idle and loaded, their ratio, and
the start → QoS delays (p50/p90/max seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "node"), str(REPO / "tests" / "integration")]

from controlplane import ControlPlane  # noqa: E402
from realnode import (  # noqa: E402
    NAMESPACE,
    PykoordRelease,
    RealNode,
    cgroup_file,
    cgroup_of,
    pod_manifest,
    wait_for,
)

from apis.extension import LABEL_POD_QOS  # noqa: E402

BATCH_MEMORY = "kubernetes.io/batch-memory"
BE_LIMIT = 32 << 20
SAMPLE_S = 5.0
RUN_LABEL = "pykoord-bench-run"


def koordlet_process(node: RealNode) -> tuple[int, str]:
    """(pid, container cgroup) of the koordlet container."""
    pods = json.loads(node.kubectl("get", "pods", "-n", NAMESPACE, "-l", "koord-app=koordlet", "-o", "json").stdout)
    (pod,) = pods["items"]
    pid = node.container_pid(pod["status"]["containerStatuses"][0]["containerID"])
    return pid, cgroup_of(pid, "cpuacct")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def sample(pid: int, cgroup: str, minutes: float) -> dict[str, float]:
    """koordlet's CPU (cores, per 5 s window) and RSS (MB) over ``minutes``."""
    usage = cgroup_file(cgroup, "cpuacct.usage")
    cores: list[float] = []
    rss: list[float] = []
    last_ns, last_t = int(usage.read_text()), time.monotonic()
    deadline = last_t + minutes * 60
    while time.monotonic() < deadline:
        time.sleep(SAMPLE_S)
        now_ns, now_t = int(usage.read_text()), time.monotonic()
        cores.append((now_ns - last_ns) / 1e9 / (now_t - last_t))
        last_ns, last_t = now_ns, now_t
        rss.append(rss_mb(pid))
    return {
        "cpu_cores_mean": round(statistics.fmean(cores), 4),
        "cpu_cores_p95": round(sorted(cores)[int(0.95 * (len(cores) - 1))], 4),
        "rss_mb_min": round(min(rss), 1),
        "rss_mb_mean": round(statistics.fmean(rss), 1),
        "rss_mb_max": round(max(rss), 1),
        "samples": len(cores),
    }


class QoSPoller:
    """Every 50 ms: which BE containers' cgroups exist, and which have their batch-memory limit."""

    def __init__(self, node: RealNode) -> None:
        self.besteffort = f"{node.cgroup_root}/kubepods/besteffort"
        self.uids: set[str] = set()
        self.first_seen: dict[str, float] = {}
        self.in_place: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        base = cgroup_file(self.besteffort, "x", "memory").parent
        while not self._stop.is_set():
            now = time.monotonic()
            for uid in list(self.uids):
                pod_dir = base / f"pod{uid}"
                try:
                    children = [c for c in pod_dir.iterdir() if c.is_dir()]
                except OSError:
                    continue
                for child in children:
                    key = f"{uid}/{child.name}"
                    self.first_seen.setdefault(key, now)
                    if key not in self.in_place:
                        try:
                            if int((child / "memory.limit_in_bytes").read_text()) == BE_LIMIT:
                                self.in_place[key] = now
                        except (OSError, ValueError):
                            pass
            self._stop.wait(0.05)

    def delays(self) -> list[float]:
        return sorted(self.in_place[k] - self.first_seen[k] for k in self.in_place)


def pods_manifests(node: RealNode, count: int, run: str) -> list[dict[str, Any]]:
    image, cmd = node.images["workload"], ["sleep", "36000"]
    docs = []
    run_label = {RUN_LABEL: run}
    for i in range(count):
        name = f"bench-{run}-{i}"
        kind = i % 3
        if kind == 0:
            docs.append(
                pod_manifest(
                    name, image, cmd, node=node.name, labels=run_label, requests={"cpu": "10m", "memory": "8Mi"}
                )
            )
        elif kind == 1:
            res = {"cpu": "20m", "memory": "16Mi"}
            docs.append(pod_manifest(name, image, cmd, node=node.name, labels=run_label, requests=res, limits=res))
        else:
            batch = {BATCH_MEMORY: str(BE_LIMIT)}
            docs.append(
                pod_manifest(
                    name,
                    image,
                    cmd,
                    node=node.name,
                    labels={LABEL_POD_QOS: "BE", **run_label},
                    priority_class="koord-batch",
                    requests=batch,
                    limits=batch,
                )
            )
    return docs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=30)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--idle-minutes", type=float, default=1.0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--cluster-dir", type=Path, default=None, help="keep and reuse this cluster")
    args = parser.parse_args()
    state = args.cluster_dir or Path(tempfile.mkdtemp(prefix="pykoord-bench-node-"))
    plane = ControlPlane.up(state, node=True, start_timeout=900)
    try:
        node = RealNode.of(plane)
        release = PykoordRelease.install(node, reuse=args.cluster_dir is not None)
        wait_for(
            lambda: _batch_memory(node) >= args.pods * BE_LIMIT,
            timeout=300,
            what="batch-memory on the node for the BE pods",
        )
        pid, cgroup = koordlet_process(node)
        idle = sample(pid, cgroup, args.idle_minutes)
        poller = QoSPoller(node)
        run = uuid.uuid4().hex[:5]
        manifests = pods_manifests(node, args.pods, run)
        poller.start()
        node.apply(*manifests)
        created = json.loads(node.kubectl("get", "pods", "-l", f"{RUN_LABEL}={run}", "-o", "json").stdout)["items"]
        poller.uids.update(
            p["metadata"]["uid"] for p in created if p["metadata"].get("labels", {}).get(LABEL_POD_QOS) == "BE"
        )
        for doc in manifests:
            node.wait_pod_running(doc["metadata"]["name"], timeout=600)
        loaded = sample(pid, cgroup, args.minutes)
        poller.stop()
        delays = poller.delays()
        be_pods = len(poller.uids)
        result = {
            "bench": "koordlet_node",
            "pods": args.pods,
            "machine": f"{os.cpu_count()} cores",
            "koordlet_limits": "200m CPU, 256Mi (chart defaults)",
            "idle": idle,
            "loaded": loaded,
            "cpu_ratio_loaded_vs_idle": round(loaded["cpu_cores_mean"] / max(idle["cpu_cores_mean"], 1e-6), 2),
            "rss_ratio_loaded_vs_idle": round(loaded["rss_mb_mean"] / idle["rss_mb_mean"], 2),
            "be_containers": be_pods,
            "be_containers_with_qos": len(delays),
            "start_to_qos_s": {
                "p50": round(statistics.median(delays), 2) if delays else None,
                "p90": round(delays[int(0.9 * (len(delays) - 1))], 2) if delays else None,
                "max": round(max(delays), 2) if delays else None,
            },
        }
        print(json.dumps(result, indent=2))
        if args.json:
            args.json.write_text(json.dumps(result, indent=2) + "\n")
        for doc in manifests:
            node.delete("pod", doc["metadata"]["name"], wait=False)
        if args.cluster_dir is None:
            release.uninstall()
    finally:
        if args.cluster_dir is None:
            plane.down()
    return 0


def _batch_memory(node: RealNode) -> int:
    from apis.slo.quantity import int_value

    allocatable = (node.get("node", node.name, "") or {}).get("status", {}).get("allocatable", {})
    return int_value(allocatable.get(BATCH_MEMORY, "0"))


if __name__ == "__main__":
    sys.exit(main())
