"""Generate the Python protobuf messages of this folder's ``.proto`` files (NRI's ``api.proto`` and the ttrpc
envelope ``ttrpc.proto``) with grpcio-tools' protoc.

This runs at build time: ``setup.py``'s ``build_py`` calls :func:`generate` (grpcio-tools is a build
requirement in ``pyproject.toml``), so ``pip install .`` and ``pip install -e .`` (``scripts/bootstrap.sh``)
both leave ``api_pb2.py``/``.pyi`` and ``ttrpc_pb2.py``/``.pyi`` here; they are not committed. To regenerate
by hand (after replacing a ``.proto``)::

    .venv/bin/python -m koordlet.runtimehooks.nri.proto.generate

It imports nothing from pykoord, so ``setup.py`` can load it by path before the package is installed. The
generated code pins the protobuf runtime to protoc's major version; ``pyproject.toml`` keeps grpcio-tools (the
build) and protobuf (the runtime) in step.
"""

from __future__ import annotations

import keyword
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
"""The repository (or sdist) root: the generated modules import each other by package path from here."""
PROTOS = ("api.proto", "ttrpc.proto")


class GenerateError(RuntimeError):
    """protoc failed; the message carries its output."""


def generate(out_root: Path | None = None) -> list[Path]:
    """Run protoc on :data:`PROTOS`; write ``*_pb2.py`` and ``*_pb2.pyi`` under ``out_root`` (default: in
    place). Returns the written files."""
    import grpc_tools
    from grpc_tools import protoc

    out = Path(out_root) if out_root is not None else ROOT
    rel = HERE.relative_to(ROOT)
    (out / rel).mkdir(parents=True, exist_ok=True)
    well_known = Path(grpc_tools.__file__).resolve().parent / "_proto"
    args = [
        "protoc",
        f"-I{ROOT}",
        f"-I{well_known}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        *(str(rel / name) for name in PROTOS),
    ]
    code = protoc.main(args)
    if code != 0:
        raise GenerateError(f"protoc {' '.join(args[1:])} exited {code}")
    written = [out / rel / f"{Path(name).stem}_pb2{suffix}" for name in PROTOS for suffix in (".py", ".pyi")]
    missing = [str(p) for p in written if not p.is_file()]
    if missing:
        raise GenerateError(f"protoc wrote no {', '.join(missing)}")
    for path in written:
        if path.suffix == ".pyi":
            path.write_text(drop_keyword_names(path.read_text()))
    return written


_ANNOTATED_NAME = re.compile(r"^(\s*)(\w+):")


def drop_keyword_names(stub: str) -> str:
    """protoc's ``--pyi_out`` declares enum values by name, and NRI's ``Field`` enum has a value ``None``:
    ``None: Field`` is not Python, and mypy stops at it. Such lines become comments (the value is still
    there at run time: ``api_pb2.Field.Value("None")``)."""
    out = []
    for line in stub.splitlines(keepends=True):
        match = _ANNOTATED_NAME.match(line)
        if match and keyword.iskeyword(match.group(2)):
            out.append(f"{match.group(1)}# {line.strip()}  (a Python keyword: left out of the stub)\n")
        else:
            out.append(line)
    return "".join(out)


if __name__ == "__main__":
    for path in generate(Path(sys.argv[1]) if len(sys.argv) > 1 else None):
        print(path)
