"""The JobNodeFinder step of the cycle (Koordinator's FindOneNode): after PreFilter, a finder's node is
the cycle's only candidate; Skip goes on as usual; a rejection rejects the pod as PreFilter does."""

from __future__ import annotations

from typing import Any

import pytest

from apis.config import parse_scheduler_config
from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.interfaces import PreFilterPlugin
from koord_scheduler.framework.koordinator_stages import JobNodeFinder
from koord_scheduler.framework.registry import PluginSpec, Registry
from koord_scheduler.framework.status import Code, Status, error, unschedulable
from koord_scheduler.framework.types import PreFilterResult
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from tests.builders import make_node, make_pod

NOW = 1_800_000_000.0
CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    preFilter: {enabled: [{name: Finder}]}
"""


class Finder:
    name = "Finder"

    def __init__(self, answer: tuple[str, Status]) -> None:
        self.answer = answer
        self.seen: list[PreFilterResult | None] = []

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Any) -> tuple[PreFilterResult | None, Status]:
        return PreFilterResult(frozenset({"n1", "n2"})), Status()

    def pre_filter_extensions(self) -> None:
        return None

    def find_one_node(self, state: CycleState, pod: Pod, result: PreFilterResult | None) -> tuple[str, Status]:
        self.seen.append(result)
        return self.answer


def _implements(p: Finder) -> tuple[PreFilterPlugin, JobNodeFinder]:
    return p, p


@pytest.mark.parametrize(
    ("answer", "want_node", "want_condition"),
    [
        pytest.param(("n3", Status()), "n3", None, id="success-is-the-only-candidate"),
        pytest.param(("", Status(Code.SKIP)), "n1", None, id="skip-goes-on-with-prefilter-result"),
        pytest.param(
            ("", unschedulable("no room for the job")),
            None,
            (
                "Unschedulable",
                "0/3 nodes are available: no room for the job. no new claims to deallocate, "
                "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.",
            ),
            id="rejection-rejects-like-prefilter",
        ),
        pytest.param(("", error("planner broke")), None, ("SchedulerError", "planner broke"), id="error"),
    ],
)
async def test_job_node_finder(
    answer: tuple[str, Status], want_node: str | None, want_condition: tuple[str, str] | None
) -> None:
    finder = Finder(answer)
    registry = in_tree_registry().merge(Registry([PluginSpec("Finder", lambda args, handle: finder)]))
    nodes = [make_node(n).capacity(cpu="4", memory="8Gi", pods=10).build() for n in ("n1", "n2", "n3")]
    cluster = MemoryCluster.from_objects(nodes, [make_pod("a").req(cpu="1").build()])
    scheduler = build_scheduler(parse_scheduler_config(CONFIG), registry, cluster, clock=lambda: NOW)
    await cluster.start(scheduler)
    await scheduler.run_until_idle()
    assert finder.seen[0] == PreFilterResult(frozenset({"n1", "n2"}), frozenset({"Finder"}))
    assert (cluster.pods["default/a"].node_name or None) == want_node
    assert cluster.conditions.get("default/a") == want_condition
