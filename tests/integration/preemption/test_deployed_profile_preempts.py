"""The deployed koord-scheduler profile (deploy/koord-scheduler/configmap.yaml) preempts against the real
API server: the chart disables every default PostFilter, and the configmap must still evict a
low-priority pod for a high-priority one (through Coscheduling's job-level preemption). The profile is
taken from the configmap unchanged (its plugins and pluginConfig), under this test's scheduler name; the
scheduler runs with ``--controllers=reservation``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until
from test_preemption_cluster import HIGH, LOW, NominationWatch, gone, kwok_node, pod

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
CONFIGMAP = REPO / "deploy" / "koord-scheduler" / "configmap.yaml"
CRDS = {
    "/apis/scheduling.koordinator.sh/v1alpha1/reservations": "scheduling.koordinator.sh_reservations.yaml",
    "/apis/slo.koordinator.sh/v1alpha1/nodemetrics": "slo.koordinator.sh_nodemetrics.yaml",
}


def deployed_profile() -> dict[str, Any]:
    configmap = yaml.safe_load(CONFIGMAP.read_text())
    config = yaml.safe_load(configmap["data"]["koord-scheduler-config"])
    profile: dict[str, Any] = config["profiles"][0]
    return profile


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    for path, crd in CRDS.items():
        body = yaml.safe_load((REPO / "deploy" / "crds" / crd).read_text().split("---", 1)[1])
        result = control_plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body)
        assert result.status in (201, 409), result.body[:300]
        wait_until(lambda p=path: control_plane.request("GET", p).status == 200, timeout=30, what=f"{crd} served")
    s = Scope.create(control_plane, "deploypre")
    for name, value in ((LOW, 10), (HIGH, 1000)):
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        result = control_plane.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body)
        assert result.status in (201, 409), result.body[:300]
    yield s
    s.cleanup()


@pytest.fixture
def scheduler(scope: Scope, tmp_path: Path) -> Iterator[SchedulerProcess]:
    config = scheduler_config(scope)
    profile = deployed_profile()
    profile["schedulerName"] = scope.scheduler_name
    config["profiles"] = [profile]
    proc = SchedulerProcess.start(scope.plane, config, tmp_path, extra_args=("--controllers=reservation",))
    yield proc
    if proc.alive:
        proc.kill()


def test_deployed_profile_preempts_low_priority_pod(scope: Scope, scheduler: SchedulerProcess) -> None:
    post_filter = [e["name"] for e in deployed_profile()["plugins"]["postFilter"]["enabled"]]
    assert "Coscheduling" in post_filter and "DefaultPreemption" not in post_filter  # job-level preemption
    node = kwok_node(scope, "n1", cpu="2")
    scope.add_pods([pod(scope, "low", cpu="1500m", priority_class=LOW)])
    scope.wait_all_bound(1, timeout=30)
    with NominationWatch(scope) as watch:
        scope.add_pods([pod(scope, "high", cpu="1500m", priority_class=HIGH)])
        wait_until(lambda: gone(scope, "low"), timeout=60, what="the victim deleted")
        wait_until(lambda: scope.pod("high")["spec"].get("nodeName") == node, timeout=60, what="preemptor bound")
    assert watch.nominated.get("high") == {node}
    assert [e["regarding"]["name"] for e in scope.events(reason="Preempted")] == ["low"]
