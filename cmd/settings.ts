import { parseArgs } from 'node:util';
import type { Component } from '../handlers/components.js';
import type { GatewaySettings } from '../handlers/settings.js';
import type { Cap, MaxUnavailable } from '../handlers/replacement-budget.js';
import { MIN_TOKEN_LENGTH } from '../discovery/api-tokens.js';

/** Everything the operator's entry point can be told, from flags or environment. */
export interface Settings {
  kubeconfig?: string;
  providersConfig?: string;
  /** The discovery API's address and its session and cooldown tuning. */
  discovery: {
    host: string;
    port: number;
    maxCooldownSeconds: number;
    rateLimitCooldownSeconds: number;
    maxRateLimitCooldownSeconds: number;
    singleCooldownWindow: boolean;
    suspicionTimeoutSeconds: number;
    suspicionHoldoffSeconds: number;
    sessionIdleSeconds: number;
    maxSessions: number;
    /** `--discovery-session-quota`: live sessions one token may keep (its own oldest ends beyond it). */
    sessionQuota: number;
    /** `--metrics-target-names`: /metrics names client targets (default: pseudonyms). */
    metricsTargetNames: boolean;
    /** `--discovery-tls-cert` and `--discovery-tls-key`: the API serves HTTPS with them. */
    tls?: { certFile: string; keyFile: string };
  };
  recheckIntervalMillis: number;
  /** How clients authenticate to the discovery API (closed unless told otherwise). */
  discoveryAuth: DiscoveryAuth;
  /** Per-token request rate of the discovery API. */
  discoveryRateLimit: { ratePerSecond: number; burst: number };
  metrics: { host: string; port: number };
  leaderElect: boolean;
  leaderElectionNamespace: string;
  leaderElectionID: string;
  logLevel: 'trace' | 'debug' | 'info' | 'warn' | 'error';
  cooldownSeconds: number;
  maxLeaseTTLSeconds: number;
  orphanSweepIntervalSeconds: number;
  orphanMinAgeSeconds: number;
  healthConcurrency: number;
  watchNamespace?: string;
  maxUnavailable: MaxUnavailable;
  /** `--replace-unhealthy-after`: the fleet default of spec.rotation.unhealthyAfterSeconds; 0 = off. */
  replaceUnhealthyAfterSeconds: number;
  /** `--repair-hold-unhealthy-percent`: more Unhealthy at once than this holds a provider's repairs. */
  repairHoldUnhealthyPercent: number;
  /** `--exit-ip-allow-non-public`: accept exit IPs that are not public addresses (loopback tests, private egress). */
  exitIPAllowNonPublic: boolean;
  /** `--rotation-drain-timeout`: seconds a proxy rotated on age drains before its instance is replaced. */
  rotationDrainSeconds: number;
  /** The owner identity on every instance it creates; unset = the kube-system Namespace's UID. */
  clusterName?: string;
  /** Where leases, sessions and cooldowns live. */
  leaseStore: LeaseStoreSettings;
  /** The parts this process runs (`--components`). */
  components: readonly Component[];
  /** The forward-proxy gateway's address and tuning (served when components include gateway). */
  gateway: GatewaySettings;
  /** `--probe-ca-file`: a PEM file of extra CAs the health probes trust. */
  probeCAFile?: string;
}

export type DiscoveryAuth =
  /** Named tokens from a file, re-read on change. */
  | { kind: 'tokens-file'; path: string }
  /** One token from DISCOVERY_TOKEN, named "default". */
  | { kind: 'token'; token: string }
  /** --discovery-unauthenticated: said explicitly, warned about at start-up. */
  | { kind: 'none' };

export type LeaseStoreSettings =
  | { kind: 'memory' }
  | {
      kind: 'redis';
      /** redis:// or rediss:// (TLS); a password in it only from the environment, never a flag. */
      url: string;
      /** REDIS_PASSWORD / REDIS_USERNAME (env only: a Secret's keys). */
      password?: string;
      username?: string;
      keyPrefix: string;
      timeoutMs: number;
      /** `--redis-ca-file`: a PEM file of the CAs a rediss:// server is verified against. */
      caFile?: string;
      /** `--redis-allow-eviction`: start on a maxmemory-policy that may evict the book's keys. */
      allowEviction: boolean;
    };

export type { Component };
export const COMPONENTS: readonly Component[] = ['controller', 'discovery', 'gateway'];

