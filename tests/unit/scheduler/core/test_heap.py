"""HeapSettler: collect, freeze and raise the generation-0 threshold when first idle, and again when idle
no more often than ``resettle_seconds``; while the caches load only the thresholds are raised."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from apis.config import KubeSchedulerConfiguration
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler import heap
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.heap import HeapSettler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.scheduler import SchedulerOptions
from tests.builders import make_node, make_pod


@pytest.fixture(autouse=True)
def restore_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


class _Cycle:
    """A reference cycle, which only the cyclic collector frees."""

    def __init__(self) -> None:
        self.me = self


def test_settle_collects_cycles_freezes_the_rest_and_raises_the_threshold() -> None:
    gc.unfreeze()
    for _ in range(50):
        _Cycle()
    result = heap.settle()
    assert result.collected >= 50
    assert result.frozen == gc.get_freeze_count() > 0
    assert gc.get_threshold() == (heap.GEN0_THRESHOLD, *heap.OLDER_THRESHOLDS)


def test_idle_resettles_only_after_the_interval_and_unfreezes_first() -> None:
    now = [0.0]
    settler = HeapSettler(resettle_seconds=600.0, clock=lambda: now[0])
    settler.start()
    assert settler.settles == 1
    now[0] = 599.0
    assert settler.idle() is None
    survivor = [_Cycle() for _ in range(10)]  # alive now, frozen by the next settle
    frozen_with_survivor = heap.settle().frozen
    del survivor  # garbage now, but frozen: only an unfreeze lets the collector find it
    now[0] = 1200.0
    result = settler.idle()
    assert result is not None and settler.settles == 2
    assert result.collected >= 10
    assert result.frozen < frozen_with_survivor


def test_loading_raises_the_thresholds_without_collecting_and_first_idle_settles() -> None:
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    cycles = [_Cycle() for _ in range(20)]
    del cycles
    settler = HeapSettler()
    settler.loading()
    assert gc.get_threshold() == (heap.GEN0_THRESHOLD, *heap.OLDER_THRESHOLDS)
    assert settler.settles == 0
    result = settler.idle()
    assert result is not None and settler.settles == 1
    assert result.collected >= 20  # the unfreeze lets the first settle find what loading froze


def test_scheduler_run_settles_when_idle_and_schedules() -> None:
    settler = HeapSettler()
    cluster = MemoryCluster.from_objects(
        [make_node("n1").capacity(cpu="4", memory="8Gi", pods="10").build()],
        [make_pod("p").req(cpu="1").build()],
    )
    scheduler = build_scheduler(
        KubeSchedulerConfiguration(), in_tree_registry(), cluster, options=SchedulerOptions(heap=settler)
    )

    async def run_briefly() -> None:
        await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
        stop = asyncio.Event()
        task = asyncio.ensure_future(scheduler.run(stop))
        for _ in range(100):  # the loop is idle once the binding is done and it next waits for pods
            await asyncio.sleep(0.05)
            if settler.settles:
                break
        stop.set()
        await task

    asyncio.run(run_briefly())
    assert settler.settles >= 1
    assert cluster.pods["default/p"].node_name == "n1"
