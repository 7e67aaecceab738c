// The pace a proxy keeps for a site after its 429s (client/src/crawlee/site-pace.ts).
import {
  BLIND_REST_MS,
  capacityOf,
  admit,
  MAX_PROBE_AFTER_PERIODS,
  HEADROOM_STEP,
  FIRST_HEADROOM,
  MAX_HEADROOM,
  PROBE_AFTER_PERIODS,
  rateLimited,
  succeeded,
  unpaced,
  type Pace,
} from '../../client/src/crawlee/site-pace.js';
import {
  adopt,
  replayTokens,
  heardOfProbe,
  provenAfter429,
  provenByProbe,
  raiseTo,
} from '../../client/src/crawlee/site-pace-sharing.js';
import { impliedLimit } from '../../client/src/crawlee/implied-limit.js';
import { TimeLog } from '../../client/src/crawlee/time-log.js';

type Step = ['admit' | 'ok', number] | ['429', number, number | undefined];

/** Runs `steps` from `start`; returns the pace and each admit's wait. */
function run(start: Pace, steps: Step[]) {
  let pace = start;
  const waits: number[] = [];
  for (const step of steps) {
    const [op, at] = step;
    if (op === 'ok') pace = succeeded(pace, at);
    else if (op === '429') pace = rateLimited(pace, at, step[2]);
    else {
      const turn = admit(pace, at);
      waits.push(turn.waitMs);
      pace = turn.pace;
    }
  }
  return { pace, waits };
}

/** Three per second, learned by a 429 at t=0 (its rest ended at 1,000). */
const threePerSecond: Pace = {
  ...unpaced,
  limit: 3,
  periodMs: 1_000,
  at: 0,
  restUntil: 1_000,
  limitedAt: 0,
};
const admits = (at: number, n: number): Step[] => Array.from({ length: n }, () => ['admit', at]);

