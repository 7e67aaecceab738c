import { randomBytes } from 'node:crypto';
import { DEFAULT_ROTATION_DRAIN_SECONDS, POLL_SECONDS } from './proxy-state-machine.js';
import { DEFAULT_LEASE_BOOK_RULES, type LeaseBookRules } from '../book/lease-book-settings.js';
import { DEFAULT_RECHECK_INTERVAL_MILLIS } from '../health/index.js';
import { DEFAULT_MAX_UNAVAILABLE, type MaxUnavailable } from './replacement-budget.js';
import { DEFAULT_REPAIR_HOLD_UNHEALTHY_PERCENT } from './repair-hold.js';
import { CREDENTIALS_KEY_BYTES } from './credentials-digest.js';
import { DEFAULT_EXTERNAL_ENDPOINTS, type ExternalEndpointSettings } from '../providers/endpoint-ranges.js';

/** 15 minutes: longer than a probe target's usual hiccup, short enough that a dead proxy does not linger. */
export const DEFAULT_REPLACE_UNHEALTHY_AFTER_SECONDS = 900;

/** The discovery API's own settings, owned here by the runner that serves it. */
export interface DiscoverySettings {
  host: string;
  port: number;
  /** One bearer token (named "default"); '' with no tokensFile = unauthenticated. */
  token: string;
  /** The named tokens file (re-read on change); takes the place of `token`. */
  tokensFile?: string;
  /** /metrics names client targets (`--metrics-target-names`); default: pseudonyms. */
  metricsTargetNames?: boolean;
  /** PEM files: the API serves HTTPS with them (`--discovery-tls-cert`, `--discovery-tls-key`). */
  tls?: { certFile: string; keyFile: string };
  /** Per-token request rate; undefined = unlimited. */
  rateLimit?: { ratePerSecond: number; burst: number };
  /**
   * The book's fair share among tokens (`--discovery-book-concurrency`, `--discovery-book-queue`);
   * undefined = DEFAULT_FAIR_SHARE_LIMITS.
   */
  fairShare?: { inFlight: number; queuedPerToken: number };
  /** The largest ttlSeconds a client may ask for (`--max-lease-ttl`). */
  maxLeaseTTLSeconds: number;
  /** Live sessions one token may keep (`--discovery-session-quota`); undefined = the default quota. */
  sessionQuota?: number;
  /** Live leases one token may hold (`--discovery-lease-quota`); undefined = the default quota. */
  leaseQuota?: number;
  /** Running cooldowns one token's reports may keep (`--discovery-cooldown-quota`); undefined = the default quota. */
  cooldownQuota?: number;
}

/**
 * The controller's tuning, one flag each: the entry point parses it once into this shape and
 * hands it over whole (the handlers read it flat, as part of HandlerSettings).
 */
export interface ControllerSettings {
  /** `--orphan-sweep-interval`. */
  orphanSweepIntervalSeconds: number;
  /** `--orphan-min-age`: instances younger than this are never swept. */
  orphanMinAgeSeconds: number;
  /** `--health-concurrency`: probes in flight at once. */
  healthConcurrency: number;
  /** `--recheck-interval`: between the probes of a recheck after an unreachable report. */
  recheckIntervalMillis: number;
  /** `--max-unavailable`: voluntary replacements in flight per provider. */
  maxUnavailable: MaxUnavailable;
  /**
   * `--replace-unhealthy-after`: seconds a Managed proxy may stay Unhealthy before it is
   * replaced, for proxies whose spec.rotation.unhealthyAfterSeconds is unset; 0 = never.
   */
  replaceUnhealthyAfterSeconds: number;
  /**
   * `--repair-hold-unhealthy-percent`: more than this share of a provider's Managed proxies,
   * or of those probing one target (at least 3), Unhealthy at once holds their repairs (a
   * shared cause); 100 = off (repair-hold.ts).
   */
  repairHoldUnhealthyPercent: number;
  /** `--rotation-drain-timeout`: seconds a proxy rotated on age drains before its instance goes. */
  rotationDrainSeconds: number;
  /**
   * `--instance-poll-interval`: seconds between looks at an instance being created or replaced,
   * and at a replacement waiting for a --max-unavailable slot.
   */
  instancePollSeconds: number;
  /**
   * `--exit-ip-allow-non-public`: accept echo answers that are not public addresses, and echoes
   * over plain http (which the proxy itself could answer). Off in production; the loopback tests
   * and the demo turn it on.
   */
  exitIPAllowNonPublic: boolean;
}

