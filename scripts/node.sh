#!/usr/bin/env bash
# A real Kubernetes node for pykoord's tests: containerd + runc + the CNI bridge plugin + kubelet, on this
# machine, joined to the control plane of scripts/control-plane.sh. Every binary is built from the pinned
# releases in scripts/versions.env and cached beside the control plane's, keyed by version.
#
# Usage:
#   scripts/node.sh build      build missing binaries; print NAME=PATH lines
#   scripts/node.sh up         start containerd and kubelet against the cluster in PYKOORD_CLUSTER_DIR (started
#                              with `control-plane.sh up --node`); wait until the Node is Ready; last stdout
#                              line = the node name
#   scripts/node.sh down       stop kubelet and containerd (by pid), remove the node's containers, mounts,
#                              cgroups, network and state
#   scripts/node.sh status     exit 0 and print the node name if the node is up
#   scripts/node.sh images [NAME...]
#                              build (scripts/images.py) and import images into the node's containerd; print
#                              NAME=REF lines (pause, workload, pykoord; default all)
#
# Everything the node owns is named from one random id kept in <state dir>/node/node.env, so clusters
# started in parallel never share anything: the Node name (pykoord-node-<id>), the cgroup root under which
# kubelet puts kubepods (/pykoord-<id>), the bridge (pkbr<id>) and its /24, containerd's sockets and root,
# kubelet's root and ports. Host paths kubelet insists on: /var/log/containers (symlinks, removed by down).
#
# Networking: pods live on the node's own bridge, which is also the node's InternalIP; nothing is routed
# off the machine (forwarding out of the bridge is rejected). The `kubernetes` Service (10.0.0.1:443) is
# DNATed to the API server on 127.0.0.1, which is all that pods talk to; the API server reaches webhooks at
# their endpoints (--enable-aggregator-routing), so no kube-proxy is needed.
#
# Environment: PYKOORD_CLUSTER_DIR, PYKOORD_CACHE, PYKOORD_START_TIMEOUT as scripts/control-plane.sh.
set -euo pipefail

NODE_SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/control-plane.sh
source "$NODE_SCRIPT_DIR/control-plane.sh"

KUBELET=$BIN_DIR/kubelet-$KUBERNETES_VERSION/kubelet
CONTAINERD_DIR=$BIN_DIR/containerd-$CONTAINERD_VERSION
CONTAINERD=$CONTAINERD_DIR/containerd
CTR=$CONTAINERD_DIR/ctr
CONTAINERD_SHIM=$CONTAINERD_DIR/containerd-shim-runc-v2
RUNC=$BIN_DIR/runc-$RUNC_VERSION/runc
CNI_BIN_DIR=$BIN_DIR/cni-plugins-$CNI_PLUGINS_VERSION
CRICTL=$BIN_DIR/crictl-$CRI_TOOLS_VERSION/crictl
NODE_DIR=$STATE_DIR/node

nlog() { printf '[node] %s\n' "$*" >&2; }
ndie() { nlog "error: $*"; exit 1; }

# ---------------------------------------------------------------- build

# need_debian_package COMMAND_OR_CHECK PACKAGE: install a Debian package (as root, through apt) when the
# check fails; anything else is a clear error.
need_debian_package() {
    local check=$1 package=$2
    eval "$check" >/dev/null 2>&1 && return 0
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        nlog "installing Debian package $package"
        if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$package" >&2; then
            apt-get update -q >&2
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$package" >&2
        fi
        eval "$check" >/dev/null 2>&1 && return 0
    fi
    ndie "$package is needed ($check failed); install it (Debian: apt-get install $package)"
}

