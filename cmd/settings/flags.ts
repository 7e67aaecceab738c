// The operator's flags: one row each (flag, environment variable, default, help), and the
// usage text made from them. What each value means is parsed in the files beside this one.

export interface Option {
  flag: string;
  env?: string;
  default?: string;
  help: string;
  boolean?: boolean;
}

export const OPTIONS: Option[] = [
  {
    flag: 'kubeconfig',
    env: 'KUBECONFIG',
    help: 'kubeconfig file; in-cluster config or ~/.kube/config when unset',
  },
  {
    flag: 'providers-config',
    env: 'PROXY_OPERATOR_PROVIDERS_CONFIG',
    help: 'providers YAML file; an embedded mock-only config when unset',
  },
  {
    flag: 'discovery-address',
    env: 'DISCOVERY_ADDRESS',
    default: ':8090',
    help: 'host:port of the discovery/lease API (every replica serves it)',
  },
  {
    flag: 'discovery-tokens-file',
    env: 'DISCOVERY_TOKENS_FILE',
    help: "file of the discovery API's named bearer tokens, one \"<name>: <token>\" a line (names: lower-case letters, digits, '-'; tokens: at least 16 characters); re-read on change, so deleting a line revokes one token",
  },
  {
    flag: 'discovery-tls-cert',
    env: 'DISCOVERY_TLS_CERT',
    help: 'PEM certificate (chain) file: the discovery API serves HTTPS with it and --discovery-tls-key (both or neither); plain HTTP without',
  },
  {
    flag: 'discovery-tls-key',
    env: 'DISCOVERY_TLS_KEY',
    help: 'PEM private key file of --discovery-tls-cert',
  },
  {
    flag: 'metrics-target-names',
    env: 'METRICS_TARGET_NAMES',
    default: 'false',
    boolean: true,
    help: "label proxy_operator_target_cooldowns_total with the targets clients name; by default a keyed pseudonym (t-<12 hex>), as targets are each team's private business and /metrics is unauthenticated",
  },
  {
    flag: 'discovery-unauthenticated',
    env: 'DISCOVERY_UNAUTHENTICATED',
    default: 'false',
    boolean: true,
    help: 'serve the discovery API without authentication (loudly warned); without it, start-up needs --discovery-tokens-file or DISCOVERY_TOKEN',
  },
  {
    flag: 'discovery-rate-limit',
    env: 'DISCOVERY_RATE_LIMIT',
    default: '1000',
    help: 'requests per second each discovery token may make (a token bucket); beyond it 429 with Retry-After',
  },
  {
    flag: 'discovery-rate-burst',
    env: 'DISCOVERY_RATE_BURST',
    default: '2000',
    help: 'requests a discovery token may make at once after a quiet period (the bucket size)',
  },
  {
    flag: 'discovery-book-concurrency',
    env: 'DISCOVERY_BOOK_CONCURRENCY',
    default: '16',
    help: "lease-book operations the discovery API runs at once per replica; beyond it each token waits in a queue of its own, served in turn by cost, so one token's backlog delays another's calls by at most this many operations",
  },
  {
    flag: 'discovery-book-queue',
    env: 'DISCOVERY_BOOK_QUEUE',
    default: '256',
    help: 'book calls one token may have waiting for the lease book per replica; beyond it 429 book_queue_full with Retry-After',
  },
  {
    flag: 'metrics-address',
    env: 'METRICS_ADDRESS',
    default: ':8080',
    help: 'host:port serving /metrics, /healthz and /readyz',
  },
  {
    flag: 'leader-elect',
    env: 'LEADER_ELECT',
    default: 'true',
    boolean: true,
    help: 'use a coordination.k8s.io Lease so only one replica reconciles',
  },
  {
    flag: 'leader-election-namespace',
    env: 'POD_NAMESPACE',
    default: 'proxy-operator-system',
    help: "the operator's own namespace: its leader-election Lease and its credentials key Secret",
  },
  {
    flag: 'leader-election-id',
    env: 'LEADER_ELECTION_ID',
    default: 'proxy-operator-leader',
    help: 'name of the leader-election Lease',
  },
  { flag: 'log-level', env: 'LOG_LEVEL', default: 'info', help: 'trace | debug | info | warn | error' },
  {
    flag: 'cooldown',
    env: 'COOLDOWN_SECONDS',
    default: '900',
    help: 'seconds a banned proxy rests for that target',
  },
  {
    flag: 'max-cooldown',
    env: 'MAX_COOLDOWN_SECONDS',
    default: '3600',
    help: 'longest cooldown: each consecutive ban of a proxy on a target doubles it from --cooldown up to this',
  },
  {
    flag: 'rate-limit-cooldown',
    env: 'RATE_LIMIT_COOLDOWN_SECONDS',
    default: '10',
    help: 'seconds a rate-limited proxy rests for that target (at least the Retry-After the client passed)',
  },
  {
    flag: 'max-rate-limit-cooldown',
    env: 'MAX_RATE_LIMIT_COOLDOWN_SECONDS',
    default: '120',
    help: 'longest rate-limit cooldown: consecutive rate limits double it from --rate-limit-cooldown up to this',
  },
  {
    flag: 'single-cooldown-window',
    env: 'SINGLE_COOLDOWN_WINDOW',
    default: 'false',
    boolean: true,
    help: "rate_limited rests like banned (--cooldown/--max-cooldown, one streak): the specification's rule",
  },
  {
    flag: 'suspicion-timeout',
    env: 'SUSPICION_TIMEOUT_SECONDS',
    default: '60',
    help: 'a proxy reported unreachable is leasable again after this long if no probe answered (error log, metric)',
  },
  {
    flag: 'suspicion-holdoff',
    env: 'SUSPICION_HOLDOFF_SECONDS',
    default: '5',
    help: 'unreachable reports this soon after a passing re-probe of that proxy are not believed (abuse guard)',
  },
  {
    flag: 'recheck-interval',
    env: 'RECHECK_INTERVAL_MS',
    default: '1000',
    help: 'milliseconds between the probes of a recheck after an unreachable report',
  },
  {
    flag: 'session-idle-timeout',
    env: 'SESSION_IDLE_TIMEOUT_SECONDS',
    default: '1800',
    help: 'seconds a sticky session is kept without a lease or renewal in it',
  },
  {
    flag: 'max-sessions',
    env: 'MAX_SESSIONS',
    default: '100000',
    help: 'sticky sessions kept (at least 10000); at the cap a new session forgets the least recently used one',
  },
  {
    flag: 'discovery-session-quota',
    env: 'DISCOVERY_SESSION_QUOTA',
    default: '10000',
    help: "sticky sessions one token may keep; a new one beyond it ends that token's own least recently used (never another's); keep tokens x quota at or below --max-sessions",
  },
  {
    flag: 'discovery-lease-quota',
    env: 'DISCOVERY_LEASE_QUOTA',
    default: '1000',
    help: 'live leases one token may hold, through the API and the gateway together (429 lease_quota beyond it); with --lease-store=redis the shared book counts them, across every replica',
  },
  {
    flag: 'discovery-cooldown-quota',
    env: 'DISCOVERY_COOLDOWN_QUOTA',
    default: '1000',
    help: "(proxy, target) cooldowns one token's banned/rate_limited reports may keep running (429 cooldown_quota beyond it); keep tokens x quota at or below the book's 10000 targets; with --lease-store=redis the shared book counts them, across every replica",
  },
  {
    flag: 'max-lease-ttl',
    env: 'MAX_LEASE_TTL_SECONDS',
    default: '3600',
    help: 'largest ttlSeconds a client may ask for',
  },
  {
    flag: 'orphan-sweep-interval',
    env: 'ORPHAN_SWEEP_INTERVAL_SECONDS',
    default: '600',
    help: 'seconds between orphan sweeps',
  },
  {
    flag: 'orphan-min-age',
    env: 'ORPHAN_MIN_AGE_SECONDS',
    default: '600',
    help: 'instances younger than this are never swept',
  },
  { flag: 'health-concurrency', env: 'HEALTH_CONCURRENCY', default: '64', help: 'probes in flight at once' },
  {
    flag: 'max-unavailable',
    env: 'MAX_UNAVAILABLE',
    default: '25%',
    help: 'per provider, how many of its proxies may be out of service (Provisioning or Unhealthy) before a spec change waits to replace a Ready one: N or N%, then optional overrides, e.g. 25%,gcp-eu=5',
  },
  {
    flag: 'replace-unhealthy-after',
    env: 'REPLACE_UNHEALTHY_AFTER_SECONDS',
    default: '900',
    help: 'seconds a Managed proxy may stay Unhealthy before it is replaced (a new instance and IP, paced by --max-unavailable), unless its spec.rotation.unhealthyAfterSeconds says otherwise; 0 = never',
  },
  {
    flag: 'repair-hold-unhealthy-percent',
    env: 'REPAIR_HOLD_UNHEALTHY_PERCENT',
    default: '20',
    help: "when more than this percentage of a provider's Managed proxies are Unhealthy at once (at least one always may be), or of those probing one site (its origin; at least 3), none of them is replaced: a shared cause is likelier; proxies whose probe target fails when checked without a proxy are held for that and not counted; 100 = off",
  },
  {
    flag: 'exit-ip-allow-non-public',
    env: 'EXIT_IP_ALLOW_NON_PUBLIC',
    default: 'false',
    help: 'accept an exit IP echo answer that is not a public address (loopback, private, link-local ...) and an echo over plain http, which the proxy itself could answer: for tests and private egress only',
  },
  {
    flag: 'rotation-drain-timeout',
    env: 'ROTATION_DRAIN_TIMEOUT_SECONDS',
    default: '300',
    help: 'seconds a proxy rotated on age (spec.rotation.maxAgeSeconds) is drained (no new leases, live ones finish) before its instance is replaced; 0 replaces at once',
  },
  {
    flag: 'instance-poll-interval',
    env: 'INSTANCE_POLL_INTERVAL_SECONDS',
    default: '5',
    help: 'seconds between looks at an instance being created or replaced, and at a replacement waiting for a --max-unavailable slot',
  },
  {
    flag: 'watch-namespace',
    env: 'WATCH_NAMESPACE',
    help: 'watch one namespace only (default: all namespaces)',
  },
  {
    flag: 'lease-store',
    env: 'LEASE_STORE',
    default: 'memory',
    help: 'where leases, sessions and cooldowns live: memory (this process; a restart forgets them; one discovery replica) or redis (one book shared by every replica, kept across restarts; needs --redis-url)',
  },
  {
    flag: 'redis-url',
    env: 'REDIS_URL',
    help: 'the Redis of --lease-store=redis: redis://host:port[/db] or rediss://host:port[/db] (TLS). The password goes in REDIS_PASSWORD (env only, from a Secret), never in this flag',
  },
  {
    flag: 'redis-key-prefix',
    env: 'REDIS_KEY_PREFIX',
    default: 'proxy-operator',
    help: "prefix of every key of the lease book (letters, digits, '.', '_', '-'; at most 64): operators sharing one Redis need different ones",
  },
  {
    flag: 'redis-timeout',
    env: 'REDIS_TIMEOUT_MS',
    default: '1000',
    help: 'milliseconds a Redis call may take before the request fails with 503 store_unavailable (and Retry-After)',
  },
  {
    flag: 'redis-ca-file',
    env: 'REDIS_CA_FILE',
    help: "PEM file of the CA certificates a rediss:// Redis is verified against (a managed Redis's server CA); read at start-up",
  },
  {
    flag: 'redis-allow-eviction',
    env: 'REDIS_ALLOW_EVICTION',
    default: 'false',
    boolean: true,
    help: 'start even when the Redis maxmemory-policy is not noeviction (any other policy may evict running bans, leases and load counters); without it such a Redis stops start-up',
  },
  {
    flag: 'components',
    env: 'COMPONENTS',
    default: 'controller,discovery,gateway',
    help: 'the parts this process runs, comma-separated: controller (reconciler, orphan sweep, health engine; leader-elected), discovery (the lease API, on every replica) and gateway (the forward proxy over the same lease book, on every replica). discovery or gateway without controller needs --lease-store=redis',
  },
  {
    flag: 'gateway-address',
    env: 'GATEWAY_ADDRESS',
    default: ':8888',
    help: 'host:port of the forward-proxy gateway (docs/gateway.md); clients authenticate with a discovery API token as the proxy password',
  },
  {
    flag: 'gateway-max-attempts',
    env: 'GATEWAY_MAX_ATTEMPTS',
    default: '3',
    help: 'upstream proxies the gateway tries per request or tunnel when one refuses, resets or times out before a byte reached the client (each is reported unreachable)',
  },
  {
    flag: 'gateway-connect-timeout',
    env: 'GATEWAY_CONNECT_TIMEOUT_MS',
    default: '5000',
    help: 'milliseconds an upstream proxy may take to accept the connection (and to answer a CONNECT) before it counts as unreachable',
  },
  {
    flag: 'gateway-response-timeout',
    env: 'GATEWAY_RESPONSE_TIMEOUT_MS',
    default: '60000',
    help: "milliseconds a connected upstream proxy may take to send a plain-HTTP response's head before it counts as unreachable (a request that may have reached the site is retried only if its method is idempotent)",
  },
  {
    flag: 'gateway-tunnel-idle-timeout',
    env: 'GATEWAY_TUNNEL_IDLE_TIMEOUT',
    default: '120',
    help: 'seconds a CONNECT tunnel may carry no byte either way before it is closed and its lease released (a client gone without closing, its host down or cut off, would hold both for ever); 1 to 86400',
  },
  {
    flag: 'gateway-lease-ttl',
    env: 'GATEWAY_LEASE_TTL',
    default: '60',
    help: "TTL in seconds of the leases the gateway takes (renewed while used); a username's ttl-<seconds> overrides it",
  },
  {
    flag: 'gateway-idle-timeout',
    env: 'GATEWAY_IDLE_TIMEOUT',
    default: '15',
    help: 'seconds a lease the gateway finished with waits for the next request with the same options before it is released',
  },
  {
    flag: 'gateway-ban-codes',
    env: 'GATEWAY_BAN_CODES',
    default: '403',
    help: 'site status codes the gateway reports as banned for the target (plain HTTP; comma-separated)',
  },
  {
    flag: 'gateway-rate-limit-codes',
    env: 'GATEWAY_RATE_LIMIT_CODES',
    default: '429',
    help: 'site status codes the gateway reports as rate_limited for the target, honouring Retry-After (plain HTTP; comma-separated)',
  },
  {
    flag: 'gateway-drain-timeout',
    env: 'GATEWAY_DRAIN_TIMEOUT',
    default: '20',
    help: "seconds open tunnels may finish in at shutdown before they are cut (keep it under the Pod's termination grace period)",
  },
  {
    flag: 'probe-ca-file',
    env: 'PROBE_CA_FILE',
    help: 'PEM file of extra CA certificates the health probes trust (https probe URLs behind a private CA); read at start-up',
  },
  {
    flag: 'cluster-name',
    env: 'CLUSTER_NAME',
    help: "owner identity labelled on every instance this operator creates; its orphan sweep deletes only instances carrying it. Give every operator sharing a cloud project, account or proxies namespace its own (lower-case letters, digits, '-', '_'; at most 63). Default: the UID of the kube-system Namespace",
  },
];

export function usage(): string {
  const lines = [
    'Usage: proxy-operator [flags]',
    '',
    'Every flag can also be set by the environment variable shown. DISCOVERY_TOKEN (env only) is one API bearer token (named "default"), surrounding whitespace ignored; --discovery-tokens-file holds several. REDIS_PASSWORD and REDIS_USERNAME (env only) authenticate to the Redis of --lease-store=redis. A duration is at most 24.8 days (2147483 s, 2147483647 ms: the longest a timer waits).',
    '',
  ];
  for (const o of OPTIONS) {
    const left = `  --${o.flag} ${o.boolean ? '<true|false>' : '<value>'}`;
    const extra = [o.env ? `env ${o.env}` : '', o.default !== undefined ? `default ${o.default}` : '']
      .filter(Boolean)
      .join(', ');
    lines.push(`${left.padEnd(38)}${o.help}${extra ? ` (${extra})` : ''}`);
  }
  lines.push('  --help'.padEnd(38) + 'print this help');
  return lines.join('\n');
}
