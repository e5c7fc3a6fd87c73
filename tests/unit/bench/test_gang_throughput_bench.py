"""bench/gang_throughput.py on a tiny cluster: both modes bind every pod, gang by gang, and only the gang
mode's pods carry gang annotations."""

from __future__ import annotations

import asyncio
import sys

from tests.unit.bench.conftest import BENCH, load_bench


def test_both_modes_bind_every_gang() -> None:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    bench = load_bench("gang_throughput")
    for annotated in (True, False):
        out = asyncio.run(bench.run_once(6, 3, 4, annotated=annotated))
        assert out["pods"] == 12
        assert out["mode"] == ("gang" if annotated else "plain")
        assert out["latency_max_ms"] >= out["latency_p50_ms"] > 0
    assert bench.member(0, 0, 4, annotated=True).annotations["gang.scheduling.koordinator.sh/min-available"] == "4"
    assert bench.member(0, 0, 4, annotated=False).annotations == {}
