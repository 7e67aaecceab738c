// The rules of the lease book, the same whichever store keeps it: cooldowns, suspicion,
// sessions, statistics and the caps of the (proxy, target) memory. Each store takes them as
// options, and both check them here, so a bad value is refused with the same words.
import {
  DEFAULT_MAX_RATE_LIMIT_COOLDOWN_SECONDS,
  DEFAULT_RATE_LIMIT_COOLDOWN_SECONDS,
} from './cooldown-policy.js';
import { WINDOW_BUCKETS } from './outcome-window.js';
import { DEFAULT_SUSPICION_HOLDOFF_SECONDS, DEFAULT_SUSPICION_TIMEOUT_SECONDS } from './proxy-holds.js';
import { DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE_SECONDS, MIN_MAX_SESSIONS } from './session-book.js';
import { MAX_TARGET_ENTRIES, MAX_TARGETS_PER_PROXY } from './target-book.js';

export const DEFAULT_COOLDOWN_SECONDS = 15 * 60;
export const DEFAULT_MAX_COOLDOWN_SECONDS = 60 * 60;
export const DEFAULT_STATS_WINDOW_SECONDS = 15 * 60;
export const DEFAULT_SWEEP_INTERVAL_MS = 5000;

/**
 * The book's rules an operator sets (one flag each): the cooldowns, suspicion and sessions.
 * The book owns this shape; the entry point builds it once from the flags and every layer
 * passes it whole to whichever store keeps the book.
 */
export interface LeaseBookRules {
  /** The first cooldown after a banned|rate_limited report (`--cooldown`). */
  cooldownSeconds: number;
  /** The longest cooldown a streak of bad reports can reach (`--max-cooldown`). */
  maxCooldownSeconds: number;
  /** The first cooldown after a rate_limited report (`--rate-limit-cooldown`). */
  rateLimitCooldownSeconds: number;
  /** The longest rate-limit cooldown a streak can reach (`--max-rate-limit-cooldown`). */
  maxRateLimitCooldownSeconds: number;
  /** rate_limited rests like banned, on one streak (`--single-cooldown-window`: the specification's rule). */
  singleCooldownWindow: boolean;
  /** An unanswered suspicion ends after this long (`--suspicion-timeout`). */
  suspicionTimeoutSeconds: number;
  /** Reports this soon after a passing re-probe are not believed (`--suspicion-holdoff`). */
  suspicionHoldoffSeconds: number;
  /** A sticky session without a lease or renewal is forgotten after this long (`--session-idle-timeout`). */
  sessionIdleSeconds: number;
  /** Sticky sessions kept; at the cap the least recently used goes (`--max-sessions`). */
  maxSessions: number;
}

/** The rules' defaults: the flags' defaults, so an in-process book (tests, the demo) behaves like the operator's. */
export const DEFAULT_LEASE_BOOK_RULES: LeaseBookRules = {
  cooldownSeconds: DEFAULT_COOLDOWN_SECONDS,
  maxCooldownSeconds: DEFAULT_MAX_COOLDOWN_SECONDS,
  rateLimitCooldownSeconds: DEFAULT_RATE_LIMIT_COOLDOWN_SECONDS,
  maxRateLimitCooldownSeconds: DEFAULT_MAX_RATE_LIMIT_COOLDOWN_SECONDS,
  singleCooldownWindow: false,
  suspicionTimeoutSeconds: DEFAULT_SUSPICION_TIMEOUT_SECONDS,
  suspicionHoldoffSeconds: DEFAULT_SUSPICION_HOLDOFF_SECONDS,
  sessionIdleSeconds: DEFAULT_SESSION_IDLE_SECONDS,
  maxSessions: DEFAULT_MAX_SESSIONS,
};

/** A store's options: any of the rules (a default for the rest) and the knobs only tests turn. */
export interface LeaseBookOptions extends Partial<LeaseBookRules> {
  /** Uniform in [0, 1): spreads cooldowns (tests pin it). */
  random?: () => number;
  /** Length of the sliding window of report statistics. */
  statsWindowSeconds?: number;
  /** Caps of the (proxy, target) memory; the defaults are documented in target-book.ts. */
  maxTargetsPerProxy?: number;
  maxTargetEntries?: number;
  /** How often the background loop frees memory of expired state. */
  sweepIntervalMs?: number;
  newID?: () => string;
}

