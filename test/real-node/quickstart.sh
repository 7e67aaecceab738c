# Sourced by run.sh: the README's "Quickstart on kind" on this node. Substituted: cluster
# creation (cluster.sh instead of `kind create cluster`) and image loading (images.sh and
# `ctr images import` instead of `docker build` + `kind load`). The samples are not applied
# as they are: their kubernetes Proxy probes a public URL, and nothing here may leave the
# machine; the run's Proxies are the same kinds with in-cluster probe targets.

pods_ready() { # NAMESPACE SELECTOR
  $KUBECTL -n "$1" wait pod -l "$2" --for=condition=Ready --timeout=2s
}
px_phase() { $KUBECTL get px "$1" -o jsonpath='{.status.phase}'; }
px_ready() { [ "$(px_phase "$1")" = Ready ]; }
operator_logs() { $KUBECTL -n proxy-operator-system logs deploy/proxy-operator --tail=-1 2>/dev/null; }
# Everything the operator logged, across its Pods (kept with the component logs).
save_operator_logs() {
  local p
  for p in $($KUBECTL -n proxy-operator-system get pods -o name 2>/dev/null); do
    $KUBECTL -n proxy-operator-system logs "$p" >"$LOGS/operator-${p#pod/}.log" 2>&1
  done
}

# What a failed discovery flow needs to be understood from CI's output alone: the cluster
# DNS's last queries and the leased Squid Pod's own log.
show_proxy_side() {
  local pod
  log "   cluster DNS (dnsmasq), last queries:"
  grep -E 'query|reply|config|cached' "$LOGS/dnsmasq.log" 2>/dev/null | tail -15 | sed 's/^/     /' >&2
  pod=$($KUBECTL get px proxy-kubernetes -o jsonpath='{.status.providerID}' 2>/dev/null)
  [ -n "$pod" ] || return 0
  log "   Squid Pod $pod, last lines:"
  $KUBECTL -n "${pod%%/*}" logs "${pod#*/}" --tail=15 2>&1 | sed 's/^/     /' >&2
}

# Requests of the operator's ServiceAccounts that RBAC refused (the API server audits them:
# cluster.sh), but for this run's own deliberate attempts (kubectl's user agent).
forbidden_calls() {
  node -e '
    for (const line of require("fs").readFileSync(process.argv[1], "utf8").split("\n")) {
      if (!line) continue;
      const e = JSON.parse(line), o = e.objectRef ?? {};
      if (e.responseStatus?.code === 403 && !/^kubectl/.test(e.userAgent ?? ""))
        console.log(`${e.user.username} ${e.verb} ${o.resource}${o.subresource ? "/" + o.subresource : ""} ${o.namespace ?? "*"}/${o.name ?? ""} (${e.userAgent})`);
    }' "$AUDIT_LOG"
}
# The ServiceAccounts whose tokens made at least one request.
accounts_used() {
  node -e '
    const seen = new Set();
    for (const line of require("fs").readFileSync(process.argv[1], "utf8").split("\n"))
      if (line && !/^kubectl/.test(JSON.parse(line).userAgent ?? "")) seen.add(JSON.parse(line).user.username);
    console.log([...seen].sort().join(" "));' "$AUDIT_LOG"
}
check_no_forbidden_calls() { # WHEN
  local refused
  refused=$(forbidden_calls)
  [ -z "$refused" ] || { save_operator_logs; fail "RBAC refused the operator's own requests ($1):"$'\n'"$refused"; }
  log "   no request of the operator's accounts refused ($1; audited: $(wc -l <"$AUDIT_LOG") requests)"
}

step "quickstart: kubectl apply -k dist/ and rollout status"
$KUBECTL apply -k "$root/dist/" >"$LOGS/apply.log" 2>&1 || fail "kubectl apply -k dist/ (log: $LOGS/apply.log)"
# As the README: the API is closed by default and the Pod mounts this Secret (it waits for it).
DISCOVERY_TOKEN=$(openssl rand -hex 24)
$KUBECTL -n proxy-operator-system create secret generic proxy-operator-discovery-tokens \
  --from-literal=tokens="real-node: $DISCOVERY_TOKEN" >/dev/null || fail "creating the discovery tokens Secret"
$KUBECTL -n proxy-operator-system rollout status deploy/proxy-operator --timeout=180s >&2 ||
  { save_operator_logs; fail "rollout status"; }
