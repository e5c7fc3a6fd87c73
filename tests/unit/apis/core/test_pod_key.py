"""``Pod.key`` is computed once per Pod (the scheduler reads it about 26 times per pod) and stays right
through ``dataclasses.replace``; it takes no part in equality, hashing or repr."""

from __future__ import annotations

from dataclasses import replace

import pytest

from apis.core.types import ObjectMeta, Pod
from tests.builders import make_pod


@pytest.mark.parametrize(
    ("meta", "want_key"),
    [
        pytest.param(ObjectMeta("web-0", "prod"), "prod/web-0", id="namespaced"),
        pytest.param(ObjectMeta("web-0"), "/web-0", id="no-namespace"),
    ],
)
def test_key_is_namespace_slash_name(meta: ObjectMeta, want_key: str) -> None:
    assert Pod(meta).key == want_key


def test_key_follows_a_replaced_meta() -> None:
    pod = make_pod("a", "ns1").build()

    renamed = replace(pod, meta=replace(pod.meta, name="b", namespace="ns2"))

    assert (pod.key, renamed.key) == ("ns1/a", "ns2/b")


def test_key_survives_replace_of_other_fields() -> None:
    pod = make_pod("a", "ns1").build()

    assert replace(pod, node_name="n1").key == "ns1/a"


def test_key_is_not_part_of_equality_hash_or_repr() -> None:
    pod = make_pod("a", "ns1").build()
    twin = replace(pod)

    assert (twin == pod, hash(twin) == hash(pod)) == (True, True)
    assert "key=" not in repr(pod)


def test_key_cannot_be_set() -> None:
    pod = make_pod("a").build()

    with pytest.raises(AttributeError):
        pod.key = "x/y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Pod(ObjectMeta("a"), key="x/y")  # type: ignore[call-arg]
