#!/usr/bin/env python3
"""Render deploy/ from the Helm chart in charts/pykoord with its default values: one source of truth.

deploy/ is what `kubectl apply --server-side -k deploy/` installs without Helm. Each file is the chart's
template (or CRD) of the same name, rendered by the pinned Helm (scripts/helm.sh) as release "pykoord" in
koordinator-system; `helm test` hooks are left out. tests/unit/deploy/test_chart_renders_deploy.py fails
when deploy/ and the chart disagree.

    python3 scripts/render-deploy.py            # write deploy/
    python3 scripts/render-deploy.py --check    # exit 1 if deploy/ differs from the chart
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "pykoord"
DEPLOY = REPO / "deploy"
RELEASE = "pykoord"
NAMESPACE = "koordinator-system"
SOURCE_LINE = re.compile(rf"^---\n# Source: {CHART.name}/(.*)\n", re.MULTILINE)
SKIPPED = ("templates/tests/",)  # helm test hooks: not part of an install without Helm
HEADER = "# Rendered by scripts/render-deploy.py from charts/pykoord/{source}: edit the chart, not this file.\n"
KUSTOMIZATION_HEAD = """\
# Everything a cluster admin applies:  kubectl apply --server-side -k deploy/
# Rendered by scripts/render-deploy.py from charts/pykoord with its default values; `helm install` of the
# chart gives the same objects (docs/install.md). CRDs first by kind ordering.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
"""
KUSTOMIZATION_TAIL = """\
# Point both workloads at your registry:  kustomize edit set image pykoord=registry.example.com/pykoord:0.1.0
images:
  - name: pykoord
    newTag: 0.1.0
"""


def helm_binary() -> str:
    out = subprocess.run([str(REPO / "scripts" / "helm.sh"), "build"], check=True, capture_output=True, text=True)
    return out.stdout.strip().rsplit("=", 1)[1]


def helm_template(helm: str, *extra: str) -> str:
    """``helm template`` of the chart as release pykoord in koordinator-system, CRDs included."""
    cmd = [helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--include-crds", *extra]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def split_by_source(rendered: str) -> dict[str, list[str]]:
    """Helm's output cut at its ``---`` + ``# Source:`` lines: each chart file's documents, in Helm's order."""
    files: dict[str, list[str]] = {}
    parts = SOURCE_LINE.split(rendered)
    for source, doc in zip(parts[1::2], parts[2::2], strict=True):
        files.setdefault(source, []).append(doc)
    return files


def deploy_files(rendered: str) -> dict[str, str]:
    """deploy/ path -> content."""
    out: dict[str, str] = {}
    for source, docs in split_by_source(rendered).items():
        if source.startswith(SKIPPED):
            continue
        if source.startswith("crds/"):
            # Verbatim (scripts/gen-crds.py output), less the newline Helm writes after each file.
            out[source] = docs[0].removesuffix("\n")
            continue
        path = source.removeprefix("templates/")
        body = "---\n".join(doc.strip("\n") + "\n" for doc in docs)
        out[path] = HEADER.format(source=source) + body
    order = sorted(out, key=lambda p: (p != "namespace.yaml", not p.startswith("crds/"), "/" in p, p))
    resources = "".join(f"  - {p}\n" for p in order)
    out["kustomization.yaml"] = KUSTOMIZATION_HEAD + resources + KUSTOMIZATION_TAIL
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail if deploy/ differs instead of writing")
    parser.add_argument("--helm", help="helm binary (default: built by scripts/helm.sh)")
    args = parser.parse_args(argv)
    files = deploy_files(helm_template(args.helm or helm_binary()))
    on_disk = {str(p.relative_to(DEPLOY)) for p in DEPLOY.rglob("*.yaml")}
    stale = sorted(p for p, text in files.items() if not (DEPLOY / p).exists() or (DEPLOY / p).read_text() != text)
    extra = sorted(on_disk - set(files))
    if args.check:
        if stale or extra:
            print(
                "deploy/ differs from charts/pykoord; run scripts/render-deploy.py:\n  "
                + "\n  ".join([*(f"changed: {p}" for p in stale), *(f"not in the chart: {p}" for p in extra)]),
                file=sys.stderr,
            )
            return 1
        return 0
    for path in extra:
        (DEPLOY / path).unlink()
    for path in stale:
        (DEPLOY / path).parent.mkdir(parents=True, exist_ok=True)
        (DEPLOY / path).write_text(files[path])
    return 0


if __name__ == "__main__":
    sys.exit(main())
