// The pace one proxy keeps for one site once the site has rate-limited it: a token bucket of
// `limit` requests per `periodMs` (the 429's Retry-After), learned from the successes the site
// allowed. Pure: SessionLeases keeps one Pace per (proxy, host) and asks admit() before each
// request; what one proxy's pace tells the host's others is site-pace-sharing.ts.
//
// Why: waiting out a 429's rest and then sending every waiting request at once gets most of
// them a 429 again, and each 429 costs the request one of Crawlee's retries. Spending only
// what the site allowed keeps the crawl at the site's rate with few 429s; a bucket (rather
// than fixed windows) loses nothing when requests come late (over a one-second period it
// holds a tenth of the limit: a full one's burst met a sliding window); a probe one above the limit,
// when demand exceeds it and no 429 came for a while, finds a limit that rose.
//
// A 429 without Retry-After says nothing about the limit's shape (a bucket, a sliding or a
// fixed window, of any length): the pace is then `blind`, an additive-increase,
// multiplicative-decrease rate per second. The 429 cuts the rate to BLIND_DECREASE of what was
// going through and rests the proxy for BLIND_REST_MS only; the rate at the 429 is the
// `ceiling`, which the pace climbs back to by halving the gap each second the demand exceeds
// the pace (so a 429 on a loose limit costs about two seconds at part rate on one proxy, not
// the crawl). A 429 at the ceiling lowers it a notch (the site allows less); above the ceiling
// the pace probes only after quiet periods, as the Retry-After pace does, 5 % above; a probe
// that held all the quiet doubles the next one's step (10 %, 20 % ... up to doubling the rate:
// a limit that rose is found in a few probes, not ~47), and any 429 resets it. The Retry-After
// pace probes one more at a time: the site said its period, and the pace honours it.
import { impliedLimit } from './implied-limit.js';
import { TimeLog } from './time-log.js';

/** Periods without a 429 before the limit is probed higher (and between probes). */
export const PROBE_AFTER_PERIODS = 5;
/**
 * Each refused probe doubles the quiet periods before the next, up to this many: a site whose
 * limit holds would otherwise answer a probe with a 429 every few periods, and each costs the
 * proxy a rest.
 */
export const MAX_PROBE_AFTER_PERIODS = 80;
/**
 * A 429 after the limit went through in full means the two buckets are out of step: both
 * refill at the same rate, but a request reaches the site a few ms after this bucket let it
 * go, and those ms vary, so a request that travelled faster than the one before finds the
 * site's token not yet back. The bucket then holds back this share of a token for good (it
 * fills to `limit - headroom`), so the site's bucket stays that far ahead. Unlike a slower
 * refill, that costs no throughput: only the first request after a quiet spell waits a few ms.
 * Instead of the limit falling by one (a third of the throughput at 3 a second) ...
 */
export const HEADROOM_STEP = 0.1;
/** ... up to this share of a token; a 429 beyond it lowers the limit after all. */
export const MAX_HEADROOM = 0.5;
/**
 * The headroom a limit starts with when it is learned (or lowered). The travel varies most at
 * the start: a proxy's first requests open connections, the ones after reuse them and arrive
 * sooner, so starting from no margin cost nearly every proxy a drift 429 (and a rest) in its
 * first seconds. A margin costs only the burst after a quiet spell, by this share of a token.
 */
export const FIRST_HEADROOM = 0.3;
/** A 429 without Retry-After rests its proxy for the host this long: a moment, one assumed period. */
export const BLIND_REST_MS = 1_000;
/** A 429 without Retry-After cuts the rate to this share of the rate that met it. */
export const BLIND_DECREASE = 0.7;
/** A 429 at the ceiling (the limit is near it) cuts the rate to this share of the lowered ceiling. */
export const AT_CEILING_DECREASE = 0.9;
/** A 429 at the ceiling lowers the ceiling by this share (at least one request a second). */
export const CEILING_STEP = 0.05;
/** A blind pace's bucket holds this share of a second's rate (a burst after a quiet spell). */
export const BLIND_BURST = 0.1;
/**
 * A Retry-After of a second says the limit is per second, not its shape: a bucket, or a
 * sliding or fixed window of a second. A full bucket's burst after a quiet spell, on top of
 * the refill, sends up to twice the limit within one second, which a sliding window refuses
 * (a loose sliding window then delivered 0.90 of the demand, with 34 429s in two minutes, in
 * site-pace-convergence's table; at this share 1.00, with 4). Spread over the second, the
 * limit fits every shape. Over a longer period the burst stays: a fixed window of 10 s takes
 * its limit at the window's start (spread, it delivered 0.71 of the rate).
 */
