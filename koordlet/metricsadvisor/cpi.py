"""``CPICollector``: cycles and instructions of each container (Koordinator ``metricsadvisor/collectors/
performance``, ``collectContainerCPI``), every ``--cpi-collector-interval`` (60 s).

Each pass opens, for every running container, one hardware counter per CPU and event (cycles, instructions)
in cgroup mode on the container's ``perf_event`` cgroup, lets them count for ``--collect-cpi-timewindow``
(10 s), reads them (scaled for multiplexing and summed over CPUs) and closes them. The counts go to the
metric cache (``container_cpi``, key ``<container id>/cycles`` and ``/instructions``) and to
``koordlet_container_cpi{node,container_id,container_name,pod_uid,pod_name,pod_namespace,cpi_field}``, reset
every pass as Koordinator does. A container whose counters cannot be opened (gone, no such event) is skipped.
The agent starts it only where hardware perf events and perf_event cgroups exist.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from prometheus_client import CollectorRegistry, Gauge

from koordlet.metriccache import MetricCache, MetricKind
from koordlet.statesinformer import PodMeta
from koordlet.system import CgroupFS, CgroupVersion
from koordlet.system.clock import Clock
from koordlet.system.perf import (
    HARDWARE_CPI_EVENTS,
    PERF_COUNT_HW_CPU_CYCLES,
    PERF_COUNT_HW_INSTRUCTIONS,
    PERF_TYPE_HARDWARE,
    open_cgroup_counters,
    perf_cgroup_dir,
)

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_SECONDS = 60.0
DEFAULT_WINDOW_SECONDS = 10.0
CYCLES = (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES)
INSTRUCTIONS = (PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS)


class Counters(Protocol):
    def start(self) -> None: ...
    def read(self) -> dict[tuple[int, int], float]: ...
    def close(self) -> None: ...


CounterOpener = Callable[[Path, Sequence[int]], Counters]
"""Opens the CPI counters of a cgroup directory on the given CPUs (tests pass a fake)."""


def _open_hardware(cgroup_dir: Path, cpus: Sequence[int]) -> Counters:
    return open_cgroup_counters(cgroup_dir, cpus, HARDWARE_CPI_EVENTS)


@dataclass(frozen=True, slots=True)
class _Target:
    pod: PodMeta
    container_name: str
    container_id: str
    cgroup_dir: Path


class CPICollector:
    def __init__(
        self,
        cgroupfs: CgroupFS,
        cache: MetricCache,
        registry: CollectorRegistry,
        pods: Callable[[], Iterable[PodMeta]],
        *,
        node: str,
        clock: Clock,
        cpus: Sequence[int],
        opener: CounterOpener = _open_hardware,
    ) -> None:
        self.cgroupfs = cgroupfs
        self.cache = cache
        self.pods = pods
        self.node = node
        self.clock = clock
        self.cpus = list(cpus)
        self.opener = opener
        self.skipped = 0
        self.gauge = Gauge(
            "koordlet_container_cpi",
            "Cycles and instructions of a container over the CPI window (CPICollector)",
            ["node", "container_id", "container_name", "pod_uid", "pod_name", "pod_namespace", "cpi_field"],
            registry=registry,
        )

    def _targets(self) -> list[_Target]:
        v2 = self.cgroupfs.version is CgroupVersion.V2
        layout = self.cgroupfs.layout
        out = []
        for pod in self.pods():
            if pod.phase not in ("Running", ""):
                continue
            for container in pod.containers:
                rel = pod.container_dir(layout, container)
                if rel is None or container.container_id is None:
                    continue
                path = perf_cgroup_dir(self.cgroupfs.root, rel, v2=v2)
                out.append(_Target(pod, container.name, container.container_id.id, path))
        return out

    async def collect_once(self, *, window: float = DEFAULT_WINDOW_SECONDS, stop: asyncio.Event | None = None) -> int:
        """One pass; returns how many containers were measured (none when ``stop`` is set during the window)."""
        opened: list[tuple[_Target, Counters]] = []
        for target in self._targets():
            try:
                counters = self.opener(target.cgroup_dir, self.cpus)
                counters.start()
            except OSError as err:
                self.skipped += 1
                log.debug("CPICollector: %s: %s", target.cgroup_dir, err)
                continue
            opened.append((target, counters))
        try:
            if stop is None:
                await asyncio.sleep(window)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=window)
                if stop.is_set():
                    return 0
            now = self.clock()
            self.gauge.clear()
            for target, counters in opened:
                try:
                    counts = counters.read()
                except OSError as err:
                    self.skipped += 1
                    log.debug("CPICollector: %s: %s", target.cgroup_dir, err)
                    continue
                pod = target.pod
                for field, event in (("cycles", CYCLES), ("instructions", INSTRUCTIONS)):
                    value = counts.get(event, 0.0)
                    self.cache.append(MetricKind.CONTAINER_CPI, f"{target.container_id}/{field}", now, value)
                    labels = (self.node, target.container_id, target.container_name, pod.uid, pod.name, pod.namespace)
                    self.gauge.labels(*labels, field).set(value)
        finally:
            for _, counters in opened:
                with contextlib.suppress(OSError):
                    counters.close()
        return len(opened)

    async def run(
        self, stop: asyncio.Event, *, interval: float = DEFAULT_INTERVAL_SECONDS, window: float = DEFAULT_WINDOW_SECONDS
    ) -> None:
        while not stop.is_set():
            try:
                await self.collect_once(window=min(window, interval), stop=stop)
            except Exception as err:  # a collector never stops the agent
                log.warning("CPICollector: %s", err)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=max(interval - window, 0.0))
