#!/usr/bin/env python3
"""koordlet's NRI answer time in-process, with and without other koordlet threads holding the GIL.

    .venv/bin/python bench/nri_answer.py [--calls 2000] [--pods 100] [--busy-threads 2] [--json out.json]

No root, no node: a fake runtime (the test suite's, speaking NRI's multiplexed ttrpc on a unix socket) in
this process sends ``CreateContainer`` for a BE pod the informer knows, among ``--pods`` others, to
koordlet's plugin with its real handlers in a child process, and times each round trip from the runtime's
side (what containerd waits for). Two phases: ``idle`` (nothing else in koordlet's process) and ``busy``
(``--busy-threads`` threads doing pure-Python work, as koordlet's metric collection and reconcilers do, so
the plugin's thread must win the GIL to answer).
Prints p50/p99/max milliseconds per phase and the plugin's own histogram buckets.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [
    str(REPO),
    str(REPO / "tests" / "unit" / "koordlet" / "runtimehooks"),
    str(REPO / "tests" / "unit" / "koordlet"),
    str(REPO / "tests" / "unit" / "koordlet" / "qos"),
]

from fakeruntime import FakeRuntime  # noqa: E402
from koordlet_fakes import FakeCgroups  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402
from qos_helpers import NODE, make_node, pod  # noqa: E402

from koordlet.qosmanager import ResourceExecutor  # noqa: E402
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES, FeatureGates  # noqa: E402
from koordlet.runtimehooks.nri.handlers import HookHandlers  # noqa: E402
from koordlet.runtimehooks.nri.plugin import HookMetrics, NRIOptions, NRIPlugin  # noqa: E402
from koordlet.runtimehooks.nri.proto import api_pb2  # noqa: E402
from koordlet.runtimehooks.rules import HookRuleSource  # noqa: E402
from koordlet.runtimehooks.service import GIL_SWITCH_INTERVAL_S  # noqa: E402
from koordlet.statesinformer import StatesInformer  # noqa: E402
from koordlet.system import CgroupDriver, CgroupVersion  # noqa: E402
from koordlet.system.clock import FakeClock  # noqa: E402

CPU, MEM = "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"
TARGET_UID = "bbbbbbbb-0000-4000-8000-000000000001"


def busy(stop: threading.Event) -> None:
    """Pure-Python work that holds the GIL between switch intervals (parsing, dict building)."""
    while not stop.is_set():
        sum(len(str(i)) for i in range(2000))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def phase(runtime: FakeRuntime, calls: int, box: api_pb2.PodSandbox) -> dict[str, float]:
    samples = []
    for i in range(calls):
        c = api_pb2.Container(id=f"c{i}", pod_sandbox_id=box.id, name="main")
        c.linux.resources.cpu.shares.value = 2
        started = time.perf_counter()
        got = runtime.create_container(box, c)
        samples.append((time.perf_counter() - started) * 1000)
        assert got.adjust.linux.resources.cpu.shares.value > 2, got
    return {
        "p50_ms": round(statistics.median(samples), 3),
        "p99_ms": round(percentile(samples, 0.99), 3),
        "max_ms": round(max(samples), 3),
        "mean_ms": round(statistics.fmean(samples), 3),
    }


def serve_plugin(sock: Path, opts: argparse.Namespace, events: tuple[Any, Any], out: Any) -> None:
    """The koordlet side, in a process of its own (as in production: containerd is another process)."""
    pods, busy_threads = opts.pods, opts.busy_threads
    if opts.switch_interval > 0:
        sys.setswitchinterval(opts.switch_interval)
    root = sock.parent
    cgroups = FakeCgroups(root / "cgroup", CgroupVersion.V1, CgroupDriver.CGROUPFS)
    fs = cgroups.fs()
    informer = StatesInformer(NODE, fs.layout)
    informer.set_node(make_node())
    target = pod("be-target", TARGET_UID).be()
    target.container("main", requests={CPU: "1000", MEM: "1Gi"}, limits={CPU: "1000"})
    others = [pod(f"p{i}").be().container("main", requests={CPU: "500"}).build() for i in range(pods)]
    informer.replace_pods([target.build(), *others])
    gates = FeatureGates.resolve(KOORDLET_FEATURES)
    handlers = HookHandlers(informer, HookRuleSource(informer, gates), ResourceExecutor(fs, clock=FakeClock()))
    registry = CollectorRegistry()
    plugin = NRIPlugin(NRIOptions(sock), handlers, metrics=HookMetrics(registry, NODE))
    stop = threading.Event()
    workers: list[threading.Thread] = []
    go_busy, done = events

    def start_busy() -> None:
        go_busy.wait()
        for _ in range(busy_threads):
            worker = threading.Thread(target=busy, args=(stop,), daemon=True)
            worker.start()
            workers.append(worker)

    threading.Thread(target=start_busy, daemon=True).start()
    runner = threading.Thread(target=plugin.run, daemon=True)
    runner.start()
    done.wait()
    stop.set()
    plugin.stop()
    runner.join(10)
    out.put(
        {
            s.labels["le"]: s.value
            for metric in registry.collect()
            if metric.name == "koordlet_runtime_hook_invoked_duration_seconds"
            for s in metric.samples
            if s.name.endswith("_bucket")
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--busy-threads", type=int, default=2)
    parser.add_argument(
        "--switch-interval",
        type=float,
        default=GIL_SWITCH_INTERVAL_S,
        help=f"koordlet's GIL switch interval (koordlet sets {GIL_SWITCH_INTERVAL_S}; 0: Python's 5 ms)",
    )
    parser.add_argument("--json", type=Path)
    opts = parser.parse_args()
    ctx = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory() as tmp:
        sock = Path(tmp) / "nri.sock"
        runtime = FakeRuntime(sock)
        go_busy, done, out = ctx.Event(), ctx.Event(), ctx.Queue()
        child = ctx.Process(
            target=serve_plugin,
            args=(sock, opts, (go_busy, done), out),
        )
        child.start()
        runtime.accept()
        box = api_pb2.PodSandbox(id="sb", name="be-target", uid=TARGET_UID, namespace="default")
        box.linux.cgroup_parent = f"/kubepods/besteffort/pod{TARGET_UID}"
        phase(runtime, 50, box)  # warm up
        result: dict[str, object] = {
            "calls": opts.calls,
            "pods": opts.pods,
            "busy_threads": opts.busy_threads,
            "switch_interval_s": opts.switch_interval or sys.getswitchinterval(),
        }
        result["idle"] = phase(runtime, opts.calls, box)
        go_busy.set()
        time.sleep(0.2)
        result["busy"] = phase(runtime, opts.calls, box)
        done.set()
        runtime.close()
        result["plugin_histogram_buckets"] = out.get(timeout=30)
        child.join(10)
    text = json.dumps(result, indent=2)
    print(text)
    if opts.json is not None:
        opts.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