export const SECOND_BURST = 0.1;
/** ... but at least this many tokens: a low limit's bucket holds what it did (the headroom's margin). */
export const MIN_SECOND_BURST = 3;
/** A blind rate never falls below this (requests per second): one request every two seconds. */
export const BLIND_MIN_RATE = 0.5;
/** Success times remembered to learn the limit from. */
const RECENT_CAP = 256;
/** Before the first 429 the period is unknown: successes are remembered this long. */
const RECENT_BEFORE_FIRST_MS = 60_000;

export interface Pace {
  /** Requests per period; undefined until the first 429 (no pacing before it). */
  readonly limit: number | undefined;
  /** The last 429's Retry-After. */
  readonly periodMs: number;
  /** Tokens held back from a full bucket: the margin for the requests' varying travel (see HEADROOM_STEP). */
  readonly headroom: number;
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
  /** Blind only: this proxy's own last probe (probedAt moves with other proxies' too). */
  readonly ownProbeAt: number;
  /** Blind only: the next probe's step in base steps: 1, doubled by each probe that held. */
  readonly probeGrowth: number;
  /** Blind only: the rate the last 429 met (Infinity once a held probe passed it). */
  readonly refused: number;
  /** Times of the latest successes, oldest first. */
  readonly recent: TimeLog;
  /**
   * Before the pace is known, when the latest requests went (oldest first): one sent and not
   * yet answered has spent a token at the site all the same (see adopt).
   */
  readonly sent: TimeLog;
  /** Set by a 429 without Retry-After: `limit` is a rate per second, moved by AIMD (see above). */
  readonly blind: boolean;
  /** Blind only: the rate a 429 last met (a probe above it, held a period, raises it). */
  readonly ceiling: number;
  /** Blind only: when the rate last rose toward the ceiling. */
  readonly raisedAt: number;
}

export const unpaced: Pace = {
  limit: undefined,
  periodMs: 1_000,
  headroom: 0,
  tokens: 0,
  at: 0,
  restUntil: 0,
  limitedAt: 0,
  probedAt: 0,
  probeAfterPeriods: PROBE_AFTER_PERIODS,
  ownProbeAt: 0,
  probeGrowth: 1,
  refused: Infinity,
  recent: TimeLog.empty,
  sent: TimeLog.empty,
  blind: false,
  ceiling: 0,
  raisedAt: 0,
};

/**
 * The tokens a full bucket holds: a blind pace a fraction of its second; a Retry-After pace the
 * limit less the headroom, but over a period of a second at most SECOND_BURST of it (at least
 * MIN_SECOND_BURST tokens).
 */
export function capacityOf(pace: Pace): number {
  const limit = pace.limit ?? 1;
  if (pace.blind) return Math.max(1, limit * BLIND_BURST);
  const full = limit - pace.headroom;
  const burst = pace.periodMs <= 1_000 ? Math.max(MIN_SECOND_BURST, limit * SECOND_BURST) : full;
  return Math.max(1, Math.min(full, burst));
}

/** The step of a ceiling lowered: a twentieth of the rate. */
function probeStep(limit: number): number {
  return limit * CEILING_STEP;
}

/**
 * A blind probe's step: a twentieth of the rate times `probeGrowth`, at most doubling it, nor
 * past halfway to `refused` (on a limit that holds a probe may hold a step below the refused
 * rate, and a grown step then leapt past the limit); at least the base step.
 */
function probeIncrement(pace: Pace, limit: number): number {
  const base = probeStep(limit);
  return Math.max(base, Math.min(limit, base * pace.probeGrowth, (pace.refused - limit) / 2));
}

/**
 * Whether this proxy's own last probe held: no 429 since, for all the quiet before the next.
 * Not sooner: a site's window may be longer than a second (a 10 s fixed window, a burst).
 */
function probeHeld(pace: Pace, now: number): boolean {
  return pace.ownProbeAt > pace.limitedAt && now - pace.ownProbeAt >= pace.probeAfterPeriods * pace.periodMs;
}

/**
 * Whether a request may go now (waitMs 0, and the pace after it), or how long until it may.
 * `probe`: it may go only as a probe of a higher limit (a caller with another proxy that has
 * a token should send it there instead).
 */
