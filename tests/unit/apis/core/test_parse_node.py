from apis.core.frozendict import FrozenDict
from apis.core.parse import parse_node
from apis.core.types import ContainerImage, Taint, TaintEffect
from tests.builders import make_node

GI = 2**30


def test_node_fields() -> None:
    node = (
        make_node("n1")
        .capacity(cpu="4", memory="32Gi", pods=110)
        .allocatable(cpu="3800m")
        .zone("z1")
        .annotation("a", "b")
        .taint("dedicated", "gpu", "NoSchedule")
        .taint("soft", effect="PreferNoSchedule")
        .unschedulable()
        .image("nginx:1.25", "nginx@sha256:abc", size_bytes=100 * 2**20)
        .condition("Ready", "True")
        .build()
    )
    assert node.name == "n1"
    assert node.labels == {"kubernetes.io/hostname": "n1", "topology.kubernetes.io/zone": "z1"}
    assert node.annotations == {"a": "b"}
    assert node.capacity == {"cpu": 4000, "memory": 32 * GI, "pods": 110}
    assert node.allocatable == {"cpu": 3800, "memory": 32 * GI, "pods": 110}
    assert node.taints == (
        Taint("dedicated", TaintEffect.NO_SCHEDULE, "gpu"),
        Taint("soft", TaintEffect.PREFER_NO_SCHEDULE, ""),
    )
    assert node.unschedulable is True
    assert node.images == (ContainerImage(("nginx:1.25", "nginx@sha256:abc"), 100 * 2**20),)
    assert node.conditions == {"Ready": "True"}


def test_allocatable_falls_back_to_capacity() -> None:
    node = parse_node({"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "2", "memory": "1Gi"}}})
    assert node.allocatable == {"cpu": 2000, "memory": GI}


def test_minimal_node() -> None:
    node = parse_node({"metadata": {"name": "n1"}})
    assert (node.allocatable, node.capacity, node.taints, node.unschedulable) == ({}, {}, (), False)
    assert isinstance(node.allocatable, FrozenDict)
    assert hash(node) == hash(parse_node({"metadata": {"name": "n1"}}))