# go_install_into DIR CGO TAGS LDFLAGS PACKAGE@VERSION...: `go install` outside any module (the pinned
# tags' own go.mod and go.sum decide every dependency).
go_install_into() {
    local dir=$1 cgo=$2 tags=$3 ldflags=$4
    shift 4
    local tmp
    tmp=$(mktemp -d "$BIN_DIR/build.XXXXXX")
    (cd "$tmp" && GOWORK=off GOFLAGS='' GOBIN=$tmp CGO_ENABLED=$cgo nice -n 10 \
        go install -trimpath -tags "$tags" -ldflags "$ldflags" "$@") || { rm -rf "$tmp"; return 1; }
    mkdir -p "$dir"
    mv -f "$tmp"/* "$dir"/
    rm -rf "$tmp"
}

build_kubelet() {
    [[ -x $KUBELET ]] && return 0
    build_module_binary kubelet "$KUBERNETES_VERSION" "$K8S_MODULE" ./kubelet "$(kubernetes_version_ldflags)"
}

build_containerd() {
    [[ -x $CONTAINERD && -x $CTR && -x $CONTAINERD_SHIM ]] && return 0
    nlog "building containerd $CONTAINERD_VERSION (a cold build takes minutes)"
    local start=$SECONDS pkg=github.com/containerd/containerd/v2 ldflags
    ldflags="-s -w -X $pkg/version.Version=$CONTAINERD_VERSION -X $pkg/version.Package=$pkg"
    # Upstream's Makefile: no btrfs snapshotter without its C headers; the shim static, without cgo.
    go_install_into "$CONTAINERD_DIR.tmp" 1 "no_btrfs urfave_cli_no_docs" "$ldflags" \
        "$pkg/cmd/containerd@$CONTAINERD_VERSION" "$pkg/cmd/ctr@$CONTAINERD_VERSION"
    go_install_into "$CONTAINERD_DIR.tmp" 0 "no_btrfs urfave_cli_no_docs no_grpc" "$ldflags" \
        "$pkg/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION"
    rm -rf "$CONTAINERD_DIR"
    mv "$CONTAINERD_DIR.tmp" "$CONTAINERD_DIR"
    nlog "built containerd in $((SECONDS - start))s"
}

build_runc() {
    [[ -x $RUNC ]] && return 0
    # The seccomp tag needs libseccomp (static, from Debian's libseccomp-dev): without it runc refuses any
    # container with a seccomp profile, and kubelet asks for RuntimeDefault.
    need_debian_package "command -v gcc" gcc
    need_debian_package "command -v pkg-config" pkg-config
    need_debian_package "pkg-config --exists libseccomp" libseccomp-dev
    nlog "building runc $RUNC_VERSION"
    local start=$SECONDS
    go_install_into "$(dirname "$RUNC")" 1 "seccomp urfave_cli_no_docs netgo osusergo" \
        "-s -w -X main.version=${RUNC_VERSION#v} -extldflags -static" \
        "github.com/opencontainers/runc@$RUNC_VERSION"
    nlog "built runc in $((SECONDS - start))s"
}

build_cni_plugins() {
    [[ -x $CNI_BIN_DIR/bridge && -x $CNI_BIN_DIR/host-local && -x $CNI_BIN_DIR/loopback ]] && return 0
    nlog "building CNI plugins $CNI_PLUGINS_VERSION"
    local start=$SECONDS pkg=github.com/containernetworking/plugins
    go_install_into "$CNI_BIN_DIR.tmp" 0 "" "-s -w -X $pkg/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION" \
        "$pkg/plugins/main/bridge@$CNI_PLUGINS_VERSION" "$pkg/plugins/main/loopback@$CNI_PLUGINS_VERSION" \
        "$pkg/plugins/ipam/host-local@$CNI_PLUGINS_VERSION"
    rm -rf "$CNI_BIN_DIR"
    mv "$CNI_BIN_DIR.tmp" "$CNI_BIN_DIR"
    nlog "built CNI plugins in $((SECONDS - start))s"
}

build_crictl() {
    [[ -x $CRICTL ]] && return 0
    nlog "building crictl $CRI_TOOLS_VERSION"
    local start=$SECONDS pkg=sigs.k8s.io/cri-tools
    go_install_into "$(dirname "$CRICTL")" 0 "" "-s -w -X $pkg/pkg/version.Version=$CRI_TOOLS_VERSION" \
        "$pkg/cmd/crictl@$CRI_TOOLS_VERSION"
    nlog "built crictl in $((SECONDS - start))s"
}

build_node() {
    command -v go >/dev/null || ndie "go is not installed (need Go >= 1.26 with access to the module proxy)"
    need_debian_package "command -v iptables" iptables
    need_debian_package "command -v ip" iproute2
    mkdir -p "$BIN_DIR"
    exec 7>"$BIN_DIR/.node-build.lock"
    flock 7
    build_cni_plugins
    build_runc
    build_containerd
    build_crictl
    build_kubelet
    flock -u 7
}

cmd_node_build() {
    build_node
    printf '%s=%s\n' KUBELET "$KUBELET" CONTAINERD "$CONTAINERD" CTR "$CTR" CONTAINERD_SHIM "$CONTAINERD_SHIM" \
        RUNC "$RUNC" CNI_BIN_DIR "$CNI_BIN_DIR" CRICTL "$CRICTL"
}

# ---------------------------------------------------------------- state

# node.env: the node's names, chosen once per state dir. Sourced by up, down and status.
new_node_env() {
    local id subnet third i
    id=$(openssl rand -hex 3)
    # A /24 for the pods that no route of this machine (another cluster's bridge included) covers yet.
    for ((i = 0; i < 64; i++)); do
        third=$((RANDOM % 256))
        subnet=10.88.$third
        ip -4 route show | grep -q "^$subnet\." || break
    done
    local ports
    read -r -a ports <<<"$(free_ports 2)"
    mkdir -p "$NODE_DIR"
    cat >"$NODE_DIR/node.env" <<EOF
NODE_ID=$id
NODE_NAME=pykoord-node-$id
NODE_CGROUP_ROOT=/pykoord-$id
NODE_BRIDGE=pkbr$id
NODE_SUBNET=$subnet.0/24
NODE_IP=$subnet.1
NODE_RUN_DIR=/run/pykoord-$id
KUBELET_PORT=${ports[0]}
KUBELET_HEALTHZ_PORT=${ports[1]}
EOF
}

load_node_env() {
    [[ -f $NODE_DIR/node.env ]] || return 1
    # shellcheck source=/dev/null
    source "$NODE_DIR/node.env"
    CONTAINERD_SOCK=$NODE_RUN_DIR/containerd.sock
}

ctr_node() { "$CTR" --address "$CONTAINERD_SOCK" -n k8s.io "$@"; }
crictl_node() { "$CRICTL" --runtime-endpoint "unix://$CONTAINERD_SOCK" --timeout 30s "$@"; }

# The hierarchies under which the node's cgroups live: the unified root (cgroup v2), or every v1 controller
# mount plus, on a hybrid host, the v2 one beside them (/sys/fs/cgroup/unified, where runc also puts each
# container).
cgroup_mounts() {
    if [[ $(stat -f -c %T /sys/fs/cgroup) == cgroup2fs ]]; then
        echo /sys/fs/cgroup
        return
    fi
    local dir
    for dir in /sys/fs/cgroup/*/; do
        dir=${dir%/}
        if [[ ! -L $dir && $(stat -f -c %T "$dir") == cgroup* ]]; then echo "$dir"; fi
    done
}

