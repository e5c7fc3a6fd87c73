"""Every command in docs/ runs: ```sh test``` blocks here, ```sh test-cluster``` blocks against the real
API server (integration), and ```sh covered-by=PATH``` blocks must name an existing test that covers them.
A ```sh``` block without one of these fails, so no command goes untested. Also: docs/metrics.md lists
every metric the code registers, and README.md links the docs and names every in-tree plugin."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
FENCE = re.compile(r"^```sh([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
METRIC = re.compile(
    r"\b(Gauge|Counter|Histogram|Summary|GaugeMetricFamily|CounterMetricFamily)\(\s*"
    r"(?:\"([a-zA-Z_:][a-zA-Z0-9_:]*)\"|([A-Z_][A-Z0-9_]*))"
)


def blocks() -> list[tuple[str, int, str, str]]:
    """(file, line, tag, script) for every ```sh block."""
    out = []
    for path in sorted(DOCS.glob("*.md")):
        text = path.read_text()
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            out.append((path.name, line, match.group(1).strip(), match.group(2)))
    return out


def params(tag: str) -> list[Any]:
    return [pytest.param(script, id=f"{name}:{line}") for name, line, t, script in blocks() if t == tag]


def run_block(script: str, tmp_path: Path, extra_env: dict[str, str] | None = None) -> None:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHONPATH"))}
    env.update(
        {
            "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}",
            # `pip install` in the docs goes to a scratch directory, found through PYTHONPATH (entry points too).
            "PIP_TARGET": str(site),
            "PYTHONPATH": str(site),
            "PIP_NO_DEPS": "1",
            "TMPDIR": str(tmp_path),
            **(extra_env or {}),
        }
    )
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"{script}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"


def test_every_block_is_tested() -> None:
    untested = [
        (name, line, tag)
        for name, line, tag, _ in blocks()
        if tag not in ("test", "test-cluster") and not tag.startswith("covered-by=")
    ]
    assert untested == []
    for name, line, tag, _ in blocks():
        if tag.startswith("covered-by="):
            assert (REPO / tag.removeprefix("covered-by=")).is_file(), (name, line, tag)


@pytest.mark.slow
@pytest.mark.parametrize("script", params("test"))
def test_command_block(script: str, tmp_path: Path) -> None:
    run_block(script, tmp_path)


@pytest.mark.integration
@pytest.mark.parametrize("script", params("test-cluster"))
def test_cluster_command_block(script: str, tmp_path: Path, control_plane: Any) -> None:
    kubectl_dir = str(Path(control_plane.binaries.kubectl).parent)
    run_block(
        script,
        tmp_path,
        {
            "KUBECONFIG": str(control_plane.kubeconfig),
            "PATH": f"{kubectl_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
        },
    )


def registered_metric_names() -> set[str]:
    names = set()
    for path in [*(REPO / "koord_scheduler").rglob("*.py"), *(REPO / "koordlet").rglob("*.py")]:
        text = path.read_text()
        constants = dict(re.findall(r'^([A-Z_][A-Z0-9_]*)\s*=\s*"([a-z_:][a-z0-9_:]*)"', text, re.MULTILINE))
        for match in METRIC.finditer(text):
            name = match.group(2) or constants.get(match.group(3) or "")
            if name:
                names.add(name)
    return names


def test_metrics_reference_lists_every_registered_metric() -> None:
    names = registered_metric_names()
    assert len(names) > 20  # the scan works
    documented = set(re.findall(r"`([a-z_:]+)`", (DOCS / "metrics.md").read_text()))
    assert sorted(names - documented) == []


def test_readme_links_the_docs() -> None:
    readme = (REPO / "README.md").read_text()
    for path in sorted(DOCS.glob("*.md")):
        assert f"docs/{path.name}" in readme, path.name


def test_readme_what_works_names_every_in_tree_plugin() -> None:
    from koord_scheduler.plugins.registry import in_tree_registry

    readme = (REPO / "README.md").read_text()
    what_works = readme[readme.index("## What works") : readme.index("\n## ", readme.index("## What works") + 1)]
    missing = [name for name in in_tree_registry().names() if name not in what_works]
    assert missing == []
