"""Colocation on the real node: the slo-controller-config a user edits, the NodeSLO and NodeMetric that
follow from it, and measurements of real cgroups over time."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from realnode import NAMESPACE, RealNode, cgroup_file, wait_for

from apis.slo.quantity import int_value, milli_value

CONFIGMAP = "slo-controller-config"
# NodeMetric reports every few seconds over a short window, so a test sees a pod's usage within a minute.
FAST_METRICS = {"metricAggregateDurationSeconds": 20, "metricReportIntervalSeconds": 5}


@contextlib.contextmanager
def slo_config(node: RealNode, **keys: dict[str, Any]) -> Iterator[None]:
    """Set keys of slo-controller-config (as a user would: ``kubectl patch``), and put the old ones back."""
    current = node.get("configmap", CONFIGMAP, NAMESPACE)
    assert current is not None, "the chart installs slo-controller-config"
    before: dict[str, str] = dict(current.get("data") or {})
    patch = {"data": {key: json.dumps(value) for key, value in keys.items()}}
    node.kubectl("patch", "configmap", CONFIGMAP, "-n", NAMESPACE, "--type=merge", "-p", json.dumps(patch))
    try:
        yield
    finally:
        restore = {"data": {key: before.get(key) for key in keys}}
        node.kubectl(
            "patch", "configmap", CONFIGMAP, "-n", NAMESPACE, "--type=merge", "-p", json.dumps(restore), check=False
        )


def wait_node_slo(node: RealNode, path: list[str], want: Any, *, timeout: float = 90) -> dict[str, Any]:
    """The node's NodeSLO once ``spec.<path>`` equals ``want`` (koord-scheduler's nodeslo controller)."""

    def ready() -> dict[str, Any] | None:
        slo = node.get("nodeslo", node.name, "")
        value: Any = slo and slo.get("spec")
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return slo if value == want else None

    result: dict[str, Any] = wait_for(ready, timeout=timeout, what=f"NodeSLO spec.{'.'.join(path)} = {want!r}")
    return result


def wait_fast_metrics(node: RealNode) -> None:
    """The NodeMetric's collect policy is the fast one (koord-scheduler's nodemetric controller)."""

    def ready() -> bool:
        metric = node.get("nodemetric", node.name, "")
        policy = (metric or {}).get("spec", {}).get("metricCollectPolicy", {})
        return bool(
            policy.get("reportIntervalSeconds") == FAST_METRICS["metricReportIntervalSeconds"]
            and policy.get("aggregateDurationSeconds") == FAST_METRICS["metricAggregateDurationSeconds"]
        )

    wait_for(ready, timeout=90, what="the NodeMetric collect policy of slo-controller-config")


@dataclass(frozen=True)
class PodUsage:
    cpu_cores: float
    memory_bytes: int
    update_time: float


def pod_usage(metric: dict[str, Any], namespace: str, name: str) -> PodUsage | None:
    """The pod's entry in a NodeMetric's status (None if it has none)."""
    status = metric.get("status") or {}
    for entry in status.get("podsMetric") or []:
        if entry.get("namespace") == namespace and entry.get("name") == name:
            usage = (entry.get("podUsage") or {}).get("resources") or {}
            when = datetime.fromisoformat(status["updateTime"].replace("Z", "+00:00")).timestamp()
            return PodUsage(milli_value(usage.get("cpu", "0")) / 1000, int_value(usage.get("memory", "0")), when)
    return None


@dataclass
class CPUSampler:
    """Samples a cgroup's ``cpuacct.usage`` every ``interval`` seconds in a thread (wall time, ns)."""

    rel_dir: str
    interval: float = 1.0
    samples: list[tuple[float, int]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> CPUSampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        path = cgroup_file(self.rel_dir, "cpuacct.usage")
        while not self._stop.is_set():
            with contextlib.suppress(OSError, ValueError):
                self.samples.append((time.time(), int(path.read_text())))
            self._stop.wait(self.interval)

    def cores(self, start: float, end: float) -> float:
        """Average cores used between ``start`` and ``end`` (the samples nearest to both)."""
        samples = list(self.samples)
        assert len(samples) >= 2, "no cgroup samples"
        first = min(samples, key=lambda s: abs(s[0] - start))
        last = min(samples, key=lambda s: abs(s[0] - end))
        assert last[0] > first[0], (start, end, samples[:3], samples[-3:])
        return (last[1] - first[1]) / 1e9 / (last[0] - first[0])


def memory_without_page_cache(rel_dir: str) -> int:
    """Koordinator's memory usage of a cgroup: ``total_active_anon + total_inactive_anon + total_unevictable``."""
    stat = dict(line.split() for line in cgroup_file(rel_dir, "memory.stat").read_text().splitlines())
    return sum(int(stat[k]) for k in ("total_active_anon", "total_inactive_anon", "total_unevictable"))


def node_memory_used_percent() -> float:
    """What koordlet reads as node memory usage: (MemTotal - MemAvailable) / MemTotal, in percent."""
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, value = line.split(":", 1)
            info[key] = int(value.split()[0])
    return 100 * (info["MemTotal"] - info["MemAvailable"]) / info["MemTotal"]


def node_cpu_busy() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine from /proc/stat: the node is this machine."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_fraction(start: tuple[int, int], end: tuple[int, int]) -> float:
    return (end[0] - start[0]) / max(end[1] - start[1], 1)
