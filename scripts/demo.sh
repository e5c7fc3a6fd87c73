#!/usr/bin/env bash
# Install pykoord into .venv and run the embedded demo: koord-scheduler simulate on the bundled cluster.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/bootstrap.sh"
exec "${PYKOORD_VENV:-"$root/.venv"}/bin/koord-scheduler" simulate "$@"
