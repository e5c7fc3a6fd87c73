#!/usr/bin/env python3
"""The container start latency koordlet's NRI hook adds, on the real node, and koordlet's CPU meanwhile.

    .venv/bin/python bench/nri_latency.py [--containers 50] [--block 25] [--parallel 5] [--json out.json]

(root; the first run builds the node and the images, see docs/real-node.md; PYKOORD_TEST_NODE_CLUSTER_DIR
keeps the cluster between runs). Steps:

1. A cluster with a real node, pykoord's chart installed (koordlet as its DaemonSet pod, NRI on).
2. Blocks of ``--block`` LS pods (``koordinator.sh/qosClass=LS``, one container, pinned to the node,
   ``--parallel`` created at a time), alternating hook on / hook off (``koordlet.nri.enabled`` through
   a patch of the koordlet DaemonSet, koordlet restarted and left to settle 20 s) until each mode has
   ``--containers``.
   Each pod's container gets CPUSetAllocator's share-pool cpuset at creation when the hook is on.
3. Each container's creation time is containerd's own: from its ``CreateContainer within sandbox`` log line
   to the ``returns container id`` line (the NRI call to koordlet is between the two), in ns.
4. koordlet's CPU: its container's ``cpuacct.usage`` over each hook-on block, and over an idle window
   (``--idle-seconds``, connected, no pod created) just before it.

Prints one JSON document: p50/p90/p99/max create milliseconds per mode, the added p50 and p99 (on - off),
koordlet's own answer time (its ``koordlet_runtime_hook_invoked_duration_seconds`` histogram), and its CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "node"), str(REPO / "tests" / "integration")]

from controlplane import ControlPlane  # noqa: E402
from realnode import PykoordRelease, RealNode, cgroup_file, cgroup_of, pod_manifest  # noqa: E402

from apis.extension import LABEL_POD_QOS  # noqa: E402

LOG_LINE = re.compile(
    r'^time="([^"]+)".*CreateContainer within sandbox \\"([0-9a-f]+)\\" for (?:container )?name:\\"([^\\]+)\\"(.*)$'
)
RETURNS = re.compile(r'returns container id \\"([0-9a-f]+)\\"')
SETTLE_S = 20.0


def parse_time(text: str) -> float:
    """containerd's RFC 3339 nano timestamp → seconds (float, ns kept to the microsecond)."""
    whole, _, frac = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(whole + "+00:00").timestamp() + float("0." + (frac or "0"))


def create_durations(log: Path, offset: int, sandboxes: set[str]) -> list[float]:
    """Milliseconds of each CreateContainer in ``sandboxes`` logged after byte ``offset``."""
    started: dict[tuple[str, str], float] = {}
    out: list[float] = []
    with log.open("rb") as f:
        f.seek(offset)
        for raw in f:
            match = LOG_LINE.match(raw.decode(errors="replace").rstrip("\n"))
            if not match or match.group(2) not in sandboxes:
                continue
            key = (match.group(2), match.group(3))
            when = parse_time(match.group(1))
            if RETURNS.search(match.group(4)):
                if key in started:
                    out.append((when - started.pop(key)) * 1000)
            else:
                started[key] = when
    return out


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def rank(p: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(p * len(ordered)) - 1))]

    return {
        "n": len(ordered),
        "p50": rank(0.50),
        "p90": rank(0.90),
        "p99": rank(0.99),
        "max": ordered[-1],
        "mean": statistics.fmean(ordered),
    }


def sandbox_ids(node: RealNode, names: list[str]) -> set[str]:
    pods = json.loads(node.crictl("pods", "-o", "json"))["items"]
    return {p["id"] for p in pods if p["metadata"]["name"] in names and p["metadata"]["namespace"] == "default"}


def run_block(node: RealNode, count: int, parallel: int, run: str) -> list[str]:
    names = [f"nri-{run}-{uuid.uuid4().hex[:6]}" for _ in range(count)]
    docs = [
        pod_manifest(
            n,
            node.images["workload"],
            ["sleep", "3600"],
            node=node.name,
            labels={LABEL_POD_QOS: "LS", "pykoord-bench": run},
            requests={"cpu": "10m", "memory": "8Mi"},
        )
        for n in names
    ]

    def create(doc: dict[str, Any]) -> None:
        node.apply(doc)
        node.wait_pod_running(doc["metadata"]["name"], timeout=300)

    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(create, docs))
    return names


def koordlet_cpu_ns(release: PykoordRelease) -> int:
    pod = release.koordlet_pod()
    pid = release.node.container_pid(pod["status"]["containerStatuses"][0]["containerID"])
    return int(cgroup_file(cgroup_of(pid, "cpuacct"), "cpuacct.usage").read_text())


