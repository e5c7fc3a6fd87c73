#!/usr/bin/env bash
# Helm for the chart in charts/pykoord, built once from the Go module proxy at the
# version pinned in scripts/versions.env and cached like the control-plane binaries
# (~/.cache/pykoord/bin/helm-<version>/helm). Never downloads a release binary.
#
# Usage:
#   scripts/helm.sh build       build it if missing; print HELM=PATH
#   scripts/helm.sh path        print the cached binary's path (exit 1 if not built)
#   scripts/helm.sh ARGS...     run helm with ARGS (building it first if needed)
#
# Environment: PYKOORD_CACHE (default ~/.cache/pykoord), as scripts/control-plane.sh.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/versions.env
source "$REPO_ROOT/scripts/versions.env"
BIN_DIR=${PYKOORD_CACHE:-$HOME/.cache/pykoord}/bin
HELM=$BIN_DIR/helm-$HELM_VERSION/helm

log() { printf '[helm] %s\n' "$*" >&2; }

build() {
    [[ -x $HELM ]] && return 0
    command -v go >/dev/null || { log "error: go is not installed (need Go >= 1.24 and the module proxy)"; exit 1; }
    mkdir -p "$BIN_DIR"
    exec 9>"$BIN_DIR/.helm-build.lock"
    flock 9
    [[ -x $HELM ]] && return 0
    log "building helm $HELM_VERSION (a cold build takes minutes)"
    local start=$SECONDS tmp
    tmp=$(mktemp -d "$BIN_DIR/helm-build.XXXXXX")
    # The stamps helm's Makefile links in: the version `helm version` reports, and the Kubernetes version
    # `helm template` and `helm lint` assume without a cluster (client-go's minor, as the Makefile derives
    # it; unstamped, helm assumes v1.20 and refuses the chart's kubeVersion).
    local gomod client_go minor pkg=helm.sh/helm/v3
    gomod=$(cd "$tmp" && GOWORK=off GOFLAGS='' go mod download -json "$pkg@$HELM_VERSION" |
        sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
    client_go=$(sed -n 's#^[[:space:]]*k8s.io/client-go v0\.\([0-9]*\)\..*#\1#p' "$gomod" | head -n1)
    [[ $client_go =~ ^[0-9]+$ ]] || { log "error: no k8s.io/client-go version in $gomod"; exit 1; }
    minor=$client_go
    local ldflags="-s -w -X $pkg/internal/version.version=$HELM_VERSION -X $pkg/internal/version.gitTreeState=clean"
    ldflags+=" -X $pkg/pkg/chartutil.k8sVersionMajor=1 -X $pkg/pkg/chartutil.k8sVersionMinor=$minor"
    ldflags+=" -X $pkg/pkg/lint/rules.k8sVersionMajor=1 -X $pkg/pkg/lint/rules.k8sVersionMinor=$minor"
    # `go install pkg@version` ignores any module around it; helm's go.mod has no replace directives.
    (cd "$tmp" && GOWORK=off GOFLAGS='' GOBIN=$tmp nice -n 10 go install -trimpath -ldflags="$ldflags" \
        "$pkg/cmd/helm@$HELM_VERSION")
    mkdir -p "$(dirname "$HELM")"
    mv -f "$tmp/helm" "$HELM"
    rm -rf "$tmp"
    log "built helm in $((SECONDS - start))s"
}

case ${1:-} in
build) build; echo "HELM=$HELM" ;;
path) [[ -x $HELM ]] || exit 1; echo "$HELM" ;;
"") sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
*) build; exec "$HELM" "$@" ;;
esac
