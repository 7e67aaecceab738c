// The pace against simulated sites on a virtual clock (client/src/crawlee/site-pace.ts): one
// proxy's requests to a site that limits it as a token bucket, a sliding window or a fixed
// window, loose or tight, with or without Retry-After. Every request travels 5-25 ms each way
// (seeded), the site answers 429 over its limit, and the pace is the only thing between the
// crawler's demand and the site. A cell states the fraction of the site's rate (tight: demand
// exceeds it) or of the demand (loose: the site rarely objects) the pace must deliver over the
// run, and how many 429s it may cost.
import { admit, rateLimited, succeeded, unpaced, type Pace } from '../../client/src/crawlee/site-pace.js';
import { adopt } from '../../client/src/crawlee/site-pace-sharing.js';
import { seededRandom as random } from '../harness/seeded-random.js';

/** A site's limit for one source: whether a request at `t` passes, and its Retry-After (ms) if not. */
interface Site {
  accept(t: number): boolean;
  /** How long until a request would pass, for Retry-After. */
  waitMs(t: number): number;
}

function tokenBucket(rate: number, capacity: number): Site {
  let tokens = capacity;
  let at = 0;
  const refill = (t: number) => {
    tokens = Math.min(capacity, tokens + ((t - at) * rate) / 1000);
    at = t;
  };
  return {
    accept(t) {
      refill(t);
      if (tokens < 1) return false;
      tokens--;
      return true;
    },
    waitMs(t) {
      refill(t);
      return Math.max(0, ((1 - tokens) * 1000) / rate);
    },
  };
}

function slidingWindow(limit: number, windowMs: number): Site {
  const log: number[] = [];
  const trim = (t: number) => {
    while (log.length > 0 && log[0]! <= t - windowMs) log.shift();
  };
  return {
    accept(t) {
      trim(t);
      if (log.length >= limit) return false;
      log.push(t);
      return true;
    },
    waitMs(t) {
      trim(t);
      return log.length < limit ? 0 : log[0]! + windowMs - t;
    },
  };
}

function fixedWindow(limit: number, windowMs: number): Site {
  let window = -1;
  let count = 0;
  return {
    accept(t) {
      const w = Math.floor(t / windowMs);
      if (w !== window) [window, count] = [w, 0];
      if (count >= limit) return false;
      count++;
      return true;
    },
    waitMs(t) {
      return windowMs - (t % windowMs);
    },
  };
}

interface Run {
  sent: number;
  ok: number;
  /** When each success came back. */
  oks: number[];
  limited: number;
  demanded: number;
}

/**
 * `durationMs` of one proxy sending `demand(t)` requests per second to `site` (a backlog the
 * crawler keeps, at most a few seconds' worth), each request admitted by the pace first.
 */
function simulate(
  site: Site,
  demand: (t: number) => number,
  retryAfter: boolean,
  durationMs: number,
  start: { pace: Pace; fromMs: number } = { pace: unpaced, fromMs: 0 },
): Run & { pace: Pace } {
  const next = random(42);
  const arrivals = new Map<number, number[]>();
  const answers = new Map<number, (boolean | number)[]>();
  const at = <T>(m: Map<number, T[]>, t: number, v: T) => {
    const list = m.get(t);
    if (list) list.push(v);
    else m.set(t, [v]);
  };
  let pace: Pace = start.pace;
  let backlog = 0;
  const run: Run = { sent: 0, ok: 0, oks: [], limited: 0, demanded: 0 };
  for (let t = start.fromMs; t < durationMs; t++) {
    for (const answer of answers.get(t) ?? []) {
      if (answer === true) {
        run.ok++;
        run.oks.push(t);
        pace = succeeded(pace, t);
      } else {
        run.limited++;
        // Retry-After is whole seconds on the wire.
        const retryAfterMs = retryAfter
          ? Math.max(1, Math.ceil((answer as number) / 1000)) * 1000
          : undefined;
        pace = rateLimited(pace, t, retryAfterMs);
      }
    }
    answers.delete(t);
    for (const _ of arrivals.get(t) ?? []) {
      const ok = site.accept(t);
      at(answers, t + 5 + Math.floor(next() * 20), ok ? true : site.waitMs(t));
    }
    arrivals.delete(t);
    const wanted = demand(t) / 1000;
    run.demanded += wanted;
    backlog = Math.min(backlog + wanted, Math.max(5, demand(t) * 3));
    while (backlog >= 1) {
      const turn = admit(pace, t);
      // A pace returned with a wait may hold a raise of the rate: kept, as SitePaces does.
      pace = turn.pace;
      if (turn.waitMs > 0) break;
      backlog--;
      run.sent++;
      at(arrivals, t + 5 + Math.floor(next() * 20), 1);
    }
  }
  return { ...run, pace };
}