/** The options with their defaults, checked, in the units the stores work in. */
export interface LeaseBookSettings {
  banBaseMillis: number;
  banMaxMillis: number;
  rateLimitBaseMillis: number;
  rateLimitMaxMillis: number;
  singleCooldownWindow: boolean;
  suspicionTimeoutMillis: number;
  suspicionHoldoffMillis: number;
  sessionIdleMillis: number;
  maxSessions: number;
  statsWindowSeconds: number;
  /** One slot of the statistics window. */
  bucketMillis: number;
  sweepIntervalMs: number;
  maxTargetsPerProxy: number;
  maxTargetEntries: number;
}

/** Throws naming the option when a value is not a number or below its minimum. */
export function leaseBookSettings(options: LeaseBookOptions): LeaseBookSettings {
  const [cooldown, maxCooldown] = cooldownRange(
    ['cooldownSeconds', options.cooldownSeconds, DEFAULT_COOLDOWN_SECONDS],
    ['maxCooldownSeconds', options.maxCooldownSeconds, DEFAULT_MAX_COOLDOWN_SECONDS],
  );
  const [rateLimit, maxRateLimit] = cooldownRange(
    ['rateLimitCooldownSeconds', options.rateLimitCooldownSeconds, DEFAULT_RATE_LIMIT_COOLDOWN_SECONDS],
    [
      'maxRateLimitCooldownSeconds',
      options.maxRateLimitCooldownSeconds,
      DEFAULT_MAX_RATE_LIMIT_COOLDOWN_SECONDS,
    ],
  );
  const statsWindowSeconds = setting(
    'statsWindowSeconds',
    options.statsWindowSeconds ?? DEFAULT_STATS_WINDOW_SECONDS,
    WINDOW_BUCKETS,
  );
  return {
    banBaseMillis: cooldown * 1000,
    banMaxMillis: maxCooldown * 1000,
    rateLimitBaseMillis: rateLimit * 1000,
    rateLimitMaxMillis: maxRateLimit * 1000,
    singleCooldownWindow: options.singleCooldownWindow === true,
    suspicionTimeoutMillis:
      setting(
        'suspicionTimeoutSeconds',
        options.suspicionTimeoutSeconds ?? DEFAULT_SUSPICION_TIMEOUT_SECONDS,
        1,
      ) * 1000,
    suspicionHoldoffMillis:
      setting(
        'suspicionHoldoffSeconds',
        options.suspicionHoldoffSeconds ?? DEFAULT_SUSPICION_HOLDOFF_SECONDS,
        0,
      ) * 1000,
    sessionIdleMillis:
      setting('sessionIdleSeconds', options.sessionIdleSeconds ?? DEFAULT_SESSION_IDLE_SECONDS, 1) * 1000,
    maxSessions: setting('maxSessions', options.maxSessions ?? DEFAULT_MAX_SESSIONS, MIN_MAX_SESSIONS),
    statsWindowSeconds,
    bucketMillis: (statsWindowSeconds * 1000) / WINDOW_BUCKETS,
    sweepIntervalMs: setting('sweepIntervalMs', options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS, 1),
    maxTargetsPerProxy: setting('maxTargetsPerProxy', options.maxTargetsPerProxy ?? MAX_TARGETS_PER_PROXY, 1),
    maxTargetEntries: setting('maxTargetEntries', options.maxTargetEntries ?? MAX_TARGET_ENTRIES, 1),
  };
}

type Given = [name: keyof LeaseBookOptions, value: number | undefined, fallback: number];

/**
 * A first cooldown and the longest a streak can reach: the longest is at least the first, and
 * its default rises to a first cooldown set above it.
 */
function cooldownRange(
  [baseName, baseValue, baseDefault]: Given,
  [maxName, maxValue, maxDefault]: Given,
): [number, number] {
  const base = setting(baseName, baseValue ?? baseDefault, 0);
  return [base, setting(maxName, maxValue ?? Math.max(maxDefault, base), base)];
}

function setting(name: keyof LeaseBookOptions, value: number, min: number): number {
  if (!Number.isFinite(value) || value < min) {
    throw new Error(`${name} must be a number >= ${min}, got ${value}`);
  }
  return value;
}
