"""bench/loadaware_throughput.py's interleaved mode on a tiny cluster: both profiles place every pod,
chunk by chunk, and the slowdown is computed from what was measured."""

from __future__ import annotations

import asyncio
import sys
from types import ModuleType

import pytest

from tests.unit.bench.conftest import BENCH, load_bench


@pytest.fixture(scope="module")
def loadaware_bench() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))  # its bare-name import of measure.py
    return load_bench("loadaware_throughput")


class _NoSettle:
    """Stands in for HeapSettler: freezing the test process's heap would outlive the test."""

    started = 0

    def start(self) -> None:
        _NoSettle.started += 1


def test_interleaved_places_every_pod_of_both_profiles(
    loadaware_bench: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loadaware_bench, "HeapSettler", _NoSettle)
    out = asyncio.run(loadaware_bench.run_interleaved(nodes=12, placed=6, pods=40, pct=100, chunk=7))
    assert _NoSettle.started == 1
    for profile in ("baseline", "loadaware"):
        assert out[profile]["bound"] == 40
        assert out[profile]["cycles"] == 40
        assert out[profile]["cpu_ms_per_pod"] > 0
    assert out["chunk_pairs"] == 6  # ceil(40 / 7) turns with pods for both
    base, la = out["baseline"]["cpu_ms_per_pod"], out["loadaware"]["cpu_ms_per_pod"]
    assert out["slowdown_pct"] == round(100 * (1 - base / la), 2)
    assert out["median_chunk_slowdown_pct"] is not None
