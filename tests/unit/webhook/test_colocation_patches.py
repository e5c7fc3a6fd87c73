"""Strategic merge patch of a pod and the JSON patch diff (RFC 6901 escaping)."""

from __future__ import annotations

from typing import Any

import pytest

from koord_scheduler.webhook.jsonpatch import apply_patch, create_patch
from koord_scheduler.webhook.strategicmerge import PatchError, strategic_merge_pod

BASE: dict[str, Any] = {
    "metadata": {"labels": {"a": "1"}, "finalizers": ["x"]},
    "spec": {
        "containers": [
            {"name": "c1", "image": "i", "env": [{"name": "A", "value": "1"}]},
            {"name": "c2", "image": "j"},
        ],
        "tolerations": [{"key": "t"}],
    },
}


@pytest.mark.parametrize(
    ("patch", "want"),
    [
        pytest.param(
            {"metadata": {"labels": {"b": "2"}}},
            {**BASE, "metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x"]}},
            id="map-merge",
        ),
        pytest.param(
            {"metadata": {"labels": {"a": None}}},
            {**BASE, "metadata": {"labels": {}, "finalizers": ["x"]}},
            id="null-deletes",
        ),
        pytest.param(
            {"metadata": {"finalizers": ["y", "x"]}},
            {**BASE, "metadata": {"labels": {"a": "1"}, "finalizers": ["x", "y"]}},
            id="finalizers-union",
        ),
        pytest.param(
            {"spec": {"tolerations": [{"key": "u"}]}},
            {**BASE, "spec": {**BASE["spec"], "tolerations": [{"key": "u"}]}},
            id="plain-list-replaced",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "c2", "image": "k"}]}},
            {
                **BASE,
                "spec": {**BASE["spec"], "containers": [BASE["spec"]["containers"][0], {"name": "c2", "image": "k"}]},
            },
            id="containers-by-name",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "c1", "env": [{"name": "B", "value": "2"}]}]}},
            {
                **BASE,
                "spec": {
                    **BASE["spec"],
                    "containers": [
                        {"name": "c1", "image": "i", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                        BASE["spec"]["containers"][1],
                    ],
                },
            },
            id="env-by-name-appended",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "c2", "$patch": "delete"}]}},
            {**BASE, "spec": {**BASE["spec"], "containers": [BASE["spec"]["containers"][0]]}},
            id="delete-directive",
        ),
        pytest.param(
            {"metadata": {"$patch": "replace", "labels": {"z": "9"}}},
            {**BASE, "metadata": {"labels": {"z": "9"}}},
            id="replace-directive",
        ),
        pytest.param(
            {"spec": {"$setElementOrder/containers": [{"name": "c2"}], "terminationGracePeriodSeconds": 30}},
            {**BASE, "spec": {**BASE["spec"], "terminationGracePeriodSeconds": 30}},
            id="set-element-order-ignored",
        ),
    ],
)
def test_strategic_merge(patch: dict[str, Any], want: dict[str, Any]) -> None:
    assert strategic_merge_pod(BASE, patch) == want
    assert BASE["metadata"]["labels"] == {"a": "1"}, "the input is not changed"


@pytest.mark.parametrize(
    "patch",
    [
        pytest.param([1], id="not-object"),
        pytest.param({"spec": {"containers": [{"image": "x"}]}}, id="no-merge-key"),
        pytest.param({"spec": {"$patch": "merge"}}, id="unknown-directive"),
    ],
)
def test_strategic_merge_refused(patch: Any) -> None:
    with pytest.raises(PatchError):
        strategic_merge_pod(BASE, patch)


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param({"a": {}}, {"a": {"x/y": "1"}}, [{"op": "add", "path": "/a/x~1y", "value": "1"}], id="slash"),
        pytest.param({"a": {"m~n": "1"}}, {"a": {}}, [{"op": "remove", "path": "/a/m~0n"}], id="tilde"),
        pytest.param({"l": [1, 2]}, {"l": [1, 3]}, [{"op": "replace", "path": "/l/1", "value": 3}], id="list-item"),
        pytest.param({"l": [1]}, {"l": [1, 2]}, [{"op": "replace", "path": "/l", "value": [1, 2]}], id="list-length"),
        pytest.param({"p": 1}, {"p": 1}, [], id="unchanged"),
        pytest.param({"p": 1}, {"p": True}, [{"op": "replace", "path": "/p", "value": True}], id="type-change"),
    ],
)
def test_create_patch(old: dict[str, Any], new: dict[str, Any], want: list[dict[str, Any]]) -> None:
    assert create_patch(old, new) == want
    assert apply_patch(old, want) == new
