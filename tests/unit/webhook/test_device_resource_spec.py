"""The pod webhook's DeviceResourceSpec rule: Koordinator's ``device_resource_spec_test.go`` cases
transcribed (containers' GPU requests and limits before and after), through the whole mutation."""

from __future__ import annotations

from typing import Any

import pytest

from koord_scheduler.webhook.device_spec import mutate_device_resources
from koord_scheduler.webhook.mutation import mutate_pod

CORE, MEM, RATIO = "koordinator.sh/gpu-core", "koordinator.sh/gpu-memory", "koordinator.sh/gpu-memory-ratio"
GPU, SHARED = "koordinator.sh/gpu", "koordinator.sh/gpu.shared"


def pod(requests: dict[str, str], limits: dict[str, str] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": dict(requests), "limits": dict(limits if limits is not None else requests)}
    return {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c1", "image": "app", "resources": resources}]},
    }


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param(
            {CORE: "100", MEM: "4000", RATIO: "50"},
            {CORE: "100", MEM: "4000", RATIO: "50", SHARED: "1"},
            id="mutating-gpu-share-when-gpuMemoryRatio-small-than-100",
        ),
        pytest.param(
            {CORE: "100", MEM: "8000", RATIO: "200"},
            {CORE: "100", MEM: "8000", RATIO: "200", SHARED: "2"},
            id="mutating-gpu-share-when-gpuMemoryRatio-is-multiple-of-100",
        ),
        pytest.param({GPU: "200"}, {CORE: "200", RATIO: "200", SHARED: "2"}, id="mutating-gpu"),
        pytest.param({MEM: "8Gi"}, {MEM: "8Gi", SHARED: "1"}, id="memory-alone-one-gpu"),
        pytest.param({CORE: "300", MEM: "8Gi"}, {CORE: "300", MEM: "8Gi", SHARED: "3"}, id="no-ratio-count-from-core"),
        pytest.param({SHARED: "2", RATIO: "100"}, {SHARED: "2", RATIO: "100"}, id="gpu-shared-given-kept"),
    ],
)
def test_device_resource_spec(before: dict[str, str], after: dict[str, str]) -> None:
    p = pod(before)
    assert mutate_device_resources(p) is (before != after)
    resources = p["spec"]["containers"][0]["resources"]
    assert resources == {"requests": after, "limits": after}


def test_pods_without_gpu_resources_are_unchanged_and_the_rule_runs_in_every_mutation() -> None:
    plain = pod({"cpu": "1", "nvidia.com/gpu": "1"})
    assert not mutate_device_resources(plain)
    result = mutate_pod(pod({GPU: "100"}), [], priority_classes={}, roll=lambda: 0)
    assert result.pod["spec"]["containers"][0]["resources"]["requests"] == {CORE: "100", RATIO: "100", SHARED: "1"}
