import type { ProxyRecord } from '../../book/catalog.js';
import type { AcquireResult, Lease, LeaseRequest, ReportResult } from '../../book/lease-store.js';
import { MemoryLeaseStore, type MemoryLeaseStoreOptions } from '../../book/memory-lease-store.js';
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

// What only the memory store does, or does at its own scale. Everything every store must do is
// the LeaseStore contract (lease-store-contract.ts), which runs against this store too
// (lease-store-contract.memory.unit.test.ts).
describe('MemoryLeaseStore', () => {
  describe('expiry', () => {
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
        'a recheck asked for an earlier suspicion passed',
        async (s) =>
          s.store.observeHealth('ns/a', {
            kind: 'probe_passed',
            address: A,
            suspicion: String(s.reportedAt - 1),
          }),
        'ns/b',
      ],
      [
        'a probe of an old address passed',
        async (s) =>
          s.store.observeHealth('ns/a', {
            kind: 'probe_passed',
            address: '10.9.9.9:3128',
            suspicion: String(s.reportedAt),
          }),
        'ns/b',
      ],
      [
        'the engine found it unhealthy',
        async (s) => s.store.observeHealth('ns/a', { kind: 'down', address: A }),
        'ns/b',
      ],
      [
        'the recheck asked for this suspicion passed',
        async (s) =>
          s.store.observeHealth('ns/a', {
            kind: 'probe_passed',
            address: A,
            suspicion: String(s.reportedAt),
          }),
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
      await s.store.observeHealth('ns/a', {
        kind: 'probe_passed',
        address: A,
        suspicion: String(s.clock.now()),
      });
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
});
