// The site pace (gateway/site-pace.ts): its rules as tables, then simulated sites (a token
// bucket, a sliding and a fixed window; loose and tight; with and without Retry-After)
// crawled through one upstream's pace on a virtual clock (site-pace-sim.ts).
import {
  adopt,
  BLIND_REST_MS,
  hasRoom,
  measuredRate,
  RECENT_CAP,
  rateLimited,
  reserve,
  succeeded,
  UNPACED,
  type Pace,
} from '../../gateway/site-pace.js';
import { SitePaces } from '../../gateway/site-paces.js';
import { perSecond, simSite, simulate, type Shape } from './site-pace-sim.js';

const T = 1_000_000;
const paced = (p: Partial<Pace>): Pace => ({ ...UNPACED, rate: 3, ceiling: 3, limitedAt: T - 10_000, ...p });
const withSuccesses = (p: Pace, times: number[]): Pace => times.reduce((acc, t) => succeeded(acc, t), p);

describe('reserve: when a request may go', () => {
  it.each<[string, Pace, number, number]>([
    ['unpaced (no 429 yet): at once', UNPACED, T, T],
    ['paced, nothing reserved lately: at once', paced({ due: T - 5000 }), T, T],
    ['resting after a 429: when the rest ends', paced({ restUntil: T + 800, due: T + 800 }), T, T + 800],
    ['a turn reserved before: one interval after it', paced({ due: T + 200 }), T, T + 200],
  ])('%s', (_name, pace, now, at) => {
    expect(reserve(pace, now).at).toBe(at);
  });

  it('spaces turns reserved together one interval apart, never a burst', () => {
    let pace = paced({ rate: 4, ceiling: 4, limitedAt: T, raisedAt: T, due: T });
    const turns: number[] = [];
    for (let i = 0; i < 4; i++) {
      const turn = reserve(pace, T);
      pace = turn.pace;
      turns.push(turn.at - T);
    }
    expect(turns).toEqual([0, 250, 500, 750]);
  });

  it.each<[string, Pace, number, boolean]>([
    ['unpaced', UNPACED, T, true],
    ['its turn has come', paced({ due: T - 1 }), T, true],
    ['resting', paced({ restUntil: T + 1, due: T + 1 }), T, false],
    ['a turn reserved ahead', paced({ due: T + 100 }), T, false],
  ])('hasRoom: %s → %s', (_name, pace, now, room) => {
    expect(hasRoom(pace, now)).toBe(room);
  });
});

describe('the rate climbs while requests wait for turns (demand exceeds the pace)', () => {
  const waiting = (p: Partial<Pace>) => reserve(paced({ due: T + 500, ...p }), T).pace;
  it.each<[string, Partial<Pace>, number, number]>([
    [
      'below the ceiling, a period after the 429: half the gap',
      { rate: 2, ceiling: 4, limitedAt: T - 1000 },
      3,
      4,
    ],
    ['within a period of the 429: not yet', { rate: 2, ceiling: 4, limitedAt: T - 500 }, 2, 4],
    ['within a period of the last climb: not yet', { rate: 2, ceiling: 4, raisedAt: T - 500 }, 2, 4],
    ['near the ceiling: at least 2 % of it, never past it', { rate: 3.99, ceiling: 4 }, 4, 4],
    [
      'at the ceiling, quiet for 5 periods: probes one request a period above (5 % at least)',
      { rate: 4, ceiling: 4, limitedAt: T - 5000, probedAt: 0 },
      5,
      4,
    ],
    ['at the ceiling, a 429 4 s ago: holds', { rate: 4, ceiling: 4, limitedAt: T - 4000 }, 4, 4],
    [
      'a probe that held 2 periods becomes the ceiling',
      { rate: 4.2, ceiling: 4, probedAt: T - 2000, raisedAt: T - 500 },
      4.2,
      4.2,
    ],
  ])('%s', (_name, p, rate, ceiling) => {
    const after = waiting(p);
    expect(after.rate).toBeCloseTo(rate, 6);
    expect(after.ceiling).toBeCloseTo(ceiling, 6);
  });

  it('does not climb when the turn is free (demand below the pace)', () => {
    expect(reserve(paced({ rate: 2, ceiling: 4, due: 0 }), T).pace.rate).toBe(2);
  });
});

