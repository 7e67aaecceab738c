# Sourced by run.sh: a single-node cluster from the store's binaries. etcd and the API
# server as in the test harness, but the API server on a veth address the Pods can reach;
# a private containerd (its own root, state and socket in the work folder); the CNI bridge;
# kube-controller-manager, kube-scheduler, kube-proxy (iptables) and the kubelet.

step "cluster: certificates and credentials"
pki=$W/pki
mkdir -p "$pki"
(
  cd "$pki"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 1 -subj /CN=proxy-operator-real-node-ca 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj /CN=kube-apiserver 2>/dev/null
  printf 'subjectAltName=IP:%s,IP:10.96.0.1,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n' "$API_IP" >san.ext
  openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 1 -extfile san.ext 2>/dev/null
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
)
ADMIN_TOKEN=$(openssl rand -hex 24)
# One admin identity (system:masters) for the components and the test: a single-node test
# cluster, not a hardened one.
printf '%s,admin,admin,system:masters\n' "$ADMIN_TOKEN" >"$pki/tokens.csv"
cat >"$W/admin.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: node, cluster: {server: "https://$API_IP:$API_PORT", certificate-authority: "$pki/ca.crt"}}]
users: [{name: admin, user: {token: "$ADMIN_TOKEN"}}]
contexts: [{name: node, context: {cluster: node, user: admin}}]
current-context: node
EOF

# Every request of the operator's ServiceAccounts is audited (metadata only: no bodies, no
# Secret values), so the run can fail on any call RBAC refused them (quickstart.sh).
cat >"$pki/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    users:
      - system:serviceaccount:proxy-operator-system:proxy-operator
      - system:serviceaccount:proxy-operator-system:proxy-operator-discovery
      - system:serviceaccount:proxy-operator-system:proxy-operator-gateway
  - level: None
EOF
AUDIT_LOG=$LOGS/audit.log

step "cluster: etcd and kube-apiserver on $API_IP"
start etcd "$STORE/etcd" --data-dir "$W/etcd" --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
  --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
  --initial-cluster "default=http://127.0.0.1:$((ETCD_PORT + 1))" --unsafe-no-fsync
start kube-apiserver "$STORE/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address "$API_IP" --advertise-address "$API_IP" --secure-port "$API_PORT" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" --token-auth-file "$pki/tokens.csv" \
  --service-cluster-ip-range "$SVC_CIDR" --service-account-issuer https://kubernetes.default.svc \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --authorization-mode Node,RBAC --allow-privileged=true --cert-dir "$W/apiserver" \
  --kubelet-preferred-address-types InternalIP --endpoint-reconciler-type lease \
  --audit-policy-file "$pki/audit-policy.yaml" --audit-log-path "$AUDIT_LOG"
wait_for "API server ready" 120 $KUBECTL get --raw /readyz || fail "the API server did not become ready"

step "cluster: containerd (private: root, state, socket under $W)"
mkdir -p "$W/containerd/certs.d" "$W/cni/net.d"
# Every registry, and any other, resolves to a closed local port: a missing image fails on
# the node instead of being fetched.
for reg in _default docker.io registry-1.docker.io registry.k8s.io quay.io gcr.io ghcr.io; do
  mkdir -p "$W/containerd/certs.d/$reg"
  printf 'server = "http://127.0.0.1:9"\n[host."http://127.0.0.1:9"]\n  capabilities = ["pull", "resolve"]\n' \
    >"$W/containerd/certs.d/$reg/hosts.toml"
done
cat >"$W/containerd/config.toml" <<EOF
version = 2
root = "$W/containerd/root"
state = "$W/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$W/containerd/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$W/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_REF"
  # Root here lacks CAP_SYS_RESOURCE: a negative oom_score_adj is refused and every sandbox
  # would fail with "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$W/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$W/containerd/certs.d"
EOF
cat >"$W/cni/net.d/10-proxy-operator.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "proxy-operator-real-node",
  "plugins": [
    {
      "type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$POD_GW"}]],
               "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$W/cni/ipam"}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
# Paths the runtime writes outside the work folder, removed afterwards if this run made them.
for d in /run/containerd /var/lib/cni /etc/cni /run/netns /var/lib/kubelet /var/log/containers /var/log/pods; do
  new_path "$d"
done
start containerd containerd --config "$W/containerd/config.toml" --log-level info
wait_for "containerd serving" 30 $CTR version || fail "containerd did not start"
for tar in "$W"/images/*.tar; do
  $CTR images import "$tar" >>"$LOGS/image-import.log" 2>&1 || fail "importing $tar (log: $LOGS/image-import.log)"
done
log "   images on the node: $($CTR images ls -q | grep -v '^sha256' | tr '\n' ' ')"

step "cluster: kube-controller-manager and kube-scheduler"
start kube-controller-manager "$STORE/kube-controller-manager" --kubeconfig "$W/admin.kubeconfig" \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
  --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
  --use-service-account-credentials=true --leader-elect=false --bind-address 127.0.0.1 --secure-port 10257 \
  --service-cluster-ip-range "$SVC_CIDR" --allocate-node-cidrs=false --cert-dir "$W/kcm"
start kube-scheduler "$STORE/kube-scheduler" --kubeconfig "$W/admin.kubeconfig" --leader-elect=false \
  --bind-address 127.0.0.1 --secure-port 10259 --cert-dir "$W/scheduler"

step "cluster: kube-proxy (iptables) and the kubelet"
cat >"$W/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$W/admin.kubeconfig"}
mode: iptables
clusterCIDR: "$POD_CIDR"
hostnameOverride: $NODE_NAME
bindAddress: 127.0.0.1
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# Leave the machine's conntrack sysctls alone.
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
EOF
undo "$STORE/kube-proxy --cleanup"
start kube-proxy "$STORE/kube-proxy" --config "$W/kube-proxy.yaml"
# The node's resolver for Pods that do not use the cluster DNS: a loopback address, so
# their lookups go nowhere.
printf 'nameserver 127.0.0.1\n' >"$W/resolv.conf"
# Cluster DNS for Service names, node-local and closed: dnsmasq on the bridge's gateway
# address answers <svc>.<ns>.svc.cluster.local from a hosts file kept in step with the
# Services, NXDOMAIN for anything else (--no-resolv, --local=/#/: it forwards no query).
undo "ip link del $BRIDGE"
ip link add "$BRIDGE" type bridge
ip addr add "$POD_GW/${POD_CIDR#*/}" dev "$BRIDGE"
ip link set "$BRIDGE" up
mkdir -p "$W/dns"
: >"$W/dns/services"
start dnsmasq dnsmasq --keep-in-foreground --no-resolv --no-hosts --no-poll --addn-hosts="$W/dns/services" \
  --listen-address="$POD_GW" --bind-interfaces --except-interface=lo --pid-file="$W/dns/dnsmasq.pid" \
  --log-facility=- --log-queries --user=root --domain-needed --local=/#/