export class SettingsError extends Error {}

interface Option {
  flag: string;
  env?: string;
  default?: string;
  help: string;
  boolean?: boolean;
}

const OPTIONS: Option[] = [
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
    help: 'namespace of the leader-election Lease',
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
    help: "when more than this percentage of a provider's Managed proxies are Unhealthy at once (at least one always may be), none of them is replaced: a shared cause is likelier (repairs also hold while the probe target fails when checked without a proxy); 100 = off",
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
    'Every flag can also be set by the environment variable shown. DISCOVERY_TOKEN (env only) is one API bearer token (named "default"), surrounding whitespace ignored; --discovery-tokens-file holds several. REDIS_PASSWORD and REDIS_USERNAME (env only) authenticate to the Redis of --lease-store=redis.',
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

function address(flag: string, value: string): { host: string; port: number } {
  const m = /^(.*):(\d+)$/.exec(value);
  const port = m ? Number(m[2]) : NaN;
  if (!m || !(port >= 0 && port <= 65535))
    throw new SettingsError(`--${flag}: "${value}" is not host:port (e.g. :8090 or 127.0.0.1:8090)`);
  return { host: m[1] === '' ? '0.0.0.0' : m[1], port };
}

function percent(flag: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 100)
    throw new SettingsError(`--${flag}: "${value}" must be an integer from 0 to 100`);
  return n;
}

function positiveInt(flag: string, value: string, min = 1): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min)
    throw new SettingsError(`--${flag}: "${value}" must be an integer >= ${min}`);
  return n;
}

/**
 * How the API authenticates: a tokens file, one token, or, said explicitly, nothing. Only a
 * process that serves the API needs one; a bad combination stops start-up naming the key.
 */
function discoveryAuth(
  get: (flag: string) => string | undefined,
  env: NodeJS.ProcessEnv,
  serves: boolean,
): DiscoveryAuth {
  const path = get('discovery-tokens-file');
  const token = bearerToken(env.DISCOVERY_TOKEN);
  const open = bool('discovery-unauthenticated', get('discovery-unauthenticated')!);
  if (path !== undefined && token !== '')
    throw new SettingsError(
      '--discovery-tokens-file: given together with DISCOVERY_TOKEN; put that token in the file under a name',
    );
  if (open && (path !== undefined || token !== ''))
    throw new SettingsError(
      '--discovery-unauthenticated: given together with a token (--discovery-tokens-file or DISCOVERY_TOKEN); choose one',
    );
  if (path !== undefined) return { kind: 'tokens-file', path };
  if (token !== '') return { kind: 'token', token };
  if (open || !serves) return { kind: 'none' };
  throw new SettingsError(
    '--discovery-tokens-file: the discovery API needs a token: mount a tokens file (or set DISCOVERY_TOKEN), or pass --discovery-unauthenticated=true to serve it without authentication',
  );
}

/** Both files or neither: a certificate without its key (or the reverse) is a mistake. */
function discoveryTLS(
  certFile: string | undefined,
  keyFile: string | undefined,
): { tls?: { certFile: string; keyFile: string } } {
  if (certFile === undefined && keyFile === undefined) return {};
  if (certFile === undefined)
    throw new SettingsError('--discovery-tls-cert: required with --discovery-tls-key');
  if (keyFile === undefined)
    throw new SettingsError('--discovery-tls-key: required with --discovery-tls-cert');
  return { tls: { certFile, keyFile } };
}

function positiveNumber(flag: string, value: string): number {
  const n = Number(value);
  if (!(value.trim() !== '' && Number.isFinite(n) && n > 0))
    throw new SettingsError(`--${flag}: "${value}" must be a positive number`);
  return n;
}

/**
 * The API token. A Secret made from a file (`--from-file`) ends in a newline: surrounding
 * whitespace is dropped. Whitespace inside can never be sent as a bearer token, so it is an error.
 */
function bearerToken(value: string | undefined): string {
  const token = (value ?? '').trim();
  if (/\s/.test(token))
    throw new SettingsError('DISCOVERY_TOKEN: must not contain whitespace inside the token');
  if (token !== '' && token.length < MIN_TOKEN_LENGTH)
    throw new SettingsError(
      `DISCOVERY_TOKEN: must be at least ${MIN_TOKEN_LENGTH} characters (got ${token.length}); \`openssl rand -hex 24\` makes one`,
    );
  return token;
}

