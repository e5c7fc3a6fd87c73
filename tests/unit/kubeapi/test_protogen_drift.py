"""kubeapi/protogen is what scripts/gen_protos.py generates from the pinned release's .proto files.

The .proto files come through ``go mod download`` (the module cache the control-plane build fills, or
the Go module proxy); protoc comes from grpcio-tools (a dev dependency).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_the_committed_protobuf_modules_match_a_fresh_generation() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_protos.py"), "--check"],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "up to date" in result.stdout
