// A crawl's trace as text (bench:crawl --trace): per second of the crawl, its first second, its
// leases' timing, and where a rate-limited site's budget went.
import type { SiteHit } from './crawl-site.js';
import { siteBudget, type SiteBudget } from './site-budget.js';

/** `second:200s/429s/sources` for each second of a crawl that saw a request. */
export function perSecond(
  hits: readonly { from: string; status: number; at: number }[],
  started: number,
): string {
  const seconds = new Map<number, { ok: number; throttled: number; sources: Set<string> }>();
  for (const hit of hits) {
    const second = Math.floor((hit.at - started) / 1000);
    let entry = seconds.get(second);
    if (entry === undefined) seconds.set(second, (entry = { ok: 0, throttled: 0, sources: new Set() }));
    if (hit.status === 200) {
      entry.ok++;
      entry.sources.add(hit.from);
    } else if (hit.status === 429) entry.throttled++;
  }
  return [...seconds]
    .sort(([a], [b]) => a - b)
    .map(([second, e]) => `${second}:${e.ok}/${e.throttled}/${e.sources.size}`)
    .join(' ')
    .concat(' | ', startPhase(hits, started));
}

/** When the crawl's first leases came, and how long one took to come. */
export function leasePhase(
  times: readonly { askedAt: number; grantedAt: number }[],
  started: number,
): string {
  const granted = times.map((t) => t.grantedAt - started).sort((a, b) => a - b);
  const took = times.map((t) => t.grantedAt - t.askedAt).sort((a, b) => a - b);
  return `lease no. 1/10/20 granted at ${granted[0] ?? '-'}/${granted[9] ?? '-'}/${granted[19] ?? '-'} ms, round trip median ${took[Math.floor(took.length / 2)] ?? '-'} ms`;
}

/** The crawl's first second in ms from its start: first request, each source's first 200, the 20th/60th/100th 200. */
function startPhase(hits: readonly { from: string; status: number; at: number }[], started: number): string {
  const ok = hits.filter((h) => h.status === 200).map((h) => h.at - started);
  const firstOk = new Map<string, number>();
  for (const h of hits) if (h.status === 200 && !firstOk.has(h.from)) firstOk.set(h.from, h.at - started);
  const sources = [...firstOk.values()].sort((a, b) => a - b);
  const nth = (n: number) => (ok.length >= n ? `${ok[n - 1]}` : '-');
  return [
    `first request ${hits.length > 0 ? hits[0]!.at - started : '-'} ms`,
    `sources' first 200 median ${sources[Math.floor(sources.length / 2)] ?? '-'} last ${sources.at(-1) ?? '-'} ms`,
    `200 no. 20/60/100 at ${nth(20)}/${nth(60)}/${nth(100)} ms`,
  ].join(', ');
}

/** A rate-limited site's budget up to its last 200 (undefined: no limit, or no page). */
export function budgetAtLastPage(
  hits: readonly SiteHit[],
  rateLimitPerSecond: number | undefined,
): SiteBudget | undefined {
  const last = hits.findLast((h) => h.status === 200);
  if (rateLimitPerSecond === undefined || last === undefined) return undefined;
  return siteBudget(hits, rateLimitPerSecond, last.at);
}

export function describeBudget(b: SiteBudget): string {
  const f = (n: number) => n.toFixed(1);
  return `site budget by the last page ${f(b.total)} tokens: used ${b.used}, before each source's first request ${f(b.beforeFirst)}, lost while full ${f(b.whileFull)}, left in buckets ${f(b.left)}`;
}
