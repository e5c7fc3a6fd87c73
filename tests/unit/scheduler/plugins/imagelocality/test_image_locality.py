"""ImageLocality: upstream's score table (``image_locality_test.go``), the formula, and the index kept
in step with node changes."""

from __future__ import annotations

import dataclasses

import pytest

from apis.core.types import Node, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.plugins.imagelocality import scoring
from koord_scheduler.plugins.imagelocality.plugin import ImageLocality
from tests.builders import make_node, make_pod
from tests.fwtest import FakeHandle, make_snapshot, scores

MB = 1024 * 1024

Images = list[tuple[tuple[str, ...], int]]
"""Images on a node: (names, size in MiB)."""
NODE_40_300_2000: Images = [
    (("gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"), 40),
    (("gcr.io/300:latest", "gcr.io/300:v1"), 300),
    (("gcr.io/2000:latest",), 2000),
]
NODE_250_10: Images = [(("gcr.io/250:latest",), 250), (("gcr.io/10:latest", "gcr.io/10:v1"), 10)]
NODE_600_40_900: Images = [(("gcr.io/600:latest",), 600), (("gcr.io/40:latest",), 40), (("gcr.io/900:latest",), 900)]
NODE_300_600_900: Images = [(("gcr.io/300:latest",), 300), (("gcr.io/600:latest",), 600), (("gcr.io/900:latest",), 900)]
NODE_4000_30: Images = [(("gcr.io/4000:latest",), 4000), (("gcr.io/30:latest",), 30)]
NODE_20_30_40: Images = [(("gcr.io/20:latest",), 20), (("gcr.io/30:latest",), 30), (("gcr.io/40:latest",), 40)]
NO_IMAGES: Images = []


def node(name: str, images: Images) -> Node:
    builder = make_node(name)
    for names, size in images:
        builder = builder.image(*names, size_bytes=size * MB)
    return builder.build()


def pod(*images: str, init: tuple[str, ...] = ()) -> Pod:
    builder = make_pod("p").image(images[0])
    for image in images[1:]:
        builder = builder.container(image=image)
    for image in init:
        builder = builder.init_container(image=image)
    return builder.build()


@pytest.mark.parametrize(
    ("the_pod", "nodes", "want"),
    [
        pytest.param(
            pod("gcr.io/40", "gcr.io/250"),
            [NODE_40_300_2000, NODE_250_10],
            [0, 5],
            id="two-images-spread-on-two-nodes-prefer-the-larger",
        ),
        pytest.param(
            pod("gcr.io/40", "gcr.io/300"), [NODE_40_300_2000, NODE_250_10], [7, 0], id="two-images-on-one-node"
        ),
        pytest.param(
            pod("gcr.io/10", "gcr.io/4000"),
            [NODE_4000_30, NODE_250_10],
            [100, 0],
            id="exceeding-the-limit-uses-the-limit",
        ),
        pytest.param(
            pod("gcr.io/10", "gcr.io/4000"),
            [NODE_4000_30, NODE_250_10, NO_IMAGES],
            [66, 0, 0],
            id="exceeding-the-limit-with-a-node-without-images",
        ),
        pytest.param(
            pod("gcr.io/300", "gcr.io/600", "gcr.io/900"),
            [NODE_600_40_900, NODE_300_600_900, NO_IMAGES],
            [32, 36, 0],
            id="multiple-large-images",
        ),
        pytest.param(pod("gcr.io/30", "gcr.io/40"), [NODE_20_30_40, NODE_4000_30], [1, 0], id="multiple-small-images"),
        pytest.param(
            pod("gcr.io/30", init=("gcr.io/300",)),
            [NODE_40_300_2000, NODE_20_30_40],
            [6, 0],
            id="init-containers-count",
        ),
    ],
)
def test_upstream_scores(the_pod: Pod, nodes: list[list[tuple[tuple[str, ...], int]]], want: list[int]) -> None:
    snap = make_snapshot([node(f"node{i + 1}", images) for i, images in enumerate(nodes)])
    plugin = ImageLocality(FakeHandle(snap))
    got = scores(plugin, the_pod, snap)
    assert [got[f"node{i + 1}"] for i in range(len(nodes))] == want
    # The per-node form agrees with the batch form.
    infos = [snap.node_info(f"node{i + 1}") for i in range(len(nodes))]
    assert [plugin.score(CycleState(), the_pod, info) for info in infos if info is not None] == want


@pytest.mark.parametrize(
    ("name", "want"),
    [
        pytest.param("gcr.io/40", "gcr.io/40:latest", id="no-tag-gets-latest"),
        pytest.param("gcr.io/40:v1", "gcr.io/40:v1", id="tag-kept"),
        pytest.param("localhost:5000/img", "localhost:5000/img:latest", id="registry-port-is-not-a-tag"),
        pytest.param("img@sha256:abc", "img@sha256:abc", id="digest-kept"),
    ],
)
def test_normalized_image_name(name: str, want: str) -> None:
    assert scoring.normalized_image_name(name) == want


@pytest.mark.parametrize(
    ("size", "with_image", "total", "containers", "want"),
    [
        pytest.param(500 * MB, 1, 4, 1, 10, id="500MiB-on-1-of-4-nodes"),
        pytest.param(22 * MB, 1, 1, 1, 0, id="below-min-threshold"),
        pytest.param(2000 * MB, 1, 1, 1, 100, id="above-max-threshold"),
    ],
)
def test_formula(size: int, with_image: int, total: int, containers: int, want: int) -> None:
    assert scoring.calculate_priority(scoring.scaled_image_score(size, with_image, total), containers) == want


def test_no_image_anywhere_skips_score() -> None:
    snap = make_snapshot([node("n1", NODE_250_10)])
    assert scores(ImageLocality(FakeHandle(snap)), pod("gcr.io/other"), snap) == {}


def test_index_follows_node_changes() -> None:
    snap = make_snapshot([node("n1", NODE_600_40_900), node("n2", NO_IMAGES)])
    plugin = ImageLocality(FakeHandle(snap))
    the_pod = pod("gcr.io/600")
    # 600 MiB on 1 of 2 nodes: 100 * (300 - 23) // (1000 - 23) = 28; on both: 100 * 577 // 977 = 59.
    assert scores(plugin, the_pod, snap) == {"n1": 28, "n2": 0}
    sign = plugin.sign_pod(the_pod)
    snap.upsert_node(node("n2", NODE_600_40_900))
    assert scores(plugin, the_pod, snap) == {"n1": 59, "n2": 59}
    assert plugin.sign_pod(the_pod) != sign
    snap.remove_node("n1")
    snap.upsert_node(dataclasses.replace(node("n2", NO_IMAGES)))
    assert scores(plugin, the_pod, snap) == {}
    assert plugin.index.images == {}