$KUBECTL label namespace default crawl.example.com/proxy-client=true --overwrite >/dev/null
for ns in proxy-operator-system proxy-operator-proxies; do
  [ "$($KUBECTL get namespace $ns -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}')" = restricted ] ||
    fail "namespace $ns does not enforce the Pod Security restricted profile"
done

step "quickstart: an in-cluster target, a Squid Pod for the External Proxy, the crawler script"
squid_conf=$(cd "$root" && node -e "import('./build/providers/kubernetes/squid-config.js').then(m => process.stdout.write(m.squidConfig({ port: 3128, clients: ['$POD_CIDR'] })))")
$KUBECTL create configmap crawler --from-file=crawler.mjs="$here/crawler.mjs" >/dev/null
$KUBECTL apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: target, labels: {app: target}}
spec:
  containers:
    - name: http
      image: $BASE_REF
      imagePullPolicy: IfNotPresent
      command: [node, -e, "require('http').createServer((q, s) => { if (q.url === '/generate_204') { s.writeHead(204); return s.end(); } s.setHeader('x-peer', q.socket.remoteAddress); s.end('hello from the in-cluster target'); }).listen(8080)"]
      ports: [{containerPort: 8080}]
      readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: target}
spec:
  selector: {app: target}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: external-squid, labels: {app: external-squid}}
spec:
  containers:
    - name: squid
      image: $SQUID_REF
      imagePullPolicy: IfNotPresent
      command: [/bin/sh, -c, 'mkdir -p /tmp/squid && printf "%s" "\$SQUID_CONF" > /tmp/squid/squid.conf && exec squid -N -d 1 -f /tmp/squid/squid.conf']
      env: [{name: SQUID_CONF, value: $(node -e 'process.stdout.write(JSON.stringify(process.argv[1]))' "$squid_conf")}]
      readinessProbe: {tcpSocket: {port: 3128}, periodSeconds: 1}
EOF
wait_for "target and external-squid Pods Ready" 90 sh -c "$KUBECTL wait pod target external-squid --for=condition=Ready --timeout=2s" ||
  fail "target/external-squid Pods (kubectl describe below)"$'\n'"$($KUBECTL describe pod target external-squid | tail -30)"
TARGET_POD_IP=$($KUBECTL get pod target -o jsonpath='{.status.podIP}')
TARGET_SVC_IP=$($KUBECTL get svc target -o jsonpath='{.spec.clusterIP}')
EXTERNAL_IP=$($KUBECTL get pod external-squid -o jsonpath='{.status.podIP}')
DISCOVERY_IP=$($KUBECTL -n proxy-operator-system get svc proxy-operator-discovery -o jsonpath='{.spec.clusterIP}')
PROBE_URL=http://$TARGET_POD_IP:8080/generate_204
log "   target $TARGET_POD_IP (Service $TARGET_SVC_IP), External Squid $EXTERNAL_IP, discovery Service $DISCOVERY_IP"

# Squid Pods refuse every in-cluster destination by default; the probe target is a Pod, so the
# shipped kubernetes provider allows it by explicit configuration (docs/security.md). The
# shipped image is pinned by digest; this node has the run's own build under the tag alone
# (run.sh), so the providers config names that (an SRE's mirror is overridden the same way).
grep -qF "image: $SQUID_PINNED" <($KUBECTL -n proxy-operator-system get configmap proxy-operator-providers -o jsonpath='{.data.providers\.yaml}') ||
  fail "the shipped providers config does not name the pinned Squid image $SQUID_PINNED"
$KUBECTL -n proxy-operator-system get configmap proxy-operator-providers -o jsonpath='{.data.providers\.yaml}' |
  sed "0,/      namespace: proxy-operator-proxies/s//      namespace: proxy-operator-proxies\n      allowedDestinations: [$TARGET_POD_IP\/32]/" |
  sed "s#image: ${SQUID_PINNED}\$#image: ${SQUID_IMAGE}#" >"$W/providers-allowed.yaml"
grep -q "allowedDestinations: \[$TARGET_POD_IP/32\]" "$W/providers-allowed.yaml" || fail "could not allow the probe target in providers.yaml"
grep -qxF "      image: $SQUID_IMAGE" "$W/providers-allowed.yaml" || fail "could not point providers.yaml at the run's Squid image $SQUID_IMAGE"
$KUBECTL -n proxy-operator-system create configmap proxy-operator-providers --from-file=providers.yaml="$W/providers-allowed.yaml" \
  --dry-run=client -o yaml | $KUBECTL apply -f - >/dev/null 2>&1
