// How long a proxy rests for a target after consecutive bad reports: pure, table-tested.
import type { ReportResult } from './lease-store.js';

export interface CooldownPolicy {
  /** The first cooldown (`--cooldown`). */
  baseMillis: number;
  /** No cooldown is longer than this (`--max-cooldown`). */
  maxMillis: number;
  /** Each cooldown is spread by ±jitter (0.1 = ±10 %), so benched proxies do not all return at once. */
  jitter: number;
}

export const COOLDOWN_JITTER = 0.1;

/**
 * base × 2^(streak − 1), capped at the maximum, then spread by ±jitter and capped again;
 * `random` is uniform in [0, 1). A streak of 1 is the first bad report in a row.
 */
export function cooldownMillis(streak: number, policy: CooldownPolicy, random: number): number {
  // 2^40 × any sane base is far past every cap; the bound keeps the arithmetic finite.
  const doubled = policy.baseMillis * 2 ** Math.min(Math.max(streak, 1) - 1, 40);
  const spread = Math.min(doubled, policy.maxMillis) * (1 + policy.jitter * (2 * random - 1));
  return Math.round(Math.min(spread, policy.maxMillis));
}

/**
 * A ban and a rate limit rest a proxy differently: a ban means the site has learnt this
 * address (minutes, doubling), a 429 asks the client to slow down (seconds, doubling, at least
 * the site's Retry-After). `single` restores the specification's one window for both.
 */
export interface CooldownRules {
  banned: CooldownPolicy;
  rateLimited: CooldownPolicy;
  /** true: rate_limited shares banned's policy and streak (the specification's rule). */
  single: boolean;
}

export const DEFAULT_RATE_LIMIT_COOLDOWN_SECONDS = 10;
export const DEFAULT_MAX_RATE_LIMIT_COOLDOWN_SECONDS = 120;

/** Which cooldown (and streak) a bad report feeds. */
export type CooldownKind = 'ban' | 'rate';

export function cooldownKindOf(
  result: Exclude<ReportResult, 'ok' | 'unreachable'>,
  rules: CooldownRules,
): CooldownKind {
  return result === 'rate_limited' && !rules.single ? 'rate' : 'ban';
}

/**
 * The rest a bad report earns: the kind's policy at its streak, or, for a rate limit whose
 * response said when to come back, exactly that Retry-After (at least a second, at most the
 * ban maximum): the site knows its own window, and resting longer only idles the proxy.
 */
export function restMillis(
  kind: CooldownKind,
  streak: number,
  rules: CooldownRules,
  random: number,
  retryAfterMillis?: number,
): number {
  const policy = kind === 'rate' ? rules.rateLimited : rules.banned;
  const rest = cooldownMillis(streak, policy, random);
  if (retryAfterMillis === undefined || kind !== 'rate') return rest;
  return Math.min(Math.max(retryAfterMillis, 1000), rules.banned.maxMillis);
}
