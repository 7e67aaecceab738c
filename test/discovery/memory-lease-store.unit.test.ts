import type { ProxyRecord } from '../../discovery/catalog.js';
import type { AcquireResult, Lease, LeaseRequest, ReportResult } from '../../discovery/lease-store.js';
import { MemoryLeaseStore, type MemoryLeaseStoreOptions } from '../../discovery/memory-lease-store.js';
import { capturingLogger, eventually, FakeClock, proxy, silentLogger, TestCatalog } from './fixtures.js';

const COOLDOWN_SECONDS = 900;

function setup(options: Partial<MemoryLeaseStoreOptions> = {}, proxies: ProxyRecord[] = [proxy('ns/a')]) {
  const clock = new FakeClock();
  const catalog = new TestCatalog(proxies);
  let next = 0;
  const store = new MemoryLeaseStore({
    catalog,
    logger: silentLogger,
    clock,
    cooldownSeconds: COOLDOWN_SECONDS,
    maxCooldownSeconds: 4 * COOLDOWN_SECONDS,
    // The middle of the jitter range: every cooldown is exactly base × 2^(streak − 1).
    random: () => 0.5,
    newID: () => `lease-${++next}`,
    ...options,
  });
  const load = async (id: string) => (await store.usage([id]))[0].activeLeases;
  const lease = async (overrides: Partial<LeaseRequest> = {}) =>
    granted(await store.acquire(request(overrides)));
  return { clock, catalog, store, load, lease };
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
      const { clock, store, load } = setup();
      const result = await store.acquire(request({ ttlSeconds: 60, target: 'example.com' }));
      expect(result).toEqual({
        granted: true,
        lease: {
          id: 'lease-1',
          proxyID: 'ns/a',
          proxy: proxy('ns/a'),
          selector: {},
          target: 'example.com',
          ttlSeconds: 60,
          acquiredAt: new Date(clock.now()),
          expiresAt: new Date(clock.now() + 60_000),
        },
        usage: {
          activeLeases: 1,
          stats: { windowSeconds: 900, ok: 0, banned: 0, rate_limited: 0, unreachable: 0 },
        },
      });
      expect(await store.get('lease-1')).toEqual(granted(result));
      expect(await load('ns/a')).toBe(1);
    });

    it.each<[string, Partial<ProxyRecord>]>([
      ['unhealthy', { healthy: false }],
      ['without an IP', { ip: '' }],
      ['list-only (maxLeases 0)', { maxLeases: 0 }],
      ['being deleted', { phase: 'Deleting' }],
      ['not matching the selector', { attributes: { geo: 'us' } }],
    ])('never leases a proxy that is %s: no_match', async (_case, overrides) => {
      const { store } = setup({}, [proxy('ns/a', { attributes: { geo: 'eu' }, ...overrides })]);
      expect(await store.acquire(request({ selector: { geo: 'eu' } }))).toEqual({
        granted: false,
        reason: 'no_match',
      });
    });

    it('matches every selector pair, whichever is rarer', async () => {
      const { lease } = setup({}, [
        proxy('ns/eu-api', { attributes: { geo: 'eu', purpose: 'api' }, latencyMillis: 1 }),
        proxy('ns/eu-crawl', { attributes: { geo: 'eu', purpose: 'crawl' }, latencyMillis: 5 }),
        proxy('ns/us-crawl', { attributes: { geo: 'us', purpose: 'crawl' }, latencyMillis: 2 }),
      ]);
      expect((await lease({ selector: { geo: 'eu', purpose: 'crawl' } })).proxyID).toBe('ns/eu-crawl');
      expect((await lease({ selector: { purpose: 'crawl', geo: 'us' } })).proxyID).toBe('ns/us-crawl');
    });
  });

  describe('per-proxy cap', () => {
    it.each([1, 2, 5])('hands out exactly maxLeases=%i leases, then all_busy', async (maxLeases) => {
      const { store, load, lease } = setup({}, [proxy('ns/a', { maxLeases })]);
      for (let i = 0; i < maxLeases; i++) await lease();
      expect(await store.acquire(request())).toEqual({ granted: false, reason: 'all_busy' });
      expect(await load('ns/a')).toBe(maxLeases);
    });

    it('frees a slot when a lease is released', async () => {
      const { store, lease } = setup({}, [proxy('ns/a', { maxLeases: 1 })]);
      await store.release((await lease()).id);
      expect((await lease()).proxyID).toBe('ns/a');
    });

    it('honours a lowered maxLeases: no new lease until the load drops below it', async () => {
      const { store, catalog, lease } = setup({}, [proxy('ns/a', { maxLeases: 3 })]);
      const held = [await lease(), await lease(), await lease()];
      catalog.proxies = [proxy('ns/a', { maxLeases: 2 })];
      expect(await store.acquire(request())).toEqual({ granted: false, reason: 'all_busy' });
      await store.release(held[0].id);
      expect(await store.acquire(request())).toEqual({ granted: false, reason: 'all_busy' });
      await store.release(held[1].id);
      expect((await lease()).proxyID).toBe('ns/a');
    });
  });

  describe('least-loaded order', () => {
    it('spreads leases evenly, preferring lower latency among equally loaded proxies', async () => {
      const { lease } = setup({}, [
        proxy('ns/slow', { latencyMillis: 500 }),
        proxy('ns/fast', { latencyMillis: 50 }),
      ]);
      const order: string[] = [];
      for (let i = 0; i < 4; i++) order.push((await lease()).proxyID);
      expect(order).toEqual(['ns/fast', 'ns/slow', 'ns/fast', 'ns/slow']);
    });

    it('follows a latency change in the catalog', async () => {
      const { catalog, store, lease } = setup({}, [
        proxy('ns/a', { latencyMillis: 10 }),
        proxy('ns/b', { latencyMillis: 20 }),
      ]);
      catalog.proxies = [proxy('ns/a', { latencyMillis: 30 }), proxy('ns/b', { latencyMillis: 20 })];
      const first = await lease();
      expect(first.proxyID).toBe('ns/b');
      await store.release(first.id);
    });
  });

  describe('following the catalog', () => {
    it('never leases a proxy again once it turns unhealthy, and counts its leases when it recovers', async () => {
      const { catalog, store, load, lease } = setup({}, [proxy('ns/a', { maxLeases: 2 })]);
      const held = await lease();
      catalog.proxies = [proxy('ns/a', { maxLeases: 2, healthy: false, phase: 'Unhealthy' })];
      expect(await store.acquire(request())).toEqual({ granted: false, reason: 'no_match' });
      catalog.proxies = [proxy('ns/a', { maxLeases: 2 })];
      expect(await load('ns/a')).toBe(1);
      await lease();
      expect(await store.acquire(request())).toEqual({ granted: false, reason: 'all_busy' });
      await store.release(held.id);
      expect((await lease()).proxyID).toBe('ns/a');
    });

    it('keeps the leases of a deleted proxy until they are released, and a new proxy of the same name starts from them', async () => {
      const { catalog, store, load, lease } = setup({}, [proxy('ns/a', { maxLeases: 1 })]);
      const held = await lease();
      catalog.proxies = [];
      expect(await store.acquire(request())).toEqual({ granted: false, reason: 'no_match' });
      expect(await store.get(held.id)).toBeDefined();
      catalog.proxies = [proxy('ns/a', { maxLeases: 1 })];
      expect(await store.acquire(request())).toEqual({ granted: false, reason: 'all_busy' });
      await store.release(held.id);
      expect(await load('ns/a')).toBe(0);
      expect((await lease()).proxyID).toBe('ns/a');
    });

    it('reads attribute changes: a proxy leaves and joins selectors', async () => {
      const { catalog, store, lease } = setup({}, [proxy('ns/a', { attributes: { geo: 'eu' } })]);
      catalog.proxies = [proxy('ns/a', { attributes: { geo: 'us' } })];
      expect(await store.acquire(request({ selector: { geo: 'eu' } }))).toEqual({
        granted: false,
        reason: 'no_match',
      });
      expect((await lease({ selector: { geo: 'us' } })).proxyID).toBe('ns/a');
    });
  });

  describe('expiry', () => {
    it('ends a lease at its TTL: not found, not counted, its slot free again', async () => {
      const { clock, store, load, lease } = setup({}, [proxy('ns/a', { maxLeases: 1 })]);
      const held = await lease({ ttlSeconds: 30 });
      clock.advanceSeconds(29);
      expect(await store.get(held.id)).toBeDefined();
      clock.advanceSeconds(1);
      expect(await store.get(held.id)).toBeUndefined();
      expect(await load('ns/a')).toBe(0);
      expect((await store.totals()).activeLeases).toBe(0);
      expect(await store.report(held.id, 'banned')).toBeUndefined();
      expect((await lease()).proxyID).toBe('ns/a');
    });

    it('expires leases in deadline order, whatever order they were taken in', async () => {
      const { clock, store, lease } = setup({}, [proxy('ns/a', { maxLeases: 10 })]);
      const ttls = [50, 10, 40, 20, 30];
      const held: Lease[] = [];
      for (const ttlSeconds of ttls) held.push(await lease({ ttlSeconds }));
      const alive = async () => {
        const left = [];
        for (const l of held) if (await store.get(l.id)) left.push(l.ttlSeconds);
        return left;
      };
      clock.advanceSeconds(25);
      expect(await alive()).toEqual([50, 40, 30]);
      clock.advanceSeconds(10);
      expect(await alive()).toEqual([50, 40]);
    });

    it('logs expired leases from the background loop once started', async () => {
      const clock = new FakeClock();
      const { logger, lines } = capturingLogger();
      const store = new MemoryLeaseStore({
        catalog: new TestCatalog([proxy('ns/a')]),
        logger,
        clock,
        sweepIntervalMs: 5,
        newID: () => 'lease-x',
      });
      granted(await store.acquire(request({ ttlSeconds: 1 })));
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
  });

  describe('renewal', () => {
    it('extends a live lease to now + its original TTL by default, keeping its slot', async () => {
      const { clock, store, load, lease } = setup({}, [proxy('ns/a', { maxLeases: 1 })]);
      const held = await lease({ ttlSeconds: 60 });
      clock.advanceSeconds(50);
      const renewed = await store.renew(held.id);
      expect(renewed?.lease.expiresAt).toEqual(new Date(clock.now() + 60_000));
      expect(renewed?.usage.activeLeases).toBe(1);
      clock.advanceSeconds(59);
      expect(await store.get(held.id)).toBeDefined();
      expect(await load('ns/a')).toBe(1);
      expect(await store.acquire(request())).toEqual({ granted: false, reason: 'all_busy' });
      clock.advanceSeconds(1);
      expect(await store.get(held.id)).toBeUndefined();
      expect(await load('ns/a')).toBe(0);
    });

    it.each([
      ['a longer TTL', 600, 600],
      ['a TTL shorter than what is left: never shortened', 10, 100],
    ])('with %s', async (_case, ttlSeconds, expectedLeft) => {
      const { clock, store, lease } = setup();
      const held = await lease({ ttlSeconds: 200 });
      clock.advanceSeconds(100);
      const renewed = await store.renew(held.id, ttlSeconds);
      expect(renewed?.lease.expiresAt).toEqual(new Date(clock.now() + expectedLeft * 1000));
    });

    it.each([
      ['unknown', async () => 'never-issued'],
      [
        'released',
        async (s: ReturnType<typeof setup>) => {
          const held = await s.lease();
          await s.store.release(held.id);
          return held.id;
        },
      ],
      [
        'expired',
        async (s: ReturnType<typeof setup>) => {
          const held = await s.lease({ ttlSeconds: 10 });
          s.clock.advanceSeconds(10);
          return held.id;
        },
      ],
    ])('is refused for a lease that is %s', async (_case, make) => {
      const s = setup();
      expect(await s.store.renew(await make(s), 60)).toBeUndefined();
    });
  });

  describe('sticky sessions', () => {
    const two = () => [proxy('ns/a', { latencyMillis: 10 }), proxy('ns/b', { latencyMillis: 20 })];

    it('binds a new session and keeps leasing its proxy even when another is less loaded', async () => {
      const { store } = setup({}, two());
      const first = await store.acquire(request({ session: 's1' }));
      expect(first).toMatchObject({ granted: true, lease: { proxyID: 'ns/a', session: 's1' } });
      expect(first.granted && first.session).toEqual({ key: 's1', moved: false });
      for (let i = 0; i < 3; i++) {
        const again = await store.acquire(request({ session: 's1' }));
        expect(again).toMatchObject({ granted: true, lease: { proxyID: 'ns/a' }, session: { moved: false } });
      }
      // Without a session the least-loaded rule still applies.
      expect(granted(await store.acquire(request())).proxyID).toBe('ns/b');
    });

    it.each<[string, (s: ReturnType<typeof setup>) => Promise<void>, Partial<LeaseRequest>]>([
      [
        'turns unhealthy',
        async (s) => {
          s.catalog.proxies = [proxy('ns/a', { healthy: false, phase: 'Unhealthy' }), proxy('ns/b')];
        },
        {},
      ],
      [
        'is deleted',
        async (s) => {
          s.catalog.proxies = [proxy('ns/b')];
        },
        {},
      ],
      [
        'is at maxLeases',
        async (s) => {
          while ((await s.load('ns/a')) < 5)
            granted(await s.store.acquire(request({ selector: { geo: 'eu' } })));
        },
        {},
      ],
      [
        'cools down for the target',
        async (s) => {
          const held = await s.lease({ session: 's1', target: 'shop.example' });
          await s.store.report(held.id, 'banned');
        },
        { target: 'shop.example' },
      ],
      ['no longer matches the selector', async () => {}, { selector: { geo: 'us' } }],
    ])('moves when its proxy %s, and says so', async (_case, change, next) => {
      const s = setup({}, [
        proxy('ns/a', { latencyMillis: 10, attributes: { geo: 'eu' } }),
        proxy('ns/b', { latencyMillis: 20, attributes: { geo: 'us' } }),
      ]);
      expect((await s.lease({ session: 's1' })).proxyID).toBe('ns/a');
      await change(s);
      const moved = await s.store.acquire(request({ session: 's1', ...next }));
      expect(moved).toMatchObject({
        granted: true,
        lease: { proxyID: 'ns/b' },
        session: { key: 's1', moved: true },
      });
      // From now on the session stays on its new proxy.
      const after = await s.store.acquire(request({ session: 's1', ...next }));
      expect(after).toMatchObject({ lease: { proxyID: 'ns/b' }, session: { moved: false } });
    });

    it('keeps its binding through a refusal, and returns to its proxy once it is free', async () => {
      const { store, lease } = setup({}, [proxy('ns/a', { maxLeases: 1 })]);
      const held = await lease({ session: 's1' });
      expect(await store.acquire(request({ session: 's1' }))).toEqual({ granted: false, reason: 'all_busy' });
      await store.release(held.id);
      expect(await store.acquire(request({ session: 's1' }))).toMatchObject({
        lease: { proxyID: 'ns/a' },
        session: { moved: false },
      });
    });

    it('never exceeds maxLeases: a session whose proxy is full moves instead', async () => {
      const { store, load } = setup({}, [
        proxy('ns/a', { maxLeases: 2 }),
        proxy('ns/b', { maxLeases: 2, latencyMillis: 200 }),
      ]);
      const proxies: string[] = [];
      for (let i = 0; i < 4; i++)
        proxies.push(granted(await store.acquire(request({ session: 's1' }))).proxyID);
      expect(proxies).toEqual(['ns/a', 'ns/a', 'ns/b', 'ns/b']);
      expect(await load('ns/a')).toBe(2);
      expect(await store.acquire(request({ session: 's1' }))).toEqual({ granted: false, reason: 'all_busy' });
    });

    it('expires after the idle time; a lease or a renewal in it counts as use', async () => {
      const { clock, store, catalog, lease } = setup({ sessionIdleSeconds: 600 }, two());
      const held = await lease({ session: 's1', ttlSeconds: 3000 });
      expect(held.proxyID).toBe('ns/a');
      clock.advanceSeconds(599);
      await store.renew(held.id, 3000);
      clock.advanceSeconds(599);
      // Still bound: make ns/a the worse choice, the session stays anyway.
      catalog.proxies = [proxy('ns/a', { latencyMillis: 999 }), proxy('ns/b', { latencyMillis: 20 })];
      await store.release(held.id);
      expect(await store.acquire(request({ session: 's1' }))).toMatchObject({ lease: { proxyID: 'ns/a' } });
      clock.advanceSeconds(600);
      expect((await store.totals()).activeSessions).toBe(0);
      // Expired: a new session, placed by the normal rule, and not reported as moved.
      expect(await store.acquire(request({ session: 's1' }))).toMatchObject({
        lease: { proxyID: 'ns/b' },
        session: { key: 's1', moved: false },
      });
    });

    it('ends explicitly: its binding is forgotten, its leases stay valid', async () => {
      const { store, catalog, lease } = setup({}, two());
      const held = await lease({ session: 's1' });
      await store.endSession('s1');
      await store.endSession('s1');
      expect(await store.get(held.id)).toBeDefined();
      catalog.proxies = [proxy('ns/a', { latencyMillis: 999 }), proxy('ns/b', { latencyMillis: 20 })];
      expect(await store.acquire(request({ session: 's1' }))).toMatchObject({
        lease: { proxyID: 'ns/b' },
        session: { moved: false },
      });
    });

    it('at the cap, a new session forgets the least recently used one', async () => {
      const maxSessions = 10_000;
      // Leases of 1 s, one per millisecond: never more than 1,000 live at once.
      const { clock, store } = setup({ maxSessions }, [proxy('ns/a', { maxLeases: 1000 })]);
      for (let i = 0; i < maxSessions; i++) {
        granted(await store.acquire(request({ session: `s${i}`, ttlSeconds: 1 })));
        clock.advanceSeconds(0.001);
      }
      // Touch the oldest: s1 becomes the least recently used.
      granted(await store.acquire(request({ session: 's0', ttlSeconds: 1 })));
      clock.advanceSeconds(0.001);
      granted(await store.acquire(request({ session: 'one-more', ttlSeconds: 1 })));
      const totals = await store.totals();
      expect(totals.activeSessions).toBe(maxSessions);
      expect(totals.sessionsEvicted).toBe(1);
    });

    it('refuses a cap below 10,000 sessions', () => {
      expect(() => setup({ maxSessions: 9_999 })).toThrow(/maxSessions must be a number >= 10000/);
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
      // No target anywhere: the global pool, which only leases without a target use.
      ['banned', undefined, undefined, undefined, true],
      ['rate_limited', undefined, undefined, 'example.com', false],
      ['ok', undefined, undefined, undefined, false],
    ])(
      'report %s (target %s) on a lease for %s → lease for %s cooling down: %s',
      async (result, reportTarget, leaseTarget, acquireTarget, cooling) => {
        const { store, lease } = setup();
        const held = await lease({ target: leaseTarget });
        await store.report(held.id, result, { target: reportTarget });
        const outcome = await store.acquire(request({ target: acquireTarget }));
        expect(outcome).toEqual(
          cooling
            ? { granted: false, reason: 'all_cooling_down', retryAfterMs: expect.any(Number) }
            : expect.objectContaining({ granted: true }),
        );
      },
    );

    it('lasts the configured cooldown, then the proxy is leasable again', async () => {
      const { clock, store, lease } = setup({ cooldownSeconds: 60 });
      const held = await lease();
      const outcome = await store.report(held.id, 'banned', { target: 'example.com' });
      expect(outcome).toEqual({
        lease: held,
        target: 'example.com',
        cooldownUntil: new Date(clock.now() + 60_000),
      });
      clock.advanceSeconds(59);
      expect(await store.acquire(request({ target: 'example.com' }))).toEqual({
        granted: false,
        reason: 'all_cooling_down',
        retryAfterMs: 1000,
      });
      clock.advanceSeconds(1);
      expect((await lease({ target: 'example.com' })).proxyID).toBe('ns/a');
    });

    it('steers leases for the target to other proxies while one cools down', async () => {
      const { store, lease } = setup({}, [
        proxy('ns/a', { latencyMillis: 1 }),
        proxy('ns/b', { latencyMillis: 999 }),
      ]);
      const held = await lease({ target: 'example.com' });
      expect(held.proxyID).toBe('ns/a');
      await store.report(held.id, 'rate_limited');
      await store.release(held.id);
      expect((await lease({ target: 'example.com' })).proxyID).toBe('ns/b');
    });

    it('is never shortened by a later report', async () => {
      const { clock, store, lease } = setup({ cooldownSeconds: 60, maxCooldownSeconds: 60 });
      const first = await store.report((await lease()).id, 'banned', { target: 'example.com' });
      clock.advanceSeconds(30);
      const second = await store.report((await lease()).id, 'banned', { target: 'example.com' });
      expect(second!.cooldownUntil!.getTime()).toBe(first!.cooldownUntil!.getTime() + 30_000);
      const third = await store.report((await lease()).id, 'ok', { target: 'example.com' });
      expect(third!.cooldownUntil).toBeUndefined();
      expect(await store.acquire(request({ target: 'example.com' }))).toMatchObject({
        reason: 'all_cooling_down',
      });
    });

    it('reports on unknown leases change nothing', async () => {
      const { store, lease } = setup();
      expect(await store.report('nope', 'banned', { target: 'example.com' })).toBeUndefined();
      expect((await lease({ target: 'example.com' })).proxyID).toBe('ns/a');
    });
  });

  describe('adaptive cooldowns', () => {
    /** Reports `results` one after the other on fresh leases; returns each cooldown's length in seconds. */
    async function lengths(s: ReturnType<typeof setup>, results: ReportResult[], target = 'example.com') {
      const out: (number | null)[] = [];
      for (const result of results) {
        const held = await s.lease();
        const outcome = await s.store.report(held.id, result, { target });
        await s.store.release(held.id);
        const length = outcome?.cooldownUntil
          ? (outcome.cooldownUntil.getTime() - s.clock.now()) / 1000
          : null;
        out.push(length);
        // The next report comes just after this cooldown ended: consecutive, so the streak holds.
        s.clock.advanceSeconds((length ?? 0) + 1);
      }
      return out;
    }

    it.each<[string, ReportResult[], (number | null)[]]>([
      [
        'doubles with each consecutive ban, up to the maximum',
        ['banned', 'banned', 'banned', 'banned'],
        [900, 1800, 3600, 3600],
      ],
      [
        // The rate streak goes cold after each 15-minute ban (120 s without a 429); the ban streak holds.
        'a rate limit rests seconds on a streak of its own, beside the ban streak',
        ['rate_limited', 'banned', 'rate_limited', 'banned', 'rate_limited', 'rate_limited'],
        [10, 900, 10, 1800, 10, 20],
      ],
      [
        'a rate-limit streak stops at its own maximum',
        Array(6).fill('rate_limited'),
        [10, 20, 40, 80, 120, 120],
      ],
      ['an ok report resets the streak', ['banned', 'banned', 'ok', 'banned'], [900, 1800, null, 900]],
    ])('%s', async (_case, results, expected) => {
      expect(await lengths(setup(), results)).toEqual(expected);
    });

    it('--single-cooldown-window restores one window and one streak for both (the specification)', async () => {
      const s = setup({ singleCooldownWindow: true });
      expect(await lengths(s, ['banned', 'rate_limited', 'banned', 'rate_limited'])).toEqual([
        900, 1800, 3600, 3600,
      ]);
    });

    it("a rate limit's Retry-After sets its rest exactly (at least 1 s, at most the longest ban)", async () => {
      const s = setup();
      const rest = async (retryAfterSeconds: number) => {
        const held = await s.lease();
        const outcome = await s.store.report(held.id, 'rate_limited', {
          target: 'example.com',
          retryAfterSeconds,
        });
        await s.store.release(held.id);
        return (outcome!.cooldownUntil!.getTime() - s.clock.now()) / 1000;
      };
      expect(await rest(0)).toBe(1);
      expect(await rest(3)).toBe(3);
      expect(await rest(300)).toBe(300);
      expect(await rest(86_400)).toBe(3600);
    });

    it('keeps a streak per (proxy, target)', async () => {
      const s = setup();
      expect(await lengths(s, ['banned', 'banned'], 'a.example')).toEqual([900, 1800]);
      expect(await lengths(s, ['banned'], 'b.example')).toEqual([900]);
      expect(await lengths(s, ['banned'], 'a.example')).toEqual([3600]);
    });

    it('forgets a streak that has gone cold (no bad report for a maximum cooldown after the last ended)', async () => {
      const s = setup();
      expect(await lengths(s, ['banned', 'banned'])).toEqual([900, 1800]);
      s.clock.advanceSeconds(4 * COOLDOWN_SECONDS);
      expect(await lengths(s, ['banned'])).toEqual([900]);
    });

    it('spreads cooldowns by ±10 %, never beyond the maximum', async () => {
      const low = setup({ random: () => 0 });
      expect(await lengths(low, ['banned', 'banned', 'banned'])).toEqual([810, 1620, 3240]);
      const high = setup({ random: () => 0.999999 });
      const spread = await lengths(high, ['banned', 'banned', 'banned']);
      expect(spread[0]).toBeCloseTo(990, 0);
      expect(spread[1]).toBeCloseTo(1980, 0);
      expect(spread[2]).toBe(3600);
    });
  });

  describe('bounded memory for client-supplied targets', () => {
    it('20,000 distinct targets on one lease keep at most 1,000 entries for that proxy, none of them a running ban lifted', async () => {
      const { store, lease } = setup();
      const held = await lease({ ttlSeconds: 3600 });
      let capped = 0;
      for (let i = 0; i < 20_000; i++) {
        if ((await store.report(held.id, 'banned', { target: `site-${i}.example` }))!.capped === true)
          capped++;
      }
      const totals = await store.totals();
      expect(totals.activeCooldowns).toBe(1000);
      // Every cooldown at the cap still runs: nothing is forgotten, the later targets are refused.
      expect(totals.cooldownsEvicted).toBe(0);
      expect(capped).toBe(19_000);
      expect(await store.acquire(request({ target: 'site-0.example' }))).toMatchObject({
        reason: 'all_cooling_down',
      });
      expect(await store.acquire(request({ target: 'site-19999.example' }))).toMatchObject({ granted: true });
    });

    it('caps entries across all proxies too, never lifting a running cooldown', async () => {
      const proxies = Array.from({ length: 5 }, (_, i) => proxy(`ns/p${i}`, { maxLeases: 100 }));
      const { store } = setup({ maxTargetEntries: 6, maxTargetsPerProxy: 4 }, proxies);
      let capped = 0;
      for (let i = 0; i < 5; i++) {
        const held = granted(await store.acquire(request({ selector: {} })));
        for (const target of [`t${i}.example`, `u${i}.example`]) {
          if ((await store.report(held.id, 'banned', { target }))!.capped === true) capped++;
        }
      }
      const totals = await store.totals();
      expect(totals.activeCooldowns).toBe(6);
      expect(totals.cooldownsEvicted).toBe(0);
      expect(capped).toBe(4);
    });

    it('ok reports for targets with nothing bad on record take no memory', async () => {
      const { store, lease } = setup();
      const held = await lease({ ttlSeconds: 3600 });
      for (let i = 0; i < 5000; i++) await store.report(held.id, 'ok', { target: `site-${i}.example` });
      expect((await store.totals()).cooldownsEvicted).toBe(0);
      expect((await store.usage(['ns/a']))[0].stats.ok).toBe(5000);
    });
  });

  describe('outcome statistics', () => {
    it('counts reports per proxy over the sliding window, all targets together', async () => {
      const { clock, store, lease } = setup({ cooldownSeconds: 1, statsWindowSeconds: 900 }, [
        proxy('ns/a', { maxLeases: 10 }),
      ]);
      const held = await lease({ ttlSeconds: 3600 });
      await store.report(held.id, 'ok', { target: 'a.example' });
      await store.report(held.id, 'banned', { target: 'b.example' });
      clock.advanceSeconds(300);
      await store.report(held.id, 'rate_limited');
      await store.report(held.id, 'ok');
      const stats = async () => (await store.usage(['ns/a']))[0].stats;
      expect(await stats()).toEqual({
        windowSeconds: 900,
        ok: 2,
        banned: 1,
        rate_limited: 0 + 1,
        unreachable: 0,
      });
      clock.advanceSeconds(600);
      // The first two reports have left the window (900 s in 60 s steps).
      expect(await stats()).toEqual({
        windowSeconds: 900,
        ok: 1,
        banned: 0,
        rate_limited: 1,
        unreachable: 0,
      });
      clock.advanceSeconds(300);
      expect(await stats()).toEqual({
        windowSeconds: 900,
        ok: 0,
        banned: 0,
        rate_limited: 0,
        unreachable: 0,
      });
    });

    it('among equally loaded proxies, prefers the one without recent failures for the requested target', async () => {
      const { clock, store, lease } = setup({ cooldownSeconds: 60 }, [
        proxy('ns/fast', { latencyMillis: 10 }),
        proxy('ns/slow', { latencyMillis: 500 }),
      ]);
      const held = await lease({ target: 'shop.example' });
      expect(held.proxyID).toBe('ns/fast');
      await store.report(held.id, 'banned');
      await store.release(held.id);
      clock.advanceSeconds(61);
      // The cooldown is over, but the ban is still in the window.
      const forShop = await lease({ target: 'shop.example' });
      expect(forShop.proxyID).toBe('ns/slow');
      await store.release(forShop.id);
      expect((await lease({ target: 'other.example' })).proxyID).toBe('ns/fast');
    });
  });

  describe('release', () => {
    it.each([
      ['a live lease, twice', true],
      ['a lease that never existed', false],
    ])('is idempotent for %s', async (_case, acquireFirst) => {
      const { store, load, lease } = setup();
      const other = await lease();
      const id = acquireFirst ? (await lease()).id : 'never-issued';
      await store.release(id);
      await store.release(id);
      expect(await store.get(id)).toBeUndefined();
      expect(await load('ns/a')).toBe(1);
      expect(await store.get(other.id)).toBeDefined();
    });
  });

  describe('totals', () => {
    it('counts live leases, sessions and running cooldowns', async () => {
      const { clock, store, lease } = setup({ cooldownSeconds: 60, maxCooldownSeconds: 60 }, [
        proxy('ns/a', { maxLeases: 2, latencyMillis: 1 }),
        proxy('ns/b', { latencyMillis: 2 }),
      ]);
      const a = await lease({ session: 's1' });
      await lease({ session: 's2' });
      await lease();
      await store.report(a.id, 'banned', { target: 'x.example' });
      await store.report(a.id, 'banned', { target: 'y.example' });
      expect(await store.usage(['ns/a', 'ns/b', 'ns/c'])).toEqual([
        expect.objectContaining({ activeLeases: 2 }),
        expect.objectContaining({ activeLeases: 1 }),
        expect.objectContaining({ activeLeases: 0 }),
      ]);
      expect(await store.totals()).toEqual({
        activeLeases: 3,
        activeSessions: 2,
        activeCooldowns: 2,
        sessionsEvicted: 0,
        cooldownsEvicted: 0,
        suspectProxies: 0,
        suspicionsRaised: 0,
        suspicionsExpired: 0,
      });
      clock.advanceSeconds(60);
      expect((await store.totals()).activeCooldowns).toBe(0);
    });
  });

  describe('unreachable reports: a dead proxy leaves the pool within one report', () => {
    const two = () => [
      proxy('ns/a', { latencyMillis: 1 }),
      proxy('ns/b', { ip: '10.0.0.2', latencyMillis: 2 }),
    ];
    const A = '10.0.0.1:3128';

    /** ns/a leased, reported unreachable and released: its load is the lowest again. */
    async function reportedDead(options: Partial<MemoryLeaseStoreOptions> = {}) {
      const s = setup(options, two());
      const requests: [string, string][] = [];
      s.store.onProbeRequest((id, address) => requests.push([id, address]));
      const held = await s.lease({ session: 'crawl-1' });
      expect(held.proxyID).toBe('ns/a');
      const reportedAt = s.clock.now();
      const outcome = await s.store.report(held.id, 'unreachable', { target: 'shop.example' });
      await s.store.release(held.id);
      return { ...s, requests, outcome, reportedAt };
    }

    // The rule, as a table: after an unreachable report ended its last lease, a proxy is
    // leased again only once a probe that started after the report has passed.
    it.each<[string, (s: Awaited<ReturnType<typeof reportedDead>>) => Promise<void>, string]>([
      ['no probe yet', async () => undefined, 'ns/b'],
      [
        'a probe that started before the report passed',
        async (s) =>
          s.store.observeHealth('ns/a', { kind: 'probe_passed', address: A, startedAt: s.reportedAt - 1 }),
        'ns/b',
      ],
      [
        'a probe of an old address passed',
        async (s) =>
          s.store.observeHealth('ns/a', {
            kind: 'probe_passed',
            address: '10.9.9.9:3128',
            startedAt: s.reportedAt,
          }),
        'ns/b',
      ],
      [
        'the engine found it unhealthy',
        async (s) => s.store.observeHealth('ns/a', { kind: 'down', address: A }),
        'ns/b',
      ],
      [
        'a probe that started after the report passed',
        async (s) =>
          s.store.observeHealth('ns/a', { kind: 'probe_passed', address: A, startedAt: s.reportedAt }),
        'ns/a',
      ],
    ])('%s → the next lease goes to %s', async (_case, then, expected) => {
      const s = await reportedDead();
      await then(s);
      for (const target of [undefined, 'shop.example', 'other.example']) {
        const next = await s.lease(target === undefined ? {} : { target });
        expect(next.proxyID).toBe(expected);
        await s.store.release(next.id);
      }
    });

    it('holds the proxy out for every target and session, moves its sessions, and asks for one probe', async () => {
      const s = await reportedDead();
      expect(s.outcome).toEqual(expect.objectContaining({ suspect: true, probeRequested: true }));
      expect(s.requests).toEqual([['ns/a', A]]);
      const again = await s.store.acquire(request({ session: 'crawl-1' }));
      expect(again).toEqual(
        expect.objectContaining({ granted: true, session: { key: 'crawl-1', moved: true } }),
      );
      expect((await s.store.usage(['ns/a']))[0]).toEqual(expect.objectContaining({ held: 'suspect' }));
      expect((await s.store.totals()).suspectProxies).toBe(1);
    });

    it('a second report on a suspect proxy starts no second probe', async () => {
      // Two leases taken before the proxy died: both report.
      const s2 = setup({}, [proxy('ns/a')]);
      const requests: string[] = [];
      s2.store.onProbeRequest((id) => requests.push(id));
      const [one, two] = [await s2.lease(), await s2.lease()];
      expect((await s2.store.report(one.id, 'unreachable'))?.probeRequested).toBe(true);
      expect(await s2.store.report(two.id, 'unreachable')).toEqual(
        expect.objectContaining({ suspect: true, probeRequested: false }),
      );
      expect(requests).toEqual(['ns/a']);
    });

    it('a report moments after a passing re-probe is not believed; after the holdoff it is', async () => {
      const s = setup({ suspicionHoldoffSeconds: 5 }, [proxy('ns/a')]);
      const leases = [await s.lease(), await s.lease(), await s.lease()];
      await s.store.report(leases[0].id, 'unreachable');
      await s.store.observeHealth('ns/a', { kind: 'probe_passed', address: A, startedAt: s.clock.now() });
      s.clock.advanceSeconds(4);
      expect(await s.store.report(leases[1].id, 'unreachable')).toEqual(
        expect.objectContaining({ suspect: false, probeRequested: false }),
      );
      expect((await s.lease()).proxyID).toBe('ns/a');
      s.clock.advanceSeconds(1);
      expect((await s.store.report(leases[2].id, 'unreachable'))?.probeRequested).toBe(true);
      expect(await s.store.acquire(request())).toEqual({ granted: false, reason: 'no_match' });
    });

    it('a suspicion no probe answers ends after the timeout, loudly', async () => {
      const { logger, lines } = capturingLogger('info');
      const s = await reportedDead({ suspicionTimeoutSeconds: 30, logger });
      s.clock.advanceSeconds(29);
      s.store.sweep();
      expect((await s.lease()).proxyID).toBe('ns/b');
      s.clock.advanceSeconds(1);
      s.store.sweep();
      expect((await s.lease()).proxyID).toBe('ns/a');
      expect(await s.store.totals()).toEqual(
        expect.objectContaining({ suspicionsRaised: 1, suspicionsExpired: 1 }),
      );
      expect(lines()).toContainEqual(expect.objectContaining({ level: 50, proxyID: 'ns/a' }));
    });

    it('a down verdict holds the proxy until the engine says up or the status catches up', async () => {
      const s = setup({}, two());
      await s.store.observeHealth('ns/a', { kind: 'down', address: A });
      expect((await s.lease()).proxyID).toBe('ns/b');
      expect((await s.store.usage(['ns/a']))[0]).toEqual(expect.objectContaining({ held: 'down' }));
      await s.store.observeHealth('ns/a', { kind: 'up', address: A });
      expect((await s.lease()).proxyID).toBe('ns/a');
      // Down again; then the status says unhealthy, then healthy: the status decides from there.
      await s.store.observeHealth('ns/a', { kind: 'down', address: A });
      s.catalog.proxies = [proxy('ns/a', { latencyMillis: 1, healthy: false }), two()[1]];
      s.catalog.proxies = two();
      expect((await s.store.usage(['ns/a']))[0]?.held).toBeUndefined();
      const fresh = await s.store.acquire(request());
      expect(fresh.granted && fresh.lease.proxyID).toBe('ns/a');
    });

    it('counts unreachable reports in the statistics without benching any target', async () => {
      const s = await reportedDead();
      expect((await s.store.usage(['ns/a']))[0]?.stats).toEqual(
        expect.objectContaining({ unreachable: 1, banned: 0, rate_limited: 0 }),
      );
      expect((await s.store.totals()).activeCooldowns).toBe(0);
    });
  });

  describe('configuration', () => {
    it.each<[Partial<MemoryLeaseStoreOptions>, RegExp]>([
      [{ cooldownSeconds: -1 }, /cooldownSeconds/],
      [{ cooldownSeconds: Number.NaN }, /cooldownSeconds/],
      [{ cooldownSeconds: 600, maxCooldownSeconds: 300 }, /maxCooldownSeconds must be a number >= 600/],
      [{ sessionIdleSeconds: 0 }, /sessionIdleSeconds/],
      [{ statsWindowSeconds: 5 }, /statsWindowSeconds/],
      [{ sweepIntervalMs: 0 }, /sweepIntervalMs/],
    ])('rejects %j with an error naming the option', (options, message) => {
      expect(() => setup(options)).toThrow(message);
    });
  });
});