$KUBECTL -n proxy-operator-system rollout restart deploy/proxy-operator >/dev/null
$KUBECTL -n proxy-operator-system rollout status deploy/proxy-operator --timeout=120s >&2 || fail "rollout status after allowing the probe target"

MAX_LEASES=4
proxy_manifest() { # NAME [provider]
  cat <<EOF
apiVersion: crawl.example.com/v1alpha1
kind: Proxy
metadata: {name: $1}
spec:
  mode: Managed
  provider: kubernetes
  maxLeases: $MAX_LEASES
  attributes: {run: real-node}
  healthCheck: {probeURL: "$PROBE_URL", expectedStatusCodes: [204], intervalSeconds: 5, timeoutSeconds: 3}
EOF
}

step "quickstart: a kubernetes-provider Proxy and an External one become Ready (probes across the Pod network)"
proxy_manifest proxy-kubernetes | $KUBECTL apply -f - >/dev/null
$KUBECTL apply -f - >/dev/null <<EOF
apiVersion: crawl.example.com/v1alpha1
kind: Proxy
metadata: {name: proxy-external}
spec:
  mode: External
  endpoint: {host: "$EXTERNAL_IP", port: 3128}
  attributes: {run: real-node-external}
  healthCheck: {probeURL: "$PROBE_URL", expectedStatusCodes: [204], intervalSeconds: 5, timeoutSeconds: 3}
EOF
wait_for "proxy-kubernetes Ready" 120 px_ready proxy-kubernetes ||
  { save_operator_logs; fail "proxy-kubernetes is $(px_phase proxy-kubernetes): $($KUBECTL get px proxy-kubernetes -o jsonpath='{.status.conditions}')"; }
wait_for "proxy-external Ready" 60 px_ready proxy-external ||
  { save_operator_logs; fail "proxy-external is $(px_phase proxy-external): $($KUBECTL get px proxy-external -o jsonpath='{.status.conditions}')"; }
$KUBECTL get px >&2

# run_crawler NAME ARGS...: the crawler script in a Pod of the labelled namespace; waits for it.
run_crawler() {
  local name=$1 limit=$2
  shift 2
  local args
  args=$(node -e 'process.stdout.write(JSON.stringify(process.argv.slice(1)))' "$@")
  $KUBECTL apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $name}
spec:
  restartPolicy: Never
  containers:
    - name: crawler
      image: $BASE_REF
      imagePullPolicy: IfNotPresent
      command: [node, /crawler/crawler.mjs]
      args: $args
      env:
        - {name: DISCOVERY, value: "http://proxy-operator-discovery.proxy-operator-system:8090"}
        - {name: DISCOVERY_TOKEN, value: "$DISCOVERY_TOKEN"}
        - {name: TARGET, value: "http://$TARGET_POD_IP:8080/"}
        - {name: INSIDE, value: "http://$TARGET_SVC_IP/ http://target.default.svc.cluster.local/ http://$DISCOVERY_IP:8090/healthz http://169.254.169.254/latest/meta-data/"}
        - {name: PROXY, value: "default/proxy-kubernetes"}
        - {name: MAX_LEASES, value: "$MAX_LEASES"}
        - {name: GATEWAY, value: "proxy-operator-gateway.proxy-operator-system:8888"}
        - {name: EXIT_IP, value: "${EXIT_IP:-}"}
        - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
      volumeMounts: [{name: script, mountPath: /crawler}]
  volumes: [{name: script, configMap: {name: crawler}}]
EOF
  [ "$limit" = 0 ] && return 0
  crawler_wait "$name" "$limit"
}
crawler_wait() {
  local name=$1 limit=$2 phase
  wait_for "crawler $name finished" "$limit" sh -c "$KUBECTL get pod $name -o jsonpath='{.status.phase}' | grep -qE 'Succeeded|Failed'" || true
  $KUBECTL logs "$name" >"$LOGS/crawler-$name.log" 2>&1
  phase=$($KUBECTL get pod "$name" -o jsonpath='{.status.phase}')
  sed 's/^/     /' "$LOGS/crawler-$name.log" | tail -12 >&2
  [ "$phase" = Succeeded ]
}

