"""The README's ``simulate --report`` example runs as written and writes the page it promises, and the
screenshot the README shows is in the repository."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"


def report_block() -> str:
    blocks = re.findall(r"^```sh\n(.*?)^```", README.read_text(), re.MULTILINE | re.DOTALL)
    found = [b for b in blocks if "simulate --report" in b]
    assert len(found) == 1, "one README block shows --report"
    return found[0]


def test_the_readme_report_example_writes_the_page(tmp_path: Path) -> None:
    script = report_block().replace(".venv/bin/", f"{Path(sys.executable).parent}/")
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    page = (tmp_path / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and 'class="node-bar"' in page


def test_the_screenshot_the_readme_shows_exists() -> None:
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", README.read_text())
    assert "docs/images/simulate-report.png" in images
    assert (REPO / "docs" / "images" / "simulate-report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
