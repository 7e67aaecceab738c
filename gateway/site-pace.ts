// The pace one upstream proxy keeps for one site on plain HTTP, learned from the site's 429s:
// a rate per second, evenly spaced, that each request reserves a turn of. Pure; SitePaces
// (site-paces.ts) keeps one per (upstream, target) in this replica's memory.
//
// Why: after a 429's rest, sending everything that waited at once gets most of it a 429
// again (bench:crawl's tight sliding window: 123 of 200 pages). Turns spaced at the learned
// rate, reserved in order (a request's turn is the one after the last reserved), never
// burst: evenly spaced requests at a rate the site allows pass a token bucket, a sliding and
// a fixed window alike, so the pace assumes nothing about the limit's shape.
//
// How the rate is learned (additive increase, multiplicative decrease, with a ceiling):
// - The first 429 measures what the site let through in the last period (the 429's
//   Retry-After, or BLIND_REST_MS without one): that is the `ceiling`, the rate DECREASE of it.
// - While requests wait for turns (demand exceeds the pace), the rate climbs once a period by
//   half the gap to the ceiling, so a 429 on a loose limit costs a moment at part rate.
// - At the ceiling, after `probeAfterPeriods` quiet periods, the rate probes a step above it:
//   CEILING_STEP, and at least one more request a period (5 % of 3/s is one request in 7 s,
//   which two periods cannot judge). A probe that held two periods from its own turn (the
//   turns reserved before it keep the old spacing) becomes the ceiling (the limit rose), and
//   the next probe goes at once with its step doubled, up to doubling the rate: 3/s → 30/s in
//   about six probes, not the ~47 of a fixed 5 %.
// - A refused probe goes back below the ceiling and resets the step; the rate it met is
//   `refused`, and no probe goes past halfway to it (after a grown step was refused the limit
//   lies between: halving the gap beats climbing it at 5 %). Refused in a row (a limit that
//   holds), each doubles the quiet before the next; one after probes that held (a limit that
//   rose) keeps the base quiet. On a limit that holds, the step never grows.
// - A 429 at the ceiling lowers the ceiling a step (the site allows a little less: its
//   clock and ours differ by the requests' travel); a 429 below it makes that rate the ceiling.
// With Retry-After the proxy rests exactly that long (the site said its period); without, a
// moment (BLIND_REST_MS), and the rate falls further (BLIND_DECREASE).
// The Scrapy add-on keeps the same rules in python/src/proxy_operator/scrapy/pace.py (decision
// 0042): a change here is made there too, with the same table rows.

/** A 429 without Retry-After rests the proxy for the site this long: one assumed period. */
export const BLIND_REST_MS = 1_000;
/** A blind 429 below the ceiling cuts the rate to this share of the rate it met. */
export const BLIND_DECREASE = 0.7;
/** A 429 with Retry-After, at the ceiling, or refusing a probe: the rate falls to this share of the ceiling. */
export const GENTLE_DECREASE = 0.9;
/** A probe goes at least this share above the ceiling; a 429 at the ceiling lowers it by as much. */
export const CEILING_STEP = 0.05;
/** A probe that held multiplies the next probe's step by this (5 %, 10 %, 20 % ...) ... */
export const PROBE_STEP_GROWTH = 2;
/** ... up to this: doubling the rate (the limit rose). */
export const MAX_PROBE_STEP = 1;
/** The rate climbs at least this share of the ceiling a period. */
export const MIN_CLIMB = 0.02;
/** No pace is slower than this (requests per second). */
export const MIN_RATE = 0.2;
/** Quiet periods at the ceiling before a probe; a refused probe doubles them up to the maximum. */
export const PROBE_AFTER_PERIODS = 5;
export const MAX_PROBE_AFTER_PERIODS = 80;
/** Success times remembered to measure the rate a 429 met. */
export const RECENT_CAP = 64;
/** Before a 429 the period is unknown: successes are kept this long. */
export const RECENT_KEEP_MS = 60_000;
/** The least span a rate is measured over: a burst's successes within a few ms are no rate. */
export const MIN_SPAN_MS = 1_000;

