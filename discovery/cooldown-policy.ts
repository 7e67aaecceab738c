// How long a proxy rests for a target after consecutive bad reports: pure, table-tested.

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
