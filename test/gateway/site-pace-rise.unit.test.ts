// The site pace (gateway/site-pace.ts) on a site whose limit RISES mid-run: after a tight
// spell of 3/s the site allows 30/s, or has no limit at all. Probes that held double the next
// probe's step (5 %, 10 %, 20 % ... up to doubling the rate), so the pace finds the new limit
// within seconds; a refused probe resets the step, so a limit that holds costs no more 429s
// (site-pace.unit.test.ts's simulated-site table).
import {
  adopt,
  CEILING_STEP,
  climbed,
  PROBE_AFTER_PERIODS,
  reserve,
  UNPACED,
  type Pace,
} from '../../gateway/site-pace.js';
import { perSecond, simSite, simulate, type Shape } from './site-pace-sim.js';

const T = 1_000_000;
const paced = (p: Partial<Pace>): Pace => ({ ...UNPACED, rate: 3, ceiling: 3, limitedAt: T - 10_000, ...p });

describe('a probe that held: the next goes at once, its step doubled', () => {
  it.each<[string, Partial<Pace>, number, number, number]>([
    // name, pace (ceiling 30 unless given), rate after, ceiling after, next step
    ['the first held (5 %): the next probes 10 % above', { rate: 31.5, probeStep: 0.05 }, 34.65, 31.5, 0.1],
    ['the third held (20 %): the next probes 40 % above', { rate: 36, probeStep: 0.2 }, 50.4, 36, 0.4],
    ['a step never passes doubling the rate', { rate: 60, probeStep: 0.8 }, 120, 60, 1],
    [
      'a slow pace steps at least one request a period (3/s: a third), then doubles that',
      { rate: 3.15, ceiling: 3, probeStep: 0.05 },
      3.15 * (1 + 2 / 3),
      3.15,
      2 / 3,
    ],
    [
      'no further than halfway to the rate the last 429 met',
      { rate: 31.5, probeStep: 0.4, refused: 40 },
      35.75,
      31.5,
      0.8,
    ],
  ])('%s', (_name, p, rate, ceiling, step) => {
    const after = climbed(paced({ ceiling: 30, probedAt: T - 2000, raisedAt: T - 2000, ...p }), T);
    expect(after.rate).toBeCloseTo(rate, 6);
    expect(after.ceiling).toBeCloseTo(ceiling, 6);
    expect(after.probeStep).toBeCloseTo(step, 6);
    expect(after.probedAt).toBe(T);
  });

  it('a probe counts from its own turn, behind those reserved at the old rate', () => {
    const waiting = paced({ rate: 3, ceiling: 3, limitedAt: T - 10_000, probedAt: 0, due: T + 6000 });
    const turn = reserve(waiting, T);
    expect(turn.at).toBe(T + 6000);
    expect(turn.pace.rate).toBeCloseTo(4, 6);
    expect(turn.pace.probedAt).toBe(T + 6000);
  });

  it('a probe within two periods has not held yet: no step, no probe', () => {
    const probing = paced({ rate: 3.15, probeStep: 0.05, probedAt: T - 1500, raisedAt: T - 1500 });
    expect(climbed(probing, T)).toEqual(probing);
  });
});

describe('a new upstream adopting the learned pace', () => {
  const learned = paced({ rate: 2.7, probeAfterPeriods: 80, probeStep: 0.4, probedAt: T - 5000 });
  it.each<[string, keyof Pace, number]>([
    ['keeps the rate the site allows', 'rate', 2.7],
    ['keeps the ceiling', 'ceiling', 3],
    // The learned quiet may be 80 periods old news: a new upstream probes after the base quiet.
    [
      'starts with the base quiet, not the 80 periods the other reached',
      'probeAfterPeriods',
      PROBE_AFTER_PERIODS,
    ],
    ['starts with the base step', 'probeStep', CEILING_STEP],
  ])('%s', (_name, key, value) => {
    expect(adopt(UNPACED, learned, T)[key]).toBe(value);
  });
});