step "quickstart: discovery through its Service: list, lease, fetch through the leased Squid Pod (407 without its credentials, 403 to any address inside), report, release"
run_crawler crawler-quickstart 180 quickstart || { save_operator_logs; show_proxy_side; fail "the discovery flow (log: $LOGS/crawler-crawler-quickstart.log)"; }

# gateway_check NAME: a crawler Pod that has only a proxy URL (the gateway's Service, a session,
# the attribute run=real-node, the token) fetches the in-cluster target; the target must see the
# kubernetes Proxy's Squid Pod as the client. The namespace carries the gateway-client label the
# NetworkPolicy admits. That policy is not asserted: the bridge CNI here does not enforce
# NetworkPolicy (docs/deploying.md), so an unlabelled namespace would get through as well.
gateway_check() {
  EXIT_IP=$($KUBECTL get px proxy-kubernetes -o jsonpath='{.status.ip}')
  [ -n "$EXIT_IP" ] || fail "proxy-kubernetes has no status.ip"
  $KUBECTL label namespace default crawl.example.com/gateway-client=true --overwrite >/dev/null
  run_crawler "$1" 120 gateway || { save_operator_logs; show_proxy_side; fail "the gateway flow (log: $LOGS/crawler-$1.log)"; }
}

step "the gateway in the operator Pod (dist/operator.yaml): a crawler Pod fetches through its Service with only a proxy URL, out of the fleet's Squid Pod"
gateway_check crawler-gateway

step "a deleted Proxy's Squid Pod goes promptly, and its deletion is logged once"
proxy_manifest proxy-deleted | $KUBECTL apply -f - >/dev/null
wait_for "proxy-deleted Ready" 120 px_ready proxy-deleted || fail "proxy-deleted did not become Ready"
deleted_pod=$($KUBECTL get px proxy-deleted -o jsonpath='{.status.providerID}')
t0=$SECONDS
$KUBECTL delete px proxy-deleted --timeout=60s >/dev/null || fail "deleting proxy-deleted"
took=$((SECONDS - t0))
$KUBECTL -n "${deleted_pod%%/*}" get pod "${deleted_pod#*/}" >/dev/null 2>&1 && fail "Pod $deleted_pod still exists after its Proxy was deleted"
log "   Proxy and its Pod $deleted_pod gone in ${took}s"
[ "$took" -le 15 ] || fail "deleting a Ready Proxy took ${took}s (Squid's shutdown must fit the Pod's grace)"
deletions=$(operator_logs | grep -c "\"providerID\":\"$deleted_pod\".*proxy pod deletion requested\|proxy pod deletion requested.*\"providerID\":\"$deleted_pod\"" || true)
[ "$deletions" = 1 ] || fail "the deletion of $deleted_pod was logged $deletions times (want once)"

step "a force-deleted operator Pod is replaced; the fleet stays Ready"
old_pod=$($KUBECTL -n proxy-operator-system get pods -l app.kubernetes.io/name=proxy-operator -o jsonpath='{.items[0].metadata.name}')
$KUBECTL -n proxy-operator-system delete pod "$old_pod" --force --grace-period=0 >/dev/null 2>&1
t0=$SECONDS
not_ready=0
while [ $((SECONDS - t0)) -lt 60 ]; do
  for px in proxy-kubernetes proxy-external; do px_ready "$px" || not_ready=$((not_ready + 1)); done
  new_ready=$($KUBECTL -n proxy-operator-system get pods -l app.kubernetes.io/name=proxy-operator \
    -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -v "^$old_pod=" | grep -c '=True' || true)
  [ "$new_ready" -ge 1 ] && [ -z "${replaced_in:-}" ] && replaced_in=$((SECONDS - t0))
  [ -n "${replaced_in:-}" ] && [ $((SECONDS - t0)) -ge $((replaced_in + 15)) ] && break
  sleep 1
done
[ -n "${replaced_in:-}" ] || { save_operator_logs; fail "no replacement operator Pod became Ready within 60s"; }
log "   replacement Ready ${replaced_in}s after the force-delete"
[ "$not_ready" = 0 ] || fail "a Proxy left Ready $not_ready time(s) while the operator Pod was replaced"

