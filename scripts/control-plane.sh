#!/usr/bin/env bash
# Local Kubernetes control plane for pykoord's integration tests and benchmarks:
# etcd + kube-apiserver on loopback, and optionally kwok with N fake nodes.
# Every binary is built from the pinned upstream releases in scripts/versions.env
# and cached outside the repo, keyed by version.
#
# Usage:
#   scripts/control-plane.sh up [--kwok-nodes N] [--no-crds] [--node]
#                                                  start (no-op if already up); last stdout line = kubeconfig path;
#                                                  --no-crds leaves deploy/crds out (a test that installs its own);
#                                                  --node adds what real pods need (ServiceAccount admission,
#                                                  kube-controller-manager with the workload controllers,
#                                                  kube-scheduler) and a real node: scripts/node.sh up
#   scripts/control-plane.sh down                  stop everything (by pid) and remove the state
#   scripts/control-plane.sh build                 build missing binaries; print NAME=PATH lines
#   scripts/control-plane.sh status                exit 0 and print the kubeconfig path if the cluster is up
#   scripts/control-plane.sh apiserver-stop|apiserver-start|apiserver-restart
#                                                  stop/start kube-apiserver on the same port and etcd
#   scripts/control-plane.sh controller-manager-start|controller-manager-stop
#                                                  start/stop kube-controller-manager with the PersistentVolume
#                                                  controller (claim binding) and the resourceclaim controller
#                                                  (DRA claims from templates), against the running cluster
#   scripts/control-plane.sh pin                   regenerate scripts/controlplane/*/go.{mod,sum} from versions.env
#
# Environment:
#   PYKOORD_CLUSTER_DIR  state dir (default <repo>/.cluster): pki, pid files, logs, kubeconfig
#   PYKOORD_CACHE        binary cache (default ~/.cache/pykoord); binaries in bin/<component>-<version>/
#   PYKOORD_START_TIMEOUT  seconds to wait for each component to become healthy (default 60)
#   PYKOORD_KCM_FLAGS    extra kube-controller-manager flags, space-separated (e.g. --kube-api-qps=1000)
#
# Everything except the final kubeconfig path (and `build`'s NAME=PATH lines) goes to stderr.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/versions.env
source "$REPO_ROOT/scripts/versions.env"

CACHE_DIR=${PYKOORD_CACHE:-$HOME/.cache/pykoord}
BIN_DIR=$CACHE_DIR/bin
STATE_DIR=$(realpath -m "${PYKOORD_CLUSTER_DIR:-$REPO_ROOT/.cluster}")
START_TIMEOUT=${PYKOORD_START_TIMEOUT:-60}
K8S_MODULE=$REPO_ROOT/scripts/controlplane/k8s
ETCD_MODULE=$REPO_ROOT/scripts/controlplane/etcd

KUBE_APISERVER=$BIN_DIR/kube-apiserver-$KUBERNETES_VERSION/kube-apiserver
KUBE_SCHEDULER=$BIN_DIR/kube-scheduler-$KUBERNETES_VERSION/kube-scheduler
KUBE_CONTROLLER_MANAGER=$BIN_DIR/kube-controller-manager-$KUBERNETES_VERSION/kube-controller-manager
KUBECTL=$BIN_DIR/kubectl-$KUBERNETES_VERSION/kubectl
ETCD=$BIN_DIR/etcd-$ETCD_VERSION/etcd
KWOK=$BIN_DIR/kwok-$KWOK_VERSION/kwok
KWOK_STAGES=$BIN_DIR/kwok-$KWOK_VERSION/stages.yaml

# Marker that makes `down` willing to delete the state dir.
STATE_MARKER=.pykoord-cluster