/**
 * 20 clients always waiting through one upstream: 40 s at 3/s (the pace learns it and its
 * probes are refused, their quiet doubling), then the site allows `after` a second (Infinity:
 * no limit at all). `continuing`: the same upstream goes on (its quiet is what 40 s of refused
 * probes left); else a new upstream adopts the learned pace at the rise (bench:crawl's next
 * cell, a new set of proxies). Kept: the seconds from the rise until a 3 s window delivers 90 %
 * of the new limit (of what the clients get from no limit at all), and the 429s after the rise.
 */
const RISE = 40_000;
const AFTER = 120_000;
function riseRun(shape: Shape, after: number, ra: number | undefined, continuing: boolean) {
  const site = simSite(shape, (t) => (t < RISE ? 3 : after), ra);
  if (continuing) {
    const run = simulate(site, { seconds: (RISE + AFTER) / 1000, clients: 20 });
    return {
      oks: run.oks.filter((t) => t >= RISE).map((t) => t - RISE),
      limited: run.limited.filter((t) => t >= RISE),
    };
  }
  const tight = simulate(site, { seconds: RISE / 1000, clients: 20 });
  // The new upstream's clock starts at the rise: the learned pace's times shift with it.
  const learned = {
    ...tight.pace,
    probedAt: tight.pace.probedAt - RISE,
    limitedAt: tight.pace.limitedAt - RISE,
  };
  return simulate(simSite(shape, after, ra), {
    seconds: AFTER / 1000,
    clients: 20,
    start: adopt(UNPACED, learned, 0),
  });
}
/** The first second from which 3 s deliver `rate` a second, or Infinity. */
const reachedAt = (oks: number[], rate: number) =>
  [...Array(AFTER / 1000 - 3).keys()].find((s) => perSecond(oks, s * 1000, s * 1000 + 3000) >= rate) ??
  Infinity;

describe('a limit that rises: the pace finds it within seconds', () => {
  // Measured (2026-12-06), seconds from the rise to 90 % of 30/s: bucket 22-26, fixed window
  // 28-39, sliding 30-37, with 6-13 429s; no limit: 38-48 s to 90 % of what the 20 clients
  // get unpaced (~1,300/s), no 429. Before (a 5 % step, 10 % after a held probe): 42-57 s,
  // and no limit not within 117 s. The floor is the queue: 20 requests waiting at 3/s hold
  // turns 7 s ahead, and a probe's rate starts behind them.
  const unlimited = simulate(simSite('bucket', Infinity, undefined), { seconds: 10, clients: 20 });
  const open = perSecond(unlimited.oks, 0, 10_000);
  it.each<[Shape, number, number | undefined, boolean, number, number]>([
    ['bucket', 30, undefined, false, 30, 15],
    ['bucket', 30, 1000, false, 30, 15],
    ['sliding', 30, undefined, false, 45, 10],
    ['sliding', 30, 1000, false, 45, 10],
    ['fixed', 30, undefined, false, 45, 15],
    ['fixed', 30, 1000, false, 45, 15],
    ['bucket', Infinity, undefined, false, 55, 3],
    ['sliding', Infinity, 1000, false, 55, 3],
    ['bucket', 30, undefined, true, 30, 15],
    ['bucket', 30, 1000, true, 30, 15],
    ['sliding', 30, undefined, true, 45, 10],
    ['sliding', 30, 1000, true, 45, 10],
    ['fixed', 30, undefined, true, 45, 15],
    ['fixed', 30, 1000, true, 45, 15],
    ['bucket', Infinity, undefined, true, 55, 3],
    ['fixed', Infinity, 1000, true, 55, 3],
  ])(
    '%s 3/s → %s/s (Retry-After %s, same upstream: %s): 90 %% within %i s, ≤ %i 429s',
    (shape, after, ra, continuing, seconds, most429s) => {
      const run = riseRun(shape, after, ra, continuing);
      const target = 0.9 * Math.min(after, open);
      expect(reachedAt(run.oks, target)).toBeLessThanOrEqual(seconds);
      expect(run.limited.length).toBeLessThanOrEqual(most429s);
    },
  );
});