/** A label value every provider accepts (GCP's are the narrowest: lower case, digits, '-', '_'). */
function clusterName(flag: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (!/^[a-z0-9]([-a-z0-9_]{0,61}[a-z0-9])?$/.test(value))
    throw new SettingsError(
      `--${flag}: "${value}" must be 1-63 lower-case letters, digits, '-' or '_', starting and ending with a letter or digit (it is a label value on every instance)`,
    );
  return value;
}

/** The lease store flags: a bad combination stops start-up naming the flag. */
function leaseStore(
  get: (flag: string) => string | undefined,
  fromFlag: (flag: string) => boolean,
  env: NodeJS.ProcessEnv,
): LeaseStoreSettings {
  const kind = get('lease-store')!;
  if (kind !== 'memory' && kind !== 'redis')
    throw new SettingsError(`--lease-store: "${kind}" must be memory or redis`);
  const url = get('redis-url');
  if (kind === 'memory') {
    for (const flag of ['redis-url', 'redis-ca-file'])
      if (get(flag) !== undefined)
        throw new SettingsError(
          `--${flag}: given, but --lease-store is memory; add --lease-store=redis to use it`,
        );
    return { kind };
  }
  if (url === undefined)
    throw new SettingsError(
      '--redis-url: required with --lease-store=redis (redis://host:port or rediss://host:port)',
    );
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new SettingsError(
      `--redis-url: "${url}" is not a URL (redis://host:port[/db] or rediss://host:port[/db])`,
    );
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:')
    throw new SettingsError(`--redis-url: "${parsed.protocol}" must be redis: or rediss: (TLS)`);
  if (parsed.hostname === '') throw new SettingsError(`--redis-url: "${url}" names no host`);
  if (parsed.pathname !== '' && parsed.pathname !== '/' && !/^\/\d+$/.test(parsed.pathname))
    throw new SettingsError(`--redis-url: path "${parsed.pathname}" must be a database number, e.g. /0`);
  // A flag value shows in the Pod spec and in ps: the password belongs in a Secret.
  if (parsed.password !== '' && fromFlag('redis-url'))
    throw new SettingsError(
      '--redis-url: holds a password; pass it in REDIS_PASSWORD (env, from a Secret) instead of the flag',
    );
  const caFile = get('redis-ca-file');
  if (caFile !== undefined && parsed.protocol !== 'rediss:')
    throw new SettingsError(
      `--redis-ca-file: given, but --redis-url is ${parsed.protocol}// (no TLS); use rediss:// to verify the server against it`,
    );
  const keyPrefix = get('redis-key-prefix')!;
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(keyPrefix))
    throw new SettingsError(
      `--redis-key-prefix: "${keyPrefix}" must be 1-64 letters, digits, '.', '_' or '-'`,
    );
  return {
    kind,
    url,
    ...(env.REDIS_PASSWORD ? { password: env.REDIS_PASSWORD.trim() } : {}),
    ...(env.REDIS_USERNAME ? { username: env.REDIS_USERNAME.trim() } : {}),
    keyPrefix,
    timeoutMs: positiveInt('redis-timeout', get('redis-timeout')!, 10),
    ...(caFile === undefined ? {} : { caFile }),
    allowEviction: bool('redis-allow-eviction', get('redis-allow-eviction')!),
  };
}

function components(flag: string, value: string, store: LeaseStoreSettings): Component[] {
  const names = value
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== '');
  const out: Component[] = [];
  for (const name of names) {
    if (!COMPONENTS.includes(name as Component))
      throw new SettingsError(`--${flag}: "${name}" is not a component (controller, discovery, gateway)`);
    if (!out.includes(name as Component)) out.push(name as Component);
  }
  if (out.length === 0)
    throw new SettingsError(`--${flag}: "${value}" names no component (controller, discovery, gateway)`);
  for (const part of ['discovery', 'gateway'] as const)
    if (out.includes(part) && !out.includes('controller') && store.kind === 'memory')
      throw new SettingsError(
        `--${flag}: ${part} without controller needs --lease-store=redis (a memory book would not be the health engine's, and each replica would keep its own)`,
      );
  return out;
}

function bool(flag: string, value: string): boolean {
  if (['true', '1', 'yes'].includes(value)) return true;
  if (['false', '0', 'no'].includes(value)) return false;
  throw new SettingsError(`--${flag}: "${value}" must be true or false`);
}

