"""The pinned Helm (scripts/helm.sh) and charts/pykoord, for the chart tests.

Helm is built from the Go module proxy once and cached; tests that need it skip only when there is no
Go toolchain to build it with (CI has one, so there they run).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "pykoord"
KOORDINATOR_VALUES = REPO / "tests" / "fixtures" / "koordinator" / "chart-v1.8.0" / "values.yaml"
RELEASE = "pykoord"


@functools.cache
def _helm_or_reason() -> tuple[str, str]:
    script = REPO / "scripts" / "helm.sh"
    found = subprocess.run([str(script), "path"], capture_output=True, text=True, check=False)
    if found.returncode == 0:
        return found.stdout.strip(), ""
    if shutil.which("go") is None:
        return "", "no Go toolchain to build helm with (scripts/helm.sh builds it from the module proxy)"
    built = subprocess.run([str(script), "build"], capture_output=True, text=True, check=False, timeout=1800)
    assert built.returncode == 0, f"scripts/helm.sh build failed:\n{built.stderr[-3000:]}"
    return built.stdout.strip().rsplit("=", 1)[1], ""


def helm_path() -> str:
    """The cached helm binary (built if missing); skips the test only when Go is absent."""
    path, reason = _helm_or_reason()
    if not path:
        pytest.skip(reason)
    return path


def helm(
    *args: str, kubeconfig: Path | None = None, check: bool = True, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    env_args = [f"--kubeconfig={kubeconfig}"] if kubeconfig is not None else []
    result = subprocess.run(
        [helm_path(), *args, *env_args], capture_output=True, text=True, check=False, timeout=timeout
    )
    if check:
        assert result.returncode == 0, f"helm {' '.join(args)} failed:\n{result.stderr[-3000:]}"
    return result


def template(*args: str, include_crds: bool = False) -> str:
    """``helm template pykoord charts/pykoord ARGS`` (hooks included; CRDs on request)."""
    extra = ["--include-crds"] if include_crds else []
    return helm("template", RELEASE, str(CHART), "--namespace", "koordinator-system", *extra, *args).stdout


def objects(rendered: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(rendered) if d]


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} rendered"
    return matches[0]


NOTES_PROBE = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: notes
data:
  notes: {{ tpl (.Files.Get "NOTES.txt") . | quote }}
"""


def notes(tmp_path: Path, *args: str) -> str:
    """The chart's NOTES.txt as ``helm install`` would print it with ARGS, without a cluster: `helm template`
    of a copy of the chart with one more template that renders the notes file into a ConfigMap."""
    chart = tmp_path / "pykoord"
    shutil.copytree(CHART, chart)
    shutil.copy(CHART / "templates" / "NOTES.txt", chart / "NOTES.txt")
    (chart / "templates" / "zz-notes-probe.yaml").write_text(NOTES_PROBE)
    rendered = helm("template", RELEASE, str(chart), "--show-only", "templates/zz-notes-probe.yaml", *args).stdout
    text: str = yaml.safe_load(rendered)["data"]["notes"]
    return text