sync_service_names() {
  while sleep 1; do
    $KUBECTL get svc -A -o jsonpath='{range .items[*]}{.spec.clusterIP} {.metadata.name}.{.metadata.namespace}.svc.cluster.local{"\n"}{end}' \
      2>/dev/null | grep -v '^None ' >"$W/dns/services.next" || continue
    cmp -s "$W/dns/services.next" "$W/dns/services" && continue
    mv "$W/dns/services.next" "$W/dns/services" && kill -HUP "${PIDS[dnsmasq]}"
  done
}
start service-names sync_service_names
cat >"$W/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$W/containerd/containerd.sock
address: $API_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
resolvConf: $W/resolv.conf
clusterDNS: [$POD_GW]
clusterDomain: cluster.local
podLogsDir: $W/pod-logs
failSwapOn: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
serializeImagePulls: false
EOF
for h in /sys/fs/cgroup/*/; do
  [ -d "$h" ] || continue
  for g in kubepods k8s.io; do
    [ -e "$h$g" ] || undo "[ ! -d $h$g ] || find $h$g -depth -type d -exec rmdir {} +"
  done
done
undo "! mountpoint -q $W/kubelet || umount -R $W/kubelet"
start kubelet "$STORE/kubelet" --config "$W/kubelet.yaml" --kubeconfig "$W/admin.kubeconfig" \
  --root-dir "$W/kubelet" --cert-dir "$W/kubelet-pki" --hostname-override "$NODE_NAME" --node-ip "$API_IP" -v 1
wait_for "node $NODE_NAME Ready" 120 sh -c "$KUBECTL get node $NODE_NAME -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True" ||
  fail "the node did not become Ready (log: $LOGS/kubelet.log)"
wait_for "kube-proxy programmed the kubernetes Service" 60 sh -c "iptables-save -t nat | grep -q 'default/kubernetes:https'" ||
  fail "kube-proxy did not program the kubernetes Service (log: $LOGS/kube-proxy.log)"
wait_for "the default ServiceAccount" 60 $KUBECTL -n default get serviceaccount default ||
  fail "no default ServiceAccount (log: $LOGS/kube-controller-manager.log)"

# Undo of the node, run before the journal (see run.sh): Pods torn down by the kubelet
# itself (so CNI releases their addresses and veths), then the components, then whatever
# the runtime left (tasks, network namespaces, mounts).
teardown() {
  if [ -n "${PIDS[kubelet]:-}" ] && [ -n "${PIDS[kube-apiserver]:-}" ]; then
    log "   deleting every workload and waiting for the kubelet to stop their Pods"
    $KUBECTL delete deploy,rs,ds,sts,job --all -A --wait=false >/dev/null 2>&1
    $KUBECTL delete pods --all -A --grace-period=1 --wait=false >/dev/null 2>&1
    for _ in $(seq 1 40); do
      [ -z "$($CTR tasks ls -q 2>/dev/null)" ] && break
      sleep 1
    done
  fi
  for c in kubelet kube-proxy kube-scheduler kube-controller-manager service-names dnsmasq; do stop "$c"; done
  if [ -n "${PIDS[containerd]:-}" ]; then
    local t
    for t in $($CTR tasks ls -q 2>/dev/null); do $CTR tasks kill -s SIGKILL "$t" >/dev/null 2>&1; done
    sleep 1
    for t in $($CTR tasks ls -q 2>/dev/null); do $CTR tasks rm -f "$t" >/dev/null 2>&1; done
  fi
  stop containerd
  # The shims this run's containerd started (they outlive it by design): by their own PIDs.
  local pid
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $W/containerd/containerd.sock" || true); do
    kill "$pid" 2>/dev/null
  done
  stop kube-apiserver
  stop etcd
  local m
  for m in $(awk '{print $2}' /proc/mounts | grep -E "^($W/|/run/netns/cni-|/run/containerd/)" | sort -r); do
    umount -l "$m" 2>/dev/null
  done
  rm -f /run/netns/cni-* 2>/dev/null
  if mountpoint -q /run/netns && [ -z "$(ls -A /run/netns 2>/dev/null)" ]; then umount /run/netns 2>/dev/null; fi
  # Log symlinks the kubelet made for this run's containers.
  find /var/log/containers -maxdepth 1 -lname "$W/*" -delete 2>/dev/null
  ip -o link show type veth 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep '^veth' |
    while read -r v; do [ "$(cat /sys/class/net/$v/master/ifindex 2>/dev/null)" = "$(cat /sys/class/net/$BRIDGE/ifindex 2>/dev/null)" ] && ip link del "$v"; done
  true
}
