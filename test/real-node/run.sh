#!/usr/bin/env bash
# `npm run test:real-node` (root only; never part of `npm test`): the README's kind
# quickstart on a real single-node Kubernetes built on this machine from Debian's packages
# (containerd, runc, CNI plugins, buildah, debootstrap) and kubelet/kube-proxy/
# kube-controller-manager/kube-scheduler v1.36.2 built from source, with every image built
# here (nothing is pulled). Every packet stays on the machine, and every system change is
# put back at the end, also on failure. Facts behind each choice: docs/decisions/README.md
# ("The real-node run").
#
# Environment: REAL_NODE_KEEP=1 keeps the component logs of a passing run too (a failed
# run always keeps them); REAL_NODE_PREBUILT_IMAGES=<dir> loads image archives from an
# earlier run instead of building them (for work on the run itself, never in CI).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

[ "$(id -u)" = 0 ] || fail "needs root (containerd, the kubelet, iptables, mounts)"
command -v node >/dev/null && [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 24 ] ||
  fail "Node 24 must be on PATH (README: Requirements)"

K8S_VERSION=1.36.2
STORE=${XDG_DATA_HOME:-$HOME/.local/share}/kubebuilder-envtest/k8s/$K8S_VERSION-linux-amd64
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/proxy-operator-real-node
# Not proxy-operator-cp-*: the test harness reaps those as abandoned.
W=$(mktemp -d /tmp/proxy-operator-real-node.XXXXXX)
chmod 755 "$W"
LOGS=$W/logs
mkdir -p "$LOGS" "$CACHE"

# Addresses: all private, all on this machine.
POD_CIDR=10.88.0.0/24
POD_GW=10.88.0.1
SVC_CIDR=10.96.0.0/16
API_IP=10.99.0.1
API_VETH=po-api0
BRIDGE=cni0
NODE_NAME=po-node
ETCD_PORT=32379
API_PORT=6443
# The manifests pin Squid by digest (name:tag@sha256:...). The run builds its own Squid image
# (no registry), which has another digest: it is tagged with the name:tag alone, and
# quickstart.sh points the providers config at that tag (SQUID_PINNED is what dist/ names).
SQUID_PINNED=$(cd "$root" && node -e "import('./build/providers/kubernetes/config.js').then(m => console.log(m.KUBERNETES_DEFAULTS.image))" 2>/dev/null || true)
SQUID_IMAGE=${SQUID_PINNED%@*}
OPERATOR_IMAGE=proxy-operator:dev
PAUSE_IMAGE=registry.k8s.io/pause:3.10
# The image dist/redis-sample.yaml runs, exactly.
REDIS_IMAGE=$(sed -n 's/^ *image: \(redis:[^ ]*\)$/\1/p' "$root/dist/redis-sample.yaml" | head -1)
# The Dockerfile's FROM, exactly (docker.io/library/ is what containerd and buildah read it as).
BASE_IMAGE=$(sed -n 's/^FROM \([^ ]*\).*/\1/p' "$root/Dockerfile" | head -1)

KUBECTL="$STORE/kubectl --kubeconfig $W/admin.kubeconfig"
CTR="ctr --address $W/containerd/containerd.sock --namespace k8s.io"

declare -A PIDS=()

# start NAME CMD...: a component in the background, its output in $LOGS/NAME.log.
start() {
  local name=$1
  shift
  "$@" >"$LOGS/$name.log" 2>&1 &
  PIDS[$name]=$!
  log "   started $name (pid ${PIDS[$name]})"
}
stop() {
  local name=$1 pid=${PIDS[$1]:-}
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset "PIDS[$name]"
}

finish() {
  local rc=$?
  set +e
  end_step
  log "== cleaning up (exit status $rc)"
  isolation_report || rc=1
  teardown
  run_undo
  print_timings
  if [ $rc -ne 0 ] || [ "${REAL_NODE_KEEP:-}" = 1 ]; then
    log "component logs kept in $LOGS"
    # The logs are what a failed run leaves; the rest (rootfs, images, state) goes.
    find "$W" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} + 2>/dev/null
  else
    rm -rf "$W"
  fi
  remove_new_paths
  [ $rc -eq 0 ] && log "PASSED" || log "FAILED (see above; logs in $LOGS)"
  exit $rc
}
# Defined before the trap: a run that fails before its isolation step still reports (nothing).
isolation_report() {
  [ -f "$W/iptables.before" ] || return 0
  local leaked=0 line
  for ipt in iptables ip6tables; do
    while read -r line; do
      # -v -x -L: pkts bytes target ...; a non-zero packet count on a DROP is a leak stopped.
      local pkts
      pkts=$(awk '{print $1}' <<<"$line")
      if [ "$pkts" != 0 ]; then
        log "   isolation: $ipt rule stopped $pkts packet(s): $line"
        leaked=1
      fi
    done < <(for c in PO-REAL-NODE-FWD PO-REAL-NODE-OUT; do $ipt -v -x -n -L "$c" 2>/dev/null | awk 'NR>2'; done)
  done
  if [ $leaked = 1 ]; then
    log "   isolation: packets tried to leave the machine (they were dropped); failing the run"
    return 1
  fi
  log "   isolation: no packet tried to leave the machine"
}