describe('rateLimited: what a 429 teaches', () => {
  const fiveLastSecond = withSuccesses(UNPACED, [T - 900, T - 700, T - 500, T - 300, T - 100]);
  it.each<[string, Pace, number | undefined, Partial<Pace> & { restMs: number }]>([
    [
      'first, no Retry-After: the ceiling is what went through in a second, the rate 70 % of it, a 1 s rest',
      fiveLastSecond,
      undefined,
      { ceiling: 5, rate: 3.5, restMs: BLIND_REST_MS, restUntil: T + 1000, blind: true },
    ],
    [
      "first, Retry-After 2 s: the site's period; rests exactly that; 90 % of the rate",
      withSuccesses(UNPACED, [T - 1900, T - 1500, T - 1100, T - 700, T - 300, T - 100]),
      2000,
      { ceiling: 3, rate: 2.7, restMs: 2000, restUntil: T + 2000, periodMs: 2000, blind: false },
    ],
    [
      'Retry-After 0: no rest, measured over a second',
      fiveLastSecond,
      0,
      { ceiling: 5, rate: 4.5, restMs: 0, restUntil: T },
    ],
    [
      'at the ceiling: the ceiling falls 5 %, the rate to 90 % of it',
      paced({ rate: 4, ceiling: 4 }),
      undefined,
      { ceiling: 3.8, rate: 3.42, restMs: 1000 },
    ],
    [
      'below the ceiling: that rate is the new ceiling',
      paced({ rate: 3, ceiling: 4 }),
      undefined,
      { ceiling: 3, rate: 2.1, restMs: 1000 },
    ],
    [
      'a probe refused: back under the ceiling, the quiet before the next doubles',
      paced({ rate: 4.2, ceiling: 4, probedAt: T - 500, probeAfterPeriods: 5 }),
      undefined,
      { ceiling: 4, rate: 3.6, probeAfterPeriods: 10, restMs: 1000 },
    ],
  ])('%s', (_name, before, retryAfterMs, want) => {
    const { restMs, ...pace } = want;
    const answer = rateLimited(before, T, T - 50, retryAfterMs);
    expect(answer.teaches).toBe(true);
    expect(answer.restMs).toBe(restMs);
    for (const [k, v] of Object.entries(pace))
      expect([k, answer.pace[k as keyof Pace]]).toEqual([
        k,
        typeof v === 'number' ? expect.closeTo(v, 6) : v,
      ]);
  });

  it.each<[string, number[], number, number]>([
    ['nothing went through: one a period', [], 1000, 1],
    ['three in the last second', [T - 900, T - 500, T - 100], 1000, 3],
    [
      'a stream in bursts: its rate over the last 4 periods',
      [T - 3900, T - 3800, T - 3700, T - 3600, T - 1900, T - 1800, T - 1700, T - 1600],
      1000,
      2,
    ],
    [
      'the remembered successes span half a second of a 7 s Retry-After: their own span (a second at least), not 64 in 7 s',
      Array.from({ length: RECENT_CAP }, (_, i) => T - 500 + (i * 500) / RECENT_CAP),
      7000,
      RECENT_CAP,
    ],
  ])('measuredRate: %s', (_name, recent, periodMs, rate) => {
    expect(measuredRate(recent, T, periodMs)).toBeCloseTo(rate, 6);
  });

  it('a 429 to a request sent before the last 429 taught the pace teaches nothing', () => {
    const pace = paced({ limitedAt: T - 100, restUntil: T + 900 });
    expect(rateLimited(pace, T, T - 200, undefined)).toEqual({ pace, teaches: false, restMs: 900 });
  });

  it('another upstream adopts a learned pace; one with its own keeps it', () => {
    const learned = paced({ rate: 2.5, ceiling: 3 });
    expect(adopt(UNPACED, learned, T)).toMatchObject({ rate: 2.5, ceiling: 3, due: T, restUntil: 0 });
    const own = paced({ rate: 1 });
    expect(adopt(own, learned, T)).toBe(own);
  });
});

