// Two crawls run at once on one core (`bench:crawl -- --side-by-side`): each side's pages/s
// over the window both were crawling. Why: this VM's speed drifts by a third within minutes,
// so two crawls run one after the other can differ by more than the difference being measured.
// Run at once and sharing a core, both sides see the same machine at every moment, and the
// side that needs less CPU per page fetches more pages in the same time. Once one side has
// finished, the other has the core alone, so only the shared window is compared.

/** One crawl's timeline: when it started (ms since the epoch) and when each page came (ms since then, ascending). */
export interface Timeline {
  startedAt: number;
  /** The crawl's length in ms. */
  durationMs: number;
  fetchedAt: readonly number[];
}

/** Pages fetched by `at` (ms since the epoch). */
export function pagesBy(timeline: Timeline, at: number): number {
  const limit = at - timeline.startedAt;
  let lo = 0;
  let hi = timeline.fetchedAt.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (timeline.fetchedAt[mid]! <= limit) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export interface SharedWindow {
  /** The window's length in ms: from the later start to the earlier end. */
  ms: number;
  /** Pages/s of each side within the window. */
  a: number;
  b: number;
  /** a / b (NaN when b fetched nothing in the window). */
  ratio: number;
}

/** Each side's pages/s from the later of the two starts to the earlier of the two ends. */
export function sharedWindow(a: Timeline, b: Timeline): SharedWindow {
  const from = Math.max(a.startedAt, b.startedAt);
  const to = Math.min(a.startedAt + a.durationMs, b.startedAt + b.durationMs);
  const ms = Math.max(0, to - from);
  const rate = (t: Timeline) => (ms === 0 ? 0 : ((pagesBy(t, to) - pagesBy(t, from)) * 1000) / ms);
  const [ra, rb] = [rate(a), rate(b)];
  return { ms, a: ra, b: rb, ratio: rb === 0 ? NaN : ra / rb };
}