# cluster.sh replaces this with the node's teardown once there is a node to tear down.
teardown() { :; }
trap finish EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------------------------------
step "preflight: packages"
need=()
for pair in containerd:containerd runc:runc buildah:buildah debootstrap:debootstrap \
  conntrack:conntrack iptables:iptables openssl:openssl ip:iproute2 dnsmasq:dnsmasq-base; do
  command -v "${pair%%:*}" >/dev/null || need+=("${pair#*:}")
done
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
if [ ${#need[@]} -gt 0 ]; then
  log "installing from Debian: ${need[*]}"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >"$LOGS/apt.log" 2>&1 ||
    fail "apt-get install ${need[*]} (log: $LOGS/apt.log)"
fi
[ -n "$SQUID_IMAGE" ] || fail "run 'npm run build' first (the Squid image name comes from build/providers/kubernetes/config.js)"

# ---------------------------------------------------------------------------------------
# Isolation before anything is built or started. Forwarded traffic may not leave through
# any interface but the bridge, host traffic to the node's private ranges may not leave,
# and DNS lookups of registry names are dropped (a pull attempt would send them). The
# counters of these rules are checked at the end: any packet on them fails the run.
step "isolation: rules that keep every packet on the machine"
for ipt in iptables ip6tables; do
  $ipt -S PO-REAL-NODE-FWD >/dev/null 2>&1 &&
    fail "$ipt chain PO-REAL-NODE-FWD exists: an earlier run was killed before its cleanup; restore the firewall first"
  $ipt-save >"$W/$ipt.before"
  undo "restore_firewall $ipt $W/$ipt.before"
done
for key in net.ipv4.ip_forward net.ipv4.conf.all.route_localnet kernel.panic kernel.panic_on_oops \
  vm.overcommit_memory net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables \
  net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established \
  net.netfilter.nf_conntrack_tcp_timeout_close_wait; do
  sysctl_save "$key"
done
uplinks=$(ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -vE "^(lo|$BRIDGE|veth.*|$API_VETH|po-api1)$" || true)
for ipt in iptables ip6tables; do
  $ipt -N PO-REAL-NODE-FWD
  $ipt -N PO-REAL-NODE-OUT
  $ipt -I FORWARD 1 -j PO-REAL-NODE-FWD
  $ipt -I OUTPUT 1 -j PO-REAL-NODE-OUT
  for up in $uplinks; do $ipt -A PO-REAL-NODE-FWD -o "$up" -j DROP; done
  $ipt -A PO-REAL-NODE-FWD -i "$BRIDGE" ! -o "$BRIDGE" -j DROP
  for name in '|06|docker|02|io|' '|08|registry|03|k8s|02|io|' '|04|quay|02|io|' '|03|gcr|02|io|' \
    '|04|ghcr|02|io|' '|06|docker|03|com|'; do
    for proto in udp tcp; do
      $ipt -A PO-REAL-NODE-OUT -p $proto --dport 53 -m string --algo bm --hex-string "$name" -j DROP
    done
  done
done
for up in $uplinks; do
  for cidr in 10.88.0.0/16 $SVC_CIDR 10.99.0.0/24; do iptables -A PO-REAL-NODE-OUT -o "$up" -d "$cidr" -j DROP; done
done
# Service IPs kube-proxy has not programmed (yet) are local: never routed out.
undo "ip route del local $SVC_CIDR dev lo"
ip route add local "$SVC_CIDR" dev lo
# The API server's address: the kubelet and the Pods reach it; dummy interfaces are not
# available here, a veth pair is.
undo "ip link del $API_VETH"
ip link add "$API_VETH" type veth peer name po-api1
ip addr add "$API_IP/32" dev "$API_VETH"
ip link set po-api1 up
ip link set "$API_VETH" up
log "   forward: DROP out of ${uplinks//$'\n'/,} and out of $BRIDGE to anything else; registry DNS dropped"


# ---------------------------------------------------------------------------------------
step "binaries: kube-apiserver, etcd, kubectl (control-plane:setup) and the node's, v$K8S_VERSION"
[ -x "$STORE/kube-apiserver" ] && [ -x "$STORE/etcd" ] && [ -x "$STORE/kubectl" ] ||
  (cd "$root" && npm run --silent control-plane:setup >/dev/null) || fail "control-plane binaries"
bash "$here/build-node-binaries.sh" "$STORE" 2>&1 | tee "$LOGS/node-build.log" >&2

# ---------------------------------------------------------------------------------------
if [ -n "${REAL_NODE_PREBUILT_IMAGES:-}" ]; then
  # A shortcut for working on the run itself: the archives of an earlier run's images.sh.
  step "images: prebuilt archives from $REAL_NODE_PREBUILT_IMAGES (not built)"
  mkdir -p "$W/images" && cp "$REAL_NODE_PREBUILT_IMAGES"/*.tar "$W/images/"
  qualify() { case $1 in */*/*) echo "$1" ;; */*) case ${1%%/*} in *.* | localhost) echo "$1" ;; *) echo "docker.io/$1" ;; esac ;; *) echo "docker.io/library/$1" ;; esac; }
  BASE_REF=$(qualify "$BASE_IMAGE") SQUID_REF=$(qualify "$SQUID_IMAGE") PAUSE_REF=$(qualify "$PAUSE_IMAGE") REDIS_REF=$(qualify "$REDIS_IMAGE")
else
  . "$here/images.sh"
fi

# ---------------------------------------------------------------------------------------
. "$here/cluster.sh"

# ---------------------------------------------------------------------------------------
. "$here/quickstart.sh"
end_step
