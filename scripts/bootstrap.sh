#!/usr/bin/env bash
# Create (or refresh) the project virtualenv at .venv (or $PYKOORD_VENV) and install pykoord with its dev
# tools. Idempotent: a second run only reinstalls when pyproject.toml changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${PYKOORD_VENV:-"$root/.venv"}
python=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
fi
stamp="$venv/.pykoord-installed"
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ]; then
  # setuptools' "Editable installation ... folders with the same name as your package" note is for package
  # authors, not something a user can act on: filtered, every other warning still shows.
  PYTHONWARNINGS="${PYTHONWARNINGS:+$PYTHONWARNINGS,}ignore:Editable installation" \
    "$venv/bin/pip" install --quiet -e "$root[dev]"
  touch "$stamp"
fi