const SECONDS = 120;
const steady = (rate: number) => () => rate;
/** Below the limit, with a second at 1.5x it every 10 s: the list sees a few 429s. */
const bursty = (rate: number) => (t: number) => (t % 10_000 < 1_000 ? rate * 1.5 : rate * 0.6);

type Shape = 'bucket' | 'sliding' | 'fixed';
const siteOf = (shape: Shape, rate: number): Site =>
  shape === 'bucket'
    ? tokenBucket(rate, rate)
    : shape === 'sliding'
      ? slidingWindow(rate, 1_000)
      : fixedWindow(rate * 10, 10_000);

describe('the pace converges on the site limit', () => {
  // Tight: the crawler wants three times what the site allows; over two minutes the pace
  // delivers at least `share` of the site's rate, with at most `max429` 429s a minute. Measured
  // (2026-12-07): the blind pace (no Retry-After) 0.88-0.99 of the rate with 3-22 429s a
  // minute; the Retry-After pace 1.00 on buckets and short fixed windows, 0.66-0.77 on sliding
  // windows and a 10 s fixed window (it learns a bucket of the Retry-After's period, which
  // bursts into a window: the known limit of honouring Retry-After as the period; over a
  // one-second period the bucket holds a tenth of the limit, SECOND_BURST: sliding 50/s went
  // from 0.61 with 27 429s a minute to 0.77 with 13.5).
  it.each<[Shape, number, boolean, number, number]>([
    ['bucket', 3, true, 0.95, 10],
    ['bucket', 3, false, 0.9, 10],
    ['bucket', 50, true, 0.95, 10],
    ['bucket', 50, false, 0.9, 10],
    ['sliding', 3, true, 0.6, 10],
    ['sliding', 3, false, 0.85, 10],
    ['sliding', 50, true, 0.7, 20],
    ['sliding', 50, false, 0.8, 10],
    ['fixed', 3, true, 0.9, 10],
    ['fixed', 3, false, 0.9, 15],
    ['fixed', 50, true, 0.6, 10],
    ['fixed', 50, false, 0.85, 40],
  ])(
    'tight %s of %i/s (Retry-After: %s): at least %f of its rate, at most %i 429s a minute',
    (shape, rate, ra, share, max429) => {
      const run = simulate(siteOf(shape, rate), steady(rate * 3), ra, SECONDS * 1000);
      expect(run.ok / SECONDS).toBeGreaterThanOrEqual(share * rate);
      expect(run.limited / (SECONDS / 60)).toBeLessThanOrEqual(max429);
    },
  );

  // Loose: the demand is below the limit but for a second at 1.5x it every 10 s; a 429 in a
  // burst must cost a moment, not the crawl: the pace delivers at least `share` of the demand
  // (a crawler's backlog holds 3 s of demand; what overflows it is lost). Measured: 0.998-1.000
  // blind; with Retry-After 0.999-1.000 (a sliding window 0.899, with 34 429s, before the
  // bucket of a one-second period held only a tenth of the limit).
  it.each<[Shape, boolean, number]>([
    ['bucket', true, 0.95],
    ['bucket', false, 0.95],
    ['sliding', true, 0.95],
    ['sliding', false, 0.95],
    ['fixed', true, 0.95],
    ['fixed', false, 0.95],
  ])('loose %s of 50/s (Retry-After: %s): at least %f of the demand', (shape, ra, share) => {
    const run = simulate(siteOf(shape, 50), bursty(50), ra, SECONDS * 1000);
    expect(run.ok).toBeGreaterThanOrEqual(share * run.demanded);
  });

  it('a single 429 on a loose limit costs a moment: the blind pace is back above the demand within 3 s', () => {
    // 30/s against a 50/s bucket, and one 429 at t=1 s (a burst the site refused).
    let pace: Pace = unpaced;
    for (let t = 0; t < 1_000; t += 33) pace = succeeded(admit(pace, t).pace, t);
    pace = rateLimited(pace, 1_000, undefined);
    let sent = 0;
    for (let t = 1_000; t < 4_000; t++) {
      if (t % 10 !== 0) continue; // up to 100/s of demand
      const turn = admit(pace, t);
      pace = turn.pace;
      if (turn.waitMs === 0) sent++;
    }
    expect(pace.limit).toBeGreaterThanOrEqual(27);
    // Resting 1 s, then at least most of 30/s for the next two.
    expect(sent).toBeGreaterThanOrEqual(40);
  });
});