describe('site pace', () => {
  it.each<[string, Pace, Step[], Partial<Pace>, number[]]>([
    ['before any 429 every request goes at once', unpaced, admits(0, 3), { limit: undefined }, [0, 0, 0]],
    [
      'the first 429 limits to the successes of the last Retry-After period and rests that long',
      unpaced,
      [
        ['ok', 100],
        ['ok', 110],
        ['ok', 120],
        ['ok', 1_200],
        ['ok', 1_500],
        ['ok', 1_900],
        ['429', 2_000, 1_000],
      ],
      { limit: 3, periodMs: 1_000, restUntil: 3_000, tokens: 0 },
      [],
    ],
    [
      // A proxy's first requests open connections; the later ones arrive sooner.
      'a limit is learned with a margin for the uneven travel of the first requests',
      unpaced,
      [
        ['ok', 100],
        ['ok', 110],
        ['ok', 120],
        ['429', 400, 1_000],
      ],
      { limit: 3, headroom: FIRST_HEADROOM },
      [],
    ],
    [
      // A site's bucket starts full: a crawl's first period gets its burst and its refill.
      'the first 429 limits to no more than the successes imply, not to a first period of burst and refill',
      unpaced,
      [
        ['ok', 0],
        ['ok', 2],
        ['ok', 4],
        ['ok', 334],
        ['ok', 668],
        ['429', 900, 1_000],
      ],
      { limit: 3, periodMs: 1_000, restUntil: 1_900, tokens: 0 },
      [],
    ],
    [
      // The benchmark's crawl as one proxy saw it (the old rule learned 4: a 429 and a rest too many).
      'the first 429 after uneven successes limits to the densest window they imply',
      unpaced,
      [
        ['ok', 596],
        ['ok', 649],
        ['ok', 1_049],
        ['ok', 1_395],
        ['ok', 1_541],
        ['ok', 1_622],
        ['429', 1_843, 1_000],
      ],
      { limit: 3 },
      [],
    ],
    [
      'a 429 with nothing allowed before it still lets one through per period',
      unpaced,
      [['429', 0, 2_000]],
      { limit: 1, periodMs: 2_000, restUntil: 2_000 },
      [],
    ],
    ['nothing goes during the rest: the wait is its end', threePerSecond, [['admit', 400]], {}, [600]],
    [
      'when the rest ends the bucket is full (the site refilled meanwhile): the limit goes at once, then one per period/limit',
      threePerSecond,
      [...admits(1_000, 4), ['admit', 1_340]],
      { tokens: expect.closeTo(0.02, 5) as number },
      [0, 0, 0, 334, 0],
    ],
    [
      'a request that comes late finds the tokens that accrued meanwhile (no window lost)',
      { ...threePerSecond, tokens: 0, at: 1_000, restUntil: 1_000 },
      admits(1_500, 1),
      { tokens: expect.closeTo(0.5, 5) as number },
      [0],
    ],
    [
      'the bucket holds the limit at most',
      { ...threePerSecond, tokens: 0, at: 1_000, restUntil: 1_000, probedAt: 59_000 },
      admits(60_000, 4),
      { limit: 3 },
      [0, 0, 0, 334],
    ],
    [
      'a 429 while paced lowers the limit to what succeeded in the last period, one less at most, with the first headroom',
      { ...threePerSecond, limit: 5, headroom: 0.2 },
      [
        ['ok', 2_100],
        ['ok', 2_200],
        ['ok', 2_300],
        ['ok', 2_500],
        ['429', 2_600, 1_000],
      ],
      { limit: 4, restUntil: 3_600, headroom: FIRST_HEADROOM },
      [],
    ],
    [
      'a 429 after the whole limit went through in the last period keeps the limit and holds back a share of a token (the requests travel unevenly)',
      { ...threePerSecond, limit: 5 },
      [
        ['ok', 2_100],
        ['ok', 2_200],
        ['ok', 2_300],
        ['ok', 2_400],
        ['ok', 2_500],
        ['429', 2_600, 1_000],
      ],
      { limit: 5, restUntil: 3_600, headroom: HEADROOM_STEP },
      [],
    ],
    [
      `up to ${MAX_HEADROOM} of a token; then the limit falls after all`,
      { ...threePerSecond, headroom: MAX_HEADROOM },
      [
        ['ok', 2_100],
        ['ok', 2_200],
        ['ok', 2_300],
        ['429', 2_600, 1_000],
      ],
      { limit: 2, headroom: FIRST_HEADROOM },
      [],
    ],
    [
      'the headroom keeps the bucket below full: after a quiet spell the last of the limit waits the held-back share',
      { ...threePerSecond, tokens: 0, at: 1_000, restUntil: 1_000, headroom: 0.3, probedAt: 59_000 },
      admits(60_000, 3),
      { tokens: expect.closeTo(0.7, 5) as number },
      [0, 0, 100],
    ],
    [
      'the headroom costs no throughput: a busy bucket still lets the limit through every period',
      { ...threePerSecond, tokens: 0, at: 1_000, restUntil: 1_000, headroom: 0.3, probedAt: 59_000 },
      [
        ['admit', 1_334],
        ['admit', 1_668],
        ['admit', 2_002],
        ['admit', 2_336],
        ['admit', 2_670],
        ['admit', 3_004],
      ],
      {},
      [0, 0, 0, 0, 0, 0],
    ],
    [
      'a limit of one holds nothing back (one token always fits)',
      {
        ...threePerSecond,
        limit: 1,
        tokens: 0,
        at: 1_000,
        restUntil: 1_000,
        headroom: 0.5,
        probedAt: 59_000,
      },
      admits(60_000, 2),
      {},
      [0, 1_000],
    ],
    [
      'a 429 while paced never raises the limit above what succeeded',
      threePerSecond,
      [
        ['ok', 2_100],
        ['429', 2_600, 1_000],
      ],
      { limit: 1 },
      [],
    ],
    [
      'a 429 answering a probe (within a period of it) only undoes the probe',
      { ...threePerSecond, limit: 4, probedAt: 5_000 },
      [
        ['ok', 5_000],
        ['ok', 5_300],
        ['429', 5_400, 1_000],
      ],
      { limit: 3, restUntil: 6_400, probedAt: 5_000 },
      [],
    ],
    [
      'a 429 during the rest (a request sent before it) changes nothing',
      threePerSecond,
      [['429', 500, 1_000]],
      { limit: 3, restUntil: 1_000, limitedAt: 0 },
      [],
    ],
    [
      // Three per 5 s is 0.6/s: the blind pace (site-pace-convergence.unit.test.ts) takes it from there.
      'a 429 without Retry-After makes the pace blind: its rate per second cut, a rest of a moment',
      { ...threePerSecond, periodMs: 5_000, restUntil: 5_000 },
      [
        ['ok', 6_000],
        ['429', 7_000, undefined],
      ],
      {
        blind: true,
        limit: 0.5, // 0.6 * BLIND_DECREASE, at least BLIND_MIN_RATE
        ceiling: 0.6,
        periodMs: 1_000,
        restUntil: 7_000 + BLIND_REST_MS,
      },
      [],
    ],
    [
      `with demand beyond the pace and no 429 for ${PROBE_AFTER_PERIODS} periods, one more goes: the limit rises by one`,
      { ...threePerSecond, tokens: 0, at: 5_000, restUntil: 1_000 },
      [
        ['admit', 5_000],
        ['admit', 5_000],
      ],
      { limit: 4, probedAt: 5_000 },
      [0, 250],
    ],
    [
      'no probe sooner than that after a 429',
      { ...threePerSecond, tokens: 0, at: 4_000, restUntil: 1_000 },
      [['admit', 4_000]],
      { limit: 3 },
      [334],
    ],
    [
      'nor sooner than that after the last probe',
      { ...threePerSecond, tokens: 0, at: 9_000, restUntil: 1_000, probedAt: 5_000 },
      [['admit', 9_000]],
      { limit: 3 },
      [334],
    ],
    [
      'a refused probe doubles the quiet periods before the next one',
      { ...threePerSecond, limit: 4, probedAt: 5_000 },
      [['429', 5_400, 1_000]],
      { limit: 3, probeAfterPeriods: 2 * PROBE_AFTER_PERIODS },
      [],
    ],
    [
      'up to a bound',
      { ...threePerSecond, limit: 4, probedAt: 5_000, probeAfterPeriods: MAX_PROBE_AFTER_PERIODS },
      [['429', 5_400, 1_000]],
      { limit: 3, probeAfterPeriods: MAX_PROBE_AFTER_PERIODS },
      [],
    ],
    [
      'after a refused probe no probe comes until the doubled quiet has passed',
      { ...threePerSecond, tokens: 0, at: 9_000, limitedAt: 0, probeAfterPeriods: 2 * PROBE_AFTER_PERIODS },
      [['admit', 9_000]],
      { limit: 3 },
      [334],
    ],
    [
      'and then one does',
      { ...threePerSecond, tokens: 0, at: 10_000, limitedAt: 0, probeAfterPeriods: 2 * PROBE_AFTER_PERIODS },
      [['admit', 10_000]],
      { limit: 4, probedAt: 10_000 },
      [0],
    ],
    [
      'a 429 that answers no probe (the site changed) brings the probes back to every few periods',
      { ...threePerSecond, probeAfterPeriods: 4 * PROBE_AFTER_PERIODS },
      [
        ['ok', 30_100],
        ['ok', 30_200],
        ['429', 30_300, 1_000],
      ],
      { limit: 2, probeAfterPeriods: PROBE_AFTER_PERIODS },
      [],
    ],
  ])('%s', (_name, start, steps, expected, waits) => {
    const result = run(start, steps);
    expect(result.pace).toMatchObject(expected);
    expect(result.waits).toEqual(waits);
  });

  it('says when a request may go only as a probe of a higher limit', () => {
    const drained: Pace = { ...threePerSecond, tokens: 0, at: 5_000 };
    expect(admit(drained, 5_000).probe).toBe(true);
    expect(admit({ ...drained, tokens: 1 }, 5_000).probe).toBe(false);
    expect(admit(unpaced, 5_000).probe).toBe(false);
  });

  it('remembers when each request went while unpaced, and no longer once paced', () => {
    const first = admit(unpaced, 100).pace;
    expect(admit(first, 200).pace.sent.toArray()).toEqual([100, 200]);
    expect(admit(threePerSecond, 2_000).pace.sent.toArray()).toEqual([]);
  });

  it('remembers a bounded number of successes', () => {
    let pace = unpaced;
    for (let i = 0; i < 10_000; i++) pace = succeeded(pace, i);
    expect(pace.recent.length).toBe(256);
    expect(rateLimited(pace, 10_000, 100_000).limit).toBe(256);
  });

  it('forgets successes older than the period once paced', () => {
    let pace = threePerSecond;
    for (let t = 1_000; t <= 10_000; t += 100) pace = succeeded(pace, t);
    expect(pace.recent.toArray().every((t) => t > 9_000)).toBe(true);
  });
});

