"""The ``--baseline REF`` contender of ``bench/e2e_throughput.py``: koord-scheduler as of another commit,
run in the same bench run as the working tree's, so a regression shows as a same-run ratio.

The commit is checked out with ``git worktree add --detach`` into a temporary directory and installed
(not editable) into a virtualenv of its own there, with the same Python as the bench; both are removed
when the run ends. The contender is named ``koord-scheduler@REF`` and started exactly as
``koord-scheduler`` is (same configuration file and flags), from that virtualenv.

``PYKOORD_BENCH_BASELINE_ROOT=DIR`` reuses a build made beforehand instead (``DIR/venv/bin/koord-scheduler``,
e.g. ``git worktree add DIR REF && python -m venv DIR/venv && DIR/venv/bin/pip install DIR``), kept after
the run: repeated runs then skip the install.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PREFIX = "koord-scheduler@"
PREBUILT_ENV = "PYKOORD_BENCH_BASELINE_ROOT"


def contender_name(ref: str) -> str:
    return f"{PREFIX}{ref}"


def baseline_ref(name: str) -> str | None:
    """The REF of a ``koord-scheduler@REF`` contender, else None."""
    return name[len(PREFIX) :] if name.startswith(PREFIX) else None


def with_baseline(names: list[str], ref: str) -> list[str]:
    """``names`` with ``koord-scheduler@REF`` right after the first koord-scheduler contender (at the end
    when there is none), so repeats interleave the two."""
    extra = contender_name(ref)
    for i, name in enumerate(names):
        if name == "koord-scheduler" or name.startswith("koord-scheduler["):
            return [*names[: i + 1], extra, *names[i + 1 :]]
    return [*names, extra]


@dataclass(frozen=True, slots=True)
class BaselineBuild:
    ref: str
    commit: str
    root: Path

    @property
    def executable(self) -> Path:
        return self.root / "venv" / "bin" / "koord-scheduler"


def _run(args: list[str], *, cwd: Path, what: str) -> str:
    result = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"--baseline: {what} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return result.stdout.strip()


@contextlib.contextmanager
def built(ref: str, *, repo: Path, python: str = sys.executable) -> Iterator[BaselineBuild]:
    """``ref`` checked out and installed in a temporary directory, removed on exit. Raises RuntimeError
    naming the step (an unknown REF, a failed install)."""
    commit = _run(["git", "rev-parse", "--verify", f"{ref}^{{commit}}"], cwd=repo, what=f"resolving {ref!r}")
    prebuilt = os.environ.get(PREBUILT_ENV)
    if prebuilt:
        build = BaselineBuild(ref, commit, Path(prebuilt))
        if not build.executable.exists():
            raise RuntimeError(f"--baseline: {PREBUILT_ENV}={prebuilt} has no venv/bin/koord-scheduler")
        yield build
        return
    root = Path(tempfile.mkdtemp(prefix="pykoord-baseline-"))
    source = root / "src"
    try:
        _run(["git", "worktree", "add", "--detach", str(source), commit], cwd=repo, what="git worktree add")
        print(f"# --baseline {ref}: {commit[:12]} checked out in {source}; installing", file=sys.stderr)
        _run([python, "-m", "venv", str(root / "venv")], cwd=root, what="creating the virtualenv")
        _run(
            [str(root / "venv" / "bin" / "pip"), "install", "--quiet", str(source)],
            cwd=root,
            what=f"installing {commit[:12]}",
        )
        build = BaselineBuild(ref, commit, root)
        if not build.executable.exists():
            raise RuntimeError(f"--baseline: {commit[:12]} installs no koord-scheduler command")
        yield build
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(source)], cwd=repo, capture_output=True, check=False
        )
        shutil.rmtree(root, ignore_errors=True)