log() { printf '[control-plane] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ---------------------------------------------------------------- build

# Go builds of k8s.io/kubernetes take many minutes on 2 cores: be nice to the
# rest of the machine, never touch the repo's go.mod/go.sum (-mod=readonly),
# and ignore any go.work further up.
go_env() { env GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=readonly" nice -n 10 "$@"; }

# build_module_binary NAME VERSION MODULE_DIR PACKAGE [LDFLAGS]
build_module_binary() {
    local name=$1 version=$2 module=$3 package=$4 ldflags=${5:-}
    local out=$BIN_DIR/$name-$version/$name
    [[ -x $out ]] && return 0
    log "building $name $version (cold builds take minutes)"
    local start=$SECONDS
    mkdir -p "$(dirname "$out")"
    (cd "$module" && go_env go build -trimpath -ldflags="-s -w $ldflags" -o "$out.tmp.$$" "$package")
    mv -f "$out.tmp.$$" "$out"
    log "built $name in $((SECONDS - start))s"
}

# The version stamp upstream's hack/lib/version.sh links in. Without it the
# binaries report v0.0.0-master to clients (/version, User-Agent).
kubernetes_version_ldflags() {
    local info commit date minor flags=() key
    info=$(cd "$K8S_MODULE" && GOWORK=off GOFLAGS='' go list -m -json "k8s.io/kubernetes@$KUBERNETES_VERSION")
    commit=$(sed -n 's/^[[:space:]]*"Hash": "\(.*\)",\{0,1\}$/\1/p' <<<"$info" | head -n1)
    date=$(sed -n 's/^[[:space:]]*"Time": "\([^"]*\)",\{0,1\}$/\1/p' <<<"$info" | head -n1)
    minor=${KUBERNETES_VERSION#v1.}
    minor=${minor%%.*}
    for key in "gitVersion=$KUBERNETES_VERSION" gitMajor=1 "gitMinor=$minor" gitTreeState=clean \
        "gitCommit=$commit" "buildDate=$date"; do
        [[ $key == *= ]] && continue
        flags+=("-X k8s.io/component-base/version.$key" "-X k8s.io/client-go/pkg/version.$key")
    done
    echo "${flags[*]}"
}

build_kwok() {
    [[ -x $KWOK && -s $KWOK_STAGES ]] && return 0
    log "building kwok $KWOK_VERSION"
    local start=$SECONDS dir tmp moddir
    dir=$(dirname "$KWOK")
    tmp=$dir.tmp.$$
    mkdir -p "$tmp"
    # `go install pkg@version` ignores the current module; kwok's go.mod has no
    # replace directives, so this is the documented way to build it.
    (cd "$tmp" && GOWORK=off GOFLAGS='' GOBIN=$tmp nice -n 10 \
        go install -trimpath -ldflags='-s -w' "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
    # The kwok binary needs Stage objects; these are the ones kwokctl uses by
    # default (fast node init, node heartbeat with lease, fast pod lifecycle),
    # taken from the pinned tag so they cannot drift from the binary.
    moddir=$(cd "$tmp" && GOWORK=off GOFLAGS='' go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [[ -d $moddir ]] || die "cannot locate the kwok $KWOK_VERSION module source"
    local stage first=1
    for stage in node/fast/node-initialize.yaml \
        node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
        pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
        ((first)) || echo '---'
        first=0
        cat "$moddir/kustomize/stage/$stage"
    done >"$tmp/stages.yaml"
    mkdir -p "$dir"
    mv -f "$tmp/kwok" "$KWOK"
    mv -f "$tmp/stages.yaml" "$KWOK_STAGES"
    rm -rf "$tmp"
    log "built kwok in $((SECONDS - start))s"
}

build_all() {
    command -v go >/dev/null || die "go is not installed (need Go >= 1.25 with access to the module proxy)"
    mkdir -p "$BIN_DIR"
    # One build at a time across concurrent invocations (e.g. pytest and a shell).
    exec 8>"$BIN_DIR/.build.lock"
    flock 8
    build_module_binary etcd "$ETCD_VERSION" "$ETCD_MODULE" .
    local k8s_ldflags=
    if [[ ! -x $KUBE_APISERVER || ! -x $KUBECTL || ! -x $KUBE_SCHEDULER || ! -x $KUBE_CONTROLLER_MANAGER ]]; then
        k8s_ldflags=$(kubernetes_version_ldflags)
    fi
    build_module_binary kube-apiserver "$KUBERNETES_VERSION" "$K8S_MODULE" ./kube-apiserver "$k8s_ldflags"
    build_module_binary kubectl "$KUBERNETES_VERSION" "$K8S_MODULE" ./kubectl "$k8s_ldflags"
    build_module_binary kube-scheduler "$KUBERNETES_VERSION" "$K8S_MODULE" ./kube-scheduler "$k8s_ldflags"
    build_module_binary kube-controller-manager "$KUBERNETES_VERSION" "$K8S_MODULE" ./kube-controller-manager \
        "$k8s_ldflags"
    build_kwok
    flock -u 8
}

# Regenerate the Go modules from versions.env. The k8s module requires
# k8s.io/kubernetes and replaces every staging module listed in that release's
# own go.mod with the published v0.X.Y of the same release.
pin() {
    local staging=v0.${KUBERNETES_VERSION#v1.} upstream_mod
    upstream_mod=$(GOWORK=off GOFLAGS='' go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" |
        sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
    [[ -f $upstream_mod ]] || die "cannot download k8s.io/kubernetes@$KUBERNETES_VERSION"
    {
        echo "// Generated by scripts/control-plane.sh pin from k8s.io/kubernetes@$KUBERNETES_VERSION's go.mod."
        echo "// Every staging module is replaced with its published $staging release."
        echo "module pykoord.local/controlplane/k8s"
        echo
        sed -n 's/^go \(.*\)/go \1/p' "$upstream_mod"
        echo
        echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
        echo
        echo "replace ("
        sed -n '/^replace (/,/^)/p' "$upstream_mod" |
            sed -nE "s#^[[:space:]]*(k8s\.io/[^ ]+) => \./staging/src/.*#\t\1 => \1 $staging#p"
        echo ")"
    } >"$K8S_MODULE/go.mod"
    rm -f "$K8S_MODULE/go.sum"
    (cd "$K8S_MODULE" && GOWORK=off GOFLAGS='' go mod tidy)
    {
        echo "// Generated by scripts/control-plane.sh pin."
        echo "module pykoord.local/controlplane/etcd"
        echo
        echo "go 1.26.0"
        echo
        echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"
    } >"$ETCD_MODULE/go.mod"
    rm -f "$ETCD_MODULE/go.sum"
    (cd "$ETCD_MODULE" && GOWORK=off GOFLAGS='' go mod tidy)
    log "regenerated $K8S_MODULE/go.mod and $ETCD_MODULE/go.mod; commit them with go.sum"
}

# ---------------------------------------------------------------- processes

running() { # running PID: the process exists and is not a zombie waiting for its reaper
    local stat
    { stat=$(<"/proc/$1/stat"); } 2>/dev/null || return 1
    stat=${stat##*) }
    [[ ${stat:0:1} != Z ]]
}

pid_alive() { # pid_alive NAME: the pid file exists and its process runs one of our cached binaries
    local pidfile=$STATE_DIR/$1.pid pid exe
    [[ -f $pidfile ]] || return 1
    pid=$(<"$pidfile")
    [[ -n $pid ]] || return 1
    # Checking the executable guards against a recycled pid.
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
    [[ $exe == "$BIN_DIR"/* ]]
}

start_process() { # start_process NAME BINARY ARGS...
    local name=$1
    shift
    mkdir -p "$STATE_DIR/logs"
    # setsid detaches from the caller's terminal and process group, so ^C in
    # the shell or pytest's teardown does not take the cluster down by accident.
    setsid "$@" </dev/null >>"$STATE_DIR/logs/$name.log" 2>&1 &
    local pid=$! i
    echo "$pid" >"$STATE_DIR/$name.pid"
    # Until the forked shell has exec'ed the binary, pid_alive would say no.
    for ((i = 0; i < 50; i++)); do
        [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$1" ]] && return 0
        [[ -d /proc/$pid ]] || return 0
        sleep 0.05
    done
}

stop_process() { # stop_process NAME: SIGTERM, then SIGKILL after 15 s
    local name=$1 pidfile=$STATE_DIR/$1.pid pid i
    [[ -f $pidfile ]] || return 0
    if pid_alive "$name"; then
        pid=$(<"$pidfile")
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 150; i++)); do
            running "$pid" || break
            sleep 0.1
        done
        if running "$pid"; then
            log "$name (pid $pid) ignored SIGTERM; killing"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.2
        fi
    fi
    rm -f "$pidfile"
}

wait_for() { # wait_for NAME URL [CURL ARGS...]: poll URL until it answers 200 "ok"-ish
    local name=$1 url=$2
    shift 2
    local deadline=$((SECONDS + START_TIMEOUT))
    while ((SECONDS < deadline)); do
        if curl -sf --max-time 2 "$@" "$url" >/dev/null 2>&1; then
            return 0
        fi
        if ! pid_alive "$name"; then
            log "$name exited; last lines of $STATE_DIR/logs/$name.log:"
            tail -n 30 "$STATE_DIR/logs/$name.log" >&2 || true
            return 1
        fi
        sleep 0.2
    done
    log "$name not healthy after ${START_TIMEOUT}s; last lines of $STATE_DIR/logs/$name.log:"
    tail -n 30 "$STATE_DIR/logs/$name.log" >&2 || true
    return 1
}

free_ports() { # free_ports N: N distinct free loopback ports, space separated
    python3 - "$1" <<'EOF'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# ---------------------------------------------------------------- pki

make_ca() { # make_ca NAME COMMON_NAME: a self-signed P-256 CA in pki/NAME.{crt,key}
    local pki=$STATE_DIR/pki
    openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
        -keyout "$pki/$1.key" -out "$pki/$1.crt" -days 3650 -subj "/CN=$2" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
}

make_cert() { # make_cert CA NAME SUBJECT EXTENSIONS: a P-256 key and a cert signed by pki/CA
    local pki=$STATE_DIR/pki ca=$1 name=$2 subject=$3 extensions=$4
    openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
        -keyout "$pki/$name.key" -subj "$subject" -out "$pki/$name.csr" 2>/dev/null
    # Python's ssl (VERIFY_X509_STRICT since 3.13) wants the key identifiers.
    printf '%s\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\nbasicConstraints=critical,CA:FALSE\n' \
        "$extensions" >"$pki/$name.ext"
    openssl x509 -req -in "$pki/$name.csr" -CA "$pki/$ca.crt" -CAkey "$pki/$ca.key" \
        -set_serial "0x$(openssl rand -hex 16)" -days 3650 -extfile "$pki/$name.ext" \
        -out "$pki/$name.crt" 2>/dev/null
    rm -f "$pki/$name.csr" "$pki/$name.ext"
}

generate_pki() {
    local pki=$STATE_DIR/pki
    mkdir -p "$pki"
    chmod 700 "$pki"
    make_ca ca pykoord-ca
    make_cert ca apiserver "/CN=kube-apiserver" \
        "keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    # The admin user is in system:masters, so RBAC lets it do everything.
    make_cert ca admin "/O=system:masters/CN=pykoord-admin" \
        "keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
    # Front proxy (request-header authentication), as kubeadm sets it up. Without
    # it the extension-apiserver-authentication ConfigMap lacks
    # requestheader-client-ca-file and kube-scheduler's delegated authn logs errors.
    make_ca front-proxy-ca pykoord-front-proxy-ca
    # kube-apiserver's identity towards kubelets (logs, exec, port-forward), as kubeadm's
    # apiserver-kubelet-client.
    make_cert ca apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" \
        "keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
    make_cert front-proxy-ca front-proxy-client "/CN=front-proxy-client" \
        "keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
    # Service-account token signing key (TokenRequest API) and its public half.
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$pki/sa.key" 2>/dev/null
    openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
    # A static bearer token for the same admin, for raw HTTP clients.
    (umask 077 && openssl rand -hex 32 >"$STATE_DIR/admin.token")
    printf '%s,pykoord-admin,pykoord-admin,"system:masters"\n' "$(<"$STATE_DIR/admin.token")" >"$pki/tokens.csv"
}

write_kubeconfig() {
    local pki=$STATE_DIR/pki
    cat >"$STATE_DIR/kubeconfig.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: pykoord
  cluster:
    server: $SERVER
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: pykoord-admin
  user:
    client-certificate-data: $(base64 -w0 "$pki/admin.crt")
    client-key-data: $(base64 -w0 "$pki/admin.key")
contexts:
- name: pykoord
  context:
    cluster: pykoord
    user: pykoord-admin
current-context: pykoord
EOF
    chmod 600 "$STATE_DIR/kubeconfig.tmp"
    mv -f "$STATE_DIR/kubeconfig.tmp" "$STATE_DIR/kubeconfig"
}

# ---------------------------------------------------------------- components

load_state() {
    [[ -f $STATE_DIR/cluster.env ]] || die "no cluster state in $STATE_DIR (run 'up' first)"
    # shellcheck source=/dev/null
    source "$STATE_DIR/cluster.env"
}

admin_curl_args() {
    local pki=$STATE_DIR/pki
    echo --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key"
}

# The component functions read ETCD_PORT, APISERVER_PORT, SERVER, ... from cluster.env (load_state).
# shellcheck disable=SC2153
start_etcd() {
    start_process etcd "$ETCD" \
        --name=pykoord \
        --data-dir="$ETCD_DATA_DIR" \
        --listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
        --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-cluster="pykoord=http://127.0.0.1:$ETCD_PEER_PORT" \
        --unsafe-no-fsync=true \
        --quota-backend-bytes=8589934592 \
        --log-level=warn
    wait_for etcd "http://127.0.0.1:$ETCD_PORT/health" && log "etcd healthy on 127.0.0.1:$ETCD_PORT"
}

# Written once by `up` and reused by apiserver-start, so a restart comes back
# with identical flags on the same port against the same etcd.
# No kubelet runs, and kube-controller-manager only on request (its PV controller), so:
# - ServiceAccount admission is off: nothing creates the `default` ServiceAccount,
#   and pods must be creatable anyway (the TokenRequest API still works).
# - TaintNodesByCondition is off: it taints every new node not-ready, and only the
#   node lifecycle controller would remove the taint once kwok reports Ready.
# - the endpoint reconciler is off: it would publish a loopback endpoint.
# A cluster with a real node (NODE=1, `up --node`) differs: ServiceAccount admission is on (the
# workload controllers create the ServiceAccounts and kube-root-ca.crt that pods mount), webhooks are
# reached at their endpoints (no kube-proxy turns Service IPs into pod IPs), and the API server
# authenticates to kubelets with its own client certificate.
# APF is off and the in-flight limits are high so benchmarks measure the
# scheduler, not the apiserver's fairness queues. The watch termination grace
# period makes SIGTERM end open watches; with the default (0) the server waits
# up to a minute for watchers such as kwok to hang up.
write_apiserver_args() {
    local pki=$STATE_DIR/pki
    cat >"$STATE_DIR/kube-apiserver.args" <<EOF
--etcd-servers=http://127.0.0.1:$ETCD_PORT
--bind-address=127.0.0.1
--advertise-address=127.0.0.1
--secure-port=$APISERVER_PORT
--cert-dir=$pki
--tls-cert-file=$pki/apiserver.crt
--tls-private-key-file=$pki/apiserver.key
--client-ca-file=$pki/ca.crt
--token-auth-file=$pki/tokens.csv
--authorization-mode=Node,RBAC
--service-account-issuer=$SERVER
--service-account-key-file=$pki/sa.pub
--service-account-signing-key-file=$pki/sa.key
--service-cluster-ip-range=10.0.0.0/24
--allow-privileged=true
$(if ((${NODE:-0})); then
        printf '%s\n' --disable-admission-plugins=TaintNodesByCondition --enable-aggregator-routing=true \
            "--kubelet-client-certificate=$pki/apiserver-kubelet-client.crt" \
            "--kubelet-client-key=$pki/apiserver-kubelet-client.key" --kubelet-preferred-address-types=InternalIP
    else
        echo --disable-admission-plugins=ServiceAccount,TaintNodesByCondition
    fi)
--requestheader-client-ca-file=$pki/front-proxy-ca.crt
--requestheader-allowed-names=front-proxy-client
--requestheader-username-headers=X-Remote-User
--requestheader-group-headers=X-Remote-Group
--requestheader-extra-headers-prefix=X-Remote-Extra-
--proxy-client-cert-file=$pki/front-proxy-client.crt
--proxy-client-key-file=$pki/front-proxy-client.key
--endpoint-reconciler-type=none
--enable-priority-and-fairness=false
--max-requests-inflight=3000
--max-mutating-requests-inflight=1000
--shutdown-watch-termination-grace-period=2s
--profiling=true
--v=1
EOF
}

start_apiserver() {
    local args
    mapfile -t args <"$STATE_DIR/kube-apiserver.args"
    start_process kube-apiserver "$KUBE_APISERVER" "${args[@]}"
    # shellcheck disable=SC2046
    wait_for kube-apiserver "$SERVER/readyz" $(admin_curl_args) && log "kube-apiserver ready at $SERVER"
}

kubectl_admin() { "$KUBECTL" --kubeconfig="$STATE_DIR/kubeconfig" "$@"; }

install_crds() {
    local dir=$REPO_ROOT/deploy/crds
    shopt -s nullglob
    local files=("$dir"/*.yaml "$dir"/*.yml)
    shopt -u nullglob
    if ((${#files[@]} == 0)); then
        log "no CRDs in $dir; skipping"
        return 0
    fi
    log "installing ${#files[@]} CRD file(s) from $dir"
    local args=() f
    for f in "${files[@]}"; do args+=(-f "$f"); done
    kubectl_admin apply --server-side --force-conflicts "${args[@]}" >&2 || return 1
    # A CRD created a moment ago may have no conditions yet, which makes
    # `kubectl wait` fail instead of wait; retry until the deadline.
    local deadline=$((SECONDS + START_TIMEOUT))
    until kubectl_admin wait --for=condition=Established --timeout="${START_TIMEOUT}s" crd --all >&2 2>/dev/null; do
        ((SECONDS < deadline)) || { log "CRDs not Established after ${START_TIMEOUT}s"; return 1; }
        sleep 0.2
    done
    log "CRDs established"
}

create_kwok_nodes() { # create_kwok_nodes N
    local n=$1
    python3 - "$n" >"$STATE_DIR/kwok-nodes.json" <<'EOF'
import json, sys
items = []
for i in range(int(sys.argv[1])):
    name = f"kwok-node-{i}"
    resources = {"cpu": "4", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    items.append({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/role": "agent",
                "node-role.kubernetes.io/agent": "",
            },
        },
        "spec": {},
        "status": {"capacity": resources, "allocatable": resources},
    })
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
EOF
    kubectl_admin create -f "$STATE_DIR/kwok-nodes.json" >/dev/null
}

start_kwok() { # start_kwok N
    local n=$1
    log "creating $n kwok node(s)"
    create_kwok_nodes "$n" || return 1
    start_process kwok "$KWOK" \
        --config="$KWOK_STAGES" \
        --kubeconfig="$STATE_DIR/kubeconfig" \
        --manage-all-nodes=false \
        --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
        --cidr=10.244.0.0/16 \
        --node-ip=10.96.0.1 \
        --node-lease-duration-seconds=40 \
        --server-address="127.0.0.1:$KWOK_PORT"
    local deadline=$((SECONDS + START_TIMEOUT)) ready=0
    while ((SECONDS < deadline)); do
        pid_alive kwok || break
        ready=$(kubectl_admin get nodes -l type=kwok --no-headers \
            -o 'custom-columns=READY:.status.conditions[?(@.type=="Ready")].status' 2>/dev/null |
            grep -c True || true)
        ((ready >= n)) && { log "$ready kwok node(s) Ready"; return 0; }
        sleep 0.5
    done
    log "only $ready of $n kwok nodes became Ready; last lines of $STATE_DIR/logs/kwok.log:"
    tail -n 30 "$STATE_DIR/logs/kwok.log" >&2 || true
    return 1
}

# kube-controller-manager, on request, with two controllers: the PersistentVolume controller binds claims
# to volumes (the scheduler's choice for WaitForFirstConsumer claims, and volumes a provisioner creates for
# claims annotated with a selected node); the resourceclaim controller creates pods' ResourceClaims from
# their ResourceClaimTemplates and releases (deallocates or deletes) them when the pods go. Its port and
# flags are in the state dir, like the apiserver's.
# shellcheck disable=SC2086 # PYKOORD_KCM_FLAGS is split into words on purpose
start_controller_manager() {
    [[ -x $KUBE_CONTROLLER_MANAGER ]] || die "kube-controller-manager is not built (run 'build')"
    pid_alive kube-controller-manager && { log "kube-controller-manager already running"; return 0; }
    local port controllers=persistentvolume-binder-controller,resourceclaim-controller
    # With a real node (NODE=1), also what makes pods out of workloads and gives them an identity: the
    # DaemonSet, Deployment and ReplicaSet controllers, ServiceAccounts and the kube-root-ca.crt ConfigMap
    # (a ServiceAccount token volume needs both), endpoints (webhooks are dialled at them), namespace
    # deletion and garbage collection (a chart uninstall takes its pods along).
    if ((${NODE:-0})); then
        controllers+=,daemonset-controller,deployment-controller,replicaset-controller,serviceaccount-controller
        controllers+=,root-ca-certificate-publisher-controller,endpoints-controller,endpointslice-controller
        controllers+=,namespace-controller,garbage-collector-controller,disruption-controller
    fi
    port=$(free_ports 1)
    echo "$port" >"$STATE_DIR/kube-controller-manager.port"
    start_process kube-controller-manager "$KUBE_CONTROLLER_MANAGER" \
        --kubeconfig="$STATE_DIR/kubeconfig" \
        --authentication-kubeconfig="$STATE_DIR/kubeconfig" \
        --authorization-kubeconfig="$STATE_DIR/kubeconfig" \
        --bind-address=127.0.0.1 \
        --secure-port="$port" \
        --cert-dir="$STATE_DIR/pki/kube-controller-manager" \
        --controllers="$controllers" \
        --root-ca-file="$STATE_DIR/pki/ca.crt" \
        --leader-elect=false \
        --use-service-account-credentials=false \
        --pvclaimbinder-sync-period=2s \
        --v=2 ${PYKOORD_KCM_FLAGS:-}
    wait_for kube-controller-manager "https://127.0.0.1:$port/healthz" -k &&
        log "kube-controller-manager healthy on 127.0.0.1:$port"
}

# kube-scheduler (default-scheduler) for a cluster with a real node: DaemonSet and Deployment pods are
# scheduled like any pod, and pykoord's chart leaves them to the default scheduler.
start_kube_scheduler() {
    [[ -x $KUBE_SCHEDULER ]] || die "kube-scheduler is not built (run 'build')"
    pid_alive kube-scheduler && { log "kube-scheduler already running"; return 0; }
    local port
    port=$(free_ports 1)
    cat >"$STATE_DIR/kube-scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $STATE_DIR/kubeconfig
leaderElection:
  leaderElect: false
EOF
    start_process kube-scheduler "$KUBE_SCHEDULER" \
        --config="$STATE_DIR/kube-scheduler.yaml" \
        --authentication-kubeconfig="$STATE_DIR/kubeconfig" \
        --authorization-kubeconfig="$STATE_DIR/kubeconfig" \
        --bind-address=127.0.0.1 \
        --secure-port="$port" \
        --v=1
    wait_for kube-scheduler "https://127.0.0.1:$port/readyz" -k && log "kube-scheduler ready on 127.0.0.1:$port"
}

is_up() {
    [[ -f $STATE_DIR/cluster.env && -f $STATE_DIR/kubeconfig ]] || return 1
    pid_alive etcd && pid_alive kube-apiserver || return 1
    if [[ -f $STATE_DIR/kwok.pid ]]; then pid_alive kwok || return 1; fi
    if [[ -f $STATE_DIR/kube-controller-manager.pid ]]; then pid_alive kube-controller-manager || return 1; fi
    if [[ -f $STATE_DIR/kube-scheduler.pid ]]; then pid_alive kube-scheduler || return 1; fi
    (
        # shellcheck source=/dev/null
        source "$STATE_DIR/cluster.env"
        # shellcheck disable=SC2046
        curl -sf --max-time 5 $(admin_curl_args) "$SERVER/readyz" >/dev/null
    )
}

# ---------------------------------------------------------------- commands

cmd_up() {
    local kwok_nodes=0 crds=1 node=0
    while (($#)); do
        case $1 in
        --no-crds) crds=0; shift ;;
        --node) node=1; shift ;;
        --kwok-nodes) kwok_nodes=${2:?--kwok-nodes needs a number}; shift 2 ;;
        --kwok-nodes=*) kwok_nodes=${1#*=}; shift ;;
        *) die "unknown argument to up: $1" ;;
        esac
    done
    [[ $kwok_nodes =~ ^[0-9]+$ ]] || die "--kwok-nodes must be a non-negative integer"
    if is_up; then
        local running_nodes
        running_nodes=$(sed -n 's/^KWOK_NODES=//p' "$STATE_DIR/cluster.env")
        if [[ $running_nodes != "$kwok_nodes" ]]; then
            log "warning: already up with $running_nodes kwok node(s), not $kwok_nodes; run 'down' first to change it"
        else
            log "already up"
        fi
        echo "$STATE_DIR/kubeconfig"
        return 0
    fi
    [[ -f $STATE_DIR/$STATE_MARKER ]] && { log "cleaning up a stale cluster in $STATE_DIR"; cmd_down; }
    build_all
    local start=$SECONDS
    mkdir -p "$STATE_DIR/logs"
    touch "$STATE_DIR/$STATE_MARKER"
    # On failure stop what was started but keep the state dir, so the logs can be
    # read; the next `up` or `down` cleans it.
    trap 'status=$?; if ((status != 0)); then stop_all; fi' EXIT

    local ports etcd_data_dir
    read -r -a ports <<<"$(free_ports 4)"
    # etcd on tmpfs: no fsync cost and nothing left on disk. Containers often
    # get a 64 MiB /dev/shm, too small for a benchmark's worth of objects.
    local shm_free_kib
    shm_free_kib=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')
    if [[ -w /dev/shm && ${shm_free_kib:-0} -gt 2097152 ]]; then
        etcd_data_dir=$(mktemp -d /dev/shm/pykoord-etcd.XXXXXX)
    else
        etcd_data_dir=$STATE_DIR/etcd-data
    fi
    cat >"$STATE_DIR/cluster.env" <<EOF
ETCD_PORT=${ports[0]}
ETCD_PEER_PORT=${ports[1]}
APISERVER_PORT=${ports[2]}
KWOK_PORT=${ports[3]}
ETCD_DATA_DIR=$etcd_data_dir
SERVER=https://127.0.0.1:${ports[2]}
KUBERNETES_VERSION=$KUBERNETES_VERSION
ETCD_VERSION=$ETCD_VERSION
KWOK_VERSION=$KWOK_VERSION
KWOK_NODES=$kwok_nodes
NODE=$node
EOF
    load_state
    generate_pki
    write_kubeconfig

    start_etcd || die "etcd failed to start"
    write_apiserver_args
    start_apiserver || die "kube-apiserver failed to start"
    if ((crds)); then
        install_crds || die "installing CRDs failed"
    fi
    if ((kwok_nodes > 0)); then
        start_kwok "$kwok_nodes" || die "kwok failed to start"
    fi
    if ((node)); then
        start_controller_manager || die "kube-controller-manager failed to start"
        start_kube_scheduler || die "kube-scheduler failed to start"
        "$REPO_ROOT/scripts/node.sh" up >&2 || die "the node failed to start (scripts/node.sh up)"
    fi
    trap - EXIT
    log "up in $((SECONDS - start))s: $SERVER"
    echo "$STATE_DIR/kubeconfig"
}

stop_all() {
    if [[ -f $STATE_DIR/node/node.env ]]; then
        "$REPO_ROOT/scripts/node.sh" down || log "warning: scripts/node.sh down failed"
    fi
    stop_process kube-scheduler
    stop_process kube-controller-manager
    stop_process kwok
    stop_process kube-apiserver
    stop_process etcd
}

cmd_down() {
    if [[ ! -d $STATE_DIR ]]; then
        log "nothing to stop in $STATE_DIR"
        return 0
    fi
    [[ -f $STATE_DIR/$STATE_MARKER ]] || die "$STATE_DIR is not a pykoord cluster dir (no $STATE_MARKER); refusing to touch it"
    stop_all
    local data_dir=
    if [[ -f $STATE_DIR/cluster.env ]]; then
        data_dir=$(sed -n 's/^ETCD_DATA_DIR=//p' "$STATE_DIR/cluster.env")
    fi
    if [[ $data_dir == /dev/shm/pykoord-etcd.* || $data_dir == "$STATE_DIR"/etcd-data ]]; then
        rm -rf "$data_dir"
    fi
    rm -rf "$STATE_DIR"
    log "down"
}

cmd_build() {
    build_all
    printf '%s=%s\n' ETCD "$ETCD" KUBE_APISERVER "$KUBE_APISERVER" KUBE_SCHEDULER "$KUBE_SCHEDULER" \
        KUBECTL "$KUBECTL" KWOK "$KWOK" KWOK_STAGES "$KWOK_STAGES" \
        KUBE_CONTROLLER_MANAGER "$KUBE_CONTROLLER_MANAGER"
}

main() {
    local cmd=${1:-}
    (($#)) && shift
    case $cmd in
    up) cmd_up "$@" ;;
    down) cmd_down ;;
    build) cmd_build ;;
    pin) pin ;;
    status)
        if is_up; then echo "$STATE_DIR/kubeconfig"; else log "not up"; exit 1; fi
        ;;
    apiserver-stop) load_state; stop_process kube-apiserver ;;
    apiserver-start) load_state; start_apiserver ;;
    apiserver-restart) load_state; stop_process kube-apiserver; start_apiserver ;;
    controller-manager-start) load_state; start_controller_manager ;;
    controller-manager-stop) load_state; stop_process kube-controller-manager ;;
    *)
        sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
        exit 2
        ;;
    esac
}

# scripts/node.sh sources this file for its helpers and paths; only a direct run executes a command.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    main "$@"
fi