describe("a full bucket's tokens (what goes at once after a quiet spell)", () => {
  const ra = (limit: number, periodMs: number, headroom = 0.3): Pace => ({
    ...unpaced,
    limit,
    periodMs,
    headroom,
  });
  it.each<[string, Pace, number]>([
    ['Retry-After 1 s, 30 a second: a tenth of the limit, a burst a sliding window takes', ra(30, 1_000), 3],
    ['Retry-After 1 s, 50 a second', ra(50, 1_000), 5],
    ['Retry-After 1 s, 200 a second', ra(200, 1_000), 20],
    ['Retry-After 1 s, 3 a second: at most the limit less the headroom', ra(3, 1_000), 2.7],
    ['Retry-After 1 s, 1 a second: one token whatever the headroom', ra(1, 1_000), 1],
    [
      'Retry-After 10 s, 30 a period: the whole limit less the headroom (a fixed window takes it at its start)',
      ra(30, 10_000),
      29.7,
    ],
    ['blind (no Retry-After), 30 a second: a tenth of its second', { ...ra(30, 1_000), blind: true }, 3],
  ])('%s: %f', (_case, pace, tokens) => {
    expect(capacityOf(pace)).toBeCloseTo(tokens, 9);
  });
});

describe('the limit a run of successes implies', () => {
  const burstThenRefill = (limit: number, seconds: number) => [
    ...Array.from({ length: limit }, (_, i) => i),
    ...Array.from({ length: limit * seconds }, (_, i) => Math.round(((i + 1) * 1_000) / limit)),
  ];
  it.each<[string, number[], number, number]>([
    ['no success still lets one through', [], 1_000, 1],
    ['one success: one', [500], 1_000, 1],
    ['a bucket of 3 a second, its burst and refill over 2 s: 3', burstThenRefill(3, 2), 1_000, 3],
    ['a bucket of 10 a second over 3 s: 10', burstThenRefill(10, 3), 1_000, 10],
    ['a bucket of 3 a minute: 3', burstThenRefill(3, 1).map((t) => t * 60), 60_000, 3],
    [
      'a fixed window of 5 a second, two windows: 5',
      [0, 1, 2, 3, 4, 1_000, 1_001, 1_002, 1_003, 1_004],
      1_000,
      5,
    ],
    ['a few ms of jitter do not raise it: 4 in 330 ms under 3 a second', [0, 2, 4, 330], 1_000, 3],
    ['successes spread thin imply little: 3 over 2 s', [0, 1_000, 2_000], 1_000, 1],
  ])('%s', (_name, times, periodMs, expected) => {
    expect(impliedLimit(times, periodMs)).toBe(expected);
  });
});