export interface Pace {
  /** Requests per second; undefined until the first 429 (an unpaced request goes at once). */
  readonly rate: number | undefined;
  /** The rate a 429 last met (the limit is near it). */
  readonly ceiling: number;
  /** The last 429's Retry-After (at least a second), or BLIND_REST_MS without one. */
  readonly periodMs: number;
  /** Whether the last 429 said no Retry-After. */
  readonly blind: boolean;
  /** The earliest the next turn may be (ms): the last reserved turn plus one interval. */
  readonly due: number;
  /** No turn before this: the last 429's rest. */
  readonly restUntil: number;
  /** When the last 429 that taught the pace came: a reservation before it is void. */
  readonly limitedAt: number;
  /** When the rate last climbed, and when it last probed above the ceiling. */
  readonly raisedAt: number;
  readonly probedAt: number;
  readonly probeAfterPeriods: number;
  /** The next probe's share above the ceiling: CEILING_STEP, doubled by each probe that held. */
  readonly probeStep: number;
  /**
   * The rate the last 429 met (Infinity once a probe passed it): a grown step probes no higher
   * in one go. On a limit that holds, the ceiling falls a step below the limit and a probe or
   * two hold before the refused rate; without this bound the grown step leapt past the limit
   * and each such probe cost more 429s than a fixed step (bench table: 13 → 22 a minute).
   */
  readonly refused: number;
  /**
   * After a first 429 (the pace was unpaced): the successes that measured its ceiling, counting
   * those answered after it to requests sent before it (undefined otherwise).
   */
  readonly shown: number | undefined;
  /** Times of the latest successes, oldest first. */
  readonly recent: readonly number[];
}

export const UNPACED: Pace = {
  rate: undefined,
  ceiling: 0,
  periodMs: BLIND_REST_MS,
  blind: true,
  due: 0,
  restUntil: 0,
  limitedAt: 0,
  raisedAt: 0,
  probedAt: 0,
  probeAfterPeriods: PROBE_AFTER_PERIODS,
  probeStep: CEILING_STEP,
  refused: Infinity,
  shown: undefined,
  recent: [],
};

/** A request's turn: when it may go (`at` ≥ now), and the pace once it is reserved. */
export interface Turn {
  at: number;
  pace: Pace;
}

/**
 * The next turn at `now`: at once when unpaced, else after the rest and one interval after the
 * last reserved turn. A turn that must wait says demand exceeds the pace: the rate may climb
 * (or probe) first. The caller keeps `pace` only when it takes the turn.
 */
export function reserve(pace: Pace, now: number): Turn {
  if (pace.rate === undefined) return { at: now, pace };
  const at = Math.max(now, pace.restUntil, pace.due);
  if (at === now) return { at, pace: { ...pace, due: at + 1000 / pace.rate } };
  let next = climbed(pace, now);
  // A probe counts from its own turn, the first at its rate: the turns reserved before it keep
  // the old spacing (20 waiting requests at 3/s reach 7 s ahead), and a probe counted from its
  // decision "held" before a request went at its rate (a grown step then leapt a 3/s bucket to
  // 21/s before the first 429).
  if (next.probedAt === now && pace.probedAt !== now) next = { ...next, probedAt: at };
  return { at, pace: { ...next, due: at + 1000 / next.rate! } };
}

/** Whether a request through this pace may go now (another upstream's turn may be sooner). */
export function hasRoom(pace: Pace, now: number): boolean {
  return pace.rate === undefined || Math.max(pace.restUntil, pace.due) <= now;
}

