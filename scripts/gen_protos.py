#!/usr/bin/env python3
"""Regenerate kubeapi/protogen/*_pb2.py(i) from the .proto files of k8s.io/api and k8s.io/apimachinery.

The modules are those of the pinned Kubernetes release (``KUBERNETES_VERSION`` in scripts/versions.env,
v1.X.Y -> module version v0.X.Y), brought by ``go mod download`` (the Go module proxy, or the local
module cache), and compiled by protoc from ``grpcio-tools`` (``pip install grpcio-tools``; not a runtime
dependency). Each .proto is staged under a flat name (``core_v1.proto``...) with its imports rewritten,
so the generated modules import each other as ``kubeapi.protogen.<name>_pb2``; the message names (the
``package`` lines) are unchanged, so they still match what the API server sends.

    python scripts/gen_protos.py          # write kubeapi/protogen/
    python scripts/gen_protos.py --check  # exit 1 if the committed files differ from a fresh run
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "kubeapi" / "protogen"
PACKAGE = "kubeapi/protogen"

# flat name -> (module, path of the .proto inside the module)
PROTOS = {
    "core_v1": ("k8s.io/api", "core/v1/generated.proto"),
    "apps_v1": ("k8s.io/api", "apps/v1/generated.proto"),
    "policy_v1": ("k8s.io/api", "policy/v1/generated.proto"),
    "resource_v1": ("k8s.io/api", "resource/v1/generated.proto"),
    "scheduling_v1": ("k8s.io/api", "scheduling/v1/generated.proto"),
    "storage_v1": ("k8s.io/api", "storage/v1/generated.proto"),
    "events_v1": ("k8s.io/api", "events/v1/generated.proto"),
    "meta_v1": ("k8s.io/apimachinery", "pkg/apis/meta/v1/generated.proto"),
    "runtime": ("k8s.io/apimachinery", "pkg/runtime/generated.proto"),
    "runtime_schema": ("k8s.io/apimachinery", "pkg/runtime/schema/generated.proto"),
    "resource": ("k8s.io/apimachinery", "pkg/api/resource/generated.proto"),
    "intstr": ("k8s.io/apimachinery", "pkg/util/intstr/generated.proto"),
}
OUTPUTS = [f"{name}_pb2.{ext}" for name in PROTOS for ext in ("py", "pyi")]
"""What protoc writes for each: the module, and its stub for mypy."""
IMPORT = re.compile(r'^import "([^"]+)";', re.MULTILINE)


def kubernetes_version() -> str:
    for line in (ROOT / "scripts" / "versions.env").read_text().splitlines():
        if line.startswith("KUBERNETES_VERSION="):
            return line.split("=", 1)[1].strip()
    raise SystemExit("scripts/versions.env has no KUBERNETES_VERSION")


def module_dir(module: str, version: str) -> Path:
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOWORK": "off"}
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
    ).stdout
    return Path(json.loads(out)["Dir"])


def generate(dest: Path) -> None:
    staging_version = "v0." + kubernetes_version().removeprefix("v1.")
    dirs = {m: module_dir(m, staging_version) for m in {m for m, _ in PROTOS.values()}}
    flat = {f"{m}/{p}": name for name, (m, p) in PROTOS.items()}
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp) / PACKAGE
        stage.mkdir(parents=True)
        for name, (module, path) in PROTOS.items():
            text = (dirs[module] / path).read_text()
            for imported in IMPORT.findall(text):
                if imported not in flat:
                    raise SystemExit(f"{module}/{path} imports {imported}, which is not in PROTOS")
            header = f"// Staged by scripts/gen_protos.py from {module}@{staging_version}/{path}.\n"
            staged = IMPORT.sub(lambda m: f'import "{PACKAGE}/{flat[m.group(1)]}.proto";', text)
            (stage / f"{name}.proto").write_text(header + staged)
        from grpc_tools import protoc  # type: ignore[import-untyped]

        args = ["protoc", f"-I{tmp}", f"--python_out={tmp}", f"--pyi_out={tmp}"]
        args += [f"{PACKAGE}/{n}.proto" for n in PROTOS]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        dest.mkdir(parents=True, exist_ok=True)
        for name in OUTPUTS:
            (dest / name).write_bytes((stage / name).read_bytes())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed files instead")
    args = parser.parse_args()
    if not args.check:
        generate(OUT)
        print(f"wrote {', '.join(OUTPUTS)} to {OUT.relative_to(ROOT)}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        stale = [n for n in OUTPUTS if (Path(tmp) / n).read_bytes() != _read(OUT / n)]
    if stale:
        print(f"kubeapi/protogen is out of date ({', '.join(stale)}): run python scripts/gen_protos.py")
        return 1
    print("kubeapi/protogen is up to date")
    return 0


def _read(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


if __name__ == "__main__":
    sys.exit(main())
