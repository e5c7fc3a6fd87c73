"""The e2e tests use the same local control plane as tests/integration (their own instance when run
alone; a pytest run over both directories starts one per directory)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
for path in (TESTS / "integration", TESTS / "integration" / "deploy", TESTS / "integration" / "scheduler"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from controlplane import ControlPlane, session_control_plane  # noqa: E402


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with session_control_plane(tmp_path_factory.mktemp("e2e-cluster")) as plane:
        yield plane