/** Demand exceeds the pace: a probe that held becomes the ceiling; the rate climbs, or probes. */
export function climbed(pace: Pace, now: number): Pace {
  let p = pace;
  const rate = p.rate!;
  // The next probe may follow a held one after two periods, its step doubled.
  let held = false;
  if (rate > p.ceiling && now - p.probedAt >= 2 * p.periodMs) {
    held = true;
    p = {
      ...p,
      ceiling: rate,
      refused: rate >= p.refused * (1 - 1e-9) ? Infinity : p.refused,
      probeAfterPeriods: Math.max(PROBE_AFTER_PERIODS, Math.floor(p.probeAfterPeriods / 2)),
      probeStep: Math.min(MAX_PROBE_STEP, Math.max(p.probeStep, baseStep(p)) * PROBE_STEP_GROWTH),
    };
  }
  if (now - Math.max(p.limitedAt, p.raisedAt) < p.periodMs) return p;
  if (rate < p.ceiling) {
    const step = Math.max((p.ceiling - rate) / 2, p.ceiling * MIN_CLIMB);
    return { ...p, rate: Math.min(p.ceiling, rate + step), raisedAt: now };
  }
  const quiet = p.probeAfterPeriods * p.periodMs;
  if (held || (now - p.limitedAt >= quiet && now - p.probedAt >= quiet))
    return { ...p, rate: probeRate(p), probedAt: now, raisedAt: now };
  return p;
}

/**
 * A probe's rate: the step above the ceiling, but no further than halfway to the rate last
 * refused (the limit lies between: after a grown step was refused this halves the gap each
 * probe instead of climbing it at 5 %), and at least the base step (which passes a refused
 * rate left behind when the limit rose again).
 */
function probeRate(p: Pace): number {
  const halfway = (p.ceiling + p.refused) / 2;
  const base = p.ceiling * (1 + baseStep(p));
  return Math.max(base, Math.min(p.ceiling * (1 + Math.max(p.probeStep, baseStep(p))), halfway));
}

/**
 * The least step of a probe: CEILING_STEP, and at least one more request a period. At 3/s 5 %
 * is one extra request in 7 s: a probe "held" two periods before the site saw any of it.
 */
function baseStep(p: Pace): number {
  return Math.max(CEILING_STEP, 1000 / p.periodMs / p.ceiling);
}

/**
 * The site answered a request sent at `sentAt` through this pace with something other than a
 * rate limit. One sent within a period before the first 429 and answered after it was allowed
 * in the period the 429 measured: the ceiling and the rate rise to count it (a crawl's first
 * 429 may come back before the successes sent with it).
 */
export function succeeded(pace: Pace, now: number, sentAt: number = now): Pace {
  if (pace.shown !== undefined && sentAt < pace.limitedAt && sentAt > pace.limitedAt - pace.periodMs) {
    const shown = pace.shown + 1;
    const ceiling = Math.max(pace.ceiling, (shown * 1000) / pace.periodMs);
    const decrease = pace.blind ? BLIND_DECREASE : GENTLE_DECREASE;
    return { ...pace, shown, ceiling, rate: Math.max(pace.rate!, ceiling * decrease) };
  }
  return recorded(pace, now);
}

function recorded(pace: Pace, now: number): Pace {
  const keepAfter = now - (pace.rate === undefined ? RECENT_KEEP_MS : 2 * pace.periodMs);
  const { recent } = pace;
  let from = recent.length >= RECENT_CAP ? recent.length - RECENT_CAP + 1 : 0;
  while (from < recent.length && recent[from]! <= keepAfter) from++;
  const kept = from === 0 ? [...recent] : recent.slice(from);
  kept.push(now);
  return { ...pace, recent: kept };
}

/**
 * The site answered a request sent at `sentAt` with a rate limit at `now` (`retryAfterMs`: its
 * Retry-After, undefined without one). `teaches`: false when the request went before the last
 * 429 taught the pace (its answer says nothing new; the book has been told).
 */
