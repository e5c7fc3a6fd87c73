#!/usr/bin/env bash
# Install pykoord into .venv and run every check CI runs: ruff, mypy --strict on the packages, a relaxed
# mypy pass over tests/ (mypy-tests.ini), import-linter, Helm for the chart tests (built from the Go module
# proxy if missing, never downloaded as a release binary), Debian's chromium for the HTML report test (apt-get,
# when root and missing), pytest (unit, real-cgroup and real-API-server
# integration tests, and the real-node tests of tests/node: kubelet, containerd and runc built here, pods in
# real containers; marker `node`, root). Extra arguments go to pytest (`-m "not node"` leaves the node out).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/scripts/bootstrap.sh"
bin="$root/.venv/bin"
echo "== ruff"
"$bin/ruff" check .
"$bin/ruff" format --check . >/dev/null || { "$bin/ruff" format --check .; echo "run: .venv/bin/ruff format ."; exit 1; }
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
echo "== chromium (the HTML report test opens simulate's page in Debian's headless Chromium)"
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    if ! apt-get install -y -qq chromium >/dev/null 2>&1; then
      apt-get update -qq >/dev/null 2>&1 || true
      apt-get install -y -qq chromium >/dev/null 2>&1 || echo "could not install chromium: the HTML report test will fail"
    fi
  else
    echo "chromium is missing (apt-get install chromium, as root): the HTML report test will fail"
  fi
fi
echo "== pytest"
"$bin/pytest" "$@"
