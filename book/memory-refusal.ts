// Why the memory store refused a lease: counted only when nothing was free (the target's
// cooldowns are walked for the reason, never for a grant; a request every leasable proxy could
// take reads the cooling counts instead).

import type { ProxyCatalog } from './catalog.js';
import type { CoolingCounts } from './cooling-counts.js';
import type { FreeProxyIndex } from './free-proxy-index.js';
import { refusal } from './lease-selection.js';
import type { AcquireResult, LeaseRequest, NoLeaseReason } from './lease-store.js';
import { proxyMatcher } from './selector.js';
import type { TargetBook } from './target-book.js';

/** What the explanation reads: the free index, the cooldowns, the catalog. */
export interface RefusalSources {
  index: FreeProxyIndex;
  targets: TargetBook;
  catalog: ProxyCatalog;
}

/** The refusal of this request at now, and when its first running cooldown ends (none: absent). */
export function explainRefusal(
  { index, targets, catalog }: RefusalSources,
  request: LeaseRequest,
  target: string,
  now: number,
  /** For a request every leasable proxy could take: the cooling counts' figures (cooling-counts.ts). */
  counted?: { cooling: number; firstEnd: number | undefined },
): { refused: AcquireResult & { granted: false }; firstEnd?: number } {
  const leasable = index.countLeasable(request.selector, request.exitIP);
  let cooling = counted?.cooling ?? 0;
  let firstEnd = counted?.firstEnd ?? Infinity;
  if (leasable > 0 && counted === undefined) {
    const matches = proxyMatcher(request.selector, request.exitIP);
    for (const entry of targets.forTarget(target)) {
      if (entry.until <= now || !index.has(entry.proxyID)) continue;
      if (!matches(catalog.get(entry.proxyID)!)) continue;
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

/** For a request every leasable proxy could take: its refusal when every leasable proxy is
 * cooling down for the target, from the counts alone (issue 47 item 4); undefined: walk. */
export function countedRefusal(
  index: FreeProxyIndex,
  cooling: CoolingCounts,
  target: string,
  now: number,
): { refused: AcquireResult & { granted: false }; firstEnd: number } | undefined {
  const leasable = index.countLeasable({});
  if (leasable === 0 || cooling.count(target, now) < leasable) return undefined;
  const firstEnd = cooling.firstEnd(target, now)!;
  return { refused: { granted: false, reason: 'all_cooling_down', retryAfterMs: firstEnd - now }, firstEnd };
}