export interface HandlerSettings extends ControllerSettings {
  /**
   * This operator's owner identity (`--cluster-name`; the entry point defaults it to the
   * kube-system Namespace's UID): the LABEL_OWNER of every instance it creates and sweeps. The
   * constant below is for in-process use (tests, the demo).
   */
  ownerID: string;
  /**
   * The key the credentials digests on Proxies are keyed with (credentials-digest.ts), asked
   * for at each reconcile: the entry point's reads (or creates) the Secret CREDENTIALS_KEY_SECRET
   * in the operator's namespace once, retrying after a failure. The default below is drawn per
   * process, for in-process use (tests, the demo).
   */
  credentialsKey: () => Promise<Buffer>;
  /** `--watch-namespace` (filled in by createProxyOperator): the sweep never touches instances of other namespaces. */
  watchNamespace?: string;
  /** How often the health runner re-reads the cache for added, changed and deleted proxies. */
  healthSyncSeconds: number;
  /** Seconds between drift checks of a steady Managed proxy (no flag: tests shorten it). */
  driftCheckSeconds: number;
  discovery: DiscoverySettings;
  /** The lease book's rules (the book's own shape), passed whole to whichever store keeps it. */
  book: LeaseBookRules;
  /**
   * Not a flag: the providers config's `external:` block: where External endpoints may be. The default
   * refuses loopback, link-local, metadata, unspecified and the cluster's CIDRs; the loopback
   * tests and the demo allow loopback in their own settings.
   */
  externalEndpoints: ExternalEndpointSettings;
  /** The autopilot's clock (tests move it to make a proxy old without waiting); default the system's. */
  autopilotClock?: () => Date;
  /** Extra CA certificates the health probes trust (tests and the demo use a local HTTPS target). */
  probeCA?: string;
  /** How often a proxy's exit IP is read again (tests shorten it); default the engine's minute. */
  exitIPRefreshMillis?: number;
  /** The forward-proxy gateway (`--components` gateway); unset = not served. */
  gateway?: GatewaySettings;
}

export interface GatewaySettings {
  host: string;
  port: number;
  /** Upstreams tried per request or tunnel (`--gateway-max-attempts`). */
  maxAttempts: number;
  connectTimeoutMs: number;
  /** Milliseconds a connected upstream may take to send a plain-HTTP response's head. */
  responseTimeoutMs: number;
  /** Seconds a tunnel may carry no byte either way before it is closed and its lease released. */
  tunnelIdleSeconds: number;
  /** The TTL of the leases the gateway takes when the username gives none. */
  ttlSeconds: number;
  /** Seconds a finished lease waits for the next request with the same options. */
  idleSeconds: number;
  bannedCodes: readonly number[];
  rateLimitedCodes: readonly number[];
  /** Seconds open tunnels may finish in at shutdown. */
  drainSeconds: number;
  /**
   * A token of the gateway's own (named "demo"), for the demo whose discovery API is open;
   * the entry point never sets it: the gateway takes the discovery API's tokens.
   */
  demoToken?: string;
}

export const DEFAULT_GATEWAY_SETTINGS: GatewaySettings = {
  host: '0.0.0.0',
  port: 8888,
  maxAttempts: 3,
  connectTimeoutMs: 5000,
  responseTimeoutMs: 60_000,
  tunnelIdleSeconds: 120,
  ttlSeconds: 60,
  idleSeconds: 15,
  bannedCodes: [403],
  rateLimitedCodes: [429],
  drainSeconds: 20,
};

/** The key of in-process operators (tests, the demo): drawn per process, never stored. */
export const IN_PROCESS_CREDENTIALS_KEY = randomBytes(CREDENTIALS_KEY_BYTES);

export const DEFAULT_HANDLER_SETTINGS: HandlerSettings = {
  ownerID: 'proxy-operator',
  credentialsKey: () => Promise.resolve(IN_PROCESS_CREDENTIALS_KEY),
  orphanSweepIntervalSeconds: 600,
  orphanMinAgeSeconds: 600,
  healthConcurrency: 64,
  healthSyncSeconds: 2,
  driftCheckSeconds: 60,
  maxUnavailable: DEFAULT_MAX_UNAVAILABLE,
  replaceUnhealthyAfterSeconds: DEFAULT_REPLACE_UNHEALTHY_AFTER_SECONDS,
  repairHoldUnhealthyPercent: DEFAULT_REPAIR_HOLD_UNHEALTHY_PERCENT,
  exitIPAllowNonPublic: false,
  externalEndpoints: DEFAULT_EXTERNAL_ENDPOINTS,
  rotationDrainSeconds: DEFAULT_ROTATION_DRAIN_SECONDS,
  instancePollSeconds: POLL_SECONDS,
  recheckIntervalMillis: DEFAULT_RECHECK_INTERVAL_MILLIS,
  discovery: {
    host: '0.0.0.0',
    port: 8090,
    token: '',
    rateLimit: { ratePerSecond: 1000, burst: 2000 },
    maxLeaseTTLSeconds: 3600,
    sessionQuota: 10_000,
    leaseQuota: 1_000,
    cooldownQuota: 1_000,
  },
  book: DEFAULT_LEASE_BOOK_RULES,
};
