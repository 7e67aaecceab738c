// Where a rate-limited site's budget went (bench/site-budget.ts), for the crawl benchmark's trace.
import type { SiteHit } from '../../bench/crawl-site.js';
import { siteBudget, type SiteBudget } from '../../bench/site-budget.js';

const ok = (from: string, at: number): SiteHit => ({ from, status: 200, at });
const throttled = (from: string, at: number): SiteHit => ({ from, status: 429, at });

describe("a rate-limited site's budget (3 a second per source)", () => {
  it.each<[string, SiteHit[], number, SiteBudget]>([
    [
      'one source spending its bucket at once: the rest of it is left, and its refill',
      [ok('a', 0), ok('a', 0), ok('a', 0)],
      1_000,
      { total: 6, used: 3, beforeFirst: 0, whileFull: 0, left: 3 },
    ],
    [
      // a: 2 left after its request, 5 by 1,000: 2 lost. b: 2 at 500, 3.5 by 1,000: 0.5 lost.
      'a source whose first request came 500 ms after the crawl began never had 1.5 tokens',
      [ok('a', 0), ok('b', 500)],
      1_000,
      { total: 12, used: 2, beforeFirst: 1.5, whileFull: 2.5, left: 6 },
    ],
    [
      // 3 − 1 at 0 = 2; +3 by 1,000 is 5, over the bucket by 2; one more at 1,000 leaves 2.
      'a bucket that stays full loses its refill',
      [ok('a', 0), ok('a', 1_000)],
      1_000,
      { total: 6, used: 2, beforeFirst: 0, whileFull: 2, left: 2 },
    ],
    [
      'a 429 spends nothing',
      [ok('a', 0), throttled('a', 10)],
      10,
      { total: 3.03, used: 1, beforeFirst: 0, whileFull: 0, left: 2.03 },
    ],
    [
      'hits after the horizon do not count',
      [ok('a', 0), ok('a', 2_000)],
      1_000,
      { total: 6, used: 1, beforeFirst: 0, whileFull: 2, left: 3 },
    ],
  ])('%s', (_name, hits, until, expected) => {
    const budget = siteBudget(hits, 3, until);
    for (const key of Object.keys(expected) as (keyof SiteBudget)[]) {
      expect(budget[key]).toBeCloseTo(expected[key], 6);
    }
    // Every token is accounted for.
    expect(budget.used + budget.beforeFirst + budget.whileFull + budget.left).toBeCloseTo(budget.total, 6);
  });
});