export function admit(pace: Pace, now: number): { pace: Pace; waitMs: number; probe: boolean } {
  const { limit, periodMs } = pace;
  if (limit === undefined)
    return {
      pace: { ...pace, sent: pace.sent.remember(now, now - RECENT_BEFORE_FIRST_MS, RECENT_CAP) },
      waitMs: 0,
      probe: false,
    };
  if (now < pace.restUntil) return { pace, waitMs: pace.restUntil - now, probe: false };
  // At least one token fits, whatever the headroom (a limit of one cannot hold any back).
  const capacity = capacityOf(pace);
  const tokens = Math.min(capacity, pace.tokens + ((now - pace.at) * limit) / periodMs);
  if (tokens >= 1) return { pace: { ...pace, tokens: tokens - 1, at: now }, waitMs: 0, probe: false };
  if (pace.blind) return admitBlind(pace, tokens, now);
  const quiet = pace.probeAfterPeriods * periodMs;
  if (now - pace.limitedAt >= quiet && now - pace.probedAt >= quiet) {
    // Demand exceeds the pace and the site has not objected for a while: try one more. Not a
    // grown step: this bucket bursts a period's worth after a quiet spell, and on a sliding
    // window the limits grown steps found drew 429s in bursts (the table: 54 → 88 in 2 min).
    return { pace: { ...pace, limit: limit + 1, tokens, at: now, probedAt: now }, waitMs: 0, probe: true };
  }
  return { pace, waitMs: Math.ceil(((1 - tokens) * periodMs) / limit), probe: false };
}

/**
 * A blind pace with no token now (demand exceeds it): a probe that held a period raises the
 * ceiling to it; below the ceiling the rate rises by half the gap, once a second; at the
 * ceiling, after the quiet periods, a probe one step above it goes now.
 */
function admitBlind(pace: Pace, tokens: number, now: number): { pace: Pace; waitMs: number; probe: boolean } {
  const { periodMs } = pace;
  const limit = pace.limit!;
  let next: Pace = { ...pace, tokens, at: now };
  // A probe above the ceiling went a period ago without a 429: the site allows it.
  if (limit > pace.ceiling && now - pace.probedAt >= 2 * periodMs) {
    next = {
      ...next,
      ceiling: limit,
      probeAfterPeriods: Math.max(PROBE_AFTER_PERIODS, Math.floor(pace.probeAfterPeriods / 2)),
    };
  }
  const since = Math.max(pace.limitedAt, pace.raisedAt);
  if (limit < next.ceiling && now - since >= periodMs) {
    const raised = Math.min(next.ceiling, limit + Math.max((next.ceiling - limit) / 2, next.ceiling * 0.02));
    // Only the rate rises: the request waits for its token at the new rate (the caller keeps
    // the pace admit returns with a wait). Sending it on the raise put two requests closer
    // than the rate allows, and a sliding window answered each raise with a 429.
    next = { ...next, limit: raised, raisedAt: now };
  } else if (limit >= next.ceiling) {
    const quiet = next.probeAfterPeriods * periodMs;
    if (now - pace.limitedAt >= quiet && now - pace.probedAt >= quiet) {
      // This proxy's last probe held all the quiet since: the next goes by a doubled step.
      if (probeHeld(next, now))
        next = {
          ...next,
          probeGrowth: next.probeGrowth * 2,
          refused: limit >= next.refused ? Infinity : next.refused,
        };
      const probing = limit + probeIncrement(next, limit);
      return {
        pace: { ...next, limit: probing, probedAt: now, ownProbeAt: now, raisedAt: now },
        waitMs: 0,
        probe: true,
      };
    }
  }
  return {
    pace: next,
    waitMs: Math.max(1, Math.ceil(((1 - tokens) * periodMs) / next.limit!)),
    probe: false,
  };
}

/** A request through the proxy to the site succeeded. */
export function succeeded(pace: Pace, now: number): Pace {
  const keepMs = pace.limit === undefined ? RECENT_BEFORE_FIRST_MS : pace.periodMs;
  return { ...pace, recent: pace.recent.remember(now, now - keepMs, RECENT_CAP) };
}

/**
 * The site answered 429. The first limit is what the site allowed in the last period, and no
 * more than the successes imply (impliedLimit: the first period holds a full bucket's burst);
 * a later one is what the site allowed in the last period and one less than before at most,
 * at least one; when that was the whole limit, the bucket holds
 * back more instead (HEADROOM_STEP, until MAX_HEADROOM). The answer to a probe only undoes the probe and
 * doubles the wait before the next one (any other 429 resets that wait: the site changed).
 * The bucket empties and nothing goes until the rest ends. A 429 during a rest comes from a
 * request sent before it: ignored.
 */
