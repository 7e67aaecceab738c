// Which proxy a lease request gets: pure, so every LeaseStore implementation selects alike
// and the rule is tested without a store.
import type { ProxyRecord } from './catalog.js';
import type { NoLeaseReason } from './lease-store.js';
import { selectorMatcher } from './selector.js';

/** A proxy a lease may ever point at, whatever its current load. */
export function isLeasable(proxy: ProxyRecord): boolean {
  // A Deleting proxy may still pass its health checks; handing it out would strand the client.
  return proxy.healthy && proxy.ip !== '' && proxy.maxLeases > 0 && proxy.phase !== 'Deleting';
}

export interface SelectionState {
  /** Live leases on a proxy. */
  load(proxyID: string): number;
  /** Whether the proxy is cooling down for the request's target (or globally). */
  coolingDown(proxyID: string): boolean;
}

export type Selection = { proxy: ProxyRecord } | { reason: NoLeaseReason };

/**
 * Least-loaded first: fewest live leases, then lowest latency, then id (deterministic).
 * When nothing is free the reason says why: no leasable proxy matches (no_match); some
 * match and are not cooling down but all are full (all_busy, worth retrying soon); every
 * match is cooling down for this target (all_cooling_down).
 */
export function selectProxy(
  candidates: readonly ProxyRecord[],
  selector: Record<string, string>,
  state: SelectionState,
): Selection {
  const matches = selectorMatcher(selector);
  let best: ProxyRecord | undefined;
  let bestLoad = 0;
  let matched = false;
  let notCooling = false;
  for (const proxy of candidates) {
    if (!isLeasable(proxy) || !matches(proxy.attributes)) continue;
    matched = true;
    if (state.coolingDown(proxy.id)) continue;
    notCooling = true;
    const load = state.load(proxy.id);
    if (load >= proxy.maxLeases) continue;
    if (best === undefined || isBetter(proxy, load, best, bestLoad)) {
      best = proxy;
      bestLoad = load;
    }
  }
  if (best !== undefined) return { proxy: best };
  if (!matched) return { reason: 'no_match' };
  return { reason: notCooling ? 'all_busy' : 'all_cooling_down' };
}

function isBetter(a: ProxyRecord, aLoad: number, b: ProxyRecord, bLoad: number): boolean {
  if (aLoad !== bLoad) return aLoad < bLoad;
  if (a.latencyMillis !== b.latencyMillis) return a.latencyMillis < b.latencyMillis;
  return a.id < b.id;
}
