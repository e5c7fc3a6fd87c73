#!/usr/bin/env bash
# Install pykoord into .venv and run every check CI runs: ruff, mypy --strict on the packages, a relaxed
# mypy pass over tests/ (mypy-tests.ini), import-linter, Helm for the chart tests (built from the Go module
# proxy if missing, never downloaded as a release binary), pytest (unit, real-cgroup and real-API-server
# integration tests, and the real-node tests of tests/node: kubelet, containerd and runc built here, pods in
# real containers; marker `node`, root). Extra arguments go to pytest (`-m "not node"` leaves the node out).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/scripts/bootstrap.sh"
bin="$root/.venv/bin"
echo "== ruff"
"$bin/ruff" check .
echo "== mypy --strict"
"$bin/mypy"
echo "== mypy tests (relaxed: mypy-tests.ini)"
"$bin/mypy" tests --config-file mypy-tests.ini
echo "== import-linter"
"$bin/lint-imports"
echo "== helm (the chart tests; built once from the Go module proxy, then cached)"
if command -v go >/dev/null; then
  "$root/scripts/helm.sh" build
else
  echo "no Go toolchain: the chart tests will skip"
fi
echo "== pytest"
"$bin/pytest" "$@"
