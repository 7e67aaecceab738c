import { DEFAULT_ROTATION_DRAIN_SECONDS } from './proxy-state-machine.js';
import {
  DEFAULT_MAX_RATE_LIMIT_COOLDOWN_SECONDS,
  DEFAULT_RATE_LIMIT_COOLDOWN_SECONDS,
} from '../discovery/cooldown-policy.js';
import {
  DEFAULT_SUSPICION_HOLDOFF_SECONDS,
  DEFAULT_SUSPICION_TIMEOUT_SECONDS,
} from '../discovery/proxy-holds.js';
import { DEFAULT_RECHECK_INTERVAL_MILLIS } from '../health/index.js';
import { DEFAULT_MAX_UNAVAILABLE, type MaxUnavailable } from './replacement-budget.js';
import { DEFAULT_REPAIR_HOLD_UNHEALTHY_PERCENT } from './repair-hold.js';

/** 15 minutes: longer than a probe target's usual hiccup, short enough that a dead proxy does not linger. */
export const DEFAULT_REPLACE_UNHEALTHY_AFTER_SECONDS = 900;

export interface HandlerSettings {
  /**
   * This operator's owner identity (`--cluster-name`; the entry point defaults it to the
   * kube-system Namespace's UID): the LABEL_OWNER of every instance it creates and sweeps. The
   * constant below is for in-process use (tests, the demo).
   */
  ownerID: string;
  /** `--watch-namespace` (filled in by createProxyOperator): the sweep never touches instances of other namespaces. */
  watchNamespace?: string;
  orphanSweepIntervalSeconds: number;
  orphanMinAgeSeconds: number;
  healthConcurrency: number;
  /** How often the health runner re-reads the cache for added, changed and deleted proxies. */
  healthSyncSeconds: number;
  /** Seconds between drift checks of a steady Managed proxy (no flag: tests shorten it). */
  driftCheckSeconds: number;
  discovery: {
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
    cooldownSeconds: number;
    maxCooldownSeconds: number;
    rateLimitCooldownSeconds: number;
    maxRateLimitCooldownSeconds: number;
    /** rate_limited rests like banned (the specification's single window). */
    singleCooldownWindow: boolean;
    suspicionTimeoutSeconds: number;
    suspicionHoldoffSeconds: number;
    sessionIdleSeconds: number;
    maxSessions: number;
    /** Live sessions one token may keep (`--discovery-session-quota`); undefined = the default quota. */
    sessionQuota?: number;
    maxLeaseTTLSeconds: number;
  };
  /** `--max-unavailable`: voluntary replacements in flight per provider. */
  maxUnavailable: MaxUnavailable;
  /**
   * `--replace-unhealthy-after`: seconds a Managed proxy may stay Unhealthy before it is
   * replaced, for proxies whose spec.rotation.unhealthyAfterSeconds is unset; 0 = never.
   */
  replaceUnhealthyAfterSeconds: number;
  /**
   * `--repair-hold-unhealthy-percent`: more than this share of a provider's Managed proxies
   * Unhealthy at once holds all its repairs (a shared cause); 100 = off (repair-hold.ts).
   */
  repairHoldUnhealthyPercent: number;
  /** `--rotation-drain-timeout`: seconds a proxy rotated on age drains before its instance goes. */
  rotationDrainSeconds: number;
  /** The autopilot's clock (tests move it to make a proxy old without waiting); default the system's. */
  autopilotClock?: () => Date;
  /** Extra CA certificates the health probes trust (tests and the demo use a local HTTPS target). */
  probeCA?: string;
  /** Between the probes of a recheck after an unreachable report. */
  recheckIntervalMillis: number;
  /**
   * `--exit-ip-allow-non-public`: accept echo answers that are not public addresses, and echoes
   * over plain http (which the proxy itself could answer). Off in production; the loopback tests
   * and the demo turn it on.
   */
  exitIPAllowNonPublic: boolean;
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
  ttlSeconds: 60,
  idleSeconds: 15,
  bannedCodes: [403],
  rateLimitedCodes: [429],
  drainSeconds: 20,
};

export const DEFAULT_HANDLER_SETTINGS: HandlerSettings = {
  ownerID: 'proxy-operator',
  orphanSweepIntervalSeconds: 600,
  orphanMinAgeSeconds: 600,
  healthConcurrency: 64,
  healthSyncSeconds: 2,
  driftCheckSeconds: 60,
  maxUnavailable: DEFAULT_MAX_UNAVAILABLE,
  replaceUnhealthyAfterSeconds: DEFAULT_REPLACE_UNHEALTHY_AFTER_SECONDS,
  repairHoldUnhealthyPercent: DEFAULT_REPAIR_HOLD_UNHEALTHY_PERCENT,
  exitIPAllowNonPublic: false,
  rotationDrainSeconds: DEFAULT_ROTATION_DRAIN_SECONDS,
  recheckIntervalMillis: DEFAULT_RECHECK_INTERVAL_MILLIS,
  discovery: {
    host: '0.0.0.0',
    port: 8090,
    token: '',
    rateLimit: { ratePerSecond: 1000, burst: 2000 },
    cooldownSeconds: 900,
    maxCooldownSeconds: 3600,
    rateLimitCooldownSeconds: DEFAULT_RATE_LIMIT_COOLDOWN_SECONDS,
    maxRateLimitCooldownSeconds: DEFAULT_MAX_RATE_LIMIT_COOLDOWN_SECONDS,
    singleCooldownWindow: false,
    suspicionTimeoutSeconds: DEFAULT_SUSPICION_TIMEOUT_SECONDS,
    suspicionHoldoffSeconds: DEFAULT_SUSPICION_HOLDOFF_SECONDS,
    sessionIdleSeconds: 1800,
    maxSessions: 100_000,
    sessionQuota: 10_000,
    maxLeaseTTLSeconds: 3600,
  },
};
