// The lease book's own figures (leases, sessions, cooldowns, suspicions), exported once per
// book rather than once per process: every replica of a shared (Redis) book reads the same
// totals, so a gauge from each would count each lease once per replica. The caller says
// which process exports them (the acting leader).
import { Counter, Gauge, type Registry } from 'prom-client';
import type { LeaseStore, StoreTotals } from './lease-store.js';
import { StoreUnavailableError } from './store-unavailable.js';

/**
 * Registers the book's gauges and counters on `registry`; they carry the book's figures only
 * while `exported()` holds (elsewhere the gauges read 0 and the counters have no series), so
 * sum() across processes counts each lease once.
 */
export function registerBookMetrics(registry: Registry, store: LeaseStore, exported: () => boolean): void {
  // One read of the store per scrape, shared by every gauge; a store that cannot be reached
  // (Redis down) leaves the gauges at their last values (each replica's lease_store_up says
  // so), instead of failing the whole scrape.
  let scrape: Promise<StoreTotals | undefined> | undefined;
  const readTotals = (): Promise<StoreTotals | undefined> => {
    scrape ??= store.totals().then(
      (t) => t,
      (err: unknown) => {
        if (err instanceof StoreUnavailableError) return undefined;
        throw err;
      },
    );
    // Shared by the gauges of one scrape (they collect at once); the next scrape reads again.
    const current = scrape;
    current
      .finally(() => {
        if (scrape === current) scrape = undefined;
      })
      .catch(() => undefined);
    return current;
  };
  const gauge = (name: string, help: string, read: (totals: StoreTotals) => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        if (!exported()) return this.reset();
        const t = await readTotals();
        if (t !== undefined) this.set(read(t));
      },
    });
  gauge('proxy_operator_leases_active', 'Leases currently held by clients.', (t) => t.activeLeases);
  gauge(
    'proxy_operator_sessions_active',
    'Sticky sessions currently bound to a proxy.',
    (t) => t.activeSessions,
  );
  gauge(
    'proxy_operator_cooldowns_active',
    'Running cooldowns: (proxy, target) pairs benched after banned/rate_limited reports.',
    (t) => t.activeCooldowns,
  );
  gauge(
    'proxy_operator_suspect_proxies',
    'Proxies held out of every lease because an unreachable report awaits a probe.',
    (t) => t.suspectProxies,
  );
  // The store counts these itself (it may be shared); the counters follow its totals.
  const suspicions = { raised: 0, expired: 0 };
  new Counter({
    name: 'proxy_operator_suspicions_total',
    help:
      'Suspicions raised by unreachable reports (raised), and those no probe answered within --suspicion-timeout ' +
      '(expired: nothing is re-probing).',
    labelNames: ['outcome'],
    registers: [registry],
    async collect() {
      if (!exported()) {
        // Exported again later, it starts from the book's totals: a counter reset Prometheus reads as one.
        suspicions.raised = suspicions.expired = 0;
        return this.reset();
      }
      const totals = await readTotals();
      if (totals === undefined) return;
      this.inc({ outcome: 'raised' }, countedSince(suspicions.raised, totals.suspicionsRaised));
      this.inc({ outcome: 'expired' }, countedSince(suspicions.expired, totals.suspicionsExpired));
      suspicions.raised = totals.suspicionsRaised;
      suspicions.expired = totals.suspicionsExpired;
    },
  });
  const counted = { session: 0, cooldown: 0 };
  new Counter({
    name: 'proxy_operator_discovery_evictions_total',
    help: 'Sessions and (proxy, target) cooldown entries forgotten because their cap was reached.',
    labelNames: ['kind'],
    registers: [registry],
    async collect() {
      if (!exported()) {
        counted.session = counted.cooldown = 0;
        return this.reset();
      }
      const totals = await readTotals();
      if (totals === undefined) return;
      this.inc({ kind: 'session' }, countedSince(counted.session, totals.sessionsEvicted));
      this.inc({ kind: 'cooldown' }, countedSince(counted.cooldown, totals.cooldownsEvicted));
      counted.session = totals.sessionsEvicted;
      counted.cooldown = totals.cooldownsEvicted;
    },
  });
}

/**
 * What a counter following one of the book's totals adds, given the total it last saw. The
 * book's totals only grow, so a smaller one means the book started again (a Redis restart
 * that kept nothing): everything in it happened since.
 */
export function countedSince(lastSeen: number, total: number): number {
  return total < lastSeen ? total : total - lastSeen;
}
