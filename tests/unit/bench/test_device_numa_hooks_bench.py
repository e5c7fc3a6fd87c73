"""bench/deviceshare_throughput.py and bench/numa_throughput.py on tiny clusters: the hooks runs bind every
pod with the hooks and without them (and put the hooks back), and the GPU preemption run preempts one
holder per preemptor, with DeviceShare and with the GPUs as an extended resource alone."""

from __future__ import annotations

import asyncio
import sys
from types import ModuleType

from koord_scheduler.plugins.deviceshare import preemption as deviceshare_preemption
from koord_scheduler.plugins.nodenumaresource import preemption as numa_preemption
from tests.unit.bench.conftest import BENCH, load_bench


def _bench(name: str) -> ModuleType:
    for path in (BENCH, BENCH.parent):  # its bare-name imports, and ``bench.scheduler_throughput``
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    return load_bench(name)


def test_deviceshare_hooks_and_preemption() -> None:
    bench = _bench("deviceshare_throughput")
    saved = deviceshare_preemption.dry_run_of
    hooks = asyncio.run(bench.hooks_overhead(4, 2, 12, 4))
    assert deviceshare_preemption.dry_run_of is saved, "the hooks are put back"
    assert hooks["cpu_ms_per_pod"]["hooks"] > 0 and hooks["cpu_ms_per_pod"]["no_hooks"] > 0
    for flag in (True, False):
        out = asyncio.run(bench.preemption(3, 2, 2, with_deviceshare=flag))
        assert (out["bound"], out["victims"]) == (2, 2), out


def test_numa_hooks() -> None:
    bench = _bench("numa_throughput")
    saved = numa_preemption.deltas_of
    out = asyncio.run(bench.hooks(3, 6, 2))
    assert numa_preemption.deltas_of is saved
    assert out["bound"] == {"hooks": 6, "no_hooks": 6}
