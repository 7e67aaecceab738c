// The LeaseStore contract as a reusable suite (the pattern of the provider conformance kit):
// every store, in-memory or shared, must pass it unchanged. A subject builds its store from
// the options each case needs; time is the case's FakeClock, randomness the case's.
import { describe, expect, it, afterEach } from '@jest/globals';
import type { Logger } from 'pino';
import type { ProxyCatalog, ProxyRecord } from '../../book/catalog.js';
import type { AcquireResult, Lease, LeaseRequest, LeaseStore, ReportResult } from '../../book/lease-store.js';
import type { ProxyCooldown } from '../../book/lease-store.js';
import type { Clock } from '../../book/clock.js';
import type { LeaseBookOptions } from '../../book/lease-book-settings.js';
import { scopeMatcher } from '../../book/token-scope.js';
import { parseExitIPTerm } from '../../book/exit-ip-match.js';
import { FakeClock, proxy, silentLogger, TestCatalog } from './fixtures.js';

/** What every store accepts (its own options may hold more). */
export interface ContractOptions extends LeaseBookOptions {
  catalog: ProxyCatalog;
  logger: Logger;
  /** Absent: the store's own clock (Redis's TIME, the process's). */
  clock?: Clock;
}

export interface LeaseStoreSubject {
  /** Names the suite, e.g. "memory". */
  name: string;
  /** A fresh, empty store (throws on bad options, naming the option). */
  create(options: ContractOptions): LeaseStore;
  /** Resolves once probe requests raised from now on reach this store's listeners. */
  probeRequestsReady?(store: LeaseStore): Promise<void>;
  /** Resolves once the catalog changes seen so far are in the book (a shared one hears of them in the background). */
  settled?(store: LeaseStore): Promise<void>;
  /** Releases one store after its case (connections, subscriptions). */
  dispose?(store: LeaseStore): void | Promise<void>;
}

const COOLDOWN_SECONDS = 900;

function request(overrides: Partial<LeaseRequest> = {}): LeaseRequest {
  return { selector: {}, ttlSeconds: 300, ...overrides };
}

function granted(result: AcquireResult): Lease {
  if (!result.granted) throw new Error(`expected a lease, got ${result.reason}`);
  return result.lease;
}