describe('replaying requests through a bucket (what a proxy that went unpaced has left)', () => {
  // A bucket of 2.8 refilled 3 a second (0.003 per ms), as a limit of 3 with 0.2 of headroom.
  it.each<[string, number[], number, number]>([
    ['no request: full', [], 5_000, 2.8],
    ['one request, then refilled from when it went', [4_000], 4_100, 2.1],
    ['a burst refills from its last request on', [4_000, 4_010, 4_020], 4_500, 1.3],
    ['full again after long enough, never above full', [1_000, 1_001], 5_000, 2.8],
    ['more requests than tokens: empty, never below', [4_990, 4_991, 4_992, 4_993], 5_000, 0],
  ])('%s', (_name, times, now, expected) => {
    expect(replayTokens(times, 2.8, 0.003, now)).toBeCloseTo(expected, 5);
  });
});

describe('a proxy adopting the pace another proxy learned for the site', () => {
  const learned: Pace = { ...threePerSecond, headroom: 0.2, probeAfterPeriods: 20 };
  it.each<[string, Pace, Pace, number, Partial<Pace>]>([
    [
      'takes the limit, period and headroom; its bucket holds the limit less the headroom',
      unpaced,
      learned,
      5_000,
      { limit: 3, periodMs: 1_000, headroom: 0.2, tokens: 2.8, at: 5_000, limitedAt: 5_000, restUntil: 0 },
    ],
    [
      // 2.8 → 1.8 at 3,000; full again by 4,500 → 1.8; +0.9 by 4,800 → 1.7; +0.6 by 5,000.
      'less what its own successes spent, each refilled from when it went',
      { ...unpaced, recent: TimeLog.of([3_000, 4_500, 4_800]) },
      learned,
      5_000,
      { limit: 3, tokens: expect.closeTo(2.3, 5) as number, recent: TimeLog.of([3_000, 4_500, 4_800]) },
    ],
    [
      // Requests in flight when the pace arrives spent a token at the site all the same.
      'less what its requests spent, answered or not',
      { ...unpaced, recent: TimeLog.of([4_500]), sent: TimeLog.of([4_900, 4_910, 4_920]) },
      learned,
      5_000,
      { limit: 3, tokens: expect.closeTo(0.1, 5) as number, sent: TimeLog.of([]) },
    ],
    [
      // The first 429 comes a few hundred ms after a crawl's first burst: the site's bucket
      // has refilled since, and so does this one (counting the burst as spent now held every
      // proxy back by the time between them).
      'a burst long enough ago has partly refilled',
      { ...unpaced, sent: TimeLog.of([4_000, 4_010, 4_020]) },
      learned,
      4_500,
      { tokens: expect.closeTo(1.3, 5) as number },
    ],
    [
      'never below an empty bucket',
      { ...unpaced, recent: TimeLog.of([4_900, 4_910, 4_920, 4_930]) },
      learned,
      5_000,
      { tokens: 0 },
    ],
    [
      'starts with the base quiet, not the backoff the other proxy reached (the limit may have risen since)',
      unpaced,
      learned,
      5_000,
      { probeAfterPeriods: PROBE_AFTER_PERIODS, probeGrowth: 1 },
    ],
    [
      'a proxy with a pace of its own keeps it',
      { ...threePerSecond, limit: 2 },
      learned,
      5_000,
      { limit: 2 },
    ],
    ['nothing learned, nothing adopted', unpaced, unpaced, 5_000, { limit: undefined }],
  ])('%s', (_name, mine, from, now, expected) => {
    expect(adopt(mine, from, now)).toMatchObject(expected);
  });
});

