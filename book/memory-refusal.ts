// Why the memory store refused a lease: counted only when nothing was free (the target's
// cooldowns are walked for the reason, never for a grant; a request every leasable proxy could
// take reads the cooling counts instead).

import type { ProxyCatalog } from './catalog.js';
import type { CoolingCounts } from './cooling-counts.js';
import type { FreeProxyIndex } from './free-proxy-index.js';
import { anyLeasable, refusal } from './lease-selection.js';
import type { AcquireResult, LeaseRequest, NoLeaseReason } from './lease-store.js';
import { proxyMatcher } from './selector.js';
import { blockRange } from './exit-ip-match.js';
import type { TargetBook } from './target-book.js';

/** What a refusal reads: the free index, the cooldowns and their counts, the catalog. */
export interface RefusalSources {
  index: FreeProxyIndex;
  targets: TargetBook;
  cooling: CoolingCounts;
  catalog: ProxyCatalog;
}

/** A refusal and when the first running cooldown among the matches ends (none: absent). */
export interface Refusal {
  refused: AcquireResult & { granted: false };
  firstEnd?: number;
}

/**
 * The refusal of a request its walk found nothing for: a request every leasable proxy could
 * take reads its cooling from the counts, any other one walks the target's cooldowns.
 */
export function walkedRefusal(
  sources: RefusalSources,
  request: LeaseRequest,
  target: string,
  now: number,
): Refusal {
  const counted =
    request.session === undefined && anyLeasable(request)
      ? { cooling: sources.cooling.count(target, now), firstEnd: sources.cooling.firstEnd(target, now) }
      : undefined;
  return explainRefusal(sources, request, target, now, counted);
}

/** The refusal of this request at now, and when its first running cooldown ends (none: absent). */
export function explainRefusal(
  { index, targets, catalog }: Omit<RefusalSources, 'cooling'>,
  request: LeaseRequest,
  target: string,
  now: number,
  /** For a request every leasable proxy could take: the cooling counts' figures (cooling-counts.ts). */
  counted?: { cooling: number; firstEnd: number | undefined },
): Refusal {
  // Only the proxies inside the token's scope: one outside it, busy or cooling down, would
  // answer a scoped token all_busy or all_cooling_down (with its Retry-After) about another
  // team's proxies, never no_match.
  const leasable = index.countLeasable(request.selector, request.exitIP, request.within);
  let cooling = counted?.cooling ?? 0;
  let firstEnd = counted?.firstEnd ?? Infinity;
  if (leasable > 0 && counted === undefined) {
    const matches = proxyMatcher(request.selector, request.exitIP);
    for (const entry of targets.forTarget(target)) {
      if (entry.until <= now || !index.has(entry.proxyID)) continue;
      const proxy = catalog.get(entry.proxyID)!;
      if (!matches(proxy) || (request.within !== undefined && !request.within(proxy))) continue;
      cooling++;
      firstEnd = Math.min(firstEnd, entry.until);
    }
  }
  const reason: NoLeaseReason = refusal(leasable, cooling);
  const ends = firstEnd === Infinity ? {} : { firstEnd };
  return reason === 'all_cooling_down'
    ? { refused: { granted: false, reason, retryAfterMs: firstEnd - now }, ...ends }
    : { refused: { granted: false, reason }, ...ends };
}

/**
 * The refusal from the counts alone (issue 47 item 4), or undefined: walk. A request every
 * leasable proxy could take: all_cooling_down when every one is cooling down for the target
 * (every one full leaves the free index empty: its walk costs nothing). A selector or a scope
 * (no exit IP: not a class): over the classes it matches (proxy-classes.ts, at most
 * MAX_COUNTED_CLASSES), all_cooling_down when every member of them is cooling down for the
 * target, all_busy when none has a free slot; anything between is the walk's to tell. An
 * exit-IP block alone: the same over the proxies egressing from it, counted in the free
 * index's and the cooling counts' exit-ordered sets (its Retry-After: the target's first
 * cooldown end, never after the block's); a block nothing leasable is in, no_match. An exit
 * IP with a selector or a scope: the same over the by-class exit-ordered sets of the classes
 * it matches; none of their members in the block, no_match.
 */
export function countedRefusal(
  { index, cooling }: Pick<RefusalSources, 'index' | 'cooling'>,
  request: LeaseRequest,
  target: string,
  now: number,
): Refusal | undefined {
  if (request.exitIP !== undefined) {
    const block = request.exitIP;
    const alone = request.within === undefined && Object.keys(request.selector).length === 0;
    // A block alone: its members, free ones and cooling ones counted in the exit-ordered sets
    // (free-proxy-index.ts, cooling-counts.ts); with a selector or a scope, the same in the
    // by-class exit-ordered sets, over the classes it matches (at most MAX_COUNTED_CLASSES).
    const keys = alone
      ? undefined
      : index.matchingClasses(request.selector, request.within)?.map((c) => c.key);
    if (!alone && keys === undefined) return undefined;
    const counts = keys === undefined ? index.countBlock(block) : index.countBlockIn(keys, block);
    if (counts === undefined) return undefined;
    // Nothing leasable egresses from it (of the classes matched, with any): the walk's no_match, known now.
    if (counts.members === 0) return { refused: { granted: false, reason: 'no_match' } };
    const range = blockRange(block);
    const cool =
      keys === undefined
        ? cooling.countBlock(target, range, now)
        : cooling.countBlockIn(keys, target, range, now);
    // The first of the target's cooldowns to end, the block's or not: never after the block's.
    const firstEnd = cooling.firstEnd(target, now);
    if (cool >= counts.members) return coolingDown(firstEnd!, now);
    if (counts.free > 0) return undefined;
    return {
      refused: { granted: false, reason: 'all_busy' },
      ...(firstEnd === undefined ? {} : { firstEnd }),
    };
  }
  if (anyLeasable(request)) {
    const leasable = index.countLeasable({});
    if (leasable === 0 || cooling.count(target, now) < leasable) return undefined;
    return coolingDown(cooling.firstEnd(target, now)!, now);
  }
  const classes = index.matchingClasses(request.selector, request.within);
  if (classes === undefined || classes.length === 0) return undefined;
  let members = 0;
  let free = 0;
  let cool = 0;
  let firstEnd = Infinity;
  for (const { key, members: n, data } of classes) {
    members += n;
    free += data.free;
    cool += cooling.countIn(key, target, now);
    firstEnd = Math.min(firstEnd, cooling.firstEndIn(key, target, now) ?? Infinity);
  }
  if (cool >= members) return coolingDown(firstEnd, now);
  if (free > 0) return undefined;
  // All busy: the first cooldown among them ends the memo early, as the walk's explanation does.
  return { refused: { granted: false, reason: 'all_busy' }, ...(firstEnd === Infinity ? {} : { firstEnd }) };
}

function coolingDown(firstEnd: number, now: number): Refusal {
  return {
    refused: { granted: false, reason: 'all_cooling_down', retryAfterMs: firstEnd - now },
    firstEnd,
  };
}
