#!/usr/bin/env python3
"""The real node's images, built here without a registry or a container engine, as OCI archives.

    python3 scripts/images.py build [NAME...]    build what is missing; print NAME=REF ARCHIVE lines
    python3 scripts/images.py key NAME           print the content key (the image tag) without building

Three images (NAME):

- ``pause``: the pod sandbox, a static Go program (scripts/node/images/pause) alone in the image.
- ``workload``: the test workload, Debian's static busybox (a shell and the usual tools) and a static Go
  CPU/memory burner (scripts/node/images/burner).
- ``pykoord``: both binaries, built by replaying ``Dockerfile`` itself: ``FROM debian:<suite>-slim`` is a
  Debian root made by mmdebstrap (variant minbase, the packages of Debian's slim images), then every
  ``ENV``/``WORKDIR``/``COPY``/``RUN``/``USER`` instruction in order, each ``RUN`` in a chroot with the
  instruction's environment. What a user's ``docker build`` does with the same file, step for step.

Why mmdebstrap and a small OCI writer, not umoci/buildah/skopeo: buildah needs the base image from a
registry (or a second Dockerfile interpreter), skopeo only copies images that exist, and umoci would only
package the directory that mmdebstrap already made; writing an OCI layout is a tar file, a config and a
manifest (about 60 lines below), with sorted entries and clamped times so equal inputs give equal layers.

Each archive is cached under ``$PYKOORD_CACHE/images`` (default ``~/.cache/pykoord/images``), named by a key
that hashes every input: this script, the Go sources and Go version, the Debian package versions, the
Dockerfile and the files it copies. The key is also the image's tag. ``ctr -n k8s.io images import``
loads an archive (scripts/node.sh does).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import gzip
import hashlib
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GO_IMAGES = REPO / "scripts" / "node" / "images"
DOCKERFILE = REPO / "Dockerfile"
CACHE = Path(os.environ.get("PYKOORD_CACHE", Path.home() / ".cache" / "pykoord")) / "images"
# The layers' file times: equal inputs give byte-equal layers (SOURCE_DATE_EPOCH of 2024-01-01).
EPOCH = 1704067200
PLATFORM = {"architecture": "amd64", "os": "linux"}
# The names containerd stores the images under (kubelet normalises "pykoord:<tag>" to the docker.io one).
REPOSITORIES = {
    "pause": "pykoord.local/pause",
    "workload": "pykoord.local/workload",
    "pykoord": "docker.io/library/pykoord",
}
# Cached archives kept per image (and base roots per suite): other checkouts may use older ones.
KEEP_ARCHIVES = 3
# Debian's slim images leave out documentation and translations (debuerreotype's slimify list).
SLIM_DPKG_OPTIONS = (
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/lintian/*",
    "path-exclude=/usr/share/linda/*",
)


class BuildError(RuntimeError):
    """An image could not be built; the message says which step and why."""


def log(message: str) -> None:
    print(f"[images] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- OCI layout


@dataclass
class ImageConfig:
    """The part of the OCI image config a runtime uses (``config`` in the config blob)."""

    env: dict[str, str] = field(default_factory=dict)
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    user: str = ""
    workdir: str = "/"

    def to_oci(self) -> dict[str, object]:
        out: dict[str, object] = {"Env": [f"{k}={v}" for k, v in self.env.items()], "WorkingDir": self.workdir}
        if self.user:
            out["User"] = self.user
        if self.entrypoint is not None:
            out["Entrypoint"] = self.entrypoint
        if self.cmd is not None:
            out["Cmd"] = self.cmd
        return out


def _blob(data: bytes) -> tuple[str, bytes]:
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def write_oci_archive(out: Path, *, layer_tars: list[bytes], config: ImageConfig, ref: str) -> None:
    """An OCI image layout (one manifest, gzip layers) in a tar file, named ``ref`` for containerd."""
    blobs: list[tuple[str, bytes]] = []
    layers = []
    diff_ids = []
    for raw in layer_tars:
        diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
        digest, data = _blob(gzip.compress(raw, compresslevel=1, mtime=0))
        blobs.append((digest, data))
        layers.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest, "size": len(data)})
    config_doc = {
        **PLATFORM,
        "config": config.to_oci(),
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "created": "2024-01-01T00:00:00Z",
    }
    config_digest, config_data = _blob(json.dumps(config_doc, sort_keys=True).encode())
    blobs.append((config_digest, config_data))
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": len(config_data),
        },
        "layers": layers,
    }
    manifest_digest, manifest_data = _blob(json.dumps(manifest, sort_keys=True).encode())
    blobs.append((manifest_digest, manifest_data))
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest_digest,
                "size": len(manifest_data),
                "platform": PLATFORM,
                "annotations": {
                    "io.containerd.image.name": ref,
                    "org.opencontainers.image.ref.name": ref.rpartition(":")[2],
                },
            }
        ],
    }
    files = [("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'), ("index.json", json.dumps(index).encode())]
    files += [(f"blobs/sha256/{digest.removeprefix('sha256:')}", data) for digest, data in blobs]
    tmp = out.with_name(out.name + f".tmp.{os.getpid()}")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for directory in ("blobs", "blobs/sha256"):
            tar.addfile(_tarinfo(directory, tarfile.DIRTYPE, 0o755))
        for name, data in files:
            tar.addfile(_tarinfo(name, tarfile.REGTYPE, 0o644, len(data)), io.BytesIO(data))
    tmp.replace(out)


def _tarinfo(name: str, kind: bytes, mode: int, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size, info.mtime = kind, mode, size, EPOCH
    return info


def layer_from_files(files: dict[str, tuple[bytes, int]], symlinks: dict[str, str]) -> bytes:
    """A layer tar of regular files ``{path: (content, mode)}`` and ``{path: target}`` links, with parents."""
    buf = io.BytesIO()
    dirs = sorted({str(Path(p).parent) for p in [*files, *symlinks]} - {"."})
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory in _with_parents(dirs):
            tar.addfile(_tarinfo(directory, tarfile.DIRTYPE, 0o755))
        for path in sorted(files):
            data, mode = files[path]
            tar.addfile(_tarinfo(path, tarfile.REGTYPE, mode, len(data)), io.BytesIO(data))
        for path in sorted(symlinks):
            info = _tarinfo(path, tarfile.SYMTYPE, 0o777)
            info.linkname = symlinks[path]
            tar.addfile(info)
    return buf.getvalue()


def _with_parents(dirs: list[str]) -> list[str]:
    out: set[str] = set()
    for directory in dirs:
        parts = Path(directory).parts
        out.update(str(Path(*parts[: i + 1])) for i in range(len(parts)))
    return sorted(out)


def layer_from_rootfs(root: Path) -> bytes:
    """The whole directory as one layer: sorted, numeric owners kept, times clamped, /dev and /proc empty."""
    buf = io.BytesIO()
    skip_contents = {"dev", "proc", "sys", "run", "tmp"}
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            rel_dir = Path(dirpath).relative_to(root)
            if rel_dir.parts and rel_dir.parts[0] in skip_contents:
                dirnames.clear()
                continue
            # Parents before children; a symlink to a directory is added as the link, never followed.
            for name in sorted([*filenames, *dirnames]):
                _add_path(tar, root, rel_dir / name)
            dirnames[:] = sorted(d for d in dirnames if not Path(dirpath, d).is_symlink())
    return buf.getvalue()


def _add_path(tar: tarfile.TarFile, root: Path, rel: Path) -> None:
    info = tar.gettarinfo(str(root / rel), arcname=str(rel))
    if info.type not in (tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE):
        return  # device nodes and fifos: the runtime provides /dev
    info.mtime = min(int(info.mtime), EPOCH)
    info.uname = info.gname = ""
    if info.type == tarfile.REGTYPE:
        with open(root / rel, "rb") as f:
            tar.addfile(info, f)
    else:
        tar.addfile(info)


# ---------------------------------------------------------------- inputs and keys


def _digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def _tree_digest(paths: list[Path]) -> str:
    parts: list[bytes | str] = []
    for path in paths:
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and _copied(p))
        for file in files:
            parts += [str(file.relative_to(REPO)), file.read_bytes()]
    return _digest(*parts)


def _copied(path: Path) -> bool:
    """What .dockerignore lets through of a copied directory: no bytecode, no egg-info."""
    return not any(part == "__pycache__" or part.endswith(".egg-info") for part in path.parts) and (
        path.suffix != ".pyc"
    )


def _run(args: list[str], **kwargs: object) -> str:
    result = subprocess.run(args, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    if result.returncode != 0:
        raise BuildError(f"{shlex.join(args)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    out: str = result.stdout
    return out


def go_version() -> str:
    return _run(["go", "env", "GOVERSION"]).strip()


def debian_candidate(package: str) -> str:
    """The version apt would install (the image records it in its key); ``apt-get update`` first when apt
    has no package lists yet (a fresh machine)."""
    for attempt in range(2):
        for line in _run(["apt-cache", "policy", package]).splitlines():
            value = line.split(":", 1)[1].strip() if line.strip().startswith("Candidate:") else ""
            if value and value != "(none)":
                return value
        if attempt == 0 and os.geteuid() == 0:
            log("apt-get update (no package lists)")
            _run(["apt-get", "update", "-q"])
    raise BuildError(f"apt knows no {package}: run apt-get update, or check the Debian sources")


def need_debian_tool(command: str, package: str) -> None:
    """Install Debian's ``package`` (through apt, as root) when ``command`` is missing."""
    if shutil.which(command):
        return
    if os.geteuid() != 0:
        raise BuildError(f"{command} is missing: apt-get install {package}")
    debian_candidate(package)  # package lists present
    log(f"installing Debian package {package}")
    _run(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", package],
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    )