describe("a proxy hearing of another proxy's probe of the site", () => {
  const paced: Pace = { ...threePerSecond, probedAt: 2_000, probeAfterPeriods: PROBE_AFTER_PERIODS };
  it.each<[string, Pace, number, number, Partial<Pace>]>([
    ['waits its quiet from the other probe', paced, 9_000, PROBE_AFTER_PERIODS, { probedAt: 9_000 }],
    [
      'takes the doubled quiet of a refused probe',
      paced,
      9_000,
      PROBE_AFTER_PERIODS * 2,
      { probedAt: 9_000, probeAfterPeriods: PROBE_AFTER_PERIODS * 2 },
    ],
    [
      'keeps its own later probe and longer quiet',
      { ...paced, probedAt: 12_000, probeAfterPeriods: 40 },
      9_000,
      10,
      { probedAt: 12_000, probeAfterPeriods: 40 },
    ],
    [
      'an unpaced proxy has nothing to defer',
      unpaced,
      9_000,
      20,
      { probedAt: 0, probeAfterPeriods: PROBE_AFTER_PERIODS },
    ],
  ])('%s', (_name, pace, probedAt, quiet, expected) => {
    expect(heardOfProbe(pace, probedAt, quiet)).toMatchObject(expected);
  });

  it('so it does not probe within the quiet after the other proxy did', () => {
    // Quiet periods passed since its own 429: it would probe now, but another proxy just did.
    const due: Pace = { ...threePerSecond, tokens: 0, at: 10_000, restUntil: 1_000, probedAt: 0 };
    expect(admit(due, 10_000).probe).toBe(true);
    expect(admit(heardOfProbe(due, 9_900, PROBE_AFTER_PERIODS), 10_000).probe).toBe(false);
  });
});

