// Where a rate-limited site's budget went in one crawl, for the crawl benchmark's trace. The
// site gives each source a bucket of `limit` tokens refilled at `limit` a second, full at the
// source's first request (bench/crawl-site.ts). Had every source started with the crawl's
// first request, the budget up to `until` would be sources × (limit + limit × seconds). Each
// token of it was used (a 200), never there (the source's first request came later), lost (its
// bucket was full), or is still in a bucket at `until`. Two crawls of the same pages differ in
// time by what they did not use, over the site's rate.

import type { SiteHit } from './crawl-site.js';

export interface SiteBudget {
  /** sources × (limit + limit × seconds from the crawl's first request to `until`). */
  total: number;
  /** Requests the site answered 200. */
  used: number;
  /** Refill before each source's first request. */
  beforeFirst: number;
  /** Refill while a source's bucket was full. */
  whileFull: number;
  /** Tokens in the buckets at `until`. */
  left: number;
}

/** The site's budget up to `until` (ms, the hits' clock), by where it went. */
export function siteBudget(hits: readonly SiteHit[], limit: number, until: number): SiteBudget {
  const perMs = limit / 1000;
  const bySource = new Map<string, SiteHit[]>();
  for (const hit of hits) {
    if (hit.at > until) continue;
    let list = bySource.get(hit.from);
    if (list === undefined) bySource.set(hit.from, (list = []));
    list.push(hit);
  }
  const first = Math.min(...[...bySource.values()].map((list) => list[0]!.at));
  const budget: SiteBudget = { total: 0, used: 0, beforeFirst: 0, whileFull: 0, left: 0 };
  for (const list of bySource.values()) {
    budget.total += limit + perMs * (until - first);
    budget.beforeFirst += perMs * (list[0]!.at - first);
    let tokens = limit;
    let at = list[0]!.at;
    const refill = (to: number) => {
      tokens += perMs * (to - at);
      at = to;
      if (tokens > limit) {
        budget.whileFull += tokens - limit;
        tokens = limit;
      }
    };
    for (const hit of list) {
      refill(hit.at);
      // A 429 spends nothing; the site answers 200 only with a token.
      if (hit.status === 200) {
        tokens--;
        budget.used++;
      }
    }
    refill(until);
    budget.left += tokens;
  }
  return budget;
}
