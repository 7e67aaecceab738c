// The memory store's holds of suspect or down proxies (proxy-holds.ts decides; this keeps
// the state): the suspicions an unreachable report raises, the listeners told of each (the
// health engine probes), their timeouts, and the counts the totals show. Where a hold moves
// a proxy into or out of the free index is the store's: every change of a hold goes through
// its `place` (the store's setHold), which stores it here with put().

import type { Logger } from 'pino';
import { addressOf, type ProxyCatalog, type ProxyRecord } from './catalog.js';
import type { Clock } from './clock.js';
import type { HealthObservation, HoldReason, Lease, ProbeRequestListener } from './lease-store.js';
import {
  holdOf,
  isForgettable,
  isSuspect,
  onObservation,
  onRecordChanged,
  onUnreachable,
  suspicionToken,
  type HoldState,
  type SuspicionPolicy,
} from './proxy-holds.js';

export interface MemoryHoldsOptions {
  catalog: ProxyCatalog;
  logger: Logger;
  clock: Clock;
  policy: SuspicionPolicy;
  /** Changes a proxy's hold (the store's setHold: put() and the index to match). */
  place: (proxyID: string, state: HoldState | undefined) => void;
}

export class MemoryHolds {
  private readonly holds = new Map<string, HoldState>();
  private readonly probeListeners = new Set<ProbeRequestListener>();
  private readonly catalog: ProxyCatalog;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly policy: SuspicionPolicy;
  private readonly place: (proxyID: string, state: HoldState | undefined) => void;
  private suspicionsRaised = 0;
  /** When the earliest running suspicion times out (Infinity: none). */
  private nextSuspicionEnd = Number.POSITIVE_INFINITY;
  private suspicionsExpired = 0;

  constructor(options: MemoryHoldsOptions) {
    this.catalog = options.catalog;
    this.logger = options.logger;
    this.clock = options.clock;
    this.policy = options.policy;
    this.place = options.place;
  }

  /** Stores a proxy's hold state as it is (undefined: none); the store's setHold calls it. */
  put(proxyID: string, state: HoldState | undefined): void {
    if (state === undefined) this.holds.delete(proxyID);
    else this.holds.set(proxyID, state);
  }

  /** Why the book holds this proxy, at this address, now (undefined: it does not). */
  holdAt(proxyID: string, address: string, now: number): HoldReason | undefined {
    return holdOf(this.holds.get(proxyID), address, now, this.policy);
  }

  /** Why the book holds this proxy now, at its current address (undefined: not held, or not in the catalog). */
  heldNow(proxyID: string, now: number): HoldReason | undefined {
    const state = this.holds.get(proxyID);
    const record = state === undefined ? undefined : this.catalog.get(proxyID);
    return record === undefined ? undefined : holdOf(state, addressOf(record), now, this.policy);
  }

  observe(proxyID: string, observation: HealthObservation, now: number): void {
    this.place(proxyID, onObservation(this.holds.get(proxyID), observation, now));
  }

  onProbeRequest(listener: ProbeRequestListener): () => void {
    this.probeListeners.add(listener);
    // Suspicions raised while nobody listened (before the engine started): asked again, on
    // the next turn so the caller holds its unsubscribe function first.
    queueMicrotask(() => {
      if (!this.probeListeners.has(listener)) return;
      const now = this.clock.now();
      for (const [id, state] of this.holds) {
        const record = this.catalog.get(id);
        if (record === undefined || !isSuspect(state, addressOf(record), now, this.policy)) continue;
        this.tell(listener, id, state.address, suspicionToken(state.suspectSince!));
      }
    });
    return () => this.probeListeners.delete(listener);
  }

  private tell(listener: ProbeRequestListener, proxyID: string, address: string, suspicion: string): void {
    try {
      listener(proxyID, address, suspicion);
    } catch (err) {
      this.logger.error({ err, proxyID }, 'probe request listener threw');
    }
  }

  /** An unreachable report on a lease: the proxy at the leased address becomes suspect, once. */
  suspect(lease: Lease, now: number): { suspect: boolean; probeRequested: boolean } {
    const address = addressOf(lease.proxy);
    const { verdict, state } = onUnreachable(this.holds.get(lease.proxyID), address, now, this.policy);
    if (verdict !== 'raised') {
      return { suspect: verdict === 'already_suspect', probeRequested: false };
    }
    this.suspicionsRaised++;
    this.place(lease.proxyID, state);
    this.nextSuspicionEnd = Math.min(this.nextSuspicionEnd, now + this.policy.timeoutMillis);
    for (const listener of [...this.probeListeners])
      this.tell(listener, lease.proxyID, address, suspicionToken(now));
    return { suspect: true, probeRequested: true };
  }

  /** A suspicion that timed out makes its proxy leasable at once, not at the next sweep. */
  expireDue(now: number): void {
    if (now < this.nextSuspicionEnd) return;
    this.nextSuspicionEnd = Number.POSITIVE_INFINITY;
    this.sweep(now);
    for (const state of this.holds.values()) {
      if (state.suspectSince !== undefined) {
        this.nextSuspicionEnd = Math.min(
          this.nextSuspicionEnd,
          state.suspectSince + this.policy.timeoutMillis,
        );
      }
    }
  }

  /** Ends suspicions no probe answered in time (loudly: nothing is re-probing) and forgets the rest. */
  sweep(now: number): void {
    for (const [id, state] of this.holds) {
      if (state.suspectSince !== undefined && !isSuspect(state, state.address, now, this.policy)) {
        this.suspicionsExpired++;
        this.logger.error(
          { proxyID: id, address: state.address, suspectSince: new Date(state.suspectSince).toISOString() },
          'no probe answered an unreachable report in time: the proxy is leasable again; is the health engine running?',
        );
        const { suspectSince: _ended, ...rest } = state;
        this.place(id, isForgettable(rest, now, this.policy) ? undefined : rest);
      } else if (isForgettable(state, now, this.policy)) {
        this.holds.delete(id);
      }
    }
  }

  /** The proxy changed in the catalog (or left it): its hold catches up (no index move: the store's). */
  catalogChanged(id: string, before: ProxyRecord | undefined, after: ProxyRecord | undefined): void {
    if (after === undefined) {
      this.holds.delete(id);
      return;
    }
    const held = this.holds.get(id);
    const caughtUp = onRecordChanged(
      held,
      { address: addressOf(after), healthy: after.healthy },
      before?.healthy,
    );
    if (caughtUp === undefined) this.holds.delete(id);
    else if (caughtUp !== held) this.holds.set(id, caughtUp);
  }

  /** The suspicion figures of the totals (after a sweep at now). */
  totals(now: number): { suspectProxies: number; suspicionsRaised: number; suspicionsExpired: number } {
    this.sweep(now);
    let suspectProxies = 0;
    for (const [id, state] of this.holds) {
      if (isSuspect(state, state.address, now, this.policy) && this.catalog.get(id) !== undefined) {
        suspectProxies++;
      }
    }
    return {
      suspectProxies,
      suspicionsRaised: this.suspicionsRaised,
      suspicionsExpired: this.suspicionsExpired,
    };
  }
}
