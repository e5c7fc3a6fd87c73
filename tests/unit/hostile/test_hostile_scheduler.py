"""One bad object stays one object's problem: the scheduling loop and the informers carry on."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from apis.config import parse_scheduler_config
from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.object_errors import ObjectErrors
from tests.builders import make_node, make_pod

NOW = 1_700_000_000.0
CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
"""


async def test_a_cycle_that_raises_fails_that_pod_only(caplog: pytest.LogCaptureFixture) -> None:
    nodes = [make_node("n1").capacity(cpu="4", memory="8Gi", pods=10).build()]
    pods = [make_pod("bad").req(cpu="1").build(), make_pod("good").req(cpu="1").build()]
    cluster = MemoryCluster.from_objects(nodes, pods)
    scheduler = build_scheduler(parse_scheduler_config(CONFIG), in_tree_registry(), cluster, clock=lambda: NOW)
    fwk = scheduler.profiles["default-scheduler"]
    real_permit = fwk.run_permit

    def permit(state: CycleState, pod: Pod, node: str) -> Any:
        if pod.name == "bad":  # after Reserve and assume: the pod must be forgotten again
            raise OverflowError("Python int too large to convert to C long")
        return real_permit(state, pod, node)

    fwk.run_permit = permit  # type: ignore[method-assign,assignment]
    await cluster.start(scheduler)
    with caplog.at_level(logging.WARNING):
        await scheduler.run_until_idle()
    assert cluster.pods["default/good"].node_name == "n1"
    assert cluster.pods["default/bad"].node_name == ""
    assert scheduler.cache.get_pod("default/bad") is None, "the assumed pod is forgotten"
    assert scheduler.metrics.object_errors.count("Pod", "SchedulingError") == 1
    assert cluster.conditions["default/bad"][0] == "SchedulerError"
    assert not any(r.exc_info for r in caplog.records), "no traceback at default verbosity"
    named = [r.getMessage() for r in caplog.records if "default/bad" in r.getMessage()]
    assert any("OverflowError" in m for m in named)


def test_object_errors_log_and_count_each_problem_once(caplog: pytest.LogCaptureFixture) -> None:
    errors = ObjectErrors()
    with caplog.at_level(logging.WARNING):
        assert errors.report("Reservation", "r1", "Invalid", "spec.ttl: bad")
        assert not errors.report("Reservation", "r1", "Invalid", "spec.ttl: bad")
        assert errors.report("Reservation", "r1", "Invalid", "spec.expires: bad")
        errors.clear("Reservation", "r1")
        assert errors.report("Reservation", "r1", "Invalid", "spec.expires: bad")
    assert errors.count("Reservation", "Invalid") == 3
    assert len(caplog.records) == 3
    assert caplog.records[0].getMessage() == "Reservation r1 ignored (Invalid): spec.ttl: bad"


async def test_a_raising_pod_handler_is_reported_once_and_scheduling_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    nodes = [make_node("n1").capacity(cpu="4", memory="8Gi", pods=10).build()]
    cluster = MemoryCluster.from_objects(nodes, [make_pod("a").req(cpu="1").build()])
    scheduler = build_scheduler(parse_scheduler_config(CONFIG), in_tree_registry(), cluster, clock=lambda: NOW)

    def exploding(event: Any, old: Pod | None, new: Pod | None) -> None:
        raise KeyError("state missing")

    scheduler.watch_pods(exploding)
    await cluster.start(scheduler)
    with caplog.at_level(logging.WARNING):
        await scheduler.run_until_idle()
    assert cluster.pods["default/a"].node_name == "n1"
    assert scheduler.metrics.object_errors.count("Pod", "HandlerError") == 1
    assert not any(r.exc_info for r in caplog.records)
