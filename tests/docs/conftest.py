"""tests/docs: the cluster blocks use the same local control plane as tests/integration (their own
instance when run alone)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

INTEGRATION = Path(__file__).resolve().parents[1] / "integration"
if str(INTEGRATION) not in sys.path:
    sys.path.insert(0, str(INTEGRATION))

from controlplane import ControlPlane, session_control_plane  # noqa: E402


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with session_control_plane(tmp_path_factory.mktemp("docs-cluster")) as plane:
        yield plane
