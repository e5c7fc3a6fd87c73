"""scripts/images.py without building anything: the OCI layout it writes (what ``ctr images import`` reads)
and its Dockerfile reader (every instruction of the repository's Dockerfile is one it replays)."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import json
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[3]


def load_images() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pykoord_images", REPO / "scripts" / "images.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


images = load_images()


def read_archive(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_oci_archive_is_a_named_single_manifest_layout(tmp_path: Path) -> None:
    layer = images.layer_from_files({"bin/hello": (b"#!/bin/sh\necho hi\n", 0o755)}, {"bin/sh": "busybox"})
    config = images.ImageConfig(env={"PATH": "/bin"}, entrypoint=["/bin/hello"], user="65535:65535")
    out = tmp_path / "img.oci.tar"
    images.write_oci_archive(out, layer_tars=[layer], config=config, ref="pykoord.local/hello:abc")
    files = read_archive(out)
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    (entry,) = json.loads(files["index.json"])["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == "pykoord.local/hello:abc"
    assert entry["platform"] == {"architecture": "amd64", "os": "linux"}
    blobs = {f"sha256:{name.rsplit('/', 1)[1]}": data for name, data in files.items() if name.startswith("blobs/")}
    for digest, data in blobs.items():  # content addressed
        assert digest == "sha256:" + hashlib.sha256(data).hexdigest()
    manifest = json.loads(blobs[entry["digest"]])
    image_config = json.loads(blobs[manifest["config"]["digest"]])
    assert image_config["config"] == {
        "Env": ["PATH=/bin"],
        "WorkingDir": "/",
        "User": "65535:65535",
        "Entrypoint": ["/bin/hello"],
    }
    (layer_desc,) = manifest["layers"]
    raw = gzip.decompress(blobs[layer_desc["digest"]])
    assert image_config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(raw).hexdigest()]
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["bin"].isdir() and members["bin/hello"].mode == 0o755
    assert members["bin/sh"].issym() and members["bin/sh"].linkname == "busybox"


def test_equal_inputs_give_equal_archives(tmp_path: Path) -> None:
    def build(path: Path) -> bytes:
        layer = images.layer_from_files({"a": (b"x", 0o644)}, {})
        images.write_oci_archive(path, layer_tars=[layer], config=images.ImageConfig(), ref="r/x:1")
        return path.read_bytes()

    assert build(tmp_path / "one.tar") == build(tmp_path / "two.tar")


def test_layer_from_rootfs_keeps_links_and_leaves_dev_empty(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "python3").write_text("elf")
    (root / "bin").symlink_to("usr/bin")
    (root / "dev").mkdir()
    (root / "dev" / "junk").write_text("x")
    with tarfile.open(fileobj=io.BytesIO(images.layer_from_rootfs(root))) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["bin"].issym() and members["bin"].linkname == "usr/bin"
    assert "dev" in members and "dev/junk" not in members
    assert members["usr/bin/python3"].isfile()
    assert all(m.mtime <= images.EPOCH for m in members.values())


def test_the_dockerfile_is_one_scripts_images_py_can_replay() -> None:
    steps = images.dockerfile_instructions((REPO / "Dockerfile").read_text())
    assert steps[0][0] == "FROM"
    assert images.debian_suite(steps[0][1]) == "bookworm"
    assert {word for word, _ in steps[1:]} <= {"ENV", "WORKDIR", "COPY", "RUN", "USER", "CMD", "ENTRYPOINT"}


@pytest.mark.parametrize(
    ("base", "want"),
    [
        pytest.param("debian:bookworm-slim", "bookworm", id="slim"),
        pytest.param("debian:trixie", "trixie", id="plain"),
    ],
)
def test_debian_suite(base: str, want: str) -> None:
    assert images.debian_suite(base) == want


@pytest.mark.parametrize("base", ["python:3.12-slim", "ubuntu:24.04", "debian"])
def test_other_bases_are_refused_with_the_reason(base: str) -> None:
    with pytest.raises(images.BuildError, match="only debian:<suite>-slim"):
        images.debian_suite(base)