function cap(flag: string, value: string): Cap {
  const m = /^(\d+)(%?)$/.exec(value);
  const n = m ? Number(m[1]) : NaN;
  if (!m || n < 1 || (m[2] && n > 100))
    throw new SettingsError(`--${flag}: "${value}" must be an integer >= 1 or a percentage 1%..100%`);
  return m[2] ? { kind: 'percent', value: n } : { kind: 'count', value: n };
}

/** `25%` or `2` (every provider), then optional `<provider>=<cap>` overrides, comma-separated. */
export function parseMaxUnavailable(flag: string, value: string): MaxUnavailable {
  const result: { default?: Cap; byProvider: Record<string, Cap> } = { byProvider: {} };
  for (const item of value.split(',').map((x) => x.trim())) {
    const eq = item.indexOf('=');
    if (eq < 0) {
      if (result.default) throw new SettingsError(`--${flag}: "${value}" sets the default cap twice`);
      result.default = cap(flag, item);
      continue;
    }
    const name = item.slice(0, eq);
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name))
      throw new SettingsError(`--${flag}: "${name}" is not a provider name`);
    if (result.byProvider[name]) throw new SettingsError(`--${flag}: provider "${name}" is given twice`);
    result.byProvider[name] = cap(flag, item.slice(eq + 1));
  }
  return { default: result.default ?? { kind: 'percent', value: 25 }, byProvider: result.byProvider };
}

/** Every provider `--max-unavailable` names must be configured: a typo would silently do nothing. */
export function checkMaxUnavailableProviders(setting: MaxUnavailable, configured: readonly string[]): void {
  for (const name of Object.keys(setting.byProvider)) {
    if (!configured.includes(name))
      throw new SettingsError(
        `--max-unavailable: provider "${name}" is not configured (configured: ${configured.join(', ') || 'none'})`,
      );
  }
}