step "a Squid Pod whose image cannot be pulled says so in its Proxy's Provisioned condition, and is replaced past its start bound"
# The README's way to change providers: edit the ConfigMap, then rollout restart. The image
# is on no registry this node can reach (and a pull of it stays on loopback).
$KUBECTL -n proxy-operator-system get configmap proxy-operator-providers -o jsonpath='{.data.providers\.yaml}' >"$W/providers.yaml"
printf '%s\n' '  - name: kubernetes-unpullable' '    type: kubernetes' \
  '    kubernetes: {namespace: proxy-operator-proxies, image: "localhost:9/no-such-squid:1", startTimeoutSeconds: 20}' \
  >>"$W/providers.yaml"
$KUBECTL -n proxy-operator-system create configmap proxy-operator-providers --from-file=providers.yaml="$W/providers.yaml" \
  --dry-run=client -o yaml | $KUBECTL apply -f - >/dev/null 2>&1
$KUBECTL -n proxy-operator-system rollout restart deploy/proxy-operator >/dev/null
$KUBECTL -n proxy-operator-system rollout status deploy/proxy-operator --timeout=120s >&2 || fail "rollout status after the providers change"
proxy_manifest proxy-unpullable | sed 's/provider: kubernetes/provider: kubernetes-unpullable/' | $KUBECTL apply -f - >/dev/null
provisioned() { $KUBECTL get px "$1" -o jsonpath='{range .status.conditions[?(@.type=="Provisioned")]}{.reason}: {.message}{end}'; }
wait_for "proxy-unpullable: Provisioned=False InstanceNotStarting with the kubelet's reason" 90 \
  sh -c "$KUBECTL get px proxy-unpullable -o jsonpath='{.status.conditions[?(@.type==\"Provisioned\")].message}' | grep -qE 'ErrImagePull|ImagePullBackOff'" ||
  { save_operator_logs; fail "proxy-unpullable's Provisioned condition hides the pull failure: $(provisioned proxy-unpullable)"; }
log "   $(provisioned proxy-unpullable | cut -c1-240)"
$KUBECTL get events --field-selector involvedObject.name=proxy-unpullable,reason=InstanceNotStarting -o name | grep -q . ||
  fail "no InstanceNotStarting Event on proxy-unpullable"
# Past its start bound the Pod is treated like an instance that never boots: replaced.
wait_for "proxy-unpullable's Pod replaced after its 20 s start bound" 60 \
  sh -c "$KUBECTL get events --field-selector involvedObject.name=proxy-unpullable,reason=Replacing -o jsonpath='{.items[*].message}' | grep -q 'not started within 20 s'" ||
  { save_operator_logs; fail "proxy-unpullable was not replaced after its start bound: $(provisioned proxy-unpullable)"; }
$KUBECTL delete px proxy-unpullable --timeout=60s >/dev/null || fail "deleting proxy-unpullable"

step "the shared lease book, as docs/redis.md deploys it: Redis, the controller, 2 discovery replicas"
# A replacement of the only operator Pod forgets an in-memory book (every lease dropped, then
# up to maxLeases granted again beside the old holders): the fix is the shared book. As the
# docs say: dist/redis-sample.yaml and dist/operator-redis.yaml instead of dist/operator.yaml.
# Its controller Deployment has another selector (component=controller): the old one goes.
$KUBECTL -n proxy-operator-system delete deploy proxy-operator --wait=true --timeout=60s >/dev/null ||
  fail "deleting the single-process Deployment"
# As docs/redis.md: the password Redis requires and the operator reads, in a Secret only.
$KUBECTL -n proxy-operator-system create secret generic proxy-operator-redis \
  --from-literal=password="$(openssl rand -hex 24)" >/dev/null || fail "creating the Redis password Secret"
$KUBECTL apply -f "$root/dist/redis-sample.yaml" -f "$root/dist/operator-redis.yaml" >"$LOGS/apply-redis.log" 2>&1 ||
  fail "kubectl apply dist/redis-sample.yaml dist/operator-redis.yaml (log: $LOGS/apply-redis.log)"
# operator-redis.yaml brings the default providers config: put back the probe target's exception.
$KUBECTL -n proxy-operator-system create configmap proxy-operator-providers --from-file=providers.yaml="$W/providers-allowed.yaml" \
  --dry-run=client -o yaml | $KUBECTL apply -f - >/dev/null 2>&1
