// The pace a proxy keeps for a site after its 429s (client/src/crawlee/site-pace.ts).
import {
  admit,
  PROBE_AFTER_WINDOWS,
  rateLimited,
  succeeded,
  unpaced,
  type Pace,
} from '../../client/src/crawlee/site-pace.js';

/** Runs `steps` from `start`; returns the pace and each admit's wait. */
function run(
  start: Pace,
  steps: ([op: 'admit' | 'ok', at: number] | [op: '429', at: number, retryAfterMs?: number])[],
) {
  let pace = start;
  const waits: number[] = [];
  for (const [op, at, retryAfterMs] of steps) {
    if (op === 'ok') pace = succeeded(pace, at);
    else if (op === '429') pace = rateLimited(pace, at, retryAfterMs);
    else {
      const turn = admit(pace, at);
      waits.push(turn.waitMs);
      pace = turn.pace;
    }
  }
  return { pace, waits };
}

const paced = (limit: number, windowEnd: number, admitted: number, extra: Partial<Pace> = {}): Pace => ({
  ...unpaced,
  limit,
  periodMs: 1_000,
  windowEnd,
  admitted,
  ...extra,
});

describe('site pace', () => {
  it.each<[string, Pace, Parameters<typeof run>[1], Partial<Pace>, number[]]>([
    [
      'before any 429 every request goes at once',
      unpaced,
      [
        ['admit', 0],
        ['admit', 0],
        ['admit', 1],
      ],
      { limit: undefined },
      [0, 0, 0],
    ],
    [
      'the first 429 limits to the successes of the last Retry-After period, and rests',
      unpaced,
      [
        ['ok', 100],
        ['ok', 1_200],
        ['ok', 1_500],
        ['ok', 1_900],
        ['429', 2_000, 1_000],
      ],
      { limit: 3, periodMs: 1_000, windowEnd: 3_000, resting: true },
      [],
    ],
    [
      'a 429 with nothing allowed before it still admits one per window',
      unpaced,
      [['429', 0, 2_000]],
      { limit: 1, periodMs: 2_000, windowEnd: 2_000 },
      [],
    ],
    [
      'nothing is admitted during the rest: the wait is its end',
      paced(3, 3_000, 0, { resting: true }),
      [['admit', 2_000]],
      { resting: true },
      [1_000],
    ],
    [
      'after the rest a window admits the limit, then waits for the next window',
      paced(3, 3_000, 0, { resting: true }),
      [
        ['admit', 3_000],
        ['admit', 3_001],
        ['admit', 3_002],
        ['admit', 3_010],
      ],
      { windowEnd: 4_000, admitted: 3, resting: false, cleanWindows: 0 },
      [0, 0, 0, 990],
    ],
    [
      'a 429 in a window limits to that window’s successes',
      paced(3, 4_000, 3),
      [
        ['ok', 3_100],
        ['ok', 3_100],
        ['429', 3_200, 1_000],
      ],
      { limit: 2, windowEnd: 4_200, resting: true },
      [],
    ],
    [
      'a 429 during the rest (a request sent before it) changes nothing',
      paced(2, 4_200, 0, { resting: true }),
      [['429', 3_300, 1_000]],
      { limit: 2, windowEnd: 4_200, resting: true },
      [],
    ],
    [
      'a window that did not use its whole limit is not clean (no probe on low demand)',
      paced(3, 1_000, 1, { cleanWindows: PROBE_AFTER_WINDOWS - 1 }),
      [['admit', 1_000]],
      { limit: 3, cleanWindows: 0 },
      [0],
    ],
    [
      `after ${PROBE_AFTER_WINDOWS} clean full windows the limit is probed one higher`,
      paced(3, 1_000, 3, { cleanWindows: PROBE_AFTER_WINDOWS - 1 }),
      [['admit', 1_000]],
      { limit: 4, cleanWindows: 0, windowEnd: 2_000, admitted: 1 },
      [0],
    ],
    [
      'the window after a rest is not counted clean',
      paced(3, 1_000, 0, { resting: true, cleanWindows: PROBE_AFTER_WINDOWS - 1 }),
      [['admit', 1_000]],
      { limit: 3, cleanWindows: 0 },
      [0],
    ],
    [
      'a 429 without Retry-After keeps the period it had',
      paced(3, 1_000, 3, { periodMs: 5_000 }),
      [
        ['ok', 500],
        ['429', 600, undefined],
      ],
      { limit: 1, periodMs: 5_000, windowEnd: 5_600 },
      [],
    ],
  ])('%s', (_name, start, steps, expected, waits) => {
    const result = run(start, steps);
    expect(result.pace).toMatchObject(expected);
    expect(result.waits).toEqual(waits);
  });

  it('remembers a bounded number of successes before the first 429', () => {
    let pace = unpaced;
    for (let i = 0; i < 10_000; i++) pace = succeeded(pace, i);
    expect(pace.recent.length).toBeLessThanOrEqual(256);
    expect(rateLimited(pace, 10_000, 100_000).limit).toBe(pace.recent.length);
  });
});