/** Parses flags (taking precedence) and environment into Settings, or throws naming the bad one. */
export function parseSettings(argv: string[], env: NodeJS.ProcessEnv): Settings | 'help' {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        help: { type: 'boolean' },
        ...Object.fromEntries(OPTIONS.map((o) => [o.flag, { type: 'string' as const }])),
      },
    });
  } catch (err) {
    throw new SettingsError(`${(err as Error).message}\n\n${usage()}`);
  }
  if (parsed.values.help) return 'help';
  const get = (flag: string): string | undefined => {
    const o = OPTIONS.find((x) => x.flag === flag)!;
    const v = (parsed.values as Record<string, string | boolean | undefined>)[flag];
    if (typeof v === 'string') return v;
    if (o.env && env[o.env] !== undefined && env[o.env] !== '') return env[o.env];
    return o.default;
  };
  const level = get('log-level')!;
  if (!['trace', 'debug', 'info', 'warn', 'error'].includes(level)) {
    throw new SettingsError(`--log-level: "${level}" must be one of trace, debug, info, warn, error`);
  }
  const fromFlag = (flag: string): boolean =>
    typeof (parsed.values as Record<string, unknown>)[flag] === 'string';
  const store = leaseStore(get, fromFlag, env);
  const parts = components('components', get('components')!, store);
  const cooldownSeconds = positiveInt('cooldown', get('cooldown')!);
  const maxCooldownSeconds = positiveInt('max-cooldown', get('max-cooldown')!);
  if (maxCooldownSeconds < cooldownSeconds) {
    throw new SettingsError(
      `--max-cooldown: "${maxCooldownSeconds}" must be at least --cooldown (${cooldownSeconds})`,
    );
  }
  const rateLimitCooldownSeconds = positiveInt('rate-limit-cooldown', get('rate-limit-cooldown')!);
  const maxRateLimitCooldownSeconds = positiveInt('max-rate-limit-cooldown', get('max-rate-limit-cooldown')!);
  if (maxRateLimitCooldownSeconds < rateLimitCooldownSeconds) {
    throw new SettingsError(
      `--max-rate-limit-cooldown: "${maxRateLimitCooldownSeconds}" must be at least --rate-limit-cooldown (${rateLimitCooldownSeconds})`,
    );
  }
  return {
    kubeconfig: get('kubeconfig'),
    providersConfig: get('providers-config'),
    discovery: {
      ...address('discovery-address', get('discovery-address')!),
      maxCooldownSeconds,
      rateLimitCooldownSeconds,
      maxRateLimitCooldownSeconds,
      singleCooldownWindow: bool('single-cooldown-window', get('single-cooldown-window')!),
      suspicionTimeoutSeconds: positiveInt('suspicion-timeout', get('suspicion-timeout')!),
      suspicionHoldoffSeconds: positiveInt('suspicion-holdoff', get('suspicion-holdoff')!, 0),
      sessionIdleSeconds: positiveInt('session-idle-timeout', get('session-idle-timeout')!),
      maxSessions: positiveInt('max-sessions', get('max-sessions')!, 10_000),
      sessionQuota: positiveInt('discovery-session-quota', get('discovery-session-quota')!),
      metricsTargetNames: bool('metrics-target-names', get('metrics-target-names')!),
      ...discoveryTLS(get('discovery-tls-cert'), get('discovery-tls-key')),
    },
    discoveryAuth: discoveryAuth(get, env, parts.includes('discovery') || parts.includes('gateway')),
    discoveryRateLimit: {
      ratePerSecond: positiveNumber('discovery-rate-limit', get('discovery-rate-limit')!),
      burst: positiveInt('discovery-rate-burst', get('discovery-rate-burst')!),
    },
    metrics: address('metrics-address', get('metrics-address')!),
    leaderElect: bool('leader-elect', get('leader-elect')!),
    leaderElectionNamespace: get('leader-election-namespace')!,
    leaderElectionID: get('leader-election-id')!,
    logLevel: level as Settings['logLevel'],
    cooldownSeconds,
    maxLeaseTTLSeconds: positiveInt('max-lease-ttl', get('max-lease-ttl')!),
    orphanSweepIntervalSeconds: positiveInt('orphan-sweep-interval', get('orphan-sweep-interval')!),
    orphanMinAgeSeconds: positiveInt('orphan-min-age', get('orphan-min-age')!, 0),
    healthConcurrency: positiveInt('health-concurrency', get('health-concurrency')!),
    recheckIntervalMillis: positiveInt('recheck-interval', get('recheck-interval')!, 50),
    watchNamespace: get('watch-namespace'),
    maxUnavailable: parseMaxUnavailable('max-unavailable', get('max-unavailable')!),
    replaceUnhealthyAfterSeconds: positiveInt('replace-unhealthy-after', get('replace-unhealthy-after')!, 0),
    repairHoldUnhealthyPercent: percent(
      'repair-hold-unhealthy-percent',
      get('repair-hold-unhealthy-percent')!,
    ),
    exitIPAllowNonPublic: bool('exit-ip-allow-non-public', get('exit-ip-allow-non-public')!),
    rotationDrainSeconds: positiveInt('rotation-drain-timeout', get('rotation-drain-timeout')!, 0),
    clusterName: clusterName('cluster-name', get('cluster-name')),
    leaseStore: store,
    components: parts,
    gateway: gatewaySettings(get),
    probeCAFile: get('probe-ca-file'),
  };
}

function gatewaySettings(get: (flag: string) => string | undefined): GatewaySettings {
  return {
    ...address('gateway-address', get('gateway-address')!),
    maxAttempts: positiveInt('gateway-max-attempts', get('gateway-max-attempts')!),
    connectTimeoutMs: positiveInt('gateway-connect-timeout', get('gateway-connect-timeout')!, 10),
    ttlSeconds: positiveInt('gateway-lease-ttl', get('gateway-lease-ttl')!, 3),
    idleSeconds: positiveInt('gateway-idle-timeout', get('gateway-idle-timeout')!, 0),
    bannedCodes: statusCodes('gateway-ban-codes', get('gateway-ban-codes')!),
    rateLimitedCodes: statusCodes('gateway-rate-limit-codes', get('gateway-rate-limit-codes')!),
    drainSeconds: positiveInt('gateway-drain-timeout', get('gateway-drain-timeout')!, 0),
  };
}

/** `403,451`: HTTP status codes, or none (an empty value reports nothing). */
function statusCodes(flag: string, value: string): number[] {
  const out: number[] = [];
  for (const item of value
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== '')) {
    if (!/^[1-5]\d\d$/.test(item))
      throw new SettingsError(`--${flag}: "${item}" is not an HTTP status code (100-599)`);
    if (!out.includes(Number(item))) out.push(Number(item));
  }
  return out;
}
