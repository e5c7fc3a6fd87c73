"""bench/ scripts as modules. bench/ is not a package and its scripts import each other by bare name
(``from topology_common import ...``), so they are loaded by path under those names."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"


def load_bench(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def topology_common() -> ModuleType:
    return load_bench("topology_common")


@pytest.fixture(scope="session")
def upstream_compare(topology_common: ModuleType) -> ModuleType:
    return load_bench("upstream_compare")


@pytest.fixture(scope="session")
def e2e_throughput(topology_common: ModuleType) -> ModuleType:
    return load_bench("e2e_throughput")


@pytest.fixture(scope="session")
def upstream_dir() -> Path:
    return BENCH / "upstream"


@pytest.fixture(scope="session")
def e2e_volumes(e2e_throughput: ModuleType) -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return load_bench("e2e_volumes")