def hook_histogram(release: PykoordRelease) -> dict[str, float]:
    """koordlet's CreateContainer answer-time histogram from its /metrics: ``count``, ``sum`` (seconds) and
    each bucket's cumulative count under the key ``le=<bound>``."""
    out: dict[str, float] = {"count": 0.0, "sum": 0.0}
    prefix = "koordlet_runtime_hook_invoked_duration_seconds_"
    for line in release.koordlet_metrics().splitlines():
        if not line.startswith(prefix) or 'event="CreateContainer"' not in line:
            continue
        name, value = line.split()[0], float(line.split()[-1])
        if name.startswith(prefix + "sum"):
            out["sum"] = value
        elif name.startswith(prefix + "count"):
            out["count"] = value
        elif name.startswith(prefix + "bucket"):
            out["le=" + re.search(r'le="([^"]+)"', name).group(1)] = value  # type: ignore[union-attr]
    return out


def histogram_summary(delta: dict[str, float]) -> dict[str, float | None]:
    """Mean and the bucket bounds that hold 50 %, 99 % and all of the answers (ms) of a histogram difference."""
    count = delta.get("count", 0.0)
    if count <= 0:
        return {"count": 0, "mean_ms": None, "p50_le_ms": None, "p99_le_ms": None, "max_le_ms": None}
    bounds = sorted((float(k[3:]), v) for k, v in delta.items() if k.startswith("le="))

    def bound(q: float) -> float:
        return next(1000 * le for le, cum in bounds if cum >= q * count)

    return {
        "count": count,
        "mean_ms": 1000 * delta["sum"] / count,
        "p50_le_ms": bound(0.5),
        "p99_le_ms": bound(0.99),
        "max_le_ms": bound(1.0),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--containers", type=int, default=50, help="containers per mode (on and off)")
    parser.add_argument("--block", type=int, default=25, help="containers per block between switches")
    parser.add_argument("--parallel", type=int, default=5, help="pods created at a time")
    parser.add_argument("--idle-seconds", type=float, default=30.0, help="idle koordlet CPU window per block")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench/nri_latency.py: needs root (the real node)", file=sys.stderr)
        return 2
    kept = os.environ.get("PYKOORD_TEST_NODE_CLUSTER_DIR") or str(REPO / ".cluster" / "nri-bench")
    plane = ControlPlane.up(Path(kept), node=True, start_timeout=900)
    node = RealNode.of(plane)
    release = PykoordRelease.install(node, reuse=True)
    log = plane.state_dir / "logs" / "containerd.log"
    created: list[str] = []
    durations: dict[str, list[float]] = {"on": [], "off": []}
    cpu = {"idle_cpu_s": 0.0, "idle_s": 0.0, "creating_cpu_s": 0.0, "creating_s": 0.0}
    hook: dict[str, float] = {}
    mode = "on"
    try:
        while min(len(d) for d in durations.values()) < args.containers:
            if len(durations[mode]) >= args.containers:
                mode = "off" if mode == "on" else "on"
            release.set_nri(mode == "on")
            time.sleep(SETTLE_S)
            count = min(args.block, args.containers - len(durations[mode]))
            if mode == "on":
                before = hook_histogram(release)
                idle_ns, idle_t = koordlet_cpu_ns(release), time.monotonic()
                time.sleep(args.idle_seconds)  # connected, nothing created: the same run's idle baseline
                cpu["idle_cpu_s"] += (koordlet_cpu_ns(release) - idle_ns) / 1e9
                cpu["idle_s"] += time.monotonic() - idle_t
                start_ns, start_t = koordlet_cpu_ns(release), time.monotonic()
            offset = log.stat().st_size
            names = run_block(node, count, args.parallel, mode)
            created += names
            if mode == "on":
                cpu["creating_cpu_s"] += (koordlet_cpu_ns(release) - start_ns) / 1e9
                cpu["creating_s"] += time.monotonic() - start_t
                after = hook_histogram(release)
                for key, value in after.items():
                    hook[key] = hook.get(key, 0.0) + value - before.get(key, 0.0)
            got = create_durations(log, offset, sandbox_ids(node, names))
            durations[mode] += got
            print(f"[nri-bench] {mode}: {len(got)} containers, p50 {percentiles(got)['p50']:.1f} ms", file=sys.stderr)
            for name in names:
                node.delete("pod", name, wait=False)
            mode = "off" if mode == "on" else "on"
    finally:
        for name in created:
            node.delete("pod", name, wait=False)
        release.set_nri(True)
    idle_rate = cpu["idle_cpu_s"] / max(cpu["idle_s"], 1e-9)
    on, off = percentiles(durations["on"][: args.containers]), percentiles(durations["off"][: args.containers])
    report = {
        "machine": f"{os.cpu_count()} CPUs",
        "containers_per_mode": args.containers,
        "create_ms": {"hook_on": on, "hook_off": off},
        "added_ms": {"p50": on["p50"] - off["p50"], "p99": on["p99"] - off["p99"]},
        "koordlet_answer": histogram_summary(hook),
        "koordlet_cpu": {
            "idle_cores": idle_rate,
            "creating_cores": cpu["creating_cpu_s"] / max(cpu["creating_s"], 1e-9),
            "extra_cpu_ms_per_container": 1000
            * (cpu["creating_cpu_s"] - idle_rate * cpu["creating_s"])
            / max(len(durations["on"]), 1),
        },
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
