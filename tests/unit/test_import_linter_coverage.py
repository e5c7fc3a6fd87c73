"""import-linter sees every product module: a folder of Python modules without ``__init__.py`` is invisible to
it (its contracts then pass without looking), so every such folder fails here, and the modules
``lint-imports`` analyses must be one per ``.py`` file (plus the external packages it checks imports of)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def root_packages() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    return list(config["tool"]["importlinter"]["root_packages"])


def python_files() -> list[Path]:
    return [p for root in root_packages() for p in (REPO / root).rglob("*.py") if "__pycache__" not in p.parts]


def test_the_root_packages_are_the_product() -> None:
    assert set(root_packages()) >= {"apis", "koord_scheduler", "koordlet"}


def test_every_folder_of_python_modules_is_a_package() -> None:
    folders = {p.parent for p in python_files()}
    missing = sorted(str(f.relative_to(REPO)) for f in folders if not (f / "__init__.py").is_file())
    assert missing == []


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_lint_imports_analyses_every_product_module_and_keeps_every_contract() -> None:
    """The graph import-linter builds (the root packages, with the external packages it checks imports of)
    holds a module for every ``.py`` file, and ``lint-imports`` analyses exactly that graph."""
    import grimp

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    graph = grimp.build_graph(  # no cache: grimp's keeps modules whose files were deleted
        *root_packages(), include_external_packages=config.get("include_external_packages", False), cache_dir=None
    )
    product = {m for m in graph.modules if m.split(".")[0] in root_packages()}
    assert product == {module_name(p) for p in python_files()}

    lint_imports = Path(sys.executable).with_name("lint-imports")
    run = subprocess.run([str(lint_imports)], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    analysed = re.search(r"Analyzed (\d+) files", run.stdout)
    assert analysed is not None, run.stdout
    assert int(analysed.group(1)) == len(graph.modules)
