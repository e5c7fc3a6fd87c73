"""Every scheduler configuration the repository ships builds a real scheduler from the in-tree registry."""

from pathlib import Path

import pytest

from apis.config import load_scheduler_config
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster

REPO = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize(
    ("path", "want_profiles"),
    [
        pytest.param("config/scheduler/default.yaml", ["default-scheduler"], id="scheduler-default"),
        pytest.param("config/scheduler/koordinator.yaml", ["koord-scheduler"], id="scheduler-koordinator"),
        pytest.param("config/simulate/scheduler-config.yaml", ["default-scheduler"], id="simulate"),
        pytest.param("deploy/koord-scheduler/configmap.yaml", ["koord-scheduler"], id="deploy-configmap"),
    ],
)
def test_shipped_config_builds_a_scheduler(path: str, want_profiles: list[str]) -> None:
    config = load_scheduler_config(REPO / path)

    scheduler = build_scheduler(config, in_tree_registry(), MemoryCluster.from_objects([], []), clock=lambda: 1.0)

    assert sorted(scheduler.profiles) == want_profiles


def test_koordinator_profile_runs_reservation_postfilter_before_preemption() -> None:
    config = load_scheduler_config(REPO / "config/scheduler/koordinator.yaml")

    scheduler = build_scheduler(config, in_tree_registry(), MemoryCluster.from_objects([], []), clock=lambda: 1.0)

    fwk = scheduler.profiles["koord-scheduler"]
    want_post_filter = ["Reservation", "Coscheduling", "ElasticQuota"]  # job preemption, as the chart
    assert [p.name for p in fwk.post_filter_plugins] == want_post_filter
    assert [p.name for p in fwk.capabilities.pre_bind][-3:] == ["Reservation", "Coscheduling", "DefaultPreBind"]
    assert fwk.capabilities.pod_patch_applier is not None
    assert fwk.capabilities.reservation_nominator is not None
