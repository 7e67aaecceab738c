import type { ProxyRecord } from '../../discovery/catalog.js';
import type { AcquireResult, Lease, LeaseRequest, ReportResult } from '../../discovery/lease-store.js';
import { MemoryLeaseStore } from '../../discovery/memory-lease-store.js';
import { capturingLogger, eventually, FakeClock, proxy, silentLogger } from './fixtures.js';

const COOLDOWN_SECONDS = 900;

function setup(options: { cooldownSeconds?: number } = {}) {
  const clock = new FakeClock();
  let next = 0;
  const store = new MemoryLeaseStore({
    logger: silentLogger,
    clock,
    cooldownSeconds: options.cooldownSeconds ?? COOLDOWN_SECONDS,
    newID: () => `lease-${++next}`,
  });
  return { clock, store };
}

function request(overrides: Partial<LeaseRequest> = {}): LeaseRequest {
  return { selector: {}, ttlSeconds: 300, ...overrides };
}

function granted(result: AcquireResult): Lease {
  if (!result.granted) throw new Error(`expected a lease, got ${result.reason}`);
  return result.lease;
}

describe('MemoryLeaseStore', () => {
  describe('acquire', () => {
    it('grants a lease on the chosen proxy that expires after its TTL', async () => {
      const { clock, store } = setup();
      const lease = granted(
        await store.acquire(request({ ttlSeconds: 60, target: 'example.com' }), [proxy('ns/a')]),
      );
      expect(lease).toEqual({
        id: 'lease-1',
        proxyID: 'ns/a',
        selector: {},
        target: 'example.com',
        acquiredAt: new Date(clock.now()),
        expiresAt: new Date(clock.now() + 60_000),
      });
      expect(await store.get('lease-1')).toEqual(lease);
      expect(await store.activeCount('ns/a')).toBe(1);
    });

    it.each<[string, Partial<ProxyRecord>]>([
      ['unhealthy', { healthy: false }],
      ['without an IP', { ip: '' }],
      ['list-only (maxLeases 0)', { maxLeases: 0 }],
      ['not matching the selector', { attributes: { geo: 'us' } }],
    ])('never leases a proxy that is %s: no_match', async (_case, overrides) => {
      const { store } = setup();
      expect(
        await store.acquire(request({ selector: { geo: 'eu' } }), [
          proxy('ns/a', { attributes: { geo: 'eu' }, ...overrides }),
        ]),
      ).toEqual({
        granted: false,
        reason: 'no_match',
      });
    });
  });

  describe('per-proxy cap', () => {
    it.each([1, 2, 5])('hands out exactly maxLeases=%i leases, then all_busy', async (maxLeases) => {
      const { store } = setup();
      const candidates = [proxy('ns/a', { maxLeases })];
      for (let i = 0; i < maxLeases; i++) granted(await store.acquire(request(), candidates));
      expect(await store.acquire(request(), candidates)).toEqual({ granted: false, reason: 'all_busy' });
      expect(await store.activeCount('ns/a')).toBe(maxLeases);
    });

    it('frees a slot when a lease is released', async () => {
      const { store } = setup();
      const candidates = [proxy('ns/a', { maxLeases: 1 })];
      const lease = granted(await store.acquire(request(), candidates));
      await store.release(lease.id);
      expect(granted(await store.acquire(request(), candidates)).proxyID).toBe('ns/a');
    });

    it('honours a lowered maxLeases: no new lease until the load drops below it', async () => {
      const { store } = setup();
      for (let i = 0; i < 3; i++) granted(await store.acquire(request(), [proxy('ns/a', { maxLeases: 3 })]));
      expect(await store.acquire(request(), [proxy('ns/a', { maxLeases: 2 })])).toEqual({
        granted: false,
        reason: 'all_busy',
      });
    });
  });

  describe('least-loaded order', () => {
    it('spreads leases evenly, preferring lower latency among equally loaded proxies', async () => {
      const { store } = setup();
      const candidates = [proxy('ns/slow', { latencyMillis: 500 }), proxy('ns/fast', { latencyMillis: 50 })];
      const order: string[] = [];
      for (let i = 0; i < 4; i++) order.push(granted(await store.acquire(request(), candidates)).proxyID);
      expect(order).toEqual(['ns/fast', 'ns/slow', 'ns/fast', 'ns/slow']);
    });
  });

  describe('expiry', () => {
    it('ends a lease at its TTL: not found, not counted, its slot free again', async () => {
      const { clock, store } = setup();
      const candidates = [proxy('ns/a', { maxLeases: 1 })];
      const lease = granted(await store.acquire(request({ ttlSeconds: 30 }), candidates));
      clock.advanceSeconds(29);
      expect(await store.get(lease.id)).toBeDefined();
      clock.advanceSeconds(1);
      expect(await store.get(lease.id)).toBeUndefined();
      expect(await store.activeCount('ns/a')).toBe(0);
      expect(await store.activeTotal()).toBe(0);
      expect(await store.report(lease.id, 'banned')).toBeUndefined();
      expect(granted(await store.acquire(request(), candidates)).proxyID).toBe('ns/a');
    });

    it('drops expired leases in the background loop once started', async () => {
      const clock = new FakeClock();
      const { logger, lines } = capturingLogger();
      const store = new MemoryLeaseStore({ logger, clock, sweepIntervalMs: 5, newID: () => 'lease-x' });
      granted(await store.acquire(request({ ttlSeconds: 1 }), [proxy('ns/a')]));
      clock.advanceSeconds(2);
      await store.start();
      try {
        await eventually(() =>
          lines().some((line) => line.msg === 'lease expired' && line.leaseID === 'lease-x'),
        );
      } finally {
        await store.stop();
      }
    });

    it('sweep removes expired leases and keeps live ones', async () => {
      const { clock, store } = setup();
      granted(await store.acquire(request({ ttlSeconds: 10 }), [proxy('ns/a')]));
      const live = granted(await store.acquire(request({ ttlSeconds: 100 }), [proxy('ns/a')]));
      clock.advanceSeconds(50);
      expect(store.sweep()).toBe(1);
      expect(store.sweep()).toBe(0);
      expect(await store.get(live.id)).toBeDefined();
    });
  });

  describe('cooldown after a report', () => {
    // [report result, report target, lease target, acquire target, cooling down?]
    it.each<[ReportResult, string | undefined, string | undefined, string | undefined, boolean]>([
      ['banned', 'example.com', undefined, 'example.com', true],
      ['rate_limited', 'example.com', undefined, 'example.com', true],
      ['banned', 'example.com', undefined, 'other.org', false],
      ['banned', 'example.com', undefined, undefined, false],
      ['ok', 'example.com', undefined, 'example.com', false],
      // The report's target defaults to the lease's own target.
      ['banned', undefined, 'example.com', 'example.com', true],
      ['banned', undefined, 'example.com', undefined, false],
      // An explicit report target overrides the lease's.
      ['banned', 'other.org', 'example.com', 'example.com', false],
      ['banned', 'other.org', 'example.com', 'other.org', true],
      // No target anywhere: the global pool — benched for every lease, targeted or not.
      ['banned', undefined, undefined, undefined, true],
      ['rate_limited', undefined, undefined, 'example.com', true],
      ['ok', undefined, undefined, undefined, false],
    ])(
      'report %s (target %s) on a lease for %s → lease for %s cooling down: %s',
      async (result, reportTarget, leaseTarget, acquireTarget, cooling) => {
        const { store } = setup();
        const candidates = [proxy('ns/a')];
        const lease = granted(await store.acquire(request({ target: leaseTarget }), candidates));
        await store.report(lease.id, result, reportTarget);
        const outcome = await store.acquire(request({ target: acquireTarget }), candidates);
        expect(outcome).toEqual(
          cooling
            ? { granted: false, reason: 'all_cooling_down' }
            : expect.objectContaining({ granted: true }),
        );
      },
    );

    it('lasts the configured window, then the proxy is leasable again', async () => {
      const { clock, store } = setup({ cooldownSeconds: 60 });
      const candidates = [proxy('ns/a')];
      const lease = granted(await store.acquire(request(), candidates));
      const outcome = await store.report(lease.id, 'banned', 'example.com');
      expect(outcome).toEqual({
        lease,
        target: 'example.com',
        cooldownUntil: new Date(clock.now() + 60_000),
      });
      clock.advanceSeconds(59);
      expect(await store.acquire(request({ target: 'example.com' }), candidates)).toEqual({
        granted: false,
        reason: 'all_cooling_down',
      });
      clock.advanceSeconds(1);
      expect(granted(await store.acquire(request({ target: 'example.com' }), candidates)).proxyID).toBe(
        'ns/a',
      );
    });

    it('steers leases for the target to other proxies while one cools down', async () => {
      const { store } = setup();
      const candidates = [proxy('ns/a', { latencyMillis: 1 }), proxy('ns/b', { latencyMillis: 999 })];
      const lease = granted(await store.acquire(request({ target: 'example.com' }), candidates));
      expect(lease.proxyID).toBe('ns/a');
      await store.report(lease.id, 'rate_limited');
      await store.release(lease.id);
      expect(granted(await store.acquire(request({ target: 'example.com' }), candidates)).proxyID).toBe(
        'ns/b',
      );
    });

    it('is never shortened by a later report', async () => {
      const { clock, store } = setup({ cooldownSeconds: 60 });
      const first = granted(await store.acquire(request(), [proxy('ns/a')]));
      const firstOutcome = await store.report(first.id, 'banned', 'example.com');
      clock.advanceSeconds(30);
      const second = granted(await store.acquire(request(), [proxy('ns/a')]));
      const secondOutcome = await store.report(second.id, 'banned', 'example.com');
      expect(secondOutcome!.cooldownUntil!.getTime()).toBe(firstOutcome!.cooldownUntil!.getTime() + 30_000);
    });

    it('ok records no cooldown', async () => {
      const { store } = setup();
      const lease = granted(await store.acquire(request(), [proxy('ns/a')]));
      expect(await store.report(lease.id, 'ok', 'example.com')).toEqual({ lease, target: 'example.com' });
    });

    it('reports on unknown leases change nothing', async () => {
      const { store } = setup();
      expect(await store.report('nope', 'banned', 'example.com')).toBeUndefined();
      expect(granted(await store.acquire(request({ target: 'example.com' }), [proxy('ns/a')])).proxyID).toBe(
        'ns/a',
      );
    });
  });

  describe('release', () => {
    it.each([
      ['a live lease, twice', true],
      ['a lease that never existed', false],
    ])('is idempotent for %s', async (_case, acquireFirst) => {
      const { store } = setup();
      const other = granted(await store.acquire(request(), [proxy('ns/a')]));
      const id = acquireFirst ? granted(await store.acquire(request(), [proxy('ns/a')])).id : 'never-issued';
      await store.release(id);
      await store.release(id);
      expect(await store.get(id)).toBeUndefined();
      expect(await store.activeCount('ns/a')).toBe(1);
      expect(await store.get(other.id)).toBeDefined();
    });
  });

  describe('counting', () => {
    it('counts live leases per proxy and in total', async () => {
      const { store } = setup();
      const candidates = [
        proxy('ns/a', { maxLeases: 2, latencyMillis: 1 }),
        proxy('ns/b', { latencyMillis: 2 }),
      ];
      for (let i = 0; i < 3; i++) granted(await store.acquire(request(), candidates));
      expect(await store.activeCounts(['ns/a', 'ns/b', 'ns/c'])).toEqual(
        new Map([
          ['ns/a', 2],
          ['ns/b', 1],
          ['ns/c', 0],
        ]),
      );
      expect(await store.activeTotal()).toBe(3);
    });
  });

  describe('configuration', () => {
    it.each([
      [{ cooldownSeconds: -1 }, /cooldownSeconds/],
      [{ cooldownSeconds: Number.NaN }, /cooldownSeconds/],
      [{ sweepIntervalMs: 0 }, /sweepIntervalMs/],
    ])('rejects %j with an error naming the option', (options, message) => {
      expect(() => new MemoryLeaseStore({ logger: silentLogger, ...options })).toThrow(message);
    });
  });
});