describe('SitePaces: one pace per (upstream, target), in memory', () => {
  it('keeps pairs apart, lets an unpaced upstream adopt the target, and forgets idle pairs', () => {
    let now = T;
    const paces = new SitePaces(() => now);
    for (const t of [T - 900, T - 600, T - 300]) {
      now = t;
      paces.succeeded('p1', 'shop.example');
    }
    now = T;
    expect(paces.rateLimited('p1', 'shop.example', T - 10, undefined)).toEqual({
      teaches: true,
      restMs: 1000,
    });
    expect(paces.hasRoom('p1', 'shop.example')).toBe(false);
    expect(paces.hasRoom('p1', 'other.example')).toBe(true);
    expect(paces.paceOf('p2', 'shop.example').rate).toBeCloseTo(2.1, 6);
    expect(paces.paceOf('p2', 'other.example').rate).toBeUndefined();
    now = T + 200_000;
    paces.paceOf('p3', 'x.example');
    expect(paces.size).toBe(1);
  });

  it('a turn past the deadline is refused without a reservation', async () => {
    const now = T;
    const paces = new SitePaces(() => now);
    paces.succeeded('p1', 's');
    paces.rateLimited('p1', 's', T - 1, 30_000);
    const turn = await paces.turn('p1', 's', T + 10_000, () => false);
    expect(turn).toEqual({ kind: 'past_deadline', waitMs: 30_000, heldMs: 0 });
  });
});

/**
 * The simulated crawls: 20 clients always waiting (demand far above the limit) through one
 * upstream for 60 s. Kept: the share of the site's limit the pace turns into pages over the
 * last 40 s (converged), and the 429s after the first 2 s (each is a client's failed attempt).
 */
describe('simulated sites: the pace converges on what the site allows, with few 429s', () => {
  it.each<[Shape, number, number | undefined, number, number]>([
    // shape, limit/s, Retry-After ms, least share of the limit, most 429s a minute: what the
    // pace cost before probes grew their step (2026-12-06; fixed 30/s with Retry-After was 5),
    // so a limit that holds costs no more. Now: 2-7, 13 → 6 at 3/s with Retry-After.
    ['bucket', 3, undefined, 0.7, 9],
    ['bucket', 3, 1000, 0.7, 13],
    ['bucket', 30, undefined, 0.85, 8],
    ['bucket', 30, 1000, 0.85, 8],
    ['sliding', 3, undefined, 0.7, 9],
    ['sliding', 3, 1000, 0.7, 13],
    ['sliding', 30, undefined, 0.85, 5],
    ['sliding', 30, 1000, 0.85, 5],
    ['fixed', 3, undefined, 0.7, 9],
    ['fixed', 3, 1000, 0.7, 13],
    ['fixed', 30, undefined, 0.85, 4],
    ['fixed', 30, 1000, 0.85, 6],
  ])(
    '%s %i/s, Retry-After %s: ≥ %s of the limit, ≤ %i 429s after 2 s',
    (shape, limit, retryAfterMs, share, most429s) => {
      const run = simulate(simSite(shape, limit, retryAfterMs), { seconds: 60, clients: 20 });
      expect(perSecond(run.oks, 20_000, 60_000)).toBeGreaterThanOrEqual(share * limit);
      expect(perSecond(run.oks, 20_000, 60_000)).toBeLessThanOrEqual(limit * 1.02);
      // The first round goes before any 429 has taught the pace: those 429s are the crawl's start.
      expect(run.limited.filter((t) => t >= 2000).length).toBeLessThanOrEqual(most429s);
    },
  );

  it('a single 429 on a loose limit costs a moment: ≥ 70 % of the demand within 3 s, all of it within 12 s', () => {
    // 19 requests a second wanted of a site allowing 30; it answers one 429 at 10 s anyway.
    const run = simulate(simSite('bucket', 30, undefined), {
      seconds: 30,
      clients: 10,
      thinkMs: 500,
      hiccupsAt: [10_000],
    });
    expect(run.limited).toHaveLength(1);
    expect(perSecond(run.oks, 0, 10_000)).toBeGreaterThanOrEqual(19);
    expect(perSecond(run.oks, 13_000, 16_000)).toBeGreaterThanOrEqual(13);
    expect(perSecond(run.oks, 22_000, 30_000)).toBeGreaterThanOrEqual(18.5);
  });
});
