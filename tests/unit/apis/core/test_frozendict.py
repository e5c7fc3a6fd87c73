import copy
import json
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from apis.core.frozendict import FrozenDict


def test_behaves_like_a_dict() -> None:
    d = FrozenDict({"a": "1", "b": "2"})
    assert d == {"a": "1", "b": "2"}
    assert isinstance(d, dict)
    assert json.loads(json.dumps(d)) == d
    assert hash(d) == hash(FrozenDict({"b": "2", "a": "1"}))
    assert {d: 1}[FrozenDict(a="1", b="2")] == 1


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda d: d.__setitem__("a", "x"), id="setitem"),
        pytest.param(lambda d: d.__delitem__("a"), id="delitem"),
        pytest.param(lambda d: d.update(c="3"), id="update"),
        pytest.param(lambda d: d.pop("a"), id="pop"),
        pytest.param(lambda d: d.popitem(), id="popitem"),
        pytest.param(lambda d: d.setdefault("c", "3"), id="setdefault"),
        pytest.param(lambda d: d.clear(), id="clear"),
        pytest.param(lambda d: d.__ior__({"c": "3"}), id="ior"),
    ],
)
def test_mutators_raise(mutate: Callable[[FrozenDict[str, str]], Any]) -> None:
    d = FrozenDict({"a": "1"})
    with pytest.raises(TypeError, match="immutable"):
        mutate(d)
    assert d == {"a": "1"}


def test_copies() -> None:
    d = FrozenDict({"a": ("1",)})
    assert pickle.loads(pickle.dumps(d)) == d
    assert type(pickle.loads(pickle.dumps(d))) is FrozenDict
    assert copy.copy(d) is d
    assert copy.deepcopy(d) == d
    merged = d | {"b": ("2",)}
    assert type(merged) is dict
    assert type(d.copy()) is dict
