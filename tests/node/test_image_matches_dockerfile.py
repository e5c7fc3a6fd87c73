"""The pykoord image scripts/images.py built (the one the node runs) is what the Dockerfile describes: the
Debian packages its apt-get step names are installed, both binaries are in the virtualenv on PATH, and
the config's environment, user and working directory are the Dockerfile's final ones."""

from __future__ import annotations

import gzip
import io
import json
import re
import shlex
import tarfile
from pathlib import Path

from realnode import REPO, RealNode

DOCKERFILE = REPO / "Dockerfile"


def archive_of(real_node: RealNode) -> Path:
    tag = real_node.images["pykoord"].rsplit(":", 1)[1]
    return Path.home() / ".cache" / "pykoord" / "images" / f"pykoord-{tag}.oci.tar"


def dockerfile_final_state() -> tuple[dict[str, str], str, str, list[str]]:
    """(ENV, USER, WORKDIR, apt-get packages) as the Dockerfile leaves them, read independently."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    user, workdir, packages = "", "/", []
    for line in text.splitlines():
        word, _, args = line.strip().partition(" ")
        if word == "ENV":
            for pair in shlex.split(args):
                key, _, value = pair.partition("=")
                env[key] = value
        elif word == "USER":
            user = args.strip()
        elif word == "WORKDIR":
            workdir = args.strip() if args.startswith("/") else f"{workdir.rstrip('/')}/{args.strip()}"
        elif word == "RUN" and "apt-get install" in args:
            install = args.split("apt-get install", 1)[1].split("&&", 1)[0]
            packages = [p for p in install.split() if not p.startswith("-")]
    return env, user, workdir, packages


def test_the_image_is_the_dockerfiles(real_node: RealNode) -> None:
    with tarfile.open(archive_of(real_node)) as archive:
        blobs = {
            m.name.rsplit("/", 1)[-1]: archive.extractfile(m).read()  # type: ignore[union-attr]
            for m in archive.getmembers()
            if m.isfile()
        }
    index = json.loads(blobs["index.json"])
    manifest = json.loads(blobs[index["manifests"][0]["digest"].removeprefix("sha256:")])
    config = json.loads(blobs[manifest["config"]["digest"].removeprefix("sha256:")])["config"]
    env, user, workdir, packages = dockerfile_final_state()
    image_env = dict(item.split("=", 1) for item in config["Env"])
    assert config["User"] == user == "65532:65532"
    assert config["WorkingDir"] == workdir == "/"
    assert image_env["PATH"].startswith("/opt/pykoord/bin:")
    for key, value in env.items():
        if key != "PATH":
            assert image_env[key] == value, key
    assert packages == ["python3", "python3-venv"]
    (layer,) = manifest["layers"]
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blobs[layer["digest"].removeprefix("sha256:")]))) as tar:
        names = set(tar.getnames())
        status = tar.extractfile("var/lib/dpkg/status").read().decode()  # type: ignore[union-attr]
    installed = set(re.findall(r"^Package: (\S+)\nStatus: install ok installed", status, re.MULTILINE))
    assert set(packages) <= installed
    assert {"opt/pykoord/bin/koordlet", "opt/pykoord/bin/koord-scheduler", "opt/pykoord/bin/python"} <= names
    assert not any(name.startswith("var/lib/apt/lists/") and name.endswith("_Packages") for name in names)
