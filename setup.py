"""setuptools hook: generate koordlet's NRI protobuf modules before the package is built (``pip install .``
and ``pip install -e .`` both run it); everything else is in pyproject.toml."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

GENERATOR = Path(__file__).resolve().parent / "koordlet" / "runtimehooks" / "nri" / "proto" / "generate.py"


class BuildPyWithProtos(build_py):
    """``build_py`` that first runs protoc (grpcio-tools, a build requirement) on the NRI ``.proto`` files."""

    def run(self) -> None:
        spec = importlib.util.spec_from_file_location("nri_proto_generate", GENERATOR)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.generate()
        super().run()


setup(cmdclass={"build_py": BuildPyWithProtos})
