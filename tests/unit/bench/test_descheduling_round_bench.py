"""bench/descheduling_round.py's cluster (small): every hot node sheds pods until it is under its high
threshold, and each planned pod is counted against a cool node."""

from __future__ import annotations

from apis.config.descheduler import parse_descheduler_config
from koord_scheduler.descheduler.round import Descheduler
from tests.unit.bench.conftest import load_bench


def test_small_round() -> None:
    bench = load_bench("descheduling_round")
    view = bench.build(40, 10, 0.1)
    config, args = parse_descheduler_config(bench.CONFIG)
    plan = Descheduler(config, args, clock=lambda: bench.NOW).plan(view)
    # 4 hot nodes at 85% (10 pods of 2720m on 32 CPUs) shed 2 pods each to get under 75%.
    assert len(plan.migrations) == 8
    assert {m.node for m in plan.migrations} == {f"node-{i:05d}" for i in range(4)}
    assert all(m.target for m in plan.migrations)