# ---------------------------------------------------------------- up

node_preflight() {
    local missing=()
    [[ $(id -u) == 0 ]] || ndie "a real node needs root (kubelet, containerd and runc manage cgroups, mounts, netns)"
    [[ -d /sys/fs/cgroup ]] || missing+=("no /sys/fs/cgroup")
    grep -qw overlay /proc/filesystems || missing+=("no overlay filesystem (containerd's overlayfs snapshotter)")
    [[ -e /proc/self/ns/net ]] || missing+=("no network namespaces")
    ip link add pkprobe$$ type bridge 2>/dev/null && ip link del pkprobe$$ || missing+=("cannot create a bridge")
    local mount
    if [[ $(stat -f -c %T /sys/fs/cgroup) != cgroup2fs ]]; then
        for mount in cpu cpuacct cpuset memory pids; do
            [[ -d /sys/fs/cgroup/$mount || -n $(ls -d /sys/fs/cgroup/*"$mount"* 2>/dev/null) ]] ||
                missing+=("cgroup v1 controller $mount is not mounted")
        done
    fi
    ((${#missing[@]} == 0)) || ndie "this machine cannot run containers: ${missing[*]}"
}

make_cgroup_root() {
    local mount dir
    while read -r mount; do
        dir=$mount$NODE_CGROUP_ROOT
        mkdir -p "$dir"
        # A new cpuset cgroup starts with no CPUs and no memory nodes: give it its parent's.
        if [[ -f $dir/cpuset.cpus && -z $(<"$dir/cpuset.cpus") ]]; then
            cat "$mount/cpuset.cpus" >"$dir/cpuset.cpus"
            cat "$mount/cpuset.mems" >"$dir/cpuset.mems"
        fi
    done < <(cgroup_mounts)
}

iptables_rules() { # iptables_rules -A|-D: the node's DNAT and forwarding rules
    local op=$1 comment="pykoord-node $NODE_ID"
    iptables -w 5 -t nat "$op" PREROUTING -i "$NODE_BRIDGE" -d 10.0.0.1/32 -p tcp --dport 443 \
        -m comment --comment "$comment" -j DNAT --to-destination "127.0.0.1:$APISERVER_PORT"
    iptables -w 5 "$op" FORWARD -i "$NODE_BRIDGE" ! -o "$NODE_BRIDGE" -m comment --comment "$comment" -j REJECT
}

make_network() {
    if ! ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
        ip link add "$NODE_BRIDGE" type bridge
        ip addr add "$NODE_IP/24" dev "$NODE_BRIDGE"
    fi
    ip link set "$NODE_BRIDGE" up
    # Replies from the API server on 127.0.0.1 go back out of the bridge (kube-proxy does the same for
    # node ports on localhost).
    sysctl -q -w "net.ipv4.conf.$NODE_BRIDGE.route_localnet=1"
    iptables_rules -D 2>/dev/null || true
    iptables_rules -A
    mkdir -p "$NODE_DIR/cni/net.d" "$NODE_DIR/cni/ipam"
    cat >"$NODE_DIR/cni/net.d/10-pykoord.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "pykoord-$NODE_ID",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NODE_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$NODE_SUBNET", "gateway": "$NODE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$NODE_DIR/cni/ipam"
      }
    }
  ]
}
EOF
}

# Whether this process may lower OOM scores (CAP_SYS_RESOURCE, capability 24). Some sandboxes drop it from
# the bounding set even for root; then nothing may go below containerd's own score (0): kubelet's -998 for
# sandboxes and -997 for Guaranteed pods are raised to 0 (containerd's restrict_oom_score_adj, meant for
# such environments), and kubelet leaves its own score at 0.
can_lower_oom_score() {
    local eff
    eff=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
    (((16#$eff >> 24) & 1))
}

write_containerd_config() {
    local pause_ref=$1 restrict_oom=false
    can_lower_oom_score || restrict_oom=true
    mkdir -p "$NODE_DIR/containerd" "$NODE_RUN_DIR"
    cat >"$NODE_DIR/containerd/config.toml" <<EOF
version = 3
root = "$NODE_DIR/containerd/root"
state = "$NODE_RUN_DIR/containerd"

[grpc]
  address = "$CONTAINERD_SOCK"

[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = "$NODE_DIR/containerd/opt"

  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "$pause_ref"

  [plugins.'io.containerd.cri.v1.runtime']
    restrict_oom_score_adj = $restrict_oom
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "$RUNC"
          Root = "$NODE_RUN_DIR/runc"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["$CNI_BIN_DIR"]
      conf_dir = "$NODE_DIR/cni/net.d"
      max_conf_num = 1

  # NRI on, on this node's own socket (koordlet's runtime hooks will connect to it).
  [plugins.'io.containerd.nri.v1.nri']
    disable = false
    socket_path = "$NODE_RUN_DIR/nri.sock"
EOF
}

start_containerd() {
    # The shim is found on PATH; everything else by absolute path in the config.
    PATH=$CONTAINERD_DIR:$PATH start_process containerd "$CONTAINERD" --config "$NODE_DIR/containerd/config.toml"
    local deadline=$((SECONDS + START_TIMEOUT))
    until "$CTR" --address "$CONTAINERD_SOCK" version >/dev/null 2>&1; do
        if ! pid_alive containerd || ((SECONDS >= deadline)); then
            tail -n 30 "$STATE_DIR/logs/containerd.log" >&2 || true
            return 1
        fi
        sleep 0.2
    done
    nlog "containerd $CONTAINERD_VERSION up at $CONTAINERD_SOCK"
}

# import_images NAME...: build (or take from the cache) and import the images; print NAME=REF lines.
import_images() {
    local built line name ref archive
    built=$(python3 "$REPO_ROOT/scripts/images.py" build "$@") || ndie "building images failed (scripts/images.py)"
    while read -r line; do
        [[ -n $line ]] || continue
        name=${line%%=*}
        ref=${line#*=}
        archive=${ref#* }
        ref=${ref%% *}
        if ! ctr_node images ls -q | grep -qxF "$ref"; then
            ctr_node images import --platform linux/amd64 "$archive" >&2 || ndie "ctr images import $archive failed"
        fi
        echo "$name=$ref"
    done <<<"$built"
}

write_kubelet_config() {
    local pki=$STATE_DIR/pki
    make_cert ca "node-$NODE_ID" "/O=system:nodes/CN=system:node:$NODE_NAME" \
        "keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
    mkdir -p "$NODE_DIR/kubelet" "$NODE_DIR/pod-logs"
    cat >"$NODE_DIR/kubelet.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: pykoord
  cluster:
    server: $SERVER
    certificate-authority: $pki/ca.crt
users:
- name: $NODE_NAME
  user:
    client-certificate: $pki/node-$NODE_ID.crt
    client-key: $pki/node-$NODE_ID.key
contexts:
- name: node
  context:
    cluster: pykoord
    user: $NODE_NAME
current-context: node
EOF
    # cgroupRoot keeps this node's pods apart from any other node on the machine: kubelet's kubepods is
    # <controller>/pykoord-<id>/kubepods. Eviction thresholds are low: the tests, not kubelet, decide
    # what is evicted. Image GC never runs (the images are imported, not pullable).
    cat >"$NODE_DIR/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: $NODE_CGROUP_ROOT
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $pki/ca.crt
authorization:
  mode: Webhook
podLogsDir: $NODE_DIR/pod-logs
resolvConf: /etc/resolv.conf
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
rotateCertificates: false
serverTLSBootstrap: false
nodeStatusReportFrequency: 10s
EOF
    can_lower_oom_score || echo "oomScoreAdj: 0" >>"$NODE_DIR/kubelet-config.yaml"
}

start_kubelet() {
    start_process kubelet "$KUBELET" \
        --config="$NODE_DIR/kubelet-config.yaml" \
        --kubeconfig="$NODE_DIR/kubelet.kubeconfig" \
        --root-dir="$NODE_DIR/kubelet" \
        --hostname-override="$NODE_NAME" \
        --node-ip="$NODE_IP" \
        --v=2
    wait_for kubelet "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz" || return 1
    local deadline=$((SECONDS + START_TIMEOUT)) ready=
    while ((SECONDS < deadline)); do
        pid_alive kubelet || break
        ready=$(kubectl_admin get node "$NODE_NAME" \
            -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true)
        [[ $ready == True ]] && { nlog "node $NODE_NAME Ready ($NODE_IP, kubelet port $KUBELET_PORT)"; return 0; }
        sleep 0.5
    done
    nlog "node $NODE_NAME not Ready after ${START_TIMEOUT}s; last lines of $STATE_DIR/logs/kubelet.log:"
    tail -n 40 "$STATE_DIR/logs/kubelet.log" >&2 || true
    return 1
}

cmd_node_up() {
    load_state
    ((${NODE:-0})) || ndie "the cluster in $STATE_DIR was started without --node (control-plane.sh up --node)"
    if node_is_up; then
        nlog "already up"
        echo "$NODE_NAME"
        return 0
    fi
    node_preflight
    build_node
    [[ -f $NODE_DIR/node.env ]] || new_node_env
    load_node_env
    local start=$SECONDS
    trap 'status=$?; if ((status != 0)); then stop_node_processes; fi' EXIT
    make_cgroup_root
    make_network
    local pause_ref
    pause_ref=$(python3 "$REPO_ROOT/scripts/images.py" build pause | sed -n 's/^pause=\([^ ]*\) .*/\1/p')
    [[ -n $pause_ref ]] || ndie "the pause image could not be built (scripts/images.py build pause)"
    write_containerd_config "$pause_ref"
    start_containerd || ndie "containerd failed to start"
    import_images pause >/dev/null
    write_kubelet_config
    start_kubelet || ndie "kubelet failed to start"
    trap - EXIT
    nlog "up in $((SECONDS - start))s"
    echo "$NODE_NAME"
}

node_is_up() {
    load_node_env || return 1
    pid_alive containerd && pid_alive kubelet || return 1
    curl -sf --max-time 2 "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz" >/dev/null
}

# ---------------------------------------------------------------- down

stop_node_processes() {
    stop_process kubelet
    if [[ -S $CONTAINERD_SOCK ]] && pid_alive containerd; then
        # Through CRI, so that containerd tears down what it set up: CNI (veths, IPs), netns, mounts.
        crictl_node rmp --all --force >/dev/null 2>&1 || nlog "warning: crictl rmp failed; killing what is left"
    fi
    stop_process containerd
    # What outlived them: shims of this containerd, processes in this node's cgroups.
    local pid
    for pid in $(grep -l -a -F -- "$CONTAINERD_SOCK" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
        if [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$BIN_DIR"/* ]]; then kill -KILL "$pid" 2>/dev/null || true; fi
    done
    local mount
    while read -r mount; do
        [[ -d $mount$NODE_CGROUP_ROOT ]] || continue
        find "$mount$NODE_CGROUP_ROOT" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u |
            while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done
    done < <(cgroup_mounts)
}

remove_mounts() { # every mount under the node's dirs, deepest first
    local target
    for _ in 1 2 3; do
        local targets=()
        while read -r target; do
            targets+=("$target")
        done < <(awk -v a="$NODE_DIR/" -v b="$NODE_RUN_DIR/" \
            'index($5, a) == 1 || index($5, b) == 1 || $5 == substr(b, 1, length(b) - 1) { print $5 }' \
            /proc/self/mountinfo | sort -r)
        ((${#targets[@]})) || return 0
        for target in "${targets[@]}"; do
            umount "$target" 2>/dev/null || umount -l "$target" 2>/dev/null || true
        done
    done
}

remove_cgroups() {
    local mount
    while read -r mount; do
        [[ -d $mount$NODE_CGROUP_ROOT ]] || continue
        find "$mount$NODE_CGROUP_ROOT" -depth -type d -exec rmdir {} + 2>/dev/null || true
        if [[ -d $mount$NODE_CGROUP_ROOT ]]; then nlog "warning: $mount$NODE_CGROUP_ROOT is still there"; fi
    done < <(cgroup_mounts)
}

cmd_node_down() {
    [[ -f $STATE_DIR/cluster.env ]] && load_state
    load_node_env || { nlog "no node in $STATE_DIR"; return 0; }
    stop_node_processes
    remove_mounts
    remove_cgroups
    iptables_rules -D 2>/dev/null || true
    ip link del "$NODE_BRIDGE" 2>/dev/null || true
    local link
    for link in /var/log/containers/*.log; do
        if [[ -L $link && $(readlink "$link") == "$NODE_DIR"/* ]]; then rm -f "$link"; fi
    done
    # A netns pin of a sandbox that CRI could not remove (/var/run/netns is containerd's, machine-wide).
    rm -rf "$NODE_RUN_DIR"
    rm -rf "$NODE_DIR"
    nlog "node $NODE_NAME down"
}

cmd_node_status() {
    [[ -f $STATE_DIR/cluster.env ]] && load_state
    if node_is_up; then echo "$NODE_NAME"; else nlog "not up"; exit 1; fi
}

node_main() {
    local cmd=${1:-}
    (($#)) && shift
    case $cmd in
    build) cmd_node_build ;;
    up) cmd_node_up ;;
    down) cmd_node_down ;;
    status) cmd_node_status ;;
    images) load_state; load_node_env || ndie "no node in $STATE_DIR"; import_images "$@" ;;
    *)
        sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
        exit 2
        ;;
    esac
}

node_main "$@"
