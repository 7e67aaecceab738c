// Two crawls run at once: each side's pages/s over the window both were crawling (bench/shared-window.ts).
import { describe, expect, it } from '@jest/globals';
import { pagesBy, sharedWindow, type Timeline } from '../../bench/shared-window.js';

const timeline = (startedAt: number, durationMs: number, fetchedAt: number[]): Timeline => ({
  startedAt,
  durationMs,
  fetchedAt,
});

describe('pagesBy: pages fetched by a moment', () => {
  const t = timeline(1_000, 500, [100, 200, 200, 400]);
  it.each<[string, number, number]>([
    ['before the crawl started: none', 900, 0],
    ['at its start: none yet', 1_000, 0],
    ['a page that came at that very moment counts', 1_100, 1],
    ['pages that came together count together', 1_200, 3],
    ['between two pages', 1_300, 3],
    ['after its end: all of them', 2_000, 4],
  ])('%s', (_, at, pages) => {
    expect(pagesBy(t, at)).toBe(pages);
  });
});

describe('sharedWindow: each side within the window both crawled', () => {
  it.each<[string, Timeline, Timeline, { ms: number; a: number; b: number; ratio: number }]>([
    [
      'started together: the window ends when the faster side ends, and the slower one is cut there',
      timeline(0, 1_000, [250, 500, 750, 1_000]),
      timeline(0, 2_000, [500, 1_000, 1_500, 2_000]),
      { ms: 1_000, a: 4, b: 2, ratio: 2 },
    ],
    [
      'a later start: the window begins then, so the earlier side is not credited with its head start',
      timeline(0, 2_000, [500, 1_000, 1_500, 2_000]),
      timeline(1_000, 1_000, [500, 1_000]),
      { ms: 1_000, a: 2, b: 2, ratio: 1 },
    ],
    [
      'no overlap: no window, and no ratio',
      timeline(0, 1_000, [500]),
      timeline(2_000, 1_000, [500]),
      { ms: 0, a: 0, b: 0, ratio: NaN },
    ],
  ])('%s', (_, a, b, expected) => {
    expect(sharedWindow(a, b)).toEqual(expected);
  });
});
