// Which proxy a lease request gets: pure, so the rule is table-tested without a store.
import type { ProxyRecord } from './catalog.js';
import type { LeaseRequest, NoLeaseReason, OutcomeCounts } from './lease-store.js';
import { failures } from './outcome-window.js';

/** A proxy a lease may ever point at, whatever its current load. */
export function isLeasable(proxy: ProxyRecord): boolean {
  // A Deleting proxy may still pass its health checks; handing it out would strand the client.
  // A draining one keeps its live leases but takes no new lease or session binding.
  return (
    proxy.healthy &&
    proxy.ip !== '' &&
    proxy.maxLeases > 0 &&
    proxy.phase !== 'Deleting' &&
    proxy.draining !== true
  );
}

/**
 * Whether every leasable proxy is a candidate for the request: no selector, exit IP or token
 * scope narrows them. The stores' counts (cooling per target, full) are over every leasable
 * proxy, so only such a request may be refused from them without a walk (issue 47 item 4).
 */
export function anyLeasable(request: Pick<LeaseRequest, 'selector' | 'exitIP' | 'within'>): boolean {
  return (
    request.exitIP === undefined && request.within === undefined && Object.keys(request.selector).length === 0
  );
}

/** A leasable proxy with a free slot, and its live lease count. */
export interface Candidate {
  proxy: ProxyRecord;
  load: number;
}

export interface SelectionState {
  /** Whether the proxy is cooling down for the request's target (or the global pool). */
  coolingDown(proxyID: string): boolean;
  /** Recent counts for the request's target, when the proxy had a bad report there recently. */
  failingRecord(proxyID: string): OutcomeCounts | undefined;
}

/**
 * Least-loaded first. `free` holds the free proxies matching the selector in (load, latency,
 * id) order. Cooling proxies are skipped. Among the eligible proxies with the fewest leases,
 * one without recent failures for the target wins (the first in order, i.e. the fastest);
 * only when all of them failed recently does the lowest failure ratio win, then latency, id.
 * Stops at the first clean proxy, so it looks at few entries beyond the ones it skips.
 */
export function selectProxy(free: Iterable<Candidate>, state: SelectionState): Candidate | undefined {
  let level = -1;
  let bestFailing: { candidate: Candidate; ratio: number } | undefined;
  for (const candidate of free) {
    if (candidate.load !== level) {
      if (bestFailing !== undefined) return bestFailing.candidate;
      level = candidate.load;
    }
    if (state.coolingDown(candidate.proxy.id)) continue;
    const record = state.failingRecord(candidate.proxy.id);
    if (record === undefined) return candidate;
    const ratio = failures(record) / (failures(record) + record.ok);
    // Candidates arrive in (latency, id) order, so only a strictly lower ratio replaces.
    if (bestFailing === undefined || ratio < bestFailing.ratio) bestFailing = { candidate, ratio };
  }
  return bestFailing?.candidate;
}

/**
 * Why nothing was leased: no leasable proxy matches (no_match); some match and are not
 * cooling down but all are full (all_busy, worth retrying soon); every match is cooling down
 * for this target (all_cooling_down).
 */
export function refusal(leasableMatches: number, coolingMatches: number): NoLeaseReason {
  if (leasableMatches === 0) return 'no_match';
  return coolingMatches >= leasableMatches ? 'all_cooling_down' : 'all_busy';
}

/** The candidates a token's scope admits, in the same order. */
export function* withinScope(
  free: Iterable<Candidate>,
  admits: (proxy: ProxyRecord) => boolean,
): Generator<Candidate> {
  for (const candidate of free) if (admits(candidate.proxy)) yield candidate;
}
