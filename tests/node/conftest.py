"""Session fixtures for the real-node tests: a control plane with one real node (``up --node``), the node's
images imported, and (for the tests that need it) pykoord installed from its chart.

The first run on a fresh machine builds kubelet, containerd, runc, crictl, the CNI plugins and the images
(tens of minutes); later runs take them from ~/.cache/pykoord. Nothing here skips: a machine that cannot
run containers fails the fixture with the one line scripts/node.sh prints about it.

PYKOORD_TEST_NODE_CLUSTER_DIR=DIR keeps one cluster (and the chart installed on it) between runs, for
working on these tests; CI leaves it unset.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
for path in (TESTS / "node", TESTS / "integration", TESTS / "integration" / "deploy"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from controlplane import ControlPlane, session_control_plane  # noqa: E402
from realnode import PykoordRelease, RealNode  # noqa: E402

# Bringing the node up: containerd, kubelet, the pause image, Node Ready (a loaded 2-core machine is slow).
NODE_START_TIMEOUT_S = 900.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.node)


@pytest.fixture(scope="session")
def node_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    kept = os.environ.get("PYKOORD_TEST_NODE_CLUSTER_DIR")
    if kept:
        # A developer's cluster, kept between runs (started here if it is not up; never taken down).
        yield ControlPlane.up(Path(kept), node=True, start_timeout=NODE_START_TIMEOUT_S)
        return
    with session_control_plane(
        tmp_path_factory.mktemp("node-cluster"), node=True, start_timeout=NODE_START_TIMEOUT_S
    ) as plane:
        yield plane


@pytest.fixture(scope="session")
def real_node(node_plane: ControlPlane) -> RealNode:
    return RealNode.of(node_plane)


@pytest.fixture(scope="session")
def pykoord_release(real_node: RealNode) -> Iterator[PykoordRelease]:
    """``helm install`` of charts/pykoord with its default values, the image pointed at the tag imported on
    the node, and koordlet told where this node's kubelet keeps its kubepods cgroup and its state."""
    kept = bool(os.environ.get("PYKOORD_TEST_NODE_CLUSTER_DIR"))
    release = PykoordRelease.install(real_node, reuse=kept)
    yield release
    if not kept:
        release.uninstall()
