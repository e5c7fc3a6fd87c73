# pykoord: one image for both binaries (koord-scheduler, koordlet); deploy/ picks the command.
#   docker build -t pykoord:0.1.0 .
# The install is README's (`pip install` of this repository into a virtualenv), without the dev extras
# and not editable, on Debian's Python. tests/unit/deploy/test_dockerfile.py runs the RUN steps below in a
# fresh venv; scripts/images.py replays this file in a Debian root to build the same image without Docker
# or a registry (the real node's tests run it). docs/install.md says how to build and push it.
FROM debian:bookworm-slim

ENV PYKOORD_VENV=/opt/pykoord \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1

# Debian's Python 3.11 and its venv module (ensurepip); nothing else (no compiler: every dependency has a
# manylinux wheel).
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY apis ./apis
COPY kubeapi ./kubeapi
COPY koord_scheduler ./koord_scheduler
COPY koordlet ./koordlet

RUN python3 -m venv "$PYKOORD_VENV"
RUN "$PYKOORD_VENV/bin/pip" install --quiet .
RUN "$PYKOORD_VENV/bin/koord-scheduler" --help >/dev/null && "$PYKOORD_VENV/bin/koordlet" --help >/dev/null

ENV PATH=/opt/pykoord/bin:$PATH
WORKDIR /
# koord-scheduler runs as 65532 (deploy/koord-scheduler/deployment.yaml), koordlet as root (cgroup writes).
USER 65532:65532
