"""The MigrationController args that act on a round's plan: ``nodeFit`` (the pod must fit another node),
``evictLocalStoragePods``, ``schedulerNames`` and ``dryRun``, with their ``skipEvictionGates`` entries."""

from __future__ import annotations

import pytest

from apis.config.descheduler import parse_descheduler_config
from apis.core.types import Node, Pod
from koord_scheduler.descheduler.round import Descheduler
from tests.builders import PodBuilder, make_node
from tests.unit.descheduler.test_deschedule_plugins import NOW, deschedule_config, view, web


def _descheduler(migration_args: str) -> Descheduler:
    text = deschedule_config("PodLifeTime", "maxPodLifeTimeSeconds: 600")
    # Each pod here is its workload's only one: the expected-replicas check (test_descheduling_round) is lifted.
    lines = ["skipCheckExpectedReplicas: true", *(migration_args.split(";") if migration_args else [])]
    text += "  - name: MigrationController\n    args:\n" + "".join(f"      {line}\n" for line in lines)
    config, args = parse_descheduler_config(text)
    return Descheduler(config, args, clock=lambda: NOW)


def _old(name: str = "old", *, cpu: str = "1") -> PodBuilder:
    return web(name, age=1200).req(cpu=cpu)


def _node(name: str, *, cpu: str = "4") -> Node:
    return make_node(name).allocatable(cpu=cpu, memory="8Gi", pods="110").build()


FULL = make_node("n2").allocatable(cpu="500m", memory="8Gi", pods="110").build()
TAINTED = make_node("n2").allocatable(cpu="4", memory="8Gi", pods="110").taint("gpu", "", "NoSchedule").build()
CORDONED = make_node("n2").allocatable(cpu="4", memory="8Gi", pods="110").unschedulable().build()


@pytest.mark.parametrize(
    ("args", "others", "want"),
    [
        ("", [], ["old"]),  # nodeFit off (Koordinator's default): moved even with nowhere to go
        ("nodeFit: true", [], []),  # no other node
        ("nodeFit: true", [_node("n2")], ["old"]),
        ("nodeFit: true", [FULL], []),  # not enough cpu
        ("nodeFit: true", [TAINTED], []),
        ("nodeFit: true", [CORDONED], []),
        ("nodeFit: true;skipEvictionGates: [NodeFit]", [], ["old"]),
    ],
)
def test_node_fit(args: str, others: list[Node], want: list[str]) -> None:
    plan = _descheduler(args).plan(view([_node("n1"), *others], [_old().build()]))
    assert [m.name for m in plan.migrations] == want


def test_node_fit_counts_the_pods_already_on_the_other_node() -> None:
    pods = [_old(cpu="2").build(), web("resident", "n2").req(cpu="3").build()]
    plan = _descheduler("nodeFit: true").plan(view([_node("n1"), _node("n2")], pods))
    assert plan.migrations == ()


@pytest.mark.parametrize(
    ("args", "pod", "want"),
    [
        ("", _old().inline_volume("cache", "emptyDir").build(), []),
        ("evictLocalStoragePods: true", _old().inline_volume("cache", "emptyDir").build(), ["old"]),
        ("skipEvictionGates: [LocalStorage]", _old().inline_volume("host", "hostPath", path="/x").build(), ["old"]),
        ("schedulerNames: [koord-scheduler]", _old().build(), []),
        ("schedulerNames: [koord-scheduler]", _old().scheduler("koord-scheduler").build(), ["old"]),
        ("schedulerNames: [koord-scheduler];defaultJobMode: EvictDirectly", _old().build(), ["old"]),
    ],
)
def test_local_storage_and_scheduler_names(args: str, pod: Pod, want: list[str]) -> None:
    plan = _descheduler(args).plan(view([_node("n1"), _node("n2")], [pod]))
    assert [m.name for m in plan.migrations] == want


def test_migration_controller_dry_run_makes_the_round_a_dry_run() -> None:
    assert not _descheduler("").dry_run
    assert _descheduler("dryRun: true").dry_run
