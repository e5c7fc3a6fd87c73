"""The Dockerfile's install, without a Docker engine: its COPY, ENV, WORKDIR and RUN instructions are
replayed in a temp directory standing in for the image's root, and the installed binaries must start.

Nothing is duplicated from the Dockerfile: a change to its RUN steps is what this test runs (except the
``apt-get`` step that installs Debian's Python: the host's Python stands in for it here).
Container paths are mapped under the temp root; pip's cache is allowed (the image sets
PIP_NO_CACHE_DIR only to keep layers small).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DOCKERFILE = REPO / "Dockerfile"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_parses_into_the_expected_steps() -> None:
    steps = [word for word, _ in instructions(DOCKERFILE.read_text())]
    assert steps[0] == "FROM"
    assert "RUN" in steps and "COPY" in steps


@pytest.mark.slow
def test_dockerfile_install_steps_in_a_fresh_venv(tmp_path: Path) -> None:
    root = tmp_path / "image"
    root.mkdir()

    def inside(path: str, workdir: Path) -> Path:
        return root / path.lstrip("/") if path.startswith("/") else workdir / path

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    workdir = root
    ran = 0
    for word, args in instructions(DOCKERFILE.read_text()):
        if word == "WORKDIR":
            workdir = inside(args, workdir)
            workdir.mkdir(parents=True, exist_ok=True)
        elif word == "ENV":
            for pair in shlex.split(args):
                key, _, value = pair.partition("=")
                if key == "PIP_NO_CACHE_DIR":
                    continue
                if value.startswith("/"):
                    value = str(root / value.lstrip("/"))
                env[key] = os.path.expandvars(value)
        elif word == "COPY":
            *sources, dest = shlex.split(args)
            into_dir = len(sources) > 1 or dest.endswith("/")
            for source in sources:
                src = REPO / source
                target = inside(dest, workdir) / src.name if into_dir else inside(dest, workdir)
                target.parent.mkdir(parents=True, exist_ok=True)
                if src.is_dir():
                    shutil.copytree(
                        src, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
                    )
                else:
                    shutil.copy2(src, target)
        elif word == "RUN" and args.startswith("apt-get "):
            # The Debian packages (Python itself): this host's Python stands in for them.
            # scripts/images.py runs this step too, in a Debian root (tests/node build the image).
            continue
        elif word == "RUN":
            result = subprocess.run(
                ["bash", "-c", args], cwd=workdir, env=env, capture_output=True, text=True, timeout=900, check=False
            )
            assert result.returncode == 0, f"RUN {args}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
            ran += 1
    assert ran >= 2
    venv = Path(env["PYKOORD_VENV"])
    for binary in ("koord-scheduler", "koordlet"):
        result = subprocess.run(
            [str(venv / "bin" / binary), "--help"], capture_output=True, text=True, timeout=120, check=False, env=env
        )
        assert result.returncode == 0, result.stderr
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import koord_scheduler, koordlet; print(koord_scheduler.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert str(venv) in installed.stdout  # not the editable checkout
