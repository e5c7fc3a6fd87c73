"""``replace_fields`` gives exactly what ``dataclasses.replace`` gives, without running ``__init__``."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest

from apis.core.copying import replace_fields
from apis.core.frozendict import FrozenDict
from tests.builders import make_node, make_pod

POD = (
    make_pod("web-1", namespace="shop")
    .req(cpu="500m", memory="1Gi")
    .label("app", "web")
    .annotation("a", "b")
    .toleration("dedicated", "web", "NoSchedule")
    .condition("PodScheduled", "False")
    .build()
)


@pytest.mark.parametrize(
    ("obj", "changes"),
    [
        pytest.param(POD, {"node_name": "n1"}, id="pod-bound"),
        pytest.param(
            POD,
            {"node_name": "n1", "conditions": FrozenDict({"PodScheduled": "True"}), "phase": "Running"},
            id="pod-bind-echo",
        ),
        pytest.param(POD.meta, {"resource_version": "42"}, id="object-meta-resource-version"),
        pytest.param(POD, {}, id="no-change-is-a-copy"),
        pytest.param(make_node("n1").label("zone", "a").build(), {"unschedulable": True}, id="node"),
    ],
)
def test_replace_fields_equals_dataclasses_replace(obj: Any, changes: dict[str, Any]) -> None:
    got = replace_fields(obj, **changes)
    want = replace(obj, **changes)
    assert got == want
    assert got is not obj
    # Every field (derived ones such as Pod.key, which eq leaves out) is the one replace() gives.
    assert {f.name: getattr(got, f.name) for f in fields(obj)} == {f.name: getattr(want, f.name) for f in fields(obj)}


def test_replace_fields_refuses_an_unknown_field_and_leaves_the_original_alone() -> None:
    with pytest.raises(TypeError, match="no field"):
        replace_fields(POD, nodename="n1")
    replace_fields(POD, node_name="n1")
    assert POD.node_name == ""