$KUBECTL -n proxy-operator-system rollout status deploy/proxy-operator-redis --timeout=120s >&2 || fail "rollout status of Redis"
for d in proxy-operator proxy-operator-discovery proxy-operator-gateway; do
  $KUBECTL -n proxy-operator-system rollout restart deploy/$d >/dev/null
  $KUBECTL -n proxy-operator-system rollout status deploy/$d --timeout=180s >&2 ||
    { save_operator_logs; fail "rollout status of $d with --lease-store=redis"; }
done
operator_logs() { $KUBECTL -n proxy-operator-system logs deploy/proxy-operator --tail=-1 2>/dev/null; }
for px in proxy-kubernetes proxy-external; do
  wait_for "$px Ready under the split operator" 120 px_ready "$px" || { save_operator_logs; fail "$px is $(px_phase "$px") after the switch to Redis"; }
done
run_crawler crawler-redis-quickstart 180 quickstart ||
  { save_operator_logs; show_proxy_side; fail "the discovery flow through 2 replicas and Redis (log: $LOGS/crawler-crawler-redis-quickstart.log)"; }

step "each component under its own ServiceAccount; the discovery Pods' token can neither create nor read a Secret"
for pair in proxy-operator=proxy-operator proxy-operator-discovery=proxy-operator-discovery proxy-operator-gateway=proxy-operator-gateway; do
  sa=$($KUBECTL -n proxy-operator-system get deploy "${pair%%=*}" -o jsonpath='{.spec.template.spec.serviceAccountName}')
  [ "$sa" = "${pair#*=}" ] || fail "deploy/${pair%%=*} runs as ServiceAccount '$sa', not ${pair#*=}"
done
DISCOVERY_SA=system:serviceaccount:proxy-operator-system:proxy-operator-discovery
for check in "create secrets -n default" "get secrets -n default" "list secrets -n proxy-operator-system" \
  "get secrets -n proxy-operator-system" "list secrets --all-namespaces" "create serviceaccounts/token -n proxy-operator-system" \
  "patch proxies.crawl.example.com -n default" "create pods -n proxy-operator-proxies"; do
  # shellcheck disable=SC2086
  [ "$($KUBECTL auth can-i $check --as=$DISCOVERY_SA 2>/dev/null)" = no ] || fail "the discovery account may $check"
done
# The token a discovery Pod really holds (projected by the kubelet), used as it would be.
# If exec does not work on this node, a token of the same account is the next best thing.
disc_token=$($KUBECTL -n proxy-operator-system exec deploy/proxy-operator-discovery -- cat /var/run/secrets/kubernetes.io/serviceaccount/token 2>"$LOGS/exec-token.log") || {
  log "   kubectl exec failed ($(tail -1 "$LOGS/exec-token.log")): using a new token of the same ServiceAccount"
  disc_token=$($KUBECTL -n proxy-operator-system create token proxy-operator-discovery) || fail "no token of the discovery account"
}
as_discovery() { $KUBECTL --token="$disc_token" "$@"; }
# The control: the token works for what the account may do (list, not get by name).
as_discovery -n default get px -o name 2>&1 | grep -q proxy-kubernetes ||
  fail "the discovery Pod's token cannot list Proxies (the control: the token itself works)"
refused() { # DESCRIPTION CMD...: the attempt must be refused by RBAC
  local what=$1 out
  shift
  out=$("$@" 2>&1) && fail "the discovery Pod's token could $what"
  grep -qi forbidden <<<"$out" || fail "the discovery Pod's token: $what failed, but not as Forbidden: $out"
}
refused "create a Secret" as_discovery -n default create secret generic minted-by-discovery --from-literal=a=b
refused "read the Redis password Secret" as_discovery -n proxy-operator-system get secret proxy-operator-redis
refused "read the discovery tokens Secret" as_discovery -n proxy-operator-system get secret proxy-operator-discovery-tokens
refused "read a Secret of the watched namespace by name" as_discovery -n default get secret "$($KUBECTL -n default get secrets -o jsonpath='{.items[0].metadata.name}')"
refused "mint a token for the controller's account" as_discovery -n proxy-operator-system create token proxy-operator
log "   the discovery Pod's token: reads Proxies; refused to create or read a Secret and to mint a token"
GATEWAY_SA=system:serviceaccount:proxy-operator-system:proxy-operator-gateway
for check in "list proxies.crawl.example.com -n default" "list secrets -n default"; do
  # shellcheck disable=SC2086
  [ "$($KUBECTL auth can-i $check --as=$GATEWAY_SA 2>/dev/null)" = yes ] || fail "the gateway account may not $check (it needs to)"
