// The pace one proxy keeps for one site once the site has rate-limited it: at most `limit`
// requests per window of the 429's Retry-After, learned from the successes the site allowed.
// Pure: SessionLeases keeps one Pace per (proxy, host) and sleeps when admit() says so.
//
// Why: waiting out a 429's rest and then sending every waiting request at once gets most of
// them a 429 again, and each 429 costs the request one of Crawlee's retries. Admitting only
// what the site allowed in the last window keeps the crawl at the site's rate with almost no
// 429s; a probe one request above the limit after a few clean windows finds a limit that rose.

/** Clean full windows before the limit is probed one higher. */
export const PROBE_AFTER_WINDOWS = 3;
/** Successes remembered before the first 429 (to learn the first limit from). */
const RECENT_CAP = 256;

export interface Pace {
  /** Requests one window admits; undefined until the first 429 (no pacing before it). */
  readonly limit: number | undefined;
  /** The window's length: the last 429's Retry-After. */
  readonly periodMs: number;
  /** The current window (or the rest a 429 started) ends here. */
  readonly windowEnd: number;
  /** Requests admitted in the current window. */
  readonly admitted: number;
  /** Successes in the current window. */
  readonly succeeded: number;
  /** The current window is a 429's rest: nothing is admitted until it ends. */
  readonly resting: boolean;
  /** Consecutive windows that admitted their whole limit and saw no 429. */
  readonly cleanWindows: number;
  /** Success times before the first 429, newest last. */
  readonly recent: readonly number[];
}

export const unpaced: Pace = {
  limit: undefined,
  periodMs: 1_000,
  windowEnd: 0,
  admitted: 0,
  succeeded: 0,
  resting: false,
  cleanWindows: 0,
  recent: [],
};

/** Whether a request may go now, and the pace after it; otherwise how long to wait before asking again. */
export function admit(pace: Pace, now: number): { pace: Pace; waitMs: number } {
  if (pace.limit === undefined) return { pace, waitMs: 0 };
  if (now >= pace.windowEnd) {
    const full = !pace.resting && pace.admitted >= pace.limit;
    const clean = full ? pace.cleanWindows + 1 : 0;
    const probe = clean >= PROBE_AFTER_WINDOWS;
    return {
      pace: {
        ...pace,
        limit: probe ? pace.limit + 1 : pace.limit,
        cleanWindows: probe ? 0 : clean,
        windowEnd: now + pace.periodMs,
        admitted: 1,
        succeeded: 0,
        resting: false,
      },
      waitMs: 0,
    };
  }
  if (!pace.resting && pace.admitted < pace.limit)
    return { pace: { ...pace, admitted: pace.admitted + 1 }, waitMs: 0 };
  return { pace, waitMs: pace.windowEnd - now };
}

/** A request through the proxy to the site succeeded. */
export function succeeded(pace: Pace, now: number): Pace {
  if (pace.limit !== undefined) return { ...pace, succeeded: pace.succeeded + 1 };
  const recent = pace.recent.length >= RECENT_CAP ? pace.recent.slice(1) : pace.recent;
  return { ...pace, recent: [...recent, now] };
}

/**
 * The site answered 429. The limit becomes what the site allowed: the successes of this
 * window (before the first 429: of the last period), at least one; nothing more is admitted
 * until the rest ends. A 429 during a rest comes from a request sent before it: ignored.
 */
export function rateLimited(pace: Pace, now: number, retryAfterMs: number | undefined): Pace {
  if (pace.resting && now < pace.windowEnd) return pace;
  const periodMs = retryAfterMs !== undefined && retryAfterMs > 0 ? retryAfterMs : pace.periodMs;
  const allowed =
    pace.limit === undefined ? pace.recent.filter((t) => t > now - periodMs).length : pace.succeeded;
  return {
    limit: Math.max(1, allowed),
    periodMs,
    windowEnd: now + periodMs,
    admitted: 0,
    succeeded: 0,
    resting: true,
    cleanWindows: 0,
    recent: [],
  };
}