/** A site whose limit is `before` until `at`, then `after`. */
const rising = (before: Site, after: Site, at: number): Site => ({
  accept: (t) => (t < at ? before : after).accept(t),
  waitMs: (t) => (t < at ? before : after).waitMs(t),
});
const unlimited: Site = { accept: () => true, waitMs: () => 0 };

describe('a limit that rises: the blind pace finds it within seconds', () => {
  // 60 s at 3/s (the pace learns it; its probes are refused), then 30/s or no limit, the
  // crawler wanting 90/s throughout. Kept: the seconds from the rise until 3 s deliver 90 % of
  // the new limit (no limit: of the demand), and the 429s after the rise. Without Retry-After
  // a probe that held its quiet doubles the next one's step (5 %, 10 %, 20 % ... up to doubling
  // the rate). Measured (2026-12-06): 53-83 s (the first probe waits out the quiet that 60 s of
  // refused probes doubled); before, none within 117 s. With Retry-After the pace still probes
  // one more at a time (see site-pace.ts): a tenfold rise takes minutes (not within 117 s).
  const RISE = 60_000;
  const reachedAt = (oks: number[], rate: number) => {
    for (let s = 0; RISE + s * 1000 + 3000 <= SECONDS * 1000 + RISE; s++) {
      const from = RISE + s * 1000;
      if (oks.filter((t) => t >= from && t < from + 3000).length / 3 >= rate) return s;
    }
    return Infinity;
  };
  // A new proxy adopting the host's pace at the rise (bench:crawl's next cell leases new
  // proxies): it probes after the base quiet, not the one the tight spell doubled. Measured
  // (2026-12-06): 33-55 s, with 0-17 429s; adopting the other's quiet, none within 117 s.
  it.each<[Shape, number, number]>([
    ['bucket', 30, 40],
    ['sliding', 30, 60],
    ['fixed', 30, 40],
    ['bucket', Infinity, 45],
  ])('a new proxy adopting the pace, %s 3/s → %s/s: 90 %% within %i s', (shape, after, seconds) => {
    const tight = simulate(siteOf(shape, 3), steady(90), false, RISE);
    const site = after === Infinity ? unlimited : siteOf(shape, after);
    const start = { pace: adopt(unpaced, tight.pace, RISE), fromMs: RISE };
    const run = simulate(site, steady(90), false, RISE + SECONDS * 1000, start);
    const reached = reachedAt(run.oks, 0.9 * Math.min(after, 90));
    expect(reached).toBeLessThanOrEqual(seconds);
    expect(run.limited).toBeLessThanOrEqual(20);
  });

  it.each<[Shape, number, boolean, number, number]>([
    // shape, limit after the rise (Infinity: none), Retry-After, most seconds to 90 %, most 429s
    ['bucket', 30, false, 75, 20],
    ['sliding', 30, false, 90, 20],
    ['fixed', 30, false, 60, 20],
    ['bucket', Infinity, false, 85, 20],
    ['sliding', Infinity, false, 80, 20],
    ['fixed', Infinity, false, 70, 20],
  ])(
    '%s 3/s → %s/s (Retry-After: %s): 90 %% within %i s, at most %i 429s',
    (shape, after, ra, seconds, most429s) => {
      const site = rising(siteOf(shape, 3), after === Infinity ? unlimited : siteOf(shape, after), RISE);
      const run = simulate(site, steady(90), ra, RISE + SECONDS * 1000);
      // The same crawl without the rise: its 429s before the rise are the run's too.
      const before = simulate(siteOf(shape, 3), steady(90), ra, RISE);
      const reached = reachedAt(run.oks, 0.9 * Math.min(after, 90));
      expect(reached).toBeLessThanOrEqual(seconds);
      expect(run.limited - before.limited).toBeLessThanOrEqual(most429s);
    },
  );
});