export function rateLimited(
  pace: Pace,
  now: number,
  sentAt: number,
  retryAfterMs: number | undefined,
): { pace: Pace; teaches: boolean; restMs: number } {
  if (sentAt < pace.limitedAt) return { pace, teaches: false, restMs: Math.max(0, pace.restUntil - now) };
  const blind = retryAfterMs === undefined;
  const restMs = blind ? BLIND_REST_MS : Math.max(0, retryAfterMs);
  const periodMs = blind ? BLIND_REST_MS : Math.max(1000, retryAfterMs);
  const allowed = pace.recent.filter((t) => t > now - periodMs).length;
  const measured = measuredRate(pace.recent, now, periodMs);
  const probeRefused =
    pace.rate !== undefined && pace.rate > pace.ceiling && now - pace.probedAt < 2 * pace.periodMs;
  const atCeiling = pace.rate !== undefined && pace.rate >= pace.ceiling * (1 - 1e-9);
  let ceiling: number;
  let rate: number;
  let probeAfterPeriods = PROBE_AFTER_PERIODS;
  const first = pace.rate === undefined;
  if (probeRefused) {
    ceiling = pace.ceiling;
    rate = ceiling * GENTLE_DECREASE;
    // After probes that held (a grown step) the limit rose and lies below this probe: the quiet
    // before the next stays the base. Only probes refused in a row (the limit holds) double it.
    probeAfterPeriods =
      pace.probeStep > CEILING_STEP
        ? PROBE_AFTER_PERIODS
        : Math.min(MAX_PROBE_AFTER_PERIODS, pace.probeAfterPeriods * 2);
  } else if (atCeiling) {
    ceiling = pace.ceiling * (1 - CEILING_STEP);
    rate = ceiling * GENTLE_DECREASE;
  } else {
    // The first 429 meets what went through; a later one below the ceiling meets the rate.
    ceiling = pace.rate ?? measured;
    rate = ceiling * (blind ? BLIND_DECREASE : GENTLE_DECREASE);
  }
  ceiling = Math.max(MIN_RATE, ceiling);
  return {
    teaches: true,
    restMs,
    pace: {
      rate: Math.max(MIN_RATE, rate),
      ceiling,
      periodMs,
      blind,
      due: now + restMs,
      restUntil: now + restMs,
      limitedAt: now,
      raisedAt: now,
      probedAt: pace.probedAt,
      probeAfterPeriods,
      probeStep: CEILING_STEP,
      refused: pace.rate ?? measured,
      shown: first ? allowed : undefined,
      recent: [],
    },
  };
}

/**
 * The rate that went through before a first 429: the successes of the last period, or of the
 * last 2 or 4 periods when the remembered successes cover them (a steady stream whose requests
 * come in bursts shows its rate over a longer window), per second. When the remembered
 * successes (RECENT_CAP) span less than the period, their own span, at least MIN_SPAN_MS: 64
 * of 150/s counted over a 7 s Retry-After (a 10 s fixed window's rest) read as 9/s, and a
 * Scrapy crawl's pace with the same rule got 0.41 of such a site's rate.
 */
export function measuredRate(recent: readonly number[], now: number, periodMs: number): number {
  let best = 1000 / periodMs;
  if (recent.length >= RECENT_CAP && recent[0]! > now - periodMs)
    best = Math.max(best, (recent.length * 1000) / Math.max(now - recent[0]!, MIN_SPAN_MS));
  for (const periods of [1, 2, 4]) {
    const from = now - periods * periodMs;
    if (periods > 1 && (recent.length === 0 || recent[0]! > from)) break;
    const count = recent.filter((t) => t > from).length;
    best = Math.max(best, (count * 1000) / (periods * periodMs));
  }
  return best;
}

/**
 * An upstream's first pace for a site another upstream has learned: sites limit each source
 * alike, so it starts at that rate and ceiling instead of learning them by a 429 of its own
 * (each costs a client a 429 and the proxy a rest). Its own successes stay. An upstream with
 * a pace keeps it.
 * It starts with the base quiet and step, not the other's: the learned pace is the one its
 * last 429 taught, maybe minutes ago, and its quiet (up to MAX_PROBE_AFTER_PERIODS after
 * refused probes) kept every new upstream from probing for over a minute after the site's
 * limit rose (bench:crawl: 3/s a proxy for a whole crawl the site allowed 30/s). The cost on
 * a limit that holds is one refused probe per new upstream, after PROBE_AFTER_PERIODS.
 */
export function adopt(mine: Pace, learned: Pace, now: number): Pace {
  if (mine.rate !== undefined || learned.rate === undefined) return mine;
  return {
    ...UNPACED,
    rate: learned.rate,
    ceiling: learned.ceiling,
    periodMs: learned.periodMs,
    blind: learned.blind,
    due: now,
    limitedAt: now,
    raisedAt: now,
    probedAt: learned.probedAt,
    refused: learned.refused,
    recent: mine.recent,
  };
}