export function rateLimited(pace: Pace, now: number, retryAfterMs: number | undefined): Pace {
  if (now < pace.restUntil) return pace;
  if (retryAfterMs === undefined) return rateLimitedBlind(pace, now);
  const periodMs = retryAfterMs !== undefined && retryAfterMs > 0 ? retryAfterMs : pace.periodMs;
  const recent = pace.recent.toArray();
  const allowed = recent.filter((t) => t > now - periodMs).length;
  // The answer to a probe (within a period of it): the limit before the probe was right.
  const probeRefused = pace.limit !== undefined && now - pace.probedAt < pace.periodMs;
  let limit: number;
  let headroom = pace.headroom;
  if (pace.limit === undefined) {
    limit = Math.max(1, Math.min(allowed, impliedLimit(recent, periodMs)));
    headroom = FIRST_HEADROOM;
  } else if (probeRefused) limit = Math.max(1, pace.limit - 1);
  else if (allowed >= pace.limit && pace.headroom < MAX_HEADROOM - 1e-9) {
    limit = pace.limit;
    headroom = Math.min(MAX_HEADROOM, pace.headroom + HEADROOM_STEP);
  } else {
    limit = Math.max(1, Math.min(pace.limit - 1, allowed));
    headroom = FIRST_HEADROOM;
  }
  return {
    limit,
    periodMs,
    headroom,
    tokens: 0,
    at: now,
    restUntil: now + periodMs,
    limitedAt: now,
    probedAt: pace.probedAt,
    probeAfterPeriods: probeRefused
      ? Math.min(MAX_PROBE_AFTER_PERIODS, pace.probeAfterPeriods * 2)
      : PROBE_AFTER_PERIODS,
    ownProbeAt: pace.ownProbeAt,
    probeGrowth: 1,
    refused: Infinity,
    recent: TimeLog.empty,
    sent: TimeLog.empty,
    blind: false,
    ceiling: 0,
    raisedAt: 0,
  };
}

/**
 * A 429 without Retry-After (see the top of this file): the rate that met it is the pace's
 * rate, or before any pace what the successes of the last second imply; the rate drops to
 * BLIND_DECREASE of it and the proxy rests BLIND_REST_MS. The answer to a probe above the
 * ceiling goes back to the ceiling; a 429 at the ceiling lowers it a notch, and both double
 * the quiet before the next probe; a 429 below the ceiling makes its rate the ceiling.
 */
function rateLimitedBlind(pace: Pace, now: number): Pace {
  const periodMs = BLIND_REST_MS;
  const recent = pace.recent.toArray();
  const allowed = recent.filter((t) => t > now - periodMs).length;
  // What went through in the last second, not impliedLimit's least bound (half of a steady
  // stream's rate): a first estimate too high is corrected by the next 429s (the ceiling falls).
  const measured = Math.max(1, allowed);
  const known = pace.blind && pace.limit !== undefined;
  // A Retry-After pace's limit is per its period: as a rate per second here.
  const met = known ? pace.limit! : pace.limit === undefined ? measured : (pace.limit * 1000) / pace.periodMs;
  const probeRefused = known && met > pace.ceiling && now - pace.probedAt < 2 * periodMs;
  let ceiling: number;
  let limit: number;
  let probeAfterPeriods = PROBE_AFTER_PERIODS;
  if (probeRefused) {
    ceiling = pace.ceiling;
    limit = Math.max(BLIND_MIN_RATE, ceiling * BLIND_DECREASE);
    probeAfterPeriods = Math.min(
      MAX_PROBE_AFTER_PERIODS,
      Math.max(PROBE_AFTER_PERIODS, pace.probeAfterPeriods * 2),
    );
  } else if (known && met >= pace.ceiling) {
    ceiling = Math.max(BLIND_MIN_RATE, met - probeStep(met));
    // The ceiling was met before: the site's limit is near it, and a gentler cut suffices.
    limit = Math.max(BLIND_MIN_RATE, ceiling * AT_CEILING_DECREASE);
    probeAfterPeriods = Math.min(
      MAX_PROBE_AFTER_PERIODS,
      Math.max(PROBE_AFTER_PERIODS, pace.probeAfterPeriods * 2),
    );
  } else {
    ceiling = met;
    limit = Math.max(BLIND_MIN_RATE, met * BLIND_DECREASE);
  }
  return {
    ...unpaced,
    limit,
    periodMs,
    tokens: 0,
    at: now,
    restUntil: now + BLIND_REST_MS,
    limitedAt: now,
    probedAt: pace.probedAt,
    ownProbeAt: pace.ownProbeAt,
    refused: met,
    probeAfterPeriods,
    blind: true,
    ceiling,
    raisedAt: now,
  };
}

/** How long a 429 rests its proxy for the site: its Retry-After, or BLIND_REST_MS without one. */
export function restMs(_pace: Pace, _now: number, retryAfterMs: number | undefined): number {
  return retryAfterMs ?? BLIND_REST_MS;
}
