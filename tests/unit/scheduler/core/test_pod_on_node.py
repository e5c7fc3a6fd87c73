"""The assume step's copy of a pod (``pod_on_node``) is exactly ``dataclasses.replace(pod, node_name=...)``."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from apis.core.types import Pod
from koord_scheduler.scheduler.scheduling_cycle import pod_on_node
from tests.builders import make_pod


def everything() -> Pod:
    return (
        make_pod("web-1", namespace="shop")
        .req(cpu="500m", memory="1Gi")
        .label("app", "web")
        .annotation("a", "b")
        .owner("ReplicaSet", "web-abc")
        .priority(1000, "high")
        .scheduler("koord-scheduler")
        .node_selector({"disk": "ssd"})
        .toleration("dedicated", "web", "NoSchedule")
        .gate("wait")
        .pvc("data")
        .image("nginx:1.25")
        .nominated("n2")
        .condition("PodScheduled", "False")
        .build()
    )


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod("p").build(), id="minimal-pod"),
        pytest.param(everything(), id="every-field-set"),
    ],
)
def test_pod_on_node_equals_replace(pod: Pod) -> None:
    got = pod_on_node(pod, "n1")

    want = replace(pod, node_name="n1")
    assert [getattr(got, f.name) for f in fields(Pod)] == [getattr(want, f.name) for f in fields(Pod)]
    assert (got, hash(got), got.key) == (want, hash(want), want.key)


def test_pod_on_node_leaves_the_original_alone() -> None:
    pod = make_pod("p").build()

    got = pod_on_node(pod, "n1")

    assert (pod.node_name, got.node_name, got is pod) == ("", "n1", False)
