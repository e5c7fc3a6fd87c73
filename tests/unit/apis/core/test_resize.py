"""In-place pod resize accounting (GA in 1.35): a container is counted at the larger of its spec, actuated
and allocated requests while its status reports resources; an infeasible resize counts without the spec.
A resize down that the kubelet has not carried out yet keeps the node full (old behaviour: the smaller
spec was counted and the node overcommitted)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from apis.config import parse_scheduler_config
from apis.core.parse import parse_pod
from apis.core.resize import effective_limits, effective_requests
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.app.simulate import run_simulation
from tests.builders import make_node, make_pod

G = 10**9


@pytest.mark.parametrize(
    ("spec", "actuated", "allocated", "infeasible", "want"),
    [
        pytest.param({"cpu": 1 * G}, {"cpu": 3 * G}, {"cpu": 3 * G}, False, {"cpu": 3 * G}, id="resize-down-pending"),
        pytest.param({"cpu": 3 * G}, {"cpu": 1 * G}, {"cpu": 1 * G}, False, {"cpu": 3 * G}, id="resize-up-pending"),
        pytest.param(
            {"cpu": 3 * G}, {"cpu": 1 * G}, {"cpu": 2 * G}, True, {"cpu": 2 * G}, id="infeasible-ignores-spec"
        ),
        pytest.param({"cpu": 1 * G}, {"memory": 5}, {}, False, {"cpu": 1 * G, "memory": 5}, id="per-resource"),
    ],
)
def test_effective_requests(
    spec: dict[str, int], actuated: dict[str, int], allocated: dict[str, int], infeasible: bool, want: dict[str, int]
) -> None:
    assert effective_requests(spec, actuated, allocated, infeasible=infeasible) == want


def test_effective_limits() -> None:
    assert effective_limits({"cpu": 1}, {"cpu": 2}, infeasible=False) == {"cpu": 2}
    assert effective_limits({"cpu": 3}, {"cpu": 2}, infeasible=True) == {"cpu": 2}


def resized(name: str, *, spec_cpu: str, actuated_cpu: str, node: str = "", infeasible: bool = False) -> dict[str, Any]:
    pod = make_pod(name).req(cpu=spec_cpu).node(node).obj() if node else make_pod(name).req(cpu=spec_cpu).obj()
    container = pod["spec"]["containers"][0]["name"]
    pod["status"]["containerStatuses"] = [
        {
            "name": container,
            "allocatedResources": {"cpu": actuated_cpu},
            "resources": {"requests": {"cpu": actuated_cpu}},
        }
    ]
    if infeasible:
        pod["status"]["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
    return pod


def test_pod_requests_use_the_status_while_a_resize_is_pending() -> None:
    assert parse_pod(resized("p", spec_cpu="1", actuated_cpu="3")).requests["cpu"] == 3000
    assert parse_pod(resized("p", spec_cpu="3", actuated_cpu="1", infeasible=True)).requests["cpu"] == 1000
    without_resources = make_pod("p").req(cpu="1").obj()
    without_resources["status"]["containerStatuses"] = [{"name": "main", "allocatedResources": {"cpu": "3"}}]
    assert parse_pod(without_resources).requests["cpu"] == 1000  # no status resources: the spec, as upstream


async def test_a_pending_resize_down_is_not_overcommitted() -> None:
    node = make_node("n1").allocatable(cpu="4", memory="8Gi", pods="10").obj()
    running = resized("shrinking", spec_cpu="1", actuated_cpu="3", node="n1")
    running["status"]["phase"] = "Running"
    incoming = make_pod("incoming").req(cpu="2").obj()
    config = parse_scheduler_config("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    result, _ = await run_simulation(
        None,
        config,
        build_registry(use_entry_points=False),
        now=1_700_000_000.0,
        cluster_text=yaml.safe_dump_all([node, running, incoming]),
    )
    (placement,) = result.placements
    assert placement.node is None
    assert placement.message.startswith("0/1 nodes are available: 1 Insufficient cpu.")
