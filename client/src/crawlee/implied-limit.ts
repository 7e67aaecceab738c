// The least limit a site's successes prove, whatever the limit's shape (a token bucket, a fixed
// window or a sliding log): what a 429 teaches as a first limit, and what one proxy shows the
// site's others. Pure.
/**
 * Jitter allowed for in impliedLimit: success times are the client's, a few ms off the site's
 * clock, so a window can look a hair denser than the site let it be.
 */
const IMPLIED_LIMIT_TOLERANCE = 0.1;

/**
 * The most requests per period a limit of `L` lets through over a span `s` is `L × (1 + s /
 * period)`: a full bucket (or window) at its start and the refill during it; this holds for a
 * token bucket, a fixed window and a sliding log alike. So the successes `times` (ascending)
 * prove the limit is at least the densest window's `count / (1 + span / period)`; this returns
 * that bound as a whole number. Why not just the last period's count: a site's bucket starts
 * full, so the first period of a crawl gets the burst and the refill, up to twice the limit;
 * learning that as the limit cost every proxy a 429 and a rest per request too many.
 */
export function impliedLimit(times: readonly number[], periodMs: number): number {
  let bound = 0;
  for (let from = 0; from < times.length; from++) {
    for (let to = from; to < times.length; to++) {
      bound = Math.max(bound, (to - from + 1) / (1 + (times[to]! - times[from]!) / periodMs));
    }
  }
  return Math.max(1, Math.ceil(bound - IMPLIED_LIMIT_TOLERANCE));
}
