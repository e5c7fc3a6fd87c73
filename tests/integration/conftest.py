"""Session fixture: one real etcd + kube-apiserver (+ kwok) for all integration tests.

The cluster state lives in a pytest temp dir (``PYKOORD_CLUSTER_DIR``), so it never
touches a developer's ``.cluster/``. Binaries come from the shared build cache;
the first run on a fresh machine builds them (tens of minutes). A build or start
failure fails the tests that use the fixture: integration tests never skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from controlplane import ControlPlane, session_control_plane

# Fake nodes kwok keeps Ready for the whole test run (named kwok-node-<i>, label
# type=kwok). Tests that need an exact node set should create their own nodes
# and select them by label.
KWOK_NODES = int(os.environ.get("PYKOORD_TEST_KWOK_NODES", "2"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: needs the real kube-apiserver + etcd started by the test run")


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with session_control_plane(tmp_path_factory.mktemp("cluster"), kwok_nodes=KWOK_NODES) as plane:
        yield plane
