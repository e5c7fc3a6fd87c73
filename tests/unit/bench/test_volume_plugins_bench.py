"""bench/volume_plugins_throughput.py on a tiny cluster: both profiles place every pod and the
``without`` profile really runs without the volume plugins."""

from __future__ import annotations

import asyncio
import sys

from tests.unit.bench.conftest import BENCH, load_bench


def test_both_profiles_place_every_pod() -> None:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    bench = load_bench("volume_plugins_throughput")
    out = asyncio.run(bench.run_interleaved(nodes=8, placed=4, pods=30, pct=100, chunk=7))
    assert out["with"]["bound"] == out["without"]["bound"] == 30
    assert out["slowdown_pct"] is not None
    scheduler, _ = asyncio.run(bench.build(4, 0, 1, "without", 100))
    plugins = set(scheduler.profiles["default-scheduler"].plugins)
    assert plugins.isdisjoint(bench.VOLUME_PLUGINS)
    scheduler, _ = asyncio.run(bench.build(4, 0, 1, "with", 100))
    assert set(bench.VOLUME_PLUGINS) <= set(scheduler.profiles["default-scheduler"].plugins)