def self_digest() -> str:
    return _digest(Path(__file__).read_bytes())


# ---------------------------------------------------------------- the images


def build_go_program(name: str, out_dir: Path) -> bytes:
    target = out_dir / name
    env = {**os.environ, "CGO_ENABLED": "0", "GOWORK": "off", "GOFLAGS": ""}
    _run(["go", "build", "-trimpath", "-ldflags=-s -w", "-o", str(target), f"./{name}"], cwd=GO_IMAGES, env=env)
    return target.read_bytes()


def key_pause() -> str:
    return _digest(self_digest(), go_version(), _tree_digest([GO_IMAGES / "go.mod", GO_IMAGES / "pause"]))[:16]


def build_pause(out: Path, ref: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        binary = build_go_program("pause", Path(tmp))
    layer = layer_from_files({"pause": (binary, 0o755)}, {})
    # registry.k8s.io/pause runs as 65535 too.
    write_oci_archive(out, layer_tars=[layer], config=ImageConfig(entrypoint=["/pause"], user="65535:65535"), ref=ref)


def key_workload() -> str:
    return _digest(
        self_digest(),
        go_version(),
        debian_candidate("busybox-static"),
        _tree_digest([GO_IMAGES / "go.mod", GO_IMAGES / "burner"]),
    )[:16]


def build_workload(out: Path, ref: str) -> None:
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        burner = build_go_program("burner", tmp)
        os.chmod(tmp, 0o755)  # apt's sandbox user writes the download here
        _run(["apt-get", "download", "-q", "busybox-static"], cwd=tmp)
        debs = list(tmp.glob("busybox-static_*.deb"))
        if len(debs) != 1:
            raise BuildError(f"apt-get download busybox-static left {debs}")
        _run(["dpkg-deb", "-x", str(debs[0]), str(tmp / "deb")])
        busybox = tmp / "deb" / "bin" / "busybox"
        applets = _run([str(busybox), "--list"]).split()
        files = {"bin/busybox": (busybox.read_bytes(), 0o755), "usr/local/bin/burner": (burner, 0o755)}
        links = {f"bin/{applet}": "busybox" for applet in applets if applet != "busybox"}
        files["etc/passwd"] = (b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n", 0o644)
        files["etc/group"] = (b"root:x:0:\nnogroup:x:65534:\n", 0o644)
        files["tmp/.keep"] = (b"", 0o644)
    config = ImageConfig(env={"PATH": "/usr/local/bin:/bin"}, cmd=["/bin/sh"])
    write_oci_archive(out, layer_tars=[layer_from_files(files, links)], config=config, ref=ref)


# --- pykoord: Dockerfile replayed ---


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
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


def debian_suite(from_args: str) -> str:
    """``debian:<suite>-slim`` (or ``debian:<suite>``) → suite; any other base is refused."""
    image = from_args.split(maxsplit=1)[0]
    name, _, tag = image.partition(":")
    if name not in ("debian", "docker.io/library/debian") or not tag:
        raise BuildError(f"Dockerfile FROM {image}: only debian:<suite>-slim can be built without a registry")
    return tag.removesuffix("-slim")


def copy_sources(args: str) -> list[Path]:
    *sources, _dest = shlex.split(args)
    return [REPO / s for s in sources]


def key_pykoord() -> str:
    steps = dockerfile_instructions(DOCKERFILE.read_text())
    copied = [p for word, args in steps if word == "COPY" for p in copy_sources(args)]
    return _digest(self_digest(), DOCKERFILE.read_bytes(), _tree_digest(copied))[:16]


def _expand(value: str, env: dict[str, str]) -> str:
    for key in sorted(env, key=len, reverse=True):
        value = value.replace("${" + key + "}", env[key]).replace("$" + key, env[key])
    return value


def base_rootfs(suite: str, into: Path) -> None:
    """Debian ``suite`` minbase with the slim images' exclusions, from a cached tar when there is one."""
    need_debian_tool("mmdebstrap", "mmdebstrap")
    version = _run(["mmdebstrap", "--version"]).strip()
    cached = CACHE / f"debian-{suite}-slim-{_digest(version, suite, *SLIM_DPKG_OPTIONS)[:16]}.tar"
    if not cached.is_file():
        log(f"mmdebstrap {suite} (minbase)")
        args = ["mmdebstrap", "--variant=minbase", "--mode=root", "--format=tar", "--quiet"]
        args += [f"--dpkgopt={option}" for option in SLIM_DPKG_OPTIONS]
        tmp = cached.with_name(cached.name + f".tmp.{os.getpid()}")
        _run([*args, suite, str(tmp)])
        tmp.replace(cached)
        prune(f"debian-{suite}-slim-*.tar", keep=2)
    _run(["tar", "-xf", str(cached), "-C", str(into), "--numeric-owner"])


def run_in_chroot(root: Path, command: str, *, env: dict[str, str], workdir: str) -> None:
    """``/bin/sh -c command`` in the image root, in a private mount namespace (its mounts die with it), with
    the host's DNS and CA bundle for the build only (apt and pip reach their registries)."""
    ca_host = os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"
    build_dir = root / "run" / "pykoord-build"
    build_dir.mkdir(parents=True, exist_ok=True)
    resolv = root / "etc" / "resolv.conf"
    had_resolv = resolv.exists() or resolv.is_symlink()
    saved = resolv.read_bytes() if resolv.is_file() and not resolv.is_symlink() else None
    build_env = dict(env)
    if Path(ca_host).is_file():
        shutil.copy(ca_host, build_dir / "ca.crt")
        build_env.setdefault("PIP_CERT", "/run/pykoord-build/ca.crt")
    try:
        if resolv.is_symlink():
            resolv.unlink()
        shutil.copy("/etc/resolv.conf", resolv)
        script = "\n".join(
            [
                "set -e",
                f"mount -t proc proc {shlex.quote(str(root / 'proc'))}",
                f"mount --rbind /dev {shlex.quote(str(root / 'dev'))}",
                f"exec chroot {shlex.quote(str(root))} /usr/bin/env -i "
                + " ".join(shlex.quote(f"{k}={v}") for k, v in build_env.items())
                + f" /bin/sh -c {shlex.quote('cd ' + shlex.quote(workdir) + ' && ' + command)}",
            ]
        )
        result = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            capture_output=True,
            text=True,
            check=False,
            timeout=1800,
        )
        if result.returncode != 0:
            raise BuildError(
                f"RUN {command} failed ({result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
            )
    finally:
        resolv.unlink(missing_ok=True)
        if saved is not None:
            resolv.write_bytes(saved)
        elif not had_resolv:
            pass
        shutil.rmtree(build_dir, ignore_errors=True)


def build_pykoord(out: Path, ref: str) -> None:
    if os.geteuid() != 0:
        raise BuildError("the pykoord image is built in a chroot: run as root")
    steps = dockerfile_instructions(DOCKERFILE.read_text())
    if not steps or steps[0][0] != "FROM":
        raise BuildError("Dockerfile: the first instruction must be FROM")
    config = ImageConfig(env={"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"})
    with tempfile.TemporaryDirectory(dir=CACHE, prefix="rootfs.") as tmp_dir:
        root = Path(tmp_dir) / "root"
        root.mkdir()
        base_rootfs(debian_suite(steps[0][1]), root)
        for word, args in steps[1:]:
            if word == "ENV":
                for pair in shlex.split(args):
                    key, sep, value = pair.partition("=")
                    if not sep:
                        raise BuildError(f"Dockerfile ENV {args}: use KEY=value")
                    config.env[key] = _expand(value, config.env)
            elif word == "WORKDIR":
                config.workdir = str(Path(config.workdir, _expand(args, config.env)))
                (root / config.workdir.lstrip("/")).mkdir(parents=True, exist_ok=True)
            elif word == "COPY":
                _copy_in(root, args, config.workdir)
            elif word == "RUN":
                log(f"RUN {args[:100]}")
                run_in_chroot(root, args, env=config.env, workdir=config.workdir)
            elif word == "USER":
                config.user = args
            elif word in ("CMD", "ENTRYPOINT"):
                value = json.loads(args) if args.startswith("[") else ["/bin/sh", "-c", args]
                setattr(config, word.lower(), value)
            else:
                raise BuildError(f"Dockerfile {word}: not supported by scripts/images.py")
        layer = layer_from_rootfs(root)
    write_oci_archive(out, layer_tars=[layer], config=config, ref=ref)


def _copy_in(root: Path, args: str, workdir: str) -> None:
    *sources, dest = shlex.split(args)
    base = Path(dest) if dest.startswith("/") else Path(workdir, dest)
    into_dir = len(sources) > 1 or dest.endswith("/")
    for source in sources:
        src = REPO / source
        target = root / str(base).lstrip("/")
        if into_dir:
            target = target / src.name
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(
                src, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
            )
        else:
            shutil.copy2(src, target)


# ---------------------------------------------------------------- CLI

KEYS = {"pause": key_pause, "workload": key_workload, "pykoord": key_pykoord}
BUILDERS = {"pause": build_pause, "workload": build_workload, "pykoord": build_pykoord}


def image_ref(name: str, key: str) -> str:
    return f"{REPOSITORIES[name]}:{key}"


@contextlib.contextmanager
def build_lock() -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build(name: str) -> tuple[str, Path]:
    """(image reference, archive path) of ``name``, built unless its archive for these inputs is cached."""
    key = KEYS[name]()
    ref = image_ref(name, key)
    archive = CACHE / f"{name}-{key}.oci.tar"
    if archive.is_file():
        return ref, archive
    with build_lock():
        if not archive.is_file():
            log(f"building {ref}")
            BUILDERS[name](archive, ref)
            prune(f"{name}-*.oci.tar", keep=KEEP_ARCHIVES)
    return ref, archive


def prune(pattern: str, *, keep: int) -> None:
    """Delete all but the ``keep`` newest cached files matching ``pattern`` (each code change is a new key)."""
    files = sorted(CACHE.glob(pattern), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in files[keep:]:
        old.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build_cmd = sub.add_parser("build")
    build_cmd.add_argument("names", nargs="*", metavar="NAME", help=f"of {', '.join(BUILDERS)} (default: all)")
    key_cmd = sub.add_parser("key")
    key_cmd.add_argument("name", choices=list(KEYS))
    args = parser.parse_args(argv)
    unknown = [name for name in getattr(args, "names", []) if name not in BUILDERS]
    if unknown:
        parser.error(f"unknown image {unknown[0]!r} (images: {', '.join(BUILDERS)})")
    try:
        if args.command == "key":
            print(KEYS[args.name]())
            return 0
        for name in args.names or list(BUILDERS):
            ref, archive = build(name)
            print(f"{name}={ref} {archive}")
    except BuildError as err:
        log(f"error: {err}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