done
for check in "create secrets -n default" "get secrets -n default" "get secrets -n proxy-operator-system" \
  "patch proxies.crawl.example.com -n default" "create events -n default" "create pods -n proxy-operator-proxies" \
  "create serviceaccounts/token -n proxy-operator-system" "update leases.coordination.k8s.io -n proxy-operator-system"; do
  # shellcheck disable=SC2086
  [ "$($KUBECTL auth can-i $check --as=$GATEWAY_SA 2>/dev/null)" = no ] || fail "the gateway account may $check (it must write nothing)"
done
log "   the gateway account: lists Proxies and Secrets of the watched namespace, writes nothing"
check_no_forbidden_calls "after the switch to the split operator"

step "the lease loop against a steady operator (the control: the check itself finds nothing)"
run_crawler crawler-lease-control 60 lease-loop 15 || {
  save_operator_logs
  fail "the lease loop found violations with no restart at all (log: $LOGS/crawler-crawler-lease-control.log)"
}

step "kubectl rollout restart (discovery, then controller) under a lease loop: never more than maxLeases, no 409, no lease lost"
run_crawler crawler-lease-loop 0 lease-loop 100
wait_for "lease loop running" 60 sh -c "$KUBECTL logs crawler-lease-loop 2>/dev/null | grep -q 'holder lease $((MAX_LEASES - 1))'" ||
  fail "the lease loop did not start (log: $($KUBECTL logs crawler-lease-loop 2>&1 | tail -5))"
sleep 5
# Both parts, one after the other: the discovery replicas (the book's readers and writers) and
# the controller (health verdicts reach the book through it).
for d in proxy-operator-discovery proxy-operator; do
  $KUBECTL -n proxy-operator-system rollout restart deploy/$d >/dev/null
  $KUBECTL -n proxy-operator-system rollout status deploy/$d --timeout=180s >&2 || fail "rollout status of $d after restart"
done
crawler_wait crawler-lease-loop 180 || {
  save_operator_logs
  fail "the lease loop over a rollout restart (log: $LOGS/crawler-crawler-lease-loop.log)"
}
step "the gateway's own Deployment (dist/operator-redis.yaml, 2 replicas over Redis): a crawler Pod fetches through its Service; its Pods are scraped"
gateway_check crawler-redis-gateway
# The gateway Pods not being deleted (a Pod of an earlier rollout may still be terminating).
gw_ips=$($KUBECTL -n proxy-operator-system get pods -l app.kubernetes.io/component=gateway -o json |
  node -e 'let t = ""; process.stdin.on("data", (c) => (t += c)).on("end", () => console.log(JSON.parse(t).items.filter((p) => !p.metadata.deletionTimestamp).map((p) => p.status.podIP).join(" ")))')
[ "$(wc -w <<<"$gw_ips")" -ge 2 ] || fail "fewer than 2 gateway Pods: $gw_ips"
ep_ips=$($KUBECTL -n proxy-operator-system get endpoints proxy-operator-metrics -o jsonpath='{.subsets[*].addresses[*].ip}')
served=0
for ip in $gw_ips; do
  grep -qw "$ip" <<<"$ep_ips" || fail "gateway Pod $ip is not an endpoint of the metrics Service (the ServiceMonitor would miss it): $ep_ips"
  n=$(curl -s --max-time 5 "http://$ip:8080/metrics" | awk '$1 == "proxy_operator_gateway_requests_total{outcome=\"ok\"}" {print int($2)}')
  served=$((served + ${n:-0}))
done
[ "$served" -ge 3 ] || fail "the gateway Pods' metrics count $served ok requests (want the crawler's 3)"
log "   gateway Pods $gw_ips: endpoints of the metrics Service; proxy_operator_gateway_requests_total{outcome=ok} = $served"

save_operator_logs
check_no_forbidden_calls "end of the run"
used=$(accounts_used)
for sa in proxy-operator proxy-operator-discovery proxy-operator-gateway; do
  grep -qw "system:serviceaccount:proxy-operator-system:$sa" <<<"$used" || fail "no request was made with the $sa account (used: $used)"
done
log "   accounts that made requests: $used"