describe('what the site has shown it allows every source (sites limit every source alike)', () => {
  // Each case: the limit shown so far, the proxy's pace before a 429 at `at`, and after it.
  const after429 = (before: Pace, at: number) => rateLimited(before, at, 1_000);
  it.each<[string, number, Pace, number, number]>([
    [
      // Three within 20 ms and a 429: the site allows three (impliedLimit).
      "a proxy's first 429 shows what its last period's successes imply",
      0,
      { ...unpaced, recent: TimeLog.of([4_980, 4_990, 5_000]) },
      5_000,
      3,
    ],
    [
      // 400 ms apart: these prove only two a second, but another proxy showed three.
      'a weaker showing does not lower what another proxy showed',
      3,
      { ...unpaced, recent: TimeLog.of([4_100, 4_500, 4_900]) },
      5_000,
      3,
    ],
    [
      'successes older than the period show nothing',
      0,
      { ...unpaced, recent: TimeLog.of([1_000, 1_010, 1_020]) },
      5_000,
      0,
    ],
    [
      // Its limit held the quiet periods before the probe; the probe one above it did not.
      'a refused probe shows the limit before it',
      2,
      { ...threePerSecond, limit: 4, probedAt: 9_900, limitedAt: 1_000, recent: TimeLog.of([9_500, 9_900]) },
      10_000,
      3,
    ],
    [
      // Not a probe's answer: the site allows less than before, whatever was shown earlier.
      'a 429 that lowers a limit shows that lower limit',
      3,
      { ...threePerSecond, limitedAt: 1_000, probedAt: 0, recent: TimeLog.of([9_600]) },
      10_000,
      1,
    ],
    [
      'a 429 that only widens the headroom keeps what was shown',
      3,
      { ...threePerSecond, limitedAt: 1_000, probedAt: 0, recent: TimeLog.of([9_300, 9_600, 9_900]) },
      10_000,
      3,
    ],
  ])('%s', (_name, shown, before, at, expected) => {
    expect(provenAfter429(shown, before, after429(before, at), at)).toBe(expected);
  });

  it.each<[string, number, Pace, number]>([
    ['a probe of four shows three (the limit held its quiet periods)', 2, { ...threePerSecond, limit: 4 }, 3],
    ['and keeps a higher showing', 5, { ...threePerSecond, limit: 4 }, 5],
    ['an unpaced proxy probes nothing', 2, unpaced, 2],
  ])('%s', (_name, shown, probing, expected) => {
    expect(provenByProbe(shown, probing)).toBe(expected);
  });

  it.each<[string, Pace, number, Partial<Pace>]>([
    [
      'a lower limit rises to what was shown',
      { ...threePerSecond, limit: 2, tokens: 0.4, headroom: 0.3 },
      3,
      { limit: 3, tokens: 0.4, headroom: 0.3 },
    ],
    ['a limit at or above it stays', threePerSecond, 2, { limit: 3 }],
    ['an unpaced proxy stays unpaced (it adopts first)', unpaced, 3, { limit: undefined }],
  ])('%s', (_name, pace, shown, expected) => {
    expect(raiseTo(pace, shown)).toMatchObject(expected);
  });
});
