"""The in-process measurement loop the throughput benchmarks share."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import numpy as np

from koord_scheduler.scheduler.heap import HeapSettler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.scheduler import Scheduler


@dataclass(frozen=True, slots=True)
class Measurement:
    bound: int
    """Pods bound during the run (already-placed pods excluded)."""
    seconds: float
    p50_ms: float
    p99_ms: float
    cpu_seconds: float = 0.0
    """Process CPU time from the first cycle to the last binding (the heap settling before it excluded,
    as start-up work)."""

    @property
    def pods_per_second(self) -> float:
        return round(self.bound / self.seconds, 1) if self.seconds else 0.0


async def measure(scheduler: Scheduler, cluster: MemoryCluster, *, pending: int, placed: int) -> Measurement:
    """Schedule until the queue is empty, timing each scheduling cycle, then wait for the bindings.

    As ``Scheduler.run`` does in cluster mode, the plugins warm up and the heap is settled first
    (:meth:`Scheduler.warm_up`, :mod:`koord_scheduler.scheduler.heap`); neither is in the window."""
    scheduler.warm_up()
    HeapSettler().start()
    cpu_started = time.process_time()
    latencies = np.empty(pending + 1, dtype=np.float64)
    n = 0
    started = time.perf_counter()
    while True:
        t = time.perf_counter()
        if not scheduler.schedule_one():
            break
        if n < len(latencies):
            latencies[n] = time.perf_counter() - t
        n += 1
        if n % 32 == 0:
            await asyncio.sleep(0)
    await scheduler.drain()
    elapsed = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    lat = latencies[: min(n, len(latencies))] if n else np.zeros(1)
    bound = sum(1 for p in cluster.pods.values() if p.node_name) - placed
    return Measurement(
        bound=bound,
        seconds=round(elapsed, 3),
        p50_ms=round(float(np.percentile(lat, 50)) * 1000, 3),
        p99_ms=round(float(np.percentile(lat, 99)) * 1000, 3),
        cpu_seconds=cpu_seconds,
    )
