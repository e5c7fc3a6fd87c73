"""bench/colocation_controllers.py runs (small), and a steady cluster costs no writes between the first
minute and the update interval."""

from __future__ import annotations

import argparse

from tests.unit.bench.conftest import load_bench


async def test_small_run() -> None:
    bench = load_bench("colocation_controllers")
    rows = await bench.run(argparse.Namespace(nodes=60, pods=3, minutes=3, jitter=0.03))
    assert [r[2] for r in rows] == [120, 0, 0]  # NodeSLO + batch resources per node, then gated
    assert all(r[1] >= 60 for r in rows)  # every node reconciled each minute