export function describeLeaseStoreContract(subject: LeaseStoreSubject): void {
  const created: LeaseStore[] = [];
  afterEach(async () => {
    for (const store of created.splice(0)) await subject.dispose?.(store);
  });

  function setup(options: Partial<ContractOptions> = {}, proxies: ProxyRecord[] = [proxy('ns/a')]) {
    const clock = new FakeClock();
    const catalog = new TestCatalog(proxies);
    let next = 0;
    const store = subject.create({
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
    created.push(store);
    const load = async (id: string) => (await store.usage([id]))[0].activeLeases;
    const lease = async (overrides: Partial<LeaseRequest> = {}) =>
      granted(await store.acquire(request(overrides)));
    return { clock, catalog, store, load, lease };
  }

  describe(`the ${subject.name} lease store keeps the LeaseStore contract`, () => {
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
        ['draining before its replacement', { draining: true }],
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

      it('a draining proxy takes no new lease nor session binding; its live leases renew and run to their end', async () => {
        const { catalog, store, load, lease } = setup({}, [
          proxy('ns/a', { maxLeases: 5, latencyMillis: 1 }),
          proxy('ns/b', { ip: '10.0.0.2', maxLeases: 5, latencyMillis: 500 }),
        ]);
        const held = await lease({ session: 's1' });
        expect(held.proxyID).toBe('ns/a');
        catalog.proxies = [
          proxy('ns/a', { maxLeases: 5, latencyMillis: 1, draining: true }),
          proxy('ns/b', { ip: '10.0.0.2', maxLeases: 5, latencyMillis: 500 }),
        ];
        const next = await store.acquire(request({ session: 's1' }));
        expect(next).toMatchObject({ granted: true, lease: { proxyID: 'ns/b' }, session: { moved: true } });
        expect((await lease()).proxyID).toBe('ns/b');
        expect(await store.renew(held.id, 600)).toMatchObject({ lease: { id: held.id, proxyID: 'ns/a' } });
        expect(await load('ns/a')).toBe(1);
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

    describe('a new egress: what the old address earned is forgotten (egress.ts)', () => {
      const A = 'a.example';
      /** ns/a banned twice on A (a streak of 2: a 2 × --cooldown rest) and rate limited on B. */
      async function earned(s: ReturnType<typeof setup>) {
        const held = await s.lease({ ttlSeconds: 3600 });
        await s.store.report(held.id, 'banned', { target: A });
        await s.store.report(held.id, 'banned', { target: A });
        await s.store.report(held.id, 'rate_limited', { target: 'b.example' });
        expect((await s.store.standing('ns/a')).cooldowns).toHaveLength(2);
      }
      const change = async (s: ReturnType<typeof setup>, ...records: ProxyRecord[][]) => {
        for (const r of records) s.catalog.proxies = r;
        await subject.settled?.(s.store);
      };

      it('a replacement on a new address forgets the cooldowns and the streaks: a ban starts over at --cooldown', async () => {
        const s = setup({}, [proxy('ns/a')]);
        await earned(s);
        // Between instances (no address), then the new instance's.
        await change(
          s,
          [proxy('ns/a', { ip: '', phase: 'Provisioning', healthy: false })],
          [proxy('ns/a', { ip: '10.0.0.9' })],
        );
        expect((await s.store.standing('ns/a')).cooldowns).toEqual([]);
        const again = await s.lease({ target: A });
        expect(again.proxyID).toBe('ns/a');
        const outcome = await s.store.report(again.id, 'banned');
        expect(outcome?.cooldownUntil).toEqual(new Date(s.clock.now() + COOLDOWN_SECONDS * 1000));
      });

      it.each<[string, ProxyRecord[][], number]>([
        ['a status change on the same address keeps them', [[proxy('ns/a', { latencyMillis: 7 })]], 2],
        [
          'the exit IP read for the first time keeps them (another kind of egress, no news of a new one)',
          [[proxy('ns/a', { exitIP: '203.0.113.1' })]],
          2,
        ],
        [
          'behind a read exit IP, a new listen IP with the same exit IP keeps them (sites see the exit)',
          [
            [proxy('ns/a', { exitIP: '203.0.113.1' })],
            [proxy('ns/a', { ip: '10.0.0.9', exitIP: '203.0.113.1' })],
          ],
          2,
        ],
        [
          'behind a read exit IP, a new exit IP forgets them',
          [
            [proxy('ns/a', { exitIP: '203.0.113.1' })],
            [proxy('ns/a', { ip: '10.0.0.9', exitIP: '203.0.113.2' })],
          ],
          0,
        ],
        ['a proxy deleted and created again on its address keeps them', [[], [proxy('ns/a')]], 2],
        [
          'a proxy deleted and created again on another address forgets them',
          [[], [proxy('ns/a', { ip: '10.0.0.9' })]],
          0,
        ],
      ])('%s', async (_case, records, cooldowns) => {
        const s = setup({}, [proxy('ns/a')]);
        await earned(s);
        await change(s, ...records);
        expect((await s.store.standing('ns/a')).cooldowns).toHaveLength(cooldowns);
      });

      it("leaves other proxies' cooldowns alone", async () => {
        const s = setup({}, [proxy('ns/a'), proxy('ns/b', { ip: '10.0.0.2', latencyMillis: 500 })]);
        await earned(s);
        const b = await s.lease({ ttlSeconds: 3600, target: 'c.example' });
        await s.store.report(b.id, 'banned', { target: A });
        await change(s, [
          proxy('ns/a', { ip: '10.0.0.9' }),
          proxy('ns/b', { ip: '10.0.0.2', latencyMillis: 500 }),
        ]);
        expect((await s.store.standing('ns/a')).cooldowns).toEqual([]);
        expect((await s.store.standing('ns/b')).cooldowns).toHaveLength(1);
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
          expect(again).toMatchObject({
            granted: true,
            lease: { proxyID: 'ns/a' },
            session: { moved: false },
          });
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
        expect(await store.acquire(request({ session: 's1' }))).toEqual({
          granted: false,
          reason: 'all_busy',
        });
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
        expect(await store.acquire(request({ session: 's1' }))).toEqual({
          granted: false,
          reason: 'all_busy',
        });
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
          cooldownStarted: true,
        });
        clock.advanceSeconds(59);
        // The refusal says when to come back: when the first matching cooldown ends.
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

      it('says which reports started a cooldown (none ran for the pair) and which extended a running one', async () => {
        const { clock, store, lease } = setup({ cooldownSeconds: 60, maxCooldownSeconds: 60 }, [
          proxy('ns/a', { maxLeases: 10 }),
        ]);
        const started = async (result: 'banned' | 'rate_limited', target: string) => {
          const outcome = await store.report((await lease()).id, result, { target });
          expect(outcome!.cooldownUntil).toBeDefined();
          return outcome!.cooldownStarted === true;
        };
        const steps: [string, () => Promise<boolean>, boolean][] = [
          ['the first ban for a target', () => started('banned', 'a.example'), true],
          ['a second ban while it runs', () => started('banned', 'a.example'), false],
          ['a rate limit while the ban runs', () => started('rate_limited', 'a.example'), false],
          ['a ban for another target', () => started('banned', 'b.example'), true],
          [
            'a ban after the cooldown ended',
            async () => {
              clock.advanceSeconds(61);
              return started('banned', 'a.example');
            },
            true,
          ],
        ];
        const seen: [string, boolean][] = [];
        for (const [name, step] of steps) seen.push([name, await step()]);
        expect(seen).toEqual(steps.map(([name, , expected]) => [name, expected]));
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
          const outcome = await s.store.report(held.id, result, { target: target });
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
          'doubles with each consecutive bad report, up to the maximum',
          ['banned', 'banned', 'banned', 'banned'],
          [900, 1800, 3600, 3600],
        ],
        ['an ok report resets the streak', ['banned', 'banned', 'ok', 'banned'], [900, 1800, null, 900]],
      ])('%s', async (_case, results, expected) => {
        expect(await lengths(setup(), results)).toEqual(expected);
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

    describe('bounded memory for client-supplied targets: eviction never lifts a running cooldown', () => {
      // The junk-target attack: a lease holder bans its proxy for many made-up targets to push
      // a real ban out of the book. At a cap only an entry whose cooldown has ended may go; when
      // every entry there still runs, the new target is not recorded (outcome.capped) instead.
      it.each<[string, Partial<ContractOptions>]>([
        ['per proxy', { maxTargetsPerProxy: 10 }],
        ['across all proxies', { maxTargetEntries: 10 }],
      ])('the junk-target attack at the cap %s leaves a running ban in place', async (_case, caps) => {
        const { store, lease } = setup(caps);
        const held = await lease({ ttlSeconds: 3600 });
        expect(
          (await store.report(held.id, 'banned', { target: 'shop.example' }))!.cooldownUntil,
        ).toBeDefined();
        const outcomes = [];
        for (let i = 0; i < 1000; i++)
          outcomes.push(await store.report(held.id, 'banned', { target: `junk-${i}.example` }));
        expect(outcomes.filter((o) => o!.capped === true)).toHaveLength(991);
        expect(outcomes.filter((o) => o!.cooldownUntil !== undefined)).toHaveLength(9);
        expect(await store.acquire(request({ target: 'shop.example' }))).toMatchObject({
          granted: false,
          reason: 'all_cooling_down',
        });
        const totals = await store.totals();
        expect(totals.activeCooldowns).toBe(10);
        expect(totals.cooldownsEvicted).toBe(0);
      });

      it.each<[string, Partial<ContractOptions>]>([
        ['per proxy', { maxTargetsPerProxy: 3 }],
        ['across all proxies', { maxTargetEntries: 3 }],
      ])('at the cap %s, the entry whose cooldown ended longest ago makes room', async (_case, caps) => {
        const { clock, store, lease } = setup({ cooldownSeconds: 60, maxCooldownSeconds: 60, ...caps });
        const held = await lease({ ttlSeconds: 3600 });
        await store.report(held.id, 'banned', { target: 'a.example' });
        clock.advanceSeconds(10);
        await store.report(held.id, 'banned', { target: 'b.example' });
        clock.advanceSeconds(10);
        await store.report(held.id, 'banned', { target: 'c.example' });
        // a.example's cooldown ended at 60 s, b.example's at 70 s, c.example's runs to 80 s.
        clock.advanceSeconds(55);
        const outcome = await store.report(held.id, 'banned', { target: 'd.example' });
        expect(outcome!.capped).toBeUndefined();
        expect(outcome!.cooldownUntil).toEqual(new Date(clock.now() + 60_000));
        expect((await store.totals()).cooldownsEvicted).toBe(1);
        // b.example ended too and goes next; c.example still runs, so then nothing goes.
        expect((await store.report(held.id, 'banned', { target: 'e.example' }))!.capped).toBeUndefined();
        expect((await store.report(held.id, 'banned', { target: 'f.example' }))!.capped).toBe(true);
        expect(await store.acquire(request({ target: 'c.example' }))).toMatchObject({
          reason: 'all_cooling_down',
        });
        expect((await store.totals()).cooldownsEvicted).toBe(2);
      });

      it('ok reports for targets with nothing bad on record take no memory', async () => {
        const { store, lease } = setup({ maxTargetsPerProxy: 10 });
        const held = await lease({ ttlSeconds: 3600 });
        for (let i = 0; i < 500; i++) await store.report(held.id, 'ok', { target: `site-${i}.example` });
        expect((await store.totals()).cooldownsEvicted).toBe(0);
        expect((await store.usage(['ns/a']))[0].stats.ok).toBe(500);
        // Room is still there for a real ban.
        expect(
          (await store.report(held.id, 'banned', { target: 'shop.example' }))!.cooldownUntil,
        ).toBeDefined();
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
          rate_limited: 1,
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

    describe("the lease quota: an owner holds at most its request's leaseQuota of live leases", () => {
      const QUOTA = 3;
      const fleet = [proxy('ns/a', { maxLeases: 10 }), proxy('ns/b', { maxLeases: 10 })];
      type Setup = ReturnType<typeof setup>;
      it.each<[string, (s: Setup, held: Lease[]) => Promise<unknown>, 'granted' | 'lease_quota']>([
        ['nothing ended', async () => {}, 'lease_quota'],
        ['one released', ({ store }, held) => store.release(held[0].id, 'team-a'), 'granted'],
        [
          'one released with its report (one atomic step)',
          ({ store }, held) =>
            store.reportMany([{ leaseID: held[0].id, result: 'ok', release: true }], 'team-a'),
          'granted',
        ],
        ['their TTL passed', async ({ clock }) => clock.advanceSeconds(301), 'granted'],
        [
          'renewed past their first TTL (still held)',
          async ({ store, clock }, held) => {
            for (const l of held) await store.renew(l.id, 900, 'team-a');
            clock.advanceSeconds(301);
          },
          'lease_quota',
        ],
        [
          'one released by another owner (ends nothing)',
          ({ store }, held) => store.release(held[0].id, 'team-b'),
          'lease_quota',
        ],
      ])('after %s, the next is %s', async (_name, then, expected) => {
        const s = setup({}, fleet);
        const held: Lease[] = [];
        for (let i = 0; i < QUOTA; i++) held.push(await s.lease({ owner: 'team-a', leaseQuota: QUOTA }));
        expect(await s.store.acquire(request({ owner: 'team-a', leaseQuota: QUOTA }))).toEqual({
          granted: false,
          reason: 'lease_quota',
          held: QUOTA,
        });
        await then(s, held);
        const next = await s.store.acquire(request({ owner: 'team-a', leaseQuota: QUOTA }));
        expect(next.granted ? 'granted' : next.reason).toBe(expected);
      });

      it("refuses without leasing anything; another owner's quota, and a request without one, are their own", async () => {
        const { store, load, lease } = setup({}, fleet);
        for (let i = 0; i < QUOTA; i++)
          await lease({ owner: 'team-a', leaseQuota: QUOTA, requestID: `r${i}` });
        const before = (await load('ns/a')) + (await load('ns/b'));
        expect(before).toBe(QUOTA);
        expect(
          (await store.acquire(request({ owner: 'team-a', leaseQuota: QUOTA, session: 's1' }))).granted,
        ).toBe(false);
        expect((await load('ns/a')) + (await load('ns/b'))).toBe(QUOTA);
        // A retried request id that was granted gets its first grant back, at the quota too.
        expect(
          await store.acquire(request({ owner: 'team-a', leaseQuota: QUOTA, requestID: 'r0' })),
        ).toMatchObject({
          granted: true,
          replayed: true,
        });
        for (let i = 0; i < QUOTA; i++) await lease({ owner: 'team-b', leaseQuota: QUOTA });
        expect(await lease({ owner: 'team-a' })).toMatchObject({ owner: 'team-a' });
        expect(await lease({ leaseQuota: 1 })).toMatchObject({ proxyID: expect.any(String) });
      });
    });

    describe("the cooldown quota: an owner's reports keep at most their cooldownQuota of (proxy, target) cooldowns running", () => {
      const QUOTA = 2;
      const fleet = [proxy('ns/a', { maxLeases: 10 }), proxy('ns/b', { maxLeases: 10 })];
      const ban = (target: string) => ({ target, cooldownQuota: QUOTA });

      it.each<[string, [string, ReportResult, string][], number | undefined]>([
        [
          'two new pairs fit',
          [
            ['a', 'banned', 'x.example'],
            ['b', 'banned', 'x.example'],
          ],
          undefined,
        ],
        [
          "a third new pair is refused (the call's own new pairs count)",
          [
            ['a', 'banned', 'x.example'],
            ['a', 'rate_limited', 'y.example'],
            ['b', 'banned', 'x.example'],
          ],
          2,
        ],
        [
          'a pair already reported in the call is no new one',
          [
            ['a', 'banned', 'x.example'],
            ['a', 'banned', 'x.example'],
            ['b', 'banned', 'x.example'],
          ],
          undefined,
        ],
        [
          'ok and unreachable start none',
          [
            ['a', 'banned', 'x.example'],
            ['b', 'banned', 'x.example'],
            ['a', 'ok', 'z.example'],
            ['b', 'unreachable', 'z.example'],
          ],
          undefined,
        ],
      ])('%s', async (_name, calls, refused) => {
        const { store, load } = setup({}, fleet);
        const held = new Map<string, Lease>();
        for (const id of ['a', 'b']) {
          const l = granted(
            await store.acquire(
              request({
                owner: 'team-a',
                selector: {},
                exclude: new Set(held.size === 0 ? ['ns/b'] : ['ns/a']),
              }),
            ),
          );
          held.set(id, l);
        }
        const reports = calls.map(([id, result, target]) => ({
          leaseID: held.get(id)!.id,
          result,
          details: ban(target),
        }));
        const answer = store.reportMany(reports, 'team-a');
        if (refused === undefined) {
          expect((await answer).every((o) => o !== undefined)).toBe(true);
        } else {
          await expect(answer).rejects.toMatchObject({ name: 'CooldownQuotaRefusal', index: refused });
          // Nothing of the call was recorded: no cooldown, no statistics, both leases live.
          const standing = await store.standing(held.get('a')!.proxyID);
          expect(standing.cooldowns).toEqual([]);
          expect(standing.usage.stats.banned).toBe(0);
          expect((await load('ns/a')) + (await load('ns/b'))).toBe(2);
        }
      });

      it("counts across calls until the cooldowns end; another owner's quota is its own; a running pair may be reported again", async () => {
        const { store, clock } = setup({}, fleet);
        const mine = granted(await store.acquire(request({ owner: 'team-a', ttlSeconds: 3600 * 24 })));
        const theirs = granted(await store.acquire(request({ owner: 'team-b', ttlSeconds: 3600 * 24 })));
        await store.report(mine.id, 'banned', ban('x.example'), 'team-a');
        await store.report(mine.id, 'rate_limited', ban('y.example'), 'team-a');
        await expect(store.report(mine.id, 'banned', ban('z.example'), 'team-a')).rejects.toMatchObject({
          index: 0,
        });
        // Extending one of its own running pairs is no new one.
        expect(await store.report(mine.id, 'banned', ban('x.example'), 'team-a')).toMatchObject({
          target: 'x.example',
        });
        expect(await store.report(theirs.id, 'banned', ban('z.example'), 'team-b')).toMatchObject({
          target: 'z.example',
        });
        // No quota asked: none judged.
        expect(await store.report(mine.id, 'banned', { target: 'w.example' }, 'team-a')).toMatchObject({
          target: 'w.example',
        });
        // Once its cooldowns have ended (the longest: the doubled ban), room again.
        clock.advanceSeconds(4 * COOLDOWN_SECONDS + 1);
        expect(await store.report(mine.id, 'banned', ban('z.example'), 'team-a')).toMatchObject({
          target: 'z.example',
        });
      });
    });

    describe('ownership: a lease and a session belong to the token that took them', () => {
      it('another owner renews, reports, releases and reads nothing: as if the lease did not exist', async () => {
        const { store, clock, load, lease } = setup();
        const mine = await lease({ owner: 'team-a', target: 'example.com' });
        expect(mine.owner).toBe('team-a');
        for (const stranger of ['team-b', 'team', undefined]) {
          expect(await store.renew(mine.id, 3600, stranger)).toBeUndefined();
          expect(await store.report(mine.id, 'banned', {}, stranger)).toBeUndefined();
          await store.release(mine.id, stranger);
          expect(await store.get(mine.id, stranger)).toBeUndefined();
        }
        // A prefix that would spell the owner's scoped key from another owner's ID.
        expect(await store.renew(`a.${mine.id}`, undefined, 'team')).toBeUndefined();
        expect(await load('ns/a')).toBe(1);
        expect((await store.usage(['ns/a']))[0].stats.banned).toBe(0);
        // The owner's lease is untouched: it keeps its expiry and still leases no second time.
        const live = await store.get(mine.id, 'team-a');
        expect(live).toMatchObject({ id: mine.id, owner: 'team-a', target: 'example.com' });
        expect(live!.expiresAt).toEqual(mine.expiresAt);
        clock.advanceSeconds(1);
        expect(await store.renew(mine.id, undefined, 'team-a')).toMatchObject({ lease: { id: mine.id } });
        expect(await store.report(mine.id, 'ok', {}, 'team-a')).toMatchObject({ lease: { id: mine.id } });
        await store.release(mine.id, 'team-a');
        expect(await load('ns/a')).toBe(0);
      });

      it('keeps sessions per owner: the same key of two owners is two sessions', async () => {
        const two = [proxy('ns/a', { latencyMillis: 10 }), proxy('ns/b', { latencyMillis: 20 })];
        const { store, catalog, lease } = setup({}, two);
        const a = await lease({ owner: 'team-a', session: 's1' });
        expect(a).toMatchObject({ proxyID: 'ns/a', session: 's1' });
        // ns/a is busier now: team-b's "s1" is a new session and goes to the free proxy.
        const b = await store.acquire(request({ owner: 'team-b', session: 's1' }));
        expect(b).toMatchObject({
          lease: { proxyID: 'ns/b', session: 's1' },
          session: { key: 's1', moved: false },
        });
        // Ending team-b's session leaves team-a's binding in place.
        await store.endSession('s1', 'team-b');
        catalog.proxies = [proxy('ns/a', { latencyMillis: 999 }), proxy('ns/b', { latencyMillis: 1 })];
        expect(await store.acquire(request({ owner: 'team-a', session: 's1' }))).toMatchObject({
          lease: { proxyID: 'ns/a' },
        });
        const renewed = await store.renew(a.id, undefined, 'team-a');
        expect(renewed?.lease).toMatchObject({ session: 's1', owner: 'team-a' });
        await store.endSession('s1', 'team-a');
        expect(await store.acquire(request({ owner: 'team-a', session: 's1' }))).toMatchObject({
          lease: { proxyID: 'ns/b' },
          session: { moved: false },
        });
      });
    });

    describe("standing: one proxy's usage and running cooldowns, read at once", () => {
      it("answers the live leases, statistics, hold and every running cooldown with the store's time", async () => {
        const { clock, store, lease } = setup({ cooldownSeconds: 60, rateLimitCooldownSeconds: 10 }, [
          proxy('ns/a', { maxLeases: 5 }),
        ]);
        expect(await store.standing('ns/a')).toEqual({
          usage: {
            activeLeases: 0,
            stats: { windowSeconds: 900, ok: 0, banned: 0, rate_limited: 0, unreachable: 0 },
          },
          cooldowns: [],
          now: clock.now(),
        });
        const held = await lease({ ttlSeconds: 3600 });
        const start = clock.now();
        await store.report(held.id, 'banned', { target: 'a.example' });
        await store.report(held.id, 'rate_limited', { target: 'b.example', retryAfterSeconds: 5 });
        await store.report(held.id, 'banned');
        clock.advanceSeconds(1);
        const standing = await store.standing('ns/a');
        expect(standing.now).toBe(clock.now());
        expect(standing.usage).toMatchObject({ activeLeases: 1, stats: { banned: 2, rate_limited: 1 } });
        expect(standing.usage.held).toBeUndefined();
        // The global pool has no target; order is the store's own.
        const order = (x: ProxyCooldown, y: ProxyCooldown) =>
          x.until - y.until || (x.target ?? '').localeCompare(y.target ?? '');
        // In-process reports (no owner) are the operator's own: agreed (ban-agreement.ts).
        expect([...standing.cooldowns].sort(order)).toEqual([
          { target: 'b.example', until: start + 5_000, agreed: true },
          { until: start + 60_000, agreed: true },
          { target: 'a.example', until: start + 60_000, agreed: true },
        ]);
        clock.advanceSeconds(5);
        expect((await store.standing('ns/a')).cooldowns).toHaveLength(2);
        clock.advanceSeconds(60);
        expect((await store.standing('ns/a')).cooldowns).toEqual([]);
      });

      it.each<[string, [owner: string, trusted: boolean][], boolean]>([
        ['one token alone', [['team-a', false]], false],
        [
          'one token, twice',
          [
            ['team-a', false],
            ['team-a', false],
          ],
          false,
        ],
        [
          'two tokens',
          [
            ['team-a', false],
            ['team-b', false],
          ],
          true,
        ],
        ['one trusted token', [['team-a', true]], true],
      ])(
        'says whether the reports behind a cooldown agree (rotation on bans counts only those): %s → %s',
        async (_case, reporters, agreed) => {
          const { store, lease } = setup({}, [proxy('ns/a', { maxLeases: 5 })]);
          for (const [owner, trusted] of reporters) {
            const held = await lease({ owner });
            await store.report(
              held.id,
              'banned',
              { target: 'shop.example', rotationTrusted: trusted },
              owner,
            );
          }
          // Who reported it is the book's, whichever replica took the report (target-privacy.ts).
          const names = [...new Set(reporters.map(([owner]) => owner))];
          const [cooldown] = (await store.standing('ns/a')).cooldowns;
          expect(cooldown).toEqual({
            target: 'shop.example',
            until: expect.any(Number),
            agreed,
            reporters: expect.arrayContaining(names),
          });
          expect(cooldown.reporters).toHaveLength(names.length);
        },
      );

      it("a reporter's agreement lasts as long as the cooldown its report gave", async () => {
        const { clock, store, lease } = setup({ cooldownSeconds: 60, rateLimitCooldownSeconds: 10 }, [
          proxy('ns/a', { maxLeases: 5 }),
        ]);
        const a = await lease({ owner: 'team-a', ttlSeconds: 3600 });
        const b = await lease({ owner: 'team-b', ttlSeconds: 3600 });
        await store.report(a.id, 'banned', { target: 't' }, 'team-a');
        await store.report(b.id, 'rate_limited', { target: 't' }, 'team-b');
        expect((await store.standing('ns/a')).cooldowns).toMatchObject([{ target: 't', agreed: true }]);
        // team-b's rate limit (10 s) has ended; team-a's ban (60 s) runs on, alone.
        clock.advanceSeconds(11);
        expect((await store.standing('ns/a')).cooldowns).toMatchObject([
          { target: 't', agreed: false, reporters: ['team-a'] },
        ]);
      });

      it("shows an unreachable report's hold", async () => {
        const { store, lease } = setup({}, [proxy('ns/a', { maxLeases: 5 })]);
        const held = await lease();
        await store.report(held.id, 'unreachable');
        expect((await store.standing('ns/a')).usage.held).toBe('suspect');
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
        expect(await store.release(id)).toBe(acquireFirst);
        expect(await store.release(id)).toBe(false);
        expect(await store.get(id)).toBeUndefined();
        expect(await load('ns/a')).toBe(1);
        expect(await store.get(other.id)).toBeDefined();
      });
    });

    describe('release by another owner', () => {
      it('ends nothing and says so', async () => {
        const { store, load, lease } = setup();
        const held = await lease({ owner: 'team-a' });
        expect(await store.release(held.id, 'team-b')).toBe(false);
        expect(await load('ns/a')).toBe(1);
        expect(await store.release(held.id, 'team-a')).toBe(true);
      });
    });

    describe('scope: a token leases only the proxies its scope admits', () => {
      it('skips proxies outside it, however free, and moves a session bound outside it', async () => {
        const { store, lease } = setup({}, [
          proxy('ns-a/x', { maxLeases: 5, latencyMillis: 1 }),
          proxy('ns-b/y', { maxLeases: 1, latencyMillis: 2 }),
        ]);
        const bound = await lease({ owner: 'team-b', session: 's' });
        expect(bound.proxyID).toBe('ns-a/x');
        const within = (p: ProxyRecord) => p.id.startsWith('ns-b/');
        const result = await store.acquire(request({ owner: 'team-b', session: 's', within }));
        expect(result).toMatchObject({
          granted: true,
          lease: { proxyID: 'ns-b/y' },
          session: { moved: true },
        });
        expect((await store.acquire(request({ owner: 'team-b', within }))).granted).toBe(false);
      });

      // A refusal counts the proxies inside the scope only: one outside, busy or cooling down,
      // would tell a team another's load or its bans on a site (and when they end).
      it.each<[string, 'idle' | 'full' | 'cooling']>([
        ['idle', 'idle'],
        ['at its maxLeases', 'full'],
        ['cooling down for the target', 'cooling'],
      ])('nothing inside matches: no_match, the proxy outside %s', async (_name, outside) => {
        const { store, lease } = setup({}, [
          proxy('ns-a/x', { maxLeases: 1, attributes: { geo: 'us' } }),
          proxy('ns-b/y', { maxLeases: 1, attributes: { geo: 'eu' } }),
        ]);
        await subject.settled?.(store);
        if (outside !== 'idle') {
          const held = await lease({ owner: 'team-b', selector: { geo: 'eu' }, target: 'shop.example' });
          if (outside === 'cooling') {
            await store.report(held.id, 'banned', { target: 'shop.example' }, 'team-b');
            await store.release(held.id, 'team-b');
          }
        }
        const within = (p: ProxyRecord) => p.id.startsWith('ns-a/');
        const refused = await store.acquire(
          request({ owner: 'team-a', selector: { geo: 'eu' }, target: 'shop.example', within }),
        );
        expect(refused).toEqual({ granted: false, reason: 'no_match' });
      });
    });

    describe('exclude: proxies a request must not be given (a crawler asking ahead names those it holds)', () => {
      const three = () => [
        proxy('ns/a', { maxLeases: 5, latencyMillis: 1, ip: '10.0.2.1' }),
        proxy('ns/b', { maxLeases: 5, latencyMillis: 2, ip: '10.0.2.2' }),
        proxy('ns/c', { maxLeases: 5, latencyMillis: 3, ip: '10.0.2.3' }),
      ];

      it('skips the least loaded proxy when it is excluded and grants the next', async () => {
        const { store, lease, load } = setup({}, three());
        await subject.settled?.(store);
        expect((await lease()).proxyID).toBe('ns/a');
        // b is now the least loaded: excluded, so c (as idle) is next, then a.
        expect((await lease({ exclude: new Set(['ns/b']) })).proxyID).toBe('ns/c');
        expect((await lease({ exclude: new Set(['ns/b', 'ns/c']) })).proxyID).toBe('ns/a');
        expect(await load('ns/b')).toBe(0);
      });

      it("every match excluded: all_busy (the proxies left are the asker's own), and nothing leased", async () => {
        const { store, load } = setup({}, three());
        await subject.settled?.(store);
        for (let i = 0; i < 2; i++)
          expect(await store.acquire(request({ exclude: new Set(['ns/a', 'ns/b', 'ns/c']) }))).toEqual({
            granted: false,
            reason: 'all_busy',
          });
        expect(
          await store.acquire(request({ selector: { geo: 'none' }, exclude: new Set(['ns/a']) })),
        ).toEqual({
          granted: false,
          reason: 'no_match',
        });
        for (const id of ['ns/a', 'ns/b', 'ns/c']) expect(await load(id)).toBe(0);
      });

      it('a refusal with an exclusion never answers the same request without it (the refusal memo)', async () => {
        const { store } = setup({}, three());
        await subject.settled?.(store);
        const exclude = new Set(['ns/a', 'ns/b', 'ns/c']);
        // Twice: a shared store remembers a first refusal and answers from memory from the second.
        for (let i = 0; i < 3; i++)
          expect(await store.acquire(request({ target: 't.example', exclude }))).toMatchObject({
            granted: false,
          });
        expect(granted(await store.acquire(request({ target: 't.example' }))).proxyID).toBe('ns/a');
      });
    });

    describe('request ids: a write repeated with its request id is applied once', () => {
      it('a repeated lease request gets the first grant, not a second lease; per owner', async () => {
        const { store, load } = setup({}, [proxy('ns/a', { maxLeases: 5 })]);
        const first = await store.acquire(request({ owner: 'team', requestID: 'r-1' }));
        const again = await store.acquire(request({ owner: 'team', requestID: 'r-1' }));
        expect(granted(again).id).toBe(granted(first).id);
        expect(again).toMatchObject({ granted: true, replayed: true });
        expect(await load('ns/a')).toBe(1);
        // Another owner's 'r-1' is another request; no id at all is a new lease every time.
        expect(granted(await store.acquire(request({ owner: 'other', requestID: 'r-1' }))).id).not.toBe(
          granted(first).id,
        );
        await store.acquire(request({ owner: 'team' }));
        expect(await load('ns/a')).toBe(3);
        expect((await store.totals()).activeLeases).toBe(3);
      });

      it('a refusal records nothing: the same id is granted once a proxy is free', async () => {
        const { store } = setup({}, [proxy('ns/a', { maxLeases: 1 })]);
        const held = granted(await store.acquire(request()));
        expect(await store.acquire(request({ requestID: 'r-2' }))).toEqual({
          granted: false,
          reason: 'all_busy',
        });
        await store.release(held.id);
        expect((await store.acquire(request({ requestID: 'r-2' }))).granted).toBe(true);
      });

      it('a repeated ban is one ban: the same cooldown, one count, the streak not doubled', async () => {
        const { store, clock } = setup();
        const lease = granted(await store.acquire(request({ owner: 'team', target: 'shop.example' })));
        const first = await store.report(lease.id, 'banned', {}, 'team', 'ban-1');
        clock.advanceSeconds(10);
        const again = await store.report(lease.id, 'banned', {}, 'team', 'ban-1');
        expect(again?.cooldownUntil).toEqual(first?.cooldownUntil);
        expect(again?.replayed).toBe(true);
        expect((await store.usage(['ns/a']))[0].stats.banned).toBe(1);
        expect((await store.standing('ns/a')).cooldowns.map((c) => c.until)).toEqual([
          first!.cooldownUntil!.getTime(),
        ]);
        // A new report (another id) is a second ban: the streak doubles the rest.
        const second = await store.report(lease.id, 'banned', {}, 'team', 'ban-2');
        expect(second!.cooldownUntil!.getTime() - clock.now()).toBe(2 * COOLDOWN_SECONDS * 1000);
        expect((await store.usage(['ns/a']))[0].stats.banned).toBe(2);
      });

      it('a request id reused on another lease is another request', async () => {
        const { store } = setup({}, [proxy('ns/a', { maxLeases: 5 })]);
        const a = granted(await store.acquire(request()));
        const b = granted(await store.acquire(request()));
        await store.report(a.id, 'ok', {}, undefined, 'same');
        await store.report(b.id, 'ok', {}, undefined, 'same');
        expect((await store.usage(['ns/a']))[0].stats.ok).toBe(2);
      });

      it('a repeated release answers as the first did; a repeated renewal extends no further', async () => {
        const { store, clock } = setup();
        const lease = granted(await store.acquire(request({ ttlSeconds: 60 })));
        const renewed = await store.renew(lease.id, 600, undefined, 'renew-1');
        clock.advanceSeconds(30);
        const again = await store.renew(lease.id, 600, undefined, 'renew-1');
        expect(again?.lease.expiresAt).toEqual(renewed?.lease.expiresAt);
        expect(await store.release(lease.id, undefined, 'release-1')).toBe(true);
        expect(await store.release(lease.id, undefined, 'release-1')).toBe(true);
        expect(await store.release(lease.id, undefined, 'release-2')).toBe(false);
      });

      it('a batch is one step in order, its releases included; repeated, it records nothing again', async () => {
        const { store, load } = setup({}, [proxy('ns/a', { maxLeases: 5 })]);
        const a = granted(await store.acquire(request({ target: 'shop.example' })));
        const b = granted(await store.acquire(request({ target: 'shop.example' })));
        const batch = [
          { leaseID: a.id, result: 'ok' as const },
          { leaseID: b.id, result: 'banned' as const, release: true },
          { leaseID: 'gone', result: 'ok' as const },
        ];
        const first = await store.reportMany(batch, undefined, 'batch-1');
        expect(first).toEqual([
          expect.objectContaining({ lease: expect.objectContaining({ id: a.id }) }),
          expect.objectContaining({
            target: 'shop.example',
            cooldownUntil: expect.any(Date),
            released: true,
          }),
          undefined,
        ]);
        expect(first[0]?.released).toBeUndefined();
        expect(await load('ns/a')).toBe(1);
        const again = await store.reportMany(batch, undefined, 'batch-1');
        expect(again.map((o) => o?.cooldownUntil)).toEqual(first.map((o) => o?.cooldownUntil));
        expect(again[0]?.replayed).toBe(true);
        expect((await store.usage(['ns/a']))[0].stats).toMatchObject({ ok: 1, banned: 1 });
        expect(await load('ns/a')).toBe(1);
      });
    });

    describe('a refusal answered again (O(1)) holds only until something could make it a grant', () => {
      type Setup = ReturnType<typeof setup>;
      const TARGET = 'shop.example';
      /** ns/a full (its one slot held), refused twice: the second is remembered with its version. */
      async function allBusy(): Promise<Setup & { held: Lease }> {
        const s = setup({}, [proxy('ns/a', { maxLeases: 1 })]);
        const held = granted(await s.store.acquire(request({ target: TARGET, ttlSeconds: 60 })));
        for (let i = 0; i < 3; i++)
          expect(await s.store.acquire(request({ target: TARGET }))).toEqual({
            granted: false,
            reason: 'all_busy',
          });
        return { ...s, held };
      }
      /** ns/a banned for the target and idle, refused twice. */
      async function allCooling(): Promise<Setup & { held: Lease }> {
        const s = setup({}, [proxy('ns/a', { maxLeases: 1 })]);
        const held = granted(await s.store.acquire(request({ target: TARGET, ttlSeconds: 60 })));
        await s.store.report(held.id, 'banned');
        await s.store.release(held.id);
        for (let i = 0; i < 3; i++)
          expect(await s.store.acquire(request({ target: TARGET }))).toMatchObject({
            granted: false,
            reason: 'all_cooling_down',
          });
        return { ...s, held };
      }

      it.each<
        [
          string,
          () => Promise<Setup & { held: Lease }>,
          (s: Setup & { held: Lease }) => Promise<void> | void,
          boolean,
        ]
      >([
        ['all_busy, nothing happens → refused again', allBusy, () => {}, false],
        [
          'all_busy, the lease is released → granted',
          allBusy,
          async (s) => void (await s.store.release(s.held.id)),
          true,
        ],
        [
          'all_busy, the lease expires unreleased → granted',
          allBusy,
          (s) => s.clock.advanceSeconds(61),
          true,
        ],
        [
          'all_busy, a proxy joins the catalog → granted',
          allBusy,
          (s) => {
            s.catalog.proxies = [proxy('ns/a', { maxLeases: 1 }), proxy('ns/b', { ip: '10.0.0.2' })];
          },
          true,
        ],
        [
          "all_busy, the proxy's maxLeases rises → granted",
          allBusy,
          (s) => {
            s.catalog.proxies = [proxy('ns/a', { maxLeases: 2 })];
          },
          true,
        ],
        ['all_cooling_down, nothing happens → refused again', allCooling, () => {}, false],
        [
          'all_cooling_down, the cooldown ends → granted',
          allCooling,
          (s) => s.clock.advanceSeconds(COOLDOWN_SECONDS * 1.2),
          true,
        ],
        [
          'all_cooling_down, a new egress forgets the cooldown → granted',
          allCooling,
          async (s) => {
            s.catalog.proxies = [proxy('ns/a', { maxLeases: 1, ip: '10.0.0.9' })];
            await subject.settled?.(s.store);
          },
          true,
        ],
      ])('%s', async (_name, arrange, event, grants) => {
        const s = await arrange();
        await event(s);
        expect((await s.store.acquire(request({ target: TARGET }))).granted).toBe(grants);
      });

      it("a remembered all_cooling_down's Retry-After counts down with the clock", async () => {
        const s = setup({}, [proxy('ns/a', { maxLeases: 1 })]);
        const held = granted(await s.store.acquire(request({ target: TARGET })));
        await s.store.report(held.id, 'banned');
        const refusedAt = async () => {
          const r = await s.store.acquire(request({ target: TARGET }));
          return r.granted ? -1 : r.retryAfterMs!;
        };
        const first = await refusedAt();
        await refusedAt();
        s.clock.advanceSeconds(0.5);
        expect(await refusedAt()).toBeLessThanOrEqual(first - 500);
      });
    });

    describe("a first refusal from the fleet's counts never refuses what a walk would grant", () => {
      // Six proxies: more than the first chunk a shared store sends (4), so its refusal comes
      // from the book's counts (redis-scripts.ts: P:full, P:cdt, P:held), never from a walk;
      // the proxy each event frees is the last-ranked one (latency 6), never in that chunk.
      const TARGET = 'shop.example';
      const six = (overrides: (i: number) => Partial<ProxyRecord> = () => ({})) =>
        Array.from({ length: 6 }, (_, i) =>
          proxy(`ns/p${i + 1}`, {
            maxLeases: 1,
            latencyMillis: i + 1,
            ip: `10.0.1.${i + 1}`,
            ...overrides(i + 1),
          }),
        );
      type Setup = ReturnType<typeof setup> & { leases: Map<string, Lease> };
      async function ready(): Promise<Setup> {
        const s = setup({}, six());
        await subject.settled?.(s.store);
        return { ...s, leases: new Map() };
      }
      /** Every proxy full: p6's lease ends first (ttl 60 s), the others last 300 s. */
      async function allBusy(): Promise<Setup> {
        const s = await ready();
        for (let i = 0; i < 6; i++) {
          const lease = granted(
            await s.store.acquire(request({ target: TARGET, ttlSeconds: i === 5 ? 60 : 300 })),
          );
          s.leases.set(lease.proxyID, lease);
        }
        expect(s.leases.get('ns/p6')?.ttlSeconds).toBe(60);
        return s;
      }
      /** Every proxy banned for the target and idle; p6's cooldown ends 100 s before the others'. */
      async function allCooling(): Promise<Setup> {
        const s = await ready();
        const ban = async () => {
          const lease = granted(await s.store.acquire(request({ target: TARGET })));
          await s.store.reportMany([{ leaseID: lease.id, result: 'banned', release: true }]);
          return lease.proxyID;
        };
        // p1 first: the walk takes the fastest idle one; p6 is banned first by leasing the
        // others meanwhile.
        const others = [];
        for (let i = 0; i < 5; i++)
          others.push(granted(await s.store.acquire(request({ target: 'elsewhere' }))));
        expect(await ban()).toBe('ns/p6');
        for (const lease of others) await s.store.release(lease.id);
        s.clock.advanceSeconds(100);
        for (let i = 0; i < 5; i++) await ban();
        return s;
      }
      const refusedAs = async (s: Setup, reason: string) =>
        expect(await s.store.acquire(request({ target: TARGET }))).toMatchObject({ granted: false, reason });

      it.each<[string, () => Promise<Setup>, string]>([
        ['all busy', allBusy, 'all_busy'],
        ['all cooling down', allCooling, 'all_cooling_down'],
      ])(
        '%s: the same refusal with proxies excluded (a superset refused refuses the subset)',
        async (_case, make, reason) => {
          const s = await make();
          const exclude = new Set(['ns/p1', 'ns/p2']);
          for (let i = 0; i < 2; i++)
            expect(await s.store.acquire(request({ target: TARGET, exclude }))).toMatchObject({
              granted: false,
              reason,
            });
        },
      );

      it.each<[string, () => Promise<Setup>, (s: Setup) => Promise<void> | void, string]>([
        ['all busy → all_busy', allBusy, () => {}, 'all_busy'],
        [
          "all busy, p6's lease released → p6 granted",
          allBusy,
          async (s) => void (await s.store.release(s.leases.get('ns/p6')!.id)),
          'ns/p6',
        ],
        [
          'all busy, p6 released by a report → p6 granted',
          allBusy,
          async (s) =>
            void (await s.store.reportMany([
              { leaseID: s.leases.get('ns/p6')!.id, result: 'ok', release: true },
            ])),
          'ns/p6',
        ],
        [
          "all busy, p6's lease expires unreleased → p6 granted",
          allBusy,
          (s) => s.clock.advanceSeconds(61),
          'ns/p6',
        ],
        [
          "all busy, p6's maxLeases rises → p6 granted",
          allBusy,
          async (s) => {
            s.catalog.proxies = six((i) => (i === 6 ? { maxLeases: 2 } : {}));
            await subject.settled?.(s.store);
          },
          'ns/p6',
        ],
        [
          'all busy, a proxy joins → it is granted',
          allBusy,
          async (s) => {
            s.catalog.proxies = [...six(), proxy('ns/p7', { latencyMillis: 7, ip: '10.0.1.7' })];
            await subject.settled?.(s.store);
          },
          'ns/p7',
        ],
        [
          'all busy, a proxy joins unseen by the book yet → it is granted',
          allBusy,
          (s) => {
            s.catalog.proxies = [...six(), proxy('ns/p7', { latencyMillis: 7, ip: '10.0.1.7' })];
          },
          'ns/p7',
        ],
        [
          'all busy, p1 leaves the catalog → all_busy',
          allBusy,
          async (s) => {
            s.catalog.proxies = six().slice(1);
            await subject.settled?.(s.store);
          },
          'all_busy',
        ],
        [
          'all busy, p6 turns unhealthy → all_busy',
          allBusy,
          async (s) => {
            s.catalog.proxies = six((i) => (i === 6 ? { healthy: false } : {}));
            await subject.settled?.(s.store);
          },
          'all_busy',
        ],
        [
          'all busy, p6 turns unhealthy, its lease expires, it is healthy again → p6 granted',
          allBusy,
          async (s) => {
            s.catalog.proxies = six((i) => (i === 6 ? { healthy: false } : {}));
            await subject.settled?.(s.store);
            s.clock.advanceSeconds(61);
            s.catalog.proxies = six();
            await subject.settled?.(s.store);
          },
          'ns/p6',
        ],
        ['all cooling → all_cooling_down', allCooling, () => {}, 'all_cooling_down'],
        [
          "all cooling, p6's cooldown ends → p6 granted",
          allCooling,
          (s) => s.clock.advanceSeconds(COOLDOWN_SECONDS - 100 + 1),
          'ns/p6',
        ],
        [
          'all cooling, a proxy joins → it is granted',
          allCooling,
          async (s) => {
            s.catalog.proxies = [...six(), proxy('ns/p7', { latencyMillis: 7, ip: '10.0.1.7' })];
            await subject.settled?.(s.store);
          },
          'ns/p7',
        ],
        [
          'all cooling, p6 unhealthy and healthy again → all_cooling_down',
          allCooling,
          async (s) => {
            s.catalog.proxies = six((i) => (i === 6 ? { healthy: false } : {}));
            await subject.settled?.(s.store);
            s.catalog.proxies = six();
            await subject.settled?.(s.store);
          },
          'all_cooling_down',
        ],
        [
          'all cooling, p6 unhealthy and healthy again after its cooldown ended → p6 granted',
          allCooling,
          async (s) => {
            s.catalog.proxies = six((i) => (i === 6 ? { healthy: false } : {}));
            await subject.settled?.(s.store);
            s.clock.advanceSeconds(COOLDOWN_SECONDS - 100 + 1);
            s.catalog.proxies = six();
            await subject.settled?.(s.store);
          },
          'ns/p6',
        ],
        [
          'all cooling, p6 gets a new egress (its cooldown forgotten) → p6 granted',
          allCooling,
          async (s) => {
            s.catalog.proxies = six((i) => (i === 6 ? { ip: '10.0.9.6' } : {}));
            await subject.settled?.(s.store);
          },
          'ns/p6',
        ],
        [
          'all cooling for the target, another target → granted',
          allCooling,
          async (s) => {
            expect((await s.store.acquire(request({ target: 'elsewhere' }))).granted).toBe(true);
          },
          'all_cooling_down',
        ],
      ])('%s', async (_name, arrange, event, expected) => {
        const s = await arrange();
        await event(s);
        const answer = await s.store.acquire(request({ target: TARGET }));
        if (expected.startsWith('ns/'))
          expect(answer).toMatchObject({ granted: true, lease: { proxyID: expected } });
        else expect(answer).toMatchObject({ granted: false, reason: expected });
      });

      it("all_cooling_down's Retry-After is the first cooldown's end among them", async () => {
        const s = await allCooling();
        const answer = await s.store.acquire(request({ target: TARGET }));
        // p6's ban began 100 s before the others': its cooldown ends COOLDOWN_SECONDS - 100 s from now.
        expect(answer).toEqual({
          granted: false,
          reason: 'all_cooling_down',
          retryAfterMs: (COOLDOWN_SECONDS - 100) * 1000,
        });
        await refusedAs(s, 'all_cooling_down');
      });

      it('all busy beside a suspect proxy: all_busy, and granted once its suspicion ends', async () => {
        const s = await allBusy();
        // p6 free but suspect (its own client reported it unreachable before releasing).
        const p6 = s.leases.get('ns/p6')!;
        await s.store.report(p6.id, 'unreachable');
        await s.store.release(p6.id);
        await refusedAs(s, 'all_busy');
        s.clock.advanceSeconds(120);
        expect(await s.store.acquire(request({ target: TARGET }))).toMatchObject({
          granted: true,
          lease: { proxyID: 'ns/p6' },
        });
      });
    });

    describe.each([
      ['IPv4', '203.0.113.0/29', (i: number) => `203.0.113.${i}`, (i: number) => `198.51.100.${i}`],
      ['IPv6', '2001:db8::/125', (i: number) => `2001:db8::${i}`, (i: number) => `2001:db8:1::${i}`],
    ])(
      'a first refusal by an %s exit-IP block from the exit counts never refuses what a walk would grant',
      (_family, blockText, inside, outside) => {
        // Six proxies in the block (p1..p6, p6 ranked last) and two outside it (q1, q2, ranked
        // first, idle): more than the first chunk a shared store sends (4), so the refusal
        // comes from the book's exit sets (P:xip, P:xfull, P:xcd), never from a walk; the
        // proxy each event frees is p6, never in that chunk. Each request from a new owner:
        // no remembered refusal answers it.
        const TARGET = 'shop.example';
        const BLOCK = parseExitIPTerm(blockText)!;
        const fleet = (overrides: (id: string) => Partial<ProxyRecord> = () => ({})) => [
          ...Array.from({ length: 6 }, (_, i) =>
            proxy(`ns/p${i + 1}`, {
              maxLeases: 1,
              latencyMillis: i + 1,
              ip: `10.0.4.${i + 1}`,
              exitIP: inside(i + 1),
              ...overrides(`ns/p${i + 1}`),
            }),
          ),
          ...['ns/q1', 'ns/q2'].map((id, i) =>
            proxy(id, {
              maxLeases: 1,
              latencyMillis: 0,
              ip: `10.0.5.${i + 1}`,
              exitIP: outside(i + 1),
              ...overrides(id),
            }),
          ),
        ];
        let owners = 0;
        const byBlock = (overrides: Partial<LeaseRequest> = {}): LeaseRequest =>
          request({ target: TARGET, exitIP: BLOCK, owner: `block-${++owners}`, ...overrides });
        type Setup = ReturnType<typeof setup> & { leases: Map<string, Lease> };
        async function ready(): Promise<Setup> {
          const s = setup({}, fleet());
          await subject.settled?.(s.store);
          return { ...s, leases: new Map() };
        }
        const change = async (s: Setup, overrides: (id: string) => Partial<ProxyRecord>) => {
          s.catalog.proxies = fleet(overrides);
          await subject.settled?.(s.store);
        };
        /** Every proxy in the block full (p6's lease ends first: ttl 60 s), q1 and q2 idle. */
        async function allBusy(): Promise<Setup> {
          const s = await ready();
          for (let i = 0; i < 6; i++) {
            const lease = granted(
              await s.store.acquire(byBlock({ owner: undefined, ttlSeconds: i === 5 ? 60 : 300 })),
            );
            s.leases.set(lease.proxyID, lease);
          }
          expect(s.leases.get('ns/p6')?.ttlSeconds).toBe(60);
          return s;
        }
        /** Every proxy in the block banned for the target and idle, p6's cooldown ending 100 s before the others'. */
        async function allCooling(): Promise<Setup> {
          const s = await ready();
          const ban = async () => {
            const lease = granted(await s.store.acquire(byBlock({ owner: undefined })));
            await s.store.reportMany([{ leaseID: lease.id, result: 'banned', release: true }]);
            return lease.proxyID;
          };
          const others = [];
          for (let i = 0; i < 5; i++)
            others.push(granted(await s.store.acquire(byBlock({ owner: undefined, target: 'elsewhere' }))));
          expect(await ban()).toBe('ns/p6');
          for (const lease of others) await s.store.release(lease.id);
          s.clock.advanceSeconds(100);
          for (let i = 0; i < 5; i++) await ban();
          return s;
        }

        it.each<[string, () => Promise<Setup>, (s: Setup) => Promise<void> | void, string]>([
          ['all busy → all_busy', allBusy, () => {}, 'all_busy'],
          [
            "all busy, p6's lease released → p6 granted",
            allBusy,
            async (s) => void (await s.store.release(s.leases.get('ns/p6')!.id)),
            'ns/p6',
          ],
          [
            "all busy, p6's lease expires unreleased → p6 granted",
            allBusy,
            (s) => s.clock.advanceSeconds(61),
            'ns/p6',
          ],
          [
            "all busy, p6's lease expires and a refusal by another block ran meanwhile → p6 granted",
            allBusy,
            async (s) => {
              s.clock.advanceSeconds(61);
              await s.store.acquire(byBlock({ exitIP: parseExitIPTerm(inside(1))! }));
            },
            'ns/p6',
          ],
          [
            "all busy, q1's exit IP moves into the block → q1 granted",
            allBusy,
            (s) => change(s, (id) => (id === 'ns/q1' ? { exitIP: inside(7) } : {})),
            'ns/q1',
          ],
          [
            'all busy, p6 released and its exit IP moved out of the block → all_busy',
            allBusy,
            async (s) => {
              await s.store.release(s.leases.get('ns/p6')!.id);
              await change(s, (id) => (id === 'ns/p6' ? { exitIP: outside(6) } : {}));
            },
            'all_busy',
          ],
          [
            'all busy, a proxy in the block joins → it is granted',
            allBusy,
            async (s) => {
              s.catalog.proxies = [
                ...fleet(),
                proxy('ns/p7', { latencyMillis: 7, ip: '10.0.4.7', exitIP: inside(7) }),
              ];
              await subject.settled?.(s.store);
            },
            'ns/p7',
          ],
          [
            'all busy, a proxy outside the block joins → all_busy',
            allBusy,
            async (s) => {
              s.catalog.proxies = [
                ...fleet(),
                proxy('ns/q3', { latencyMillis: 0, ip: '10.0.5.3', exitIP: outside(3) }),
              ];
              await subject.settled?.(s.store);
            },
            'all_busy',
          ],
          [
            'all busy, a proxy in the block joins unseen by the book yet → it is granted',
            allBusy,
            (s) => {
              s.catalog.proxies = [
                ...fleet(),
                proxy('ns/p7', { latencyMillis: 7, ip: '10.0.4.7', exitIP: inside(7) }),
              ];
            },
            'ns/p7',
          ],
          [
            "all busy, p6's exit IP not known any more, its lease released → all_busy",
            allBusy,
            async (s) => {
              await s.store.release(s.leases.get('ns/p6')!.id);
              await change(s, (id) => (id === 'ns/p6' ? { exitIP: undefined } : {}));
            },
            'all_busy',
          ],
          ['all cooling → all_cooling_down', allCooling, () => {}, 'all_cooling_down'],
          [
            "all cooling, p6's cooldown ends → p6 granted",
            allCooling,
            (s) => s.clock.advanceSeconds(COOLDOWN_SECONDS - 100 + 1),
            'ns/p6',
          ],
          [
            'all cooling, p6 on a new exit IP in the block (its cooldown forgotten) → p6 granted',
            allCooling,
            (s) => change(s, (id) => (id === 'ns/p6' ? { exitIP: inside(7) } : {})),
            'ns/p6',
          ],
          [
            'all cooling, q1 on a new exit IP in the block → q1 granted',
            allCooling,
            (s) => change(s, (id) => (id === 'ns/q1' ? { exitIP: inside(7) } : {})),
            'ns/q1',
          ],
          [
            'all cooling, a proxy in the block joins → it is granted',
            allCooling,
            async (s) => {
              s.catalog.proxies = [
                ...fleet(),
                proxy('ns/p7', { latencyMillis: 7, ip: '10.0.4.7', exitIP: inside(7) }),
              ];
              await subject.settled?.(s.store);
            },
            'ns/p7',
          ],
          [
            'all cooling, p6 unhealthy and healthy again → all_cooling_down',
            allCooling,
            async (s) => {
              await change(s, (id) => (id === 'ns/p6' ? { healthy: false } : {}));
              await change(s, () => ({}));
            },
            'all_cooling_down',
          ],
          [
            'all cooling for the target, q1 and q2 banned for it too → all_cooling_down',
            allCooling,
            async (s) => {
              for (let i = 0; i < 2; i++) {
                const lease = granted(await s.store.acquire(request({ target: TARGET })));
                await s.store.reportMany([{ leaseID: lease.id, result: 'banned', release: true }]);
              }
            },
            'all_cooling_down',
          ],
          [
            'all cooling for the target, another target → granted in the block',
            allCooling,
            async (s) => {
              expect((await s.store.acquire(byBlock({ target: 'elsewhere' }))).granted).toBe(true);
            },
            'all_cooling_down',
          ],
          [
            'all cooling, p6 leased for another target too (full and cooling) → all_cooling_down',
            allCooling,
            async (s) =>
              void granted(
                await s.store.acquire(byBlock({ target: 'elsewhere', exitIP: parseExitIPTerm(inside(6))! })),
              ),
            'all_cooling_down',
          ],
          [
            'all cooling, p6 leased for another target and its cooldown ends (full, the rest cooling) → all_busy',
            allCooling,
            async (s) => {
              granted(
                await s.store.acquire(
                  byBlock({ target: 'elsewhere', ttlSeconds: 3600, exitIP: parseExitIPTerm(inside(6))! }),
                ),
              );
              s.clock.advanceSeconds(COOLDOWN_SECONDS - 100 + 1);
            },
            'all_busy',
          ],
        ])('%s', async (_name, arrange, event, expected) => {
          const s = await arrange();
          await event(s);
          const answer = await s.store.acquire(byBlock());
          if (expected.startsWith('ns/'))
            expect(answer).toMatchObject({ granted: true, lease: { proxyID: expected } });
          else expect(answer).toMatchObject({ granted: false, reason: expected });
        });

        it('a block no leasable proxy egresses from: no_match (empty, or its one proxy unhealthy)', async () => {
          const s = await ready();
          const empty = parseExitIPTerm(blockText.startsWith('2001') ? '2001:db8:2::/48' : '192.0.2.0/24')!;
          expect(await s.store.acquire(byBlock({ exitIP: empty }))).toEqual({
            granted: false,
            reason: 'no_match',
          });
          await change(s, (id) => (id === 'ns/p1' ? { healthy: false } : {}));
          expect(await s.store.acquire(byBlock({ exitIP: parseExitIPTerm(inside(1))! }))).toEqual({
            granted: false,
            reason: 'no_match',
          });
        });

        it('all busy beside a suspect proxy in the block: all_busy, and granted once its suspicion ends', async () => {
          const s = await allBusy();
          const p6 = s.leases.get('ns/p6')!;
          await s.store.report(p6.id, 'unreachable');
          await s.store.release(p6.id);
          expect(await s.store.acquire(byBlock())).toMatchObject({ granted: false, reason: 'all_busy' });
          s.clock.advanceSeconds(120);
          expect(await s.store.acquire(byBlock())).toMatchObject({
            granted: true,
            lease: { proxyID: 'ns/p6' },
          });
        });

        it("all_cooling_down's Retry-After is the first cooldown's end among them", async () => {
          const s = await allCooling();
          expect(await s.store.acquire(byBlock())).toEqual({
            granted: false,
            reason: 'all_cooling_down',
            retryAfterMs: (COOLDOWN_SECONDS - 100) * 1000,
          });
        });

        it("all_cooling_down's Retry-After is never after the block's first cooldown end, whatever cools outside it", async () => {
          const s = await ready();
          // q1 (outside) banned for the target first, then every proxy of the block 100 s later.
          const q1 = granted(await s.store.acquire(request({ target: TARGET })));
          expect(q1.proxyID).toBe('ns/q1');
          await s.store.reportMany([{ leaseID: q1.id, result: 'banned', release: true }]);
          s.clock.advanceSeconds(100);
          for (let i = 0; i < 6; i++) {
            const lease = granted(await s.store.acquire(byBlock({ owner: undefined })));
            await s.store.reportMany([{ leaseID: lease.id, result: 'banned', release: true }]);
          }
          const answer = await s.store.acquire(byBlock());
          expect(answer).toMatchObject({ granted: false, reason: 'all_cooling_down' });
          const wait = (answer as { retryAfterMs: number }).retryAfterMs;
          expect(wait).toBeGreaterThan(0);
          expect(wait).toBeLessThanOrEqual(COOLDOWN_SECONDS * 1000);
        });
      },
    );

    describe("a first refusal of a selector or a scope from its classes' counts never refuses what a walk would grant", () => {
      // Six proxies of pool a (one class: proxy-classes.ts) and two of pool b ranked before
      // them, idle; pool a named by a selector or by a token scope. More than the first chunk
      // a shared store sends (4), so its refusal comes from the counts of pool a's class; the
      // proxy each event frees is the last-ranked one (latency 6), never in that chunk.
      const TARGET = 'shop.example';
      const POOL_A = { pool: 'a' };
      const fleet = (overrides: (id: string) => Partial<ProxyRecord> = () => ({})) => [
        ...Array.from({ length: 6 }, (_, i) =>
          proxy(`ns/p${i + 1}`, {
            maxLeases: 1,
            latencyMillis: i + 1,
            ip: `10.0.2.${i + 1}`,
            attributes: POOL_A,
            ...overrides(`ns/p${i + 1}`),
          }),
        ),
        ...['ns/q1', 'ns/q2'].map((id, i) =>
          proxy(id, {
            maxLeases: 1,
            latencyMillis: 0,
            ip: `10.0.3.${i + 1}`,
            attributes: { pool: 'b' },
            ...overrides(id),
          }),
        ),
      ];
      // 'session': a selector and one session throughout (bound to each proxy it took last).
      type How = 'selector' | 'scope' | 'session';
      const named = (how: How, overrides: Partial<LeaseRequest> = {}): LeaseRequest =>
        request({
          target: TARGET,
          ...(how === 'scope' ? { within: scopeMatcher({ selector: POOL_A }) } : { selector: POOL_A }),
          ...(how === 'session' ? { session: 'contract-s' } : {}),
          ...overrides,
        });
      type Setup = ReturnType<typeof setup> & { leases: Map<string, Lease> };
      async function ready(): Promise<Setup> {
        const s = setup({}, fleet());
        await subject.settled?.(s.store);
        return { ...s, leases: new Map() };
      }
      /** Every pool a proxy full (p6's lease ends first: ttl 60 s), pool b idle. */
      async function allBusy(how: How): Promise<Setup> {
        const s = await ready();
        for (let i = 0; i < 6; i++) {
          const lease = granted(await s.store.acquire(named(how, { ttlSeconds: i === 5 ? 60 : 300 })));
          s.leases.set(lease.proxyID, lease);
        }
        expect(s.leases.get('ns/p6')?.ttlSeconds).toBe(60);
        return s;
      }
      /** Every pool a proxy banned for the target and idle, p6's cooldown ending 100 s before the others'. */
      async function allCooling(how: How): Promise<Setup> {
        const s = await ready();
        const ban = async () => {
          const lease = granted(await s.store.acquire(named(how)));
          await s.store.reportMany([{ leaseID: lease.id, result: 'banned', release: true }]);
          return lease.proxyID;
        };
        const others = [];
        for (let i = 0; i < 5; i++)
          others.push(granted(await s.store.acquire(named(how, { target: 'elsewhere' }))));
        expect(await ban()).toBe('ns/p6');
        for (const lease of others) await s.store.release(lease.id);
        s.clock.advanceSeconds(100);
        for (let i = 0; i < 5; i++) await ban();
        return s;
      }
      const relabel = async (s: Setup, id: string, pool: string) => {
        s.catalog.proxies = fleet((at) => (at === id ? { attributes: { pool } } : {}));
        await subject.settled?.(s.store);
      };
      const join = async (s: Setup, pool: string) => {
        s.catalog.proxies = [
          ...fleet(),
          proxy('ns/p7', { maxLeases: 1, latencyMillis: 7, ip: '10.0.2.7', attributes: { pool } }),
        ];
        await subject.settled?.(s.store);
      };
      const cases: [
        string,
        (how: How) => Promise<Setup>,
        (s: Setup, how: How) => Promise<void> | void,
        string,
      ][] = [
        ['all busy → all_busy (pool b idle)', allBusy, () => {}, 'all_busy'],
        [
          "all busy, p6's lease released → p6 granted",
          allBusy,
          async (s) => void (await s.store.release(s.leases.get('ns/p6')!.id)),
          'ns/p6',
        ],
        [
          "all busy, p6's lease expires unreleased → p6 granted",
          allBusy,
          (s) => s.clock.advanceSeconds(61),
          'ns/p6',
        ],
        [
          'all busy, pool b full too → all_busy',
          allBusy,
          async (s) => {
            for (let i = 0; i < 2; i++) granted(await s.store.acquire(request({ selector: { pool: 'b' } })));
          },
          'all_busy',
        ],
        [
          'all busy, pool b full, then one of it freed → all_busy',
          allBusy,
          async (s) => {
            const b = granted(await s.store.acquire(request({ selector: { pool: 'b' } })));
            granted(await s.store.acquire(request({ selector: { pool: 'b' } })));
            await s.store.release(b.id);
          },
          'all_busy',
        ],
        [
          'all busy, idle q1 relabelled into pool a → q1 granted',
          allBusy,
          (s) => relabel(s, 'ns/q1', 'a'),
          'ns/q1',
        ],
        [
          'all busy, p6 relabelled out of pool a, then released → all_busy',
          allBusy,
          async (s) => {
            await relabel(s, 'ns/p6', 'b');
            await s.store.release(s.leases.get('ns/p6')!.id);
          },
          'all_busy',
        ],
        [
          'all busy, p6 out of pool a and back, then released → p6 granted',
          allBusy,
          async (s) => {
            await relabel(s, 'ns/p6', 'b');
            await relabel(s, 'ns/p6', 'a');
            await s.store.release(s.leases.get('ns/p6')!.id);
          },
          'ns/p6',
        ],
        ['all busy, a proxy of pool a joins → it is granted', allBusy, (s) => join(s, 'a'), 'ns/p7'],
        ['all busy, a proxy of pool b joins → all_busy', allBusy, (s) => join(s, 'b'), 'all_busy'],
        [
          'all busy, q1 suspect (another class held) → all_busy',
          allBusy,
          async (s) => {
            const q1 = granted(await s.store.acquire(request({ selector: { pool: 'b' } })));
            await s.store.report(q1.id, 'unreachable');
            await s.store.release(q1.id);
          },
          'all_busy',
        ],
        ['all cooling → all_cooling_down', allCooling, () => {}, 'all_cooling_down'],
        [
          "all cooling, p6's cooldown ends → p6 granted",
          allCooling,
          (s) => s.clock.advanceSeconds(COOLDOWN_SECONDS - 100 + 1),
          'ns/p6',
        ],
        [
          'all cooling, idle q1 relabelled into pool a → q1 granted',
          allCooling,
          (s) => relabel(s, 'ns/q1', 'a'),
          'ns/q1',
        ],
        [
          'all cooling, p1 relabelled out of pool a → all_cooling_down',
          allCooling,
          (s) => relabel(s, 'ns/p1', 'b'),
          'all_cooling_down',
        ],
        [
          'all cooling, p6 out of pool a and back after its cooldown ended → p6 granted',
          allCooling,
          async (s) => {
            await relabel(s, 'ns/p6', 'b');
            s.clock.advanceSeconds(COOLDOWN_SECONDS - 100 + 1);
            await relabel(s, 'ns/p6', 'a');
          },
          'ns/p6',
        ],
        ['all cooling, a proxy of pool a joins → it is granted', allCooling, (s) => join(s, 'a'), 'ns/p7'],
        [
          'all cooling, a proxy of pool b joins → all_cooling_down',
          allCooling,
          (s) => join(s, 'b'),
          'all_cooling_down',
        ],
        [
          'all cooling, pool b banned for the target too → all_cooling_down',
          allCooling,
          async (s) => {
            for (let i = 0; i < 2; i++) {
              const b = granted(await s.store.acquire(request({ target: TARGET, selector: { pool: 'b' } })));
              await s.store.reportMany([{ leaseID: b.id, result: 'banned', release: true }]);
            }
          },
          'all_cooling_down',
        ],
      ];
      it.each(
        cases.flatMap(([name, arrange, event, expected]) =>
          (['selector', 'scope', 'session'] as const).map(
            (how) => [`${how}: ${name}`, how, arrange, event, expected] as const,
          ),
        ),
      )('%s', async (_name, how, arrange, event, expected) => {
        const s = await arrange(how);
        await event(s, how);
        const answer = await s.store.acquire(named(how));
        if (expected.startsWith('ns/'))
          expect(answer).toMatchObject({ granted: true, lease: { proxyID: expected } });
        else expect(answer).toMatchObject({ granted: false, reason: expected });
      });

      it.each(['selector', 'scope', 'session'] as const)(
        "%s: all_cooling_down's Retry-After is the first cooldown's end among its classes",
        async (how) => {
          const s = await allCooling(how);
          expect(await s.store.acquire(named(how))).toEqual({
            granted: false,
            reason: 'all_cooling_down',
            retryAfterMs: (COOLDOWN_SECONDS - 100) * 1000,
          });
        },
      );
    });

    describe("a first refusal of an exit-IP block with a selector or a scope from its classes' exit counts never refuses what a walk would grant", () => {
      // Pool a in the block (p1..p6, p6 ranked last), pool a outside it (q1, q2) and pool b in
      // it (r1, r2), the last four ranked first and idle: the request (pool a and the block)
      // matches p1..p6 only, more than the first chunk a shared store sends (4), so its
      // refusal comes from the counts of pool a's class within the block (by-class exit sets),
      // never from a walk; the proxy each event frees is p6 (or one it moves in).
      const TARGET = 'shop.example';
      const POOL_A = { pool: 'a' };
      const BLOCK = parseExitIPTerm('203.0.113.0/28')!;
      const inside = (i: number) => `203.0.113.${i}`;
      const fleet = (overrides: (id: string) => Partial<ProxyRecord> = () => ({})) => [
        ...Array.from({ length: 6 }, (_, i) =>
          proxy(`ns/p${i + 1}`, {
            maxLeases: 1,
            latencyMillis: i + 1,
            ip: `10.0.6.${i + 1}`,
            exitIP: inside(i + 1),
            attributes: POOL_A,
            ...overrides(`ns/p${i + 1}`),
          }),
        ),
        ...['ns/q1', 'ns/q2'].map((id, i) =>
          proxy(id, {
            maxLeases: 1,
            latencyMillis: 0,
            ip: `10.0.7.${i + 1}`,
            exitIP: `198.51.100.${i + 1}`,
            attributes: POOL_A,
            ...overrides(id),
          }),
        ),
        ...['ns/r1', 'ns/r2'].map((id, i) =>
          proxy(id, {
            maxLeases: 1,
            latencyMillis: 0,
            ip: `10.0.8.${i + 1}`,
            exitIP: inside(9 + i),
            attributes: { pool: 'b' },
            ...overrides(id),
          }),
        ),
      ];
      type How = 'selector' | 'scope' | 'session';
      let owners = 0;
      const named = (how: How, overrides: Partial<LeaseRequest> = {}): LeaseRequest =>
        request({
          target: TARGET,
          exitIP: BLOCK,
          owner: `mixed-${++owners}`,
          ...(how === 'scope' ? { within: scopeMatcher({ selector: POOL_A }) } : { selector: POOL_A }),
          ...(how === 'session' ? { session: 'contract-s' } : {}),
          ...overrides,
        });
      type Setup = ReturnType<typeof setup> & { leases: Map<string, Lease> };
      async function ready(): Promise<Setup> {
        const s = setup({}, fleet());
        await subject.settled?.(s.store);
        return { ...s, leases: new Map() };
      }
      const change = async (s: Setup, overrides: (id: string) => Partial<ProxyRecord>) => {
        s.catalog.proxies = fleet(overrides);
        await subject.settled?.(s.store);
      };
      /** p1..p6 full (p6's lease ends first: ttl 60 s), the rest idle. */
      async function allBusy(how: How): Promise<Setup> {
        const s = await ready();
        for (let i = 0; i < 6; i++) {
          const lease = granted(
            await s.store.acquire(named(how, { owner: undefined, ttlSeconds: i === 5 ? 60 : 300 })),
          );
          s.leases.set(lease.proxyID, lease);
        }
        expect(s.leases.get('ns/p6')?.ttlSeconds).toBe(60);
        return s;
      }
      /** p1..p6 banned for the target and idle, p6's cooldown ending 100 s before the others'. */
      async function allCooling(how: How): Promise<Setup> {
        const s = await ready();
        const ban = async () => {
          const lease = granted(await s.store.acquire(named(how, { owner: undefined })));
          await s.store.reportMany([{ leaseID: lease.id, result: 'banned', release: true }]);
          return lease.proxyID;
        };
        const others = [];
        for (let i = 0; i < 5; i++)
          others.push(granted(await s.store.acquire(named(how, { owner: undefined, target: 'elsewhere' }))));
        expect(await ban()).toBe('ns/p6');
        for (const lease of others) await s.store.release(lease.id);
        s.clock.advanceSeconds(100);
        for (let i = 0; i < 5; i++) await ban();
        return s;
      }
      const join = async (s: Setup, pool: string, exitIP: string) => {
        s.catalog.proxies = [
          ...fleet(),
          proxy('ns/p7', { maxLeases: 1, latencyMillis: 7, ip: '10.0.6.7', exitIP, attributes: { pool } }),
        ];
        await subject.settled?.(s.store);
      };
      const cases: [string, (how: How) => Promise<Setup>, (s: Setup) => Promise<void> | void, string][] = [
        ['all busy → all_busy', allBusy, () => {}, 'all_busy'],
        [
          "all busy, p6's lease released → p6 granted",
          allBusy,
          async (s) => void (await s.store.release(s.leases.get('ns/p6')!.id)),
          'ns/p6',
        ],
        [
          "all busy, p6's lease expires unreleased → p6 granted",
          allBusy,
          (s) => s.clock.advanceSeconds(61),
          'ns/p6',
        ],
        [
          "all busy, q1's exit IP moves into the block → q1 granted",
          allBusy,
          (s) => change(s, (id) => (id === 'ns/q1' ? { exitIP: inside(7) } : {})),
          'ns/q1',
        ],
        [
          'all busy, r1 relabeled into pool a → r1 granted',
          allBusy,
          (s) => change(s, (id) => (id === 'ns/r1' ? { attributes: POOL_A } : {})),
          'ns/r1',
        ],
        [
          'all busy, p6 released and relabeled into pool b → all_busy',
          allBusy,
          async (s) => {
            await s.store.release(s.leases.get('ns/p6')!.id);
            await change(s, (id) => (id === 'ns/p6' ? { attributes: { pool: 'b' } } : {}));
          },
          'all_busy',
        ],
        [
          'all busy, p6 released and its exit IP moved out of the block → all_busy',
          allBusy,
          async (s) => {
            await s.store.release(s.leases.get('ns/p6')!.id);
            await change(s, (id) => (id === 'ns/p6' ? { exitIP: '198.51.100.6' } : {}));
          },
          'all_busy',
        ],
        [
          'all busy, pool a joins in the block → it is granted',
          allBusy,
          (s) => join(s, 'a', inside(7)),
          'ns/p7',
        ],
        [
          'all busy, pool b joins in the block → all_busy',
          allBusy,
          (s) => join(s, 'b', inside(7)),
          'all_busy',
        ],
        [
          'all busy, pool a joins outside the block → all_busy',
          allBusy,
          (s) => join(s, 'a', '198.51.100.7'),
          'all_busy',
        ],
        ['all cooling → all_cooling_down', allCooling, () => {}, 'all_cooling_down'],
        [
          "all cooling, p6's cooldown ends → p6 granted",
          allCooling,
          (s) => s.clock.advanceSeconds(COOLDOWN_SECONDS - 100 + 1),
          'ns/p6',
        ],
        [
          'all cooling, r1 relabeled into pool a → r1 granted',
          allCooling,
          (s) => change(s, (id) => (id === 'ns/r1' ? { attributes: POOL_A } : {})),
          'ns/r1',
        ],
        [
          'all cooling, p6 on a new exit IP in the block (its cooldown forgotten) → p6 granted',
          allCooling,
          (s) => change(s, (id) => (id === 'ns/p6' ? { exitIP: inside(7) } : {})),
          'ns/p6',
        ],
        [
          'all cooling, pool a joins in the block → it is granted',
          allCooling,
          (s) => join(s, 'a', inside(7)),
          'ns/p7',
        ],
        [
          'all cooling, r1 and q1 banned for the target too → all_cooling_down',
          allCooling,
          async (s) => {
            for (const id of ['ns/r1', 'ns/q1']) {
              const exitIP = parseExitIPTerm(id === 'ns/r1' ? inside(9) : '198.51.100.1')!;
              const lease = granted(await s.store.acquire(request({ target: TARGET, exitIP })));
              expect(lease.proxyID).toBe(id);
              await s.store.reportMany([{ leaseID: lease.id, result: 'banned', release: true }]);
            }
          },
          'all_cooling_down',
        ],
        [
          'all cooling, p6 leased for another target and its cooldown ends (full, the rest cooling) → all_busy',
          allCooling,
          async (s) => {
            granted(
              await s.store.acquire(
                request({ target: 'elsewhere', ttlSeconds: 3600, exitIP: parseExitIPTerm(inside(6))! }),
              ),
            );
            s.clock.advanceSeconds(COOLDOWN_SECONDS - 100 + 1);
          },
          'all_busy',
        ],
      ];
      it.each(
        cases.flatMap(([name, arrange, event, expected]) =>
          (['selector', 'scope', 'session'] as const).map(
            (how) => [`${how}: ${name}`, how, arrange, event, expected] as const,
          ),
        ),
      )('%s', async (_name, how, arrange, event, expected) => {
        const s = await arrange(how);
        await event(s);
        const answer = await s.store.acquire(named(how));
        if (expected.startsWith('ns/'))
          expect(answer).toMatchObject({ granted: true, lease: { proxyID: expected } });
        else expect(answer).toMatchObject({ granted: false, reason: expected });
      });

      it.each(['selector', 'scope'] as const)(
        '%s: no pool a proxy in the block (each part alone matching) → no_match',
        async (how) => {
          const s = await ready();
          const rBlock = parseExitIPTerm('203.0.113.8/30')!;
          expect((await s.store.acquire(request({ target: TARGET, exitIP: rBlock }))).granted).toBe(true);
          expect((await s.store.acquire(named(how, { exitIP: BLOCK }))).granted).toBe(true);
          expect(await s.store.acquire(named(how, { exitIP: rBlock }))).toEqual({
            granted: false,
            reason: 'no_match',
          });
        },
      );
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

      it('answers usage in the order asked, one entry per id asked, unknown ids idle', async () => {
        const { store, lease } = setup({}, [
          proxy('ns/a', { maxLeases: 2, latencyMillis: 1 }),
          proxy('ns/b', { latencyMillis: 2 }),
        ]);
        await lease();
        await lease();
        await lease();
        const usage = await store.usage(['ns/b', 'ns/gone', 'ns/a', 'ns/b']);
        expect(usage.map((u) => u.activeLeases)).toEqual([1, 0, 2, 1]);
        expect(await store.usage([])).toEqual([]);
      });
    });

    describe('configuration', () => {
      it.each<[Partial<ContractOptions>, RegExp]>([
        [{ cooldownSeconds: -1 }, /cooldownSeconds/],
        [{ cooldownSeconds: Number.NaN }, /cooldownSeconds/],
        [{ cooldownSeconds: 600, maxCooldownSeconds: 300 }, /maxCooldownSeconds must be a number >= 600/],
        [{ sessionIdleSeconds: 0 }, /sessionIdleSeconds/],
        [{ statsWindowSeconds: 5 }, /statsWindowSeconds/],
        [{ sweepIntervalMs: 0 }, /sweepIntervalMs/],
        [{ rateLimitCooldownSeconds: -1 }, /rateLimitCooldownSeconds/],
        [{ rateLimitCooldownSeconds: 30, maxRateLimitCooldownSeconds: 20 }, /maxRateLimitCooldownSeconds/],
        [{ suspicionTimeoutSeconds: 0 }, /suspicionTimeoutSeconds/],
        [{ suspicionHoldoffSeconds: -1 }, /suspicionHoldoffSeconds/],
        [{ maxTargetsPerProxy: 0 }, /maxTargetsPerProxy must be a number >= 1/],
        [{ maxTargetEntries: Number.POSITIVE_INFINITY }, /maxTargetEntries/],
      ])('rejects %j with an error naming the option', (options, message) => {
        expect(() => setup(options)).toThrow(message);
      });
    });

    describe('rate_limited: a short cooldown and a streak of its own', () => {
      /** Reports `results` on fresh leases, each just after the previous cooldown; returns their lengths in seconds. */
      async function lengths(
        s: ReturnType<typeof setup>,
        reports: [ReportResult, number?][],
        target = 'example.com',
      ): Promise<(number | null)[]> {
        const out: (number | null)[] = [];
        for (const [result, retryAfterSeconds] of reports) {
          const held = await s.lease();
          const outcome = await s.store.report(held.id, result, {
            target,
            ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
          });
          await s.store.release(held.id);
          const length = outcome?.cooldownUntil
            ? (outcome.cooldownUntil.getTime() - s.clock.now()) / 1000
            : null;
          out.push(length);
          s.clock.advanceSeconds((length ?? 0) + 1);
        }
        return out;
      }

      it.each<[string, Partial<ContractOptions>, [ReportResult, number?][], (number | null)[]]>([
        [
          'starts at 10 s and doubles up to 120 s',
          {},
          [['rate_limited'], ['rate_limited'], ['rate_limited'], ['rate_limited'], ['rate_limited']],
          [10, 20, 40, 80, 120],
        ],
        [
          'lasts exactly the Retry-After the site sent (at least 1 s)',
          {},
          [
            ['rate_limited', 45],
            ['rate_limited', 5],
            ['rate_limited', 0.2],
          ],
          [45, 5, 1],
        ],
        [
          'a Retry-After past the ban maximum is capped by it',
          { maxCooldownSeconds: 1800 },
          [['rate_limited', 99_999]],
          [1800],
        ],
        [
          'keeps apart from the ban streak',
          {},
          [['banned'], ['rate_limited'], ['banned'], ['rate_limited']],
          // The rate-limit streak went cold during the long ban (no rate limit for 120 s).
          [900, 10, 1800, 10],
        ],
        [
          'an ok report resets both streaks',
          {},
          [['banned'], ['rate_limited'], ['ok'], ['banned'], ['rate_limited']],
          [900, 10, null, 900, 10],
        ],
        [
          'follows the configured base and maximum',
          { rateLimitCooldownSeconds: 30, maxRateLimitCooldownSeconds: 60 },
          [['rate_limited'], ['rate_limited'], ['rate_limited']],
          [30, 60, 60],
        ],
        [
          'counts like banned with singleCooldownWindow (the old rule)',
          { singleCooldownWindow: true },
          [['rate_limited'], ['banned'], ['rate_limited']],
          [900, 1800, 3600],
        ],
      ])('%s', async (_case, options, reports, expected) => {
        expect(await lengths(setup(options), reports)).toEqual(expected);
      });

      it('a proxy is cooling down for a target while either cooldown runs', async () => {
        const { clock, store, lease } = setup({ cooldownSeconds: 30, maxCooldownSeconds: 120 });
        const held = await lease({ ttlSeconds: 3600 });
        await store.report(held.id, 'banned', { target: 'example.com' });
        await store.report(held.id, 'rate_limited', { target: 'example.com', retryAfterSeconds: 70 });
        clock.advanceSeconds(60);
        // The ban has ended, the rate limit has not.
        expect(await store.acquire(request({ target: 'example.com' }))).toMatchObject({
          reason: 'all_cooling_down',
          retryAfterMs: 10_000,
        });
        clock.advanceSeconds(9);
        expect(await store.acquire(request({ target: 'example.com' }))).toMatchObject({
          reason: 'all_cooling_down',
        });
        clock.advanceSeconds(1);
        expect(await store.acquire(request({ target: 'example.com' }))).toMatchObject({ granted: true });
      });
    });

    describe('unreachable: the proxy is suspect until a probe has seen it again', () => {
      const ADDRESS = '10.0.0.1:3128';

      async function suspect(
        options: Partial<ContractOptions> = {},
        proxies = [proxy('ns/a'), proxy('ns/b', { ip: '10.0.0.2', latencyMillis: 500 })],
      ) {
        const s = setup(options, proxies);
        const requests: [string, string, string][] = [];
        s.store.onProbeRequest((id, address, token) => requests.push([id, address, token]));
        await subject.probeRequestsReady?.(s.store);
        const held = await s.lease({ target: 'example.com', ttlSeconds: 3600 });
        expect(held.proxyID).toBe('ns/a');
        const raisedAt = s.clock.now();
        const outcome = await s.store.report(held.id, 'unreachable');
        return { ...s, held, outcome, requests, raisedAt };
      }

      const waitFor = async (check: () => boolean): Promise<void> => {
        const deadline = Date.now() + 5000;
        while (!check()) {
          if (Date.now() > deadline) throw new Error('condition not met within 5 s');
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
      };

      /** The token of the first suspicion's probe request (what a passing recheck hands back). */
      const token = async (s: { requests: [string, string, string][] }): Promise<string> => {
        await waitFor(() => s.requests.length >= 1);
        return s.requests[0][2];
      };

      it('a listener that comes after the reports hears of every suspicion still running, once each', async () => {
        // Raised while no health engine listened (a rollout, a new leader): not lost.
        const s = setup({}, [
          proxy('ns/a'),
          proxy('ns/b', { ip: '10.0.0.2' }),
          proxy('ns/c', { ip: '10.0.0.3' }),
        ]);
        const leases = [await s.lease(), await s.lease(), await s.lease()];
        expect(new Set(leases.map((l) => l.proxyID)).size).toBe(3);
        for (const l of leases.slice(0, 2)) await s.store.report(l.id, 'unreachable');
        // A client re-reporting in the gap changes nothing: still one suspicion each.
        expect(await s.store.report(leases[0].id, 'unreachable')).toMatchObject({ probeRequested: false });
        const requests: [string, string, string][] = [];
        s.store.onProbeRequest((id, address, suspicion) => requests.push([id, address, suspicion]));
        await subject.probeRequestsReady?.(s.store);
        await waitFor(() => requests.length >= 2);
        const byID = new Map(requests.map(([id, address, suspicion]) => [id, { address, suspicion }]));
        expect([...byID.keys()].sort()).toEqual(
          leases
            .slice(0, 2)
            .map((l) => l.proxyID)
            .sort(),
        );
        // Each request's token ends its suspicion: both proxies are leasable again.
        for (const [id, { address, suspicion }] of byID)
          await s.store.observeHealth(id, { kind: 'probe_passed', address, suspicion });
        const usage = await s.store.usage(['ns/a', 'ns/b', 'ns/c']);
        expect(usage.map((u) => u.held)).toEqual([undefined, undefined, undefined]);
        expect(await s.store.totals()).toMatchObject({ suspectProxies: 0, suspicionsRaised: 2 });
      });

      it('excludes the proxy from every lease, any target, asks for one probe, and shows it held', async () => {
        const s = await suspect();
        expect(s.outcome).toEqual({
          lease: s.held,
          target: 'example.com',
          suspect: true,
          probeRequested: true,
        });
        await waitFor(() => s.requests.length === 1);
        expect(s.requests).toEqual([['ns/a', ADDRESS, expect.any(String)]]);
        for (const target of ['example.com', 'other.org', undefined]) {
          expect(granted(await s.store.acquire(request({ target }))).proxyID).toBe('ns/b');
        }
        const [a, b] = await s.store.usage(['ns/a', 'ns/b']);
        expect(a).toMatchObject({ held: 'suspect', stats: { unreachable: 1 } });
        expect(b.held).toBeUndefined();
        expect(await s.store.totals()).toMatchObject({
          suspectProxies: 1,
          suspicionsRaised: 1,
          suspicionsExpired: 0,
        });
      });

      it('a second report on a suspect proxy changes nothing and requests no probe', async () => {
        const s = await suspect();
        const again = await s.store.report(s.held.id, 'unreachable');
        expect(again).toMatchObject({ suspect: true, probeRequested: false });
        expect(await s.store.totals()).toMatchObject({ suspectProxies: 1, suspicionsRaised: 1 });
        await waitFor(() => s.requests.length >= 1);
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(s.requests).toHaveLength(1);
      });

      it('moves a session bound to the suspect proxy', async () => {
        const s = setup({}, [proxy('ns/a'), proxy('ns/b', { ip: '10.0.0.2', latencyMillis: 500 })]);
        const held = await s.lease({ session: 's1', ttlSeconds: 3600 });
        expect(held.proxyID).toBe('ns/a');
        await s.store.report(held.id, 'unreachable');
        expect(await s.store.acquire(request({ session: 's1' }))).toMatchObject({
          lease: { proxyID: 'ns/b' },
          session: { key: 's1', moved: true },
        });
      });

      it.each<[string, (s: Awaited<ReturnType<typeof suspect>>) => Promise<void>, boolean]>([
        [
          'the recheck asked for this suspicion passed → leasable again',
          async (s) => {
            await s.store.observeHealth('ns/a', {
              kind: 'probe_passed',
              address: ADDRESS,
              suspicion: await token(s),
            });
          },
          true,
        ],
        [
          'a recheck asked for an earlier suspicion passed → still held',
          async (s) => {
            const earlier = await token(s);
            s.clock.advanceSeconds(60);
            expect(await s.store.report(s.held.id, 'unreachable')).toMatchObject({ probeRequested: true });
            await waitFor(() => s.requests.length === 2);
            expect(s.requests[1][2]).not.toBe(earlier);
            await s.store.observeHealth('ns/a', {
              kind: 'probe_passed',
              address: ADDRESS,
              suspicion: earlier,
            });
          },
          false,
        ],
        [
          'a recheck of another address passed → still held',
          async (s) => {
            await s.store.observeHealth('ns/a', {
              kind: 'probe_passed',
              address: '10.9.9.9:3128',
              suspicion: await token(s),
            });
          },
          false,
        ],
        [
          'the suspicion timed out → leasable again',
          async (s) => {
            s.clock.advanceSeconds(60);
          },
          true,
        ],
        [
          'not yet timed out → still held',
          async (s) => {
            s.clock.advanceSeconds(59);
          },
          false,
        ],
      ])('%s', async (_case, event, leasable) => {
        const s = await suspect({}, [proxy('ns/a')]);
        await event(s);
        const outcome = await s.store.acquire(request());
        expect(outcome.granted).toBe(leasable);
        if (!leasable) expect(outcome).toEqual({ granted: false, reason: 'no_match' });
      });

      it('counts a suspicion that timed out', async () => {
        const s = await suspect({ suspicionTimeoutSeconds: 30 }, [proxy('ns/a')]);
        s.clock.advanceSeconds(30);
        expect(await s.store.totals()).toMatchObject({
          suspectProxies: 0,
          suspicionsRaised: 1,
          suspicionsExpired: 1,
        });
        expect((await s.store.usage(['ns/a']))[0].held).toBeUndefined();
      });

      it('does not believe a report right after a probe cleared the address (the abuse guard)', async () => {
        const s = await suspect({ suspicionHoldoffSeconds: 5 }, [proxy('ns/a')]);
        await s.store.observeHealth('ns/a', {
          kind: 'probe_passed',
          address: ADDRESS,
          suspicion: await token(s),
        });
        s.clock.advanceSeconds(4);
        expect(await s.store.report(s.held.id, 'unreachable')).toMatchObject({
          suspect: false,
          probeRequested: false,
        });
        expect((await s.store.acquire(request())).granted).toBe(true);
        s.clock.advanceSeconds(1);
        expect(await s.store.report(s.held.id, 'unreachable')).toMatchObject({
          suspect: true,
          probeRequested: true,
        });
        expect((await s.store.totals()).suspicionsRaised).toBe(2);
        await waitFor(() => s.requests.length === 2);
      });
    });

    describe('down: the health engine holds a proxy out ahead of its status', () => {
      const ADDRESS = '10.0.0.1:3128';

      it.each<[string, (s: ReturnType<typeof setup>) => Promise<void> | void, boolean]>([
        ['nothing more happens → still held', () => {}, false],
        [
          'up arrives for the address → leasable again',
          async (s) => {
            await s.store.observeHealth('ns/a', { kind: 'up', address: ADDRESS });
          },
          true,
        ],
        [
          'up arrives for another address → still held',
          async (s) => {
            await s.store.observeHealth('ns/a', { kind: 'up', address: '10.9.9.9:3128' });
          },
          false,
        ],
        [
          'the proxy moves to another address → leasable again',
          (s) => {
            s.catalog.proxies = [proxy('ns/a', { ip: '10.0.0.7' })];
          },
          true,
        ],
        [
          'its status catches up (unhealthy), then recovers → leasable again',
          (s) => {
            s.catalog.proxies = [proxy('ns/a', { healthy: false, phase: 'Unhealthy' })];
            s.catalog.proxies = [proxy('ns/a')];
          },
          true,
        ],
      ])('held down: %s', async (_case, event, leasable) => {
        const s = setup();
        await s.store.observeHealth('ns/a', { kind: 'down', address: ADDRESS });
        expect(await s.store.acquire(request())).toEqual({ granted: false, reason: 'no_match' });
        expect((await s.store.usage(['ns/a']))[0].held).toBe('down');
        await event(s);
        // A catalog change reaches a shared book in the background; give it a moment.
        const deadline = Date.now() + 2000;
        let outcome = await s.store.acquire(request());
        while (leasable && !outcome.granted && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, 10));
          outcome = await s.store.acquire(request());
        }
        expect(outcome.granted).toBe(leasable);
      });

      it('a down verdict ends a suspicion of the same address (held as down, not counted as expired)', async () => {
        const s = setup();
        const held = await s.lease({ ttlSeconds: 3600 });
        await s.store.report(held.id, 'unreachable');
        await s.store.observeHealth('ns/a', { kind: 'down', address: ADDRESS });
        expect((await s.store.usage(['ns/a']))[0].held).toBe('down');
        s.clock.advanceSeconds(120);
        expect(await s.store.totals()).toMatchObject({ suspectProxies: 0, suspicionsExpired: 0 });
        expect(await s.store.acquire(request())).toEqual({ granted: false, reason: 'no_match' });
      });
    });

    describe('concurrency: 500 parallel mixed requests', () => {
      it('never exceed maxLeases, never bind a session to two proxies, never lease a proxy cooling down for its target', async () => {
        const proxies = [
          proxy('ns/p1', { maxLeases: 1, latencyMillis: 10 }),
          proxy('ns/p2', { maxLeases: 2, latencyMillis: 20 }),
          proxy('ns/p3', { maxLeases: 3, latencyMillis: 30 }),
          proxy('ns/p5', { maxLeases: 5, latencyMillis: 50 }),
          proxy('ns/cooling', { maxLeases: 4, latencyMillis: 1 }),
        ];
        const { store } = setup({}, proxies);
        const TARGET = 'example.com';
        const bench = granted(await store.acquire(request({ target: TARGET })));
        expect(bench.proxyID).toBe('ns/cooling');
        await store.report(bench.id, 'banned');
        await store.release(bench.id);

        const live = new Map<string, Lease>();
        const violations: string[] = [];
        const check = (lease: Lease) => {
          const count = [...live.values()].filter((l) => l.proxyID === lease.proxyID).length;
          const cap = proxies.find((p) => p.id === lease.proxyID)!.maxLeases;
          if (count > cap) violations.push(`${lease.proxyID} holds ${count} > ${cap}`);
          if (lease.target === TARGET && lease.proxyID === 'ns/cooling')
            violations.push(`cooling proxy leased for ${TARGET}`);
        };
        const lastProxy = new Map<string, string>();
        const ops = Array.from({ length: 500 }, (_, i) => async () => {
          const kind = i % 5;
          if (kind === 4 && live.size > 0) {
            // Release one live lease (a release is over when its promise resolves: the slot is free only then).
            const [id] = live.keys();
            const lease = live.get(id)!;
            await store.release(id);
            live.delete(lease.id);
            return;
          }
          const session = kind === 3 ? `s${i % 7}` : undefined;
          const result = await store.acquire(
            request({
              target: kind % 2 === 0 ? TARGET : undefined,
              ttlSeconds: 600,
              ...(session ? { session } : {}),
            }),
          );
          if (!result.granted) return;
          live.set(result.lease.id, result.lease);
          check(result.lease);
          if (session !== undefined) {
            // A session stays on its proxy unless the answer says it moved.
            const last = lastProxy.get(session);
            if (result.session?.moved !== true && last !== undefined && last !== result.lease.proxyID) {
              violations.push(`session ${session} on ${result.lease.proxyID} and ${last} without moving`);
            }
            lastProxy.set(session, result.lease.proxyID);
          }
          if (kind === 1) await store.report(result.lease.id, 'rate_limited', { target: `t${i}.example` });
        });
        await Promise.all(ops.map((op) => op()));
        expect(violations).toEqual([]);
        const usage = await store.usage(proxies.map((p) => p.id));
        proxies.forEach((p, i) => expect(usage[i].activeLeases).toBeLessThanOrEqual(p.maxLeases));
        const total = usage.reduce((n, u) => n + u.activeLeases, 0);
        expect(total).toBe(live.size);
        expect((await store.totals()).activeLeases).toBe(live.size);
      });
    });

    describe("on the store's own clock (no test clock: Redis's TIME, the process's)", () => {
      // Redis runs on this machine: its clock and this process's agree within this much.
      const SLACK = 1000;
      function own(proxies: ProxyRecord[] = [proxy('ns/a')]) {
        const catalog = new TestCatalog(proxies);
        const store = subject.create({
          catalog,
          logger: silentLogger,
          cooldownSeconds: 60,
          random: () => 0.5,
        });
        created.push(store);
        return { catalog, store };
      }
      const around = (t: number, from: number) => {
        expect(t).toBeGreaterThanOrEqual(from - SLACK);
        expect(t).toBeLessThanOrEqual(Date.now() + SLACK);
      };

      it("grants, counts and explains on the store's time", async () => {
        const { store } = own();
        const from = Date.now();
        const lease = granted(await store.acquire(request({ ttlSeconds: 60 })));
        around(lease.acquiredAt.getTime(), from);
        expect(lease.expiresAt.getTime() - lease.acquiredAt.getTime()).toBe(60_000);
        await store.report(lease.id, 'banned', { target: 'shop.example' });
        const standing = await store.standing('ns/a');
        around(standing.now, from);
        expect(standing.usage).toMatchObject({ activeLeases: 1, stats: { banned: 1 } });
        expect(standing.cooldowns).toHaveLength(1);
        expect(standing.cooldowns[0].until - lease.acquiredAt.getTime()).toBeGreaterThanOrEqual(60_000);
        expect(standing.cooldowns[0].until - standing.now).toBeLessThanOrEqual(60_000);
        expect((await store.usage(['ns/a']))[0]).toMatchObject({ activeLeases: 1, stats: { banned: 1 } });
      });

      it('a suspicion ends when the recheck its request asked for passes', async () => {
        const { store } = own([proxy('ns/a'), proxy('ns/b', { ip: '10.0.0.2', latencyMillis: 500 })]);
        const requests: [string, string, string][] = [];
        store.onProbeRequest((id, address, suspicion) => requests.push([id, address, suspicion]));
        await subject.probeRequestsReady?.(store);
        const lease = granted(await store.acquire(request()));
        expect(lease.proxyID).toBe('ns/a');
        await store.report(lease.id, 'unreachable');
        await store.release(lease.id);
        expect((await store.usage(['ns/a']))[0].held).toBe('suspect');
        expect(granted(await store.acquire(request())).proxyID).toBe('ns/b');
        const deadline = Date.now() + 5000;
        while (requests.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
        const [[id, address, suspicion]] = requests;
        await store.observeHealth(id, { kind: 'probe_passed', address, suspicion });
        expect((await store.usage(['ns/a']))[0].held).toBeUndefined();
        // Back in the ranking: idle and the faster of the two.
        expect(granted(await store.acquire(request())).proxyID).toBe('ns/a');
      });
    });
  });
}
