// The pace one proxy keeps for one site once the site has rate-limited it: a token bucket of
// `limit` requests per `periodMs` (the 429's Retry-After), learned from the successes the site
// allowed. Pure: SessionLeases keeps one Pace per (proxy, host) and asks admit() before each
// request.
//
// Why: waiting out a 429's rest and then sending every waiting request at once gets most of
// them a 429 again, and each 429 costs the request one of Crawlee's retries. Spending only
// what the site allowed keeps the crawl at the site's rate with few 429s; a bucket (rather
// than fixed windows) loses nothing when requests come late; a probe one above the limit,
// when demand exceeds it and no 429 came for a while, finds a limit that rose.

/** Periods without a 429 before the limit is probed one higher (and between probes). */
export const PROBE_AFTER_PERIODS = 5;
/**
 * Each refused probe doubles the quiet periods before the next, up to this many: a site whose
 * limit holds would otherwise answer a probe with a 429 every few periods, and each costs the
 * proxy a rest.
 */
export const MAX_PROBE_AFTER_PERIODS = 80;
/**
 * A 429 after the limit went through in full means the site's bucket and this one drift (each
 * refills from its own clock, a few ms apart): the refill slows by this share of the period,
 * instead of the limit falling by one (a third of the throughput at 3 a second) ...
 */
export const SLACK_STEP = 0.02;
/** ... up to this share; a 429 beyond it lowers the limit after all. */
export const MAX_SLACK = 0.1;
/** Success times remembered to learn the limit from. */
const RECENT_CAP = 256;
/** Before the first 429 the period is unknown: successes are remembered this long. */
const RECENT_BEFORE_FIRST_MS = 60_000;

export interface Pace {
  /** Requests per period; undefined until the first 429 (no pacing before it). */
  readonly limit: number | undefined;
  /** The last 429's Retry-After. */
  readonly periodMs: number;
  /** Added to the period when refilling: the margin for the two clocks' drift (see SLACK_STEP). */
  readonly slackMs: number;
  /** Tokens in the bucket at `at`. */
  readonly tokens: number;
  readonly at: number;
  /** Nothing goes before this: the last 429's rest. */
  readonly restUntil: number;
  /** When the last 429 that set the pace came, and when the limit was last probed. */
  readonly limitedAt: number;
  readonly probedAt: number;
  /** Quiet periods before the next probe: PROBE_AFTER_PERIODS, doubled by each refused probe. */
  readonly probeAfterPeriods: number;
  /** Times of the latest successes, oldest first. */
  readonly recent: readonly number[];
}

export const unpaced: Pace = {
  limit: undefined,
  periodMs: 1_000,
  slackMs: 0,
  tokens: 0,
  at: 0,
  restUntil: 0,
  limitedAt: 0,
  probedAt: 0,
  probeAfterPeriods: PROBE_AFTER_PERIODS,
  recent: [],
};

/**
 * Whether a request may go now (waitMs 0, and the pace after it), or how long until it may.
 * `probe`: it may go only as a probe of a higher limit (a caller with another proxy that has
 * a token should send it there instead).
 */
export function admit(pace: Pace, now: number): { pace: Pace; waitMs: number; probe: boolean } {
  const { limit, periodMs } = pace;
  if (limit === undefined) return { pace, waitMs: 0, probe: false };
  if (now < pace.restUntil) return { pace, waitMs: pace.restUntil - now, probe: false };
  const refillMs = periodMs + pace.slackMs;
  const tokens = Math.min(limit, pace.tokens + ((now - pace.at) * limit) / refillMs);
  if (tokens >= 1) return { pace: { ...pace, tokens: tokens - 1, at: now }, waitMs: 0, probe: false };
  const quiet = pace.probeAfterPeriods * periodMs;
  if (now - pace.limitedAt >= quiet && now - pace.probedAt >= quiet) {
    // Demand exceeds the pace and the site has not objected for a while: try one more.
    return { pace: { ...pace, limit: limit + 1, tokens, at: now, probedAt: now }, waitMs: 0, probe: true };
  }
  return { pace, waitMs: Math.ceil(((1 - tokens) * refillMs) / limit), probe: false };
}

/** A request through the proxy to the site succeeded. */
export function succeeded(pace: Pace, now: number): Pace {
  const keep = now - (pace.limit === undefined ? RECENT_BEFORE_FIRST_MS : pace.periodMs);
  let from = 0;
  while (from < pace.recent.length && pace.recent[from]! <= keep) from++;
  if (pace.recent.length - from >= RECENT_CAP) from++;
  return { ...pace, recent: [...pace.recent.slice(from), now] };
}

/**
 * The site answered 429. The limit becomes what the site allowed in the last period (and one
 * less than before at most), at least one; when that was the whole limit, the refill slows
 * instead (SLACK_STEP, until MAX_SLACK). The answer to a probe only undoes the probe and
 * doubles the wait before the next one (any other 429 resets that wait: the site changed).
 * The bucket empties and nothing goes until the rest ends. A 429 during a rest comes from a
 * request sent before it: ignored.
 */
export function rateLimited(pace: Pace, now: number, retryAfterMs: number | undefined): Pace {
  if (now < pace.restUntil) return pace;
  const periodMs = retryAfterMs !== undefined && retryAfterMs > 0 ? retryAfterMs : pace.periodMs;
  const allowed = pace.recent.filter((t) => t > now - periodMs).length;
  // The answer to a probe (within a period of it): the limit before the probe was right.
  const probeRefused = pace.limit !== undefined && now - pace.probedAt < pace.periodMs;
  const maxSlackMs = MAX_SLACK * periodMs;
  let limit: number;
  let slackMs = pace.slackMs;
  if (pace.limit === undefined) limit = Math.max(1, allowed);
  else if (probeRefused) limit = Math.max(1, pace.limit - 1);
  else if (allowed >= pace.limit && pace.slackMs < maxSlackMs) {
    limit = pace.limit;
    slackMs = Math.min(maxSlackMs, pace.slackMs + SLACK_STEP * periodMs);
  } else {
    limit = Math.max(1, Math.min(pace.limit - 1, allowed));
    slackMs = 0;
  }
  return {
    limit,
    periodMs,
    slackMs,
    tokens: 0,
    at: now,
    restUntil: now + periodMs,
    limitedAt: now,
    probedAt: pace.probedAt,
    probeAfterPeriods: probeRefused
      ? Math.min(MAX_PROBE_AFTER_PERIODS, pace.probeAfterPeriods * 2)
      : PROBE_AFTER_PERIODS,
    recent: [],
  };
}
