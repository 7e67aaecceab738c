// The indexed lease path (catalog change events → free-proxy index, deadline heap, session and
// target books) must choose exactly what a plain scan of the whole fleet would. A seeded
// random walk of catalog changes, leases, renewals, releases, reports and clock moves runs
// against the store and against a deliberately naive reference model, comparing every answer.
import type { ProxyRecord } from '../../book/catalog.js';
import { isLeasable, refusal } from '../../book/lease-selection.js';
import type { LeaseRequest, ReportResult } from '../../book/lease-store.js';
import { MemoryLeaseStore } from '../../book/memory-lease-store.js';
import { matchesSelector } from '../../book/selector.js';
import { FakeClock, proxy, silentLogger, TestCatalog } from './fixtures.js';
import { seededRandom as prng } from '../harness/seeded-random.js';

const BASE_MS = 60_000;
const MAX_MS = 240_000;
const idsFor = (count: number) =>
  Array.from({ length: count }, (_, i) => `ns/p${String(i).padStart(3, '0')}`);
const SELECTORS: Record<string, string>[] = [
  {},
  { geo: 'eu' },
  { geo: 'us' },
  { purpose: 'crawl' },
  { geo: 'eu', purpose: 'crawl' },
  { geo: 'ap', purpose: 'api' },
];
const TARGETS = [undefined, 'a.example', 'b.example'];
const SESSIONS = [undefined, undefined, 's0', 's1', 's2', 's3'];

interface RefLease {
  id: string;
  proxyID: string;
  target?: string;
  ttlMs: number;
  expiresAt: number;
}

interface RefPair {
  streak: number;
  until: number;
  ok: number;
  bad: number;
}

/** The rules, written as a scan over everything with no index at all. */
class Reference {
  readonly records = new Map<string, ProxyRecord>();
  readonly leases = new Map<string, RefLease>();
  private readonly sessions = new Map<string, string>();
  private readonly pairs = new Map<string, RefPair>();

  load(proxyID: string, now: number): number {
    let n = 0;
    for (const l of this.leases.values()) if (l.proxyID === proxyID && l.expiresAt > now) n++;
    return n;
  }

  live(id: string, now: number): RefLease | undefined {
    const l = this.leases.get(id);
    return l !== undefined && l.expiresAt > now ? l : undefined;
  }

  private pair(proxyID: string, target: string): RefPair | undefined {
    return this.pairs.get(`${proxyID} ${target}`);
  }

  private cooling(proxyID: string, target: string, now: number): boolean {
    return (this.pair(proxyID, target)?.until ?? 0) > now;
  }

  acquire(req: LeaseRequest, now: number, newID: () => string) {
    const target = req.target ?? '';
    const loads = new Map<string, number>();
    for (const l of this.leases.values())
      if (l.expiresAt > now) loads.set(l.proxyID, (loads.get(l.proxyID) ?? 0) + 1);
    const load = (id: string) => loads.get(id) ?? 0;
    const eligible = (p: ProxyRecord) =>
      isLeasable(p) &&
      matchesSelector(p.attributes, req.selector) &&
      load(p.id) < p.maxLeases &&
      !this.cooling(p.id, target, now);
    let chosen: ProxyRecord | undefined;
    let moved = false;
    const bound = req.session === undefined ? undefined : this.sessions.get(req.session);
    if (bound !== undefined) {
      const p = this.records.get(bound);
      if (p !== undefined && eligible(p)) chosen = p;
      else moved = true;
    }
    if (chosen === undefined) {
      const key = (p: ProxyRecord) => {
        const pair = this.pair(p.id, target);
        const failing = pair !== undefined && pair.bad > 0;
        return [
          this.load(p.id, now),
          failing ? 1 : 0,
          failing ? pair.bad / (pair.bad + pair.ok) : 0,
          p.latencyMillis,
        ];
      };
      const ranked = [...this.records.values()]
        .filter(eligible)
        .map((p) => ({ p, k: key(p) }))
        .sort((a, b) => {
          for (let i = 0; i < a.k.length; i++) if (a.k[i] !== b.k[i]) return a.k[i] - b.k[i];
          return a.p.id < b.p.id ? -1 : 1;
        })
        .map(({ p }) => p);
      chosen = ranked[0];
    }
    if (chosen === undefined) {
      const matches = [...this.records.values()].filter(
        (p) => isLeasable(p) && matchesSelector(p.attributes, req.selector),
      );
      return {
        reason: refusal(matches.length, matches.filter((p) => this.cooling(p.id, target, now)).length),
      };
    }
    const lease: RefLease = {
      id: newID(),
      proxyID: chosen.id,
      ...(req.target === undefined ? {} : { target: req.target }),
      ttlMs: req.ttlSeconds * 1000,
      expiresAt: now + req.ttlSeconds * 1000,
    };
    this.leases.set(lease.id, lease);
    if (req.session !== undefined) this.sessions.set(req.session, chosen.id);
    return { proxyID: chosen.id, leaseID: lease.id, moved: req.session === undefined ? undefined : moved };
  }

  report(
    id: string,
    result: ReportResult,
    target: string | undefined,
    now: number,
  ): number | undefined | 'gone' {
    const l = this.live(id, now);
    if (l === undefined) return 'gone';
    const key = `${l.proxyID} ${target ?? l.target ?? ''}`;
    let pair = this.pairs.get(key);
    if (result === 'ok') {
      if (pair !== undefined) {
        pair.streak = 0;
        pair.ok++;
      }
      return undefined;
    }
    if (pair === undefined) {
      pair = { streak: 0, until: 0, ok: 0, bad: 0 };
      this.pairs.set(key, pair);
    }
    if (pair.until + MAX_MS <= now) pair.streak = 0;
    pair.streak++;
    pair.bad++;
    pair.until = Math.max(pair.until, now + Math.min(MAX_MS, BASE_MS * 2 ** (pair.streak - 1)));
    return pair.until;
  }

  renew(id: string, ttlSeconds: number | undefined, now: number): number | undefined {
    const l = this.live(id, now);
    if (l === undefined) return undefined;
    l.expiresAt = Math.max(l.expiresAt, now + (ttlSeconds === undefined ? l.ttlMs : ttlSeconds * 1000));
    return l.expiresAt;
  }

  endSession(key: string): void {
    this.sessions.delete(key);
  }
}

describe('the indexed lease path against a scan of the whole fleet', () => {
  // 24 proxies: crowded, every rule in play; 600: the index's sorted blocks split and merge.
  it.each([
    [1, 24],
    [2, 24],
    [3, 24],
    [4, 600],
  ])('agrees on every answer over 2,500 random steps (seed %i, %i proxies)', async (seed, fleetSize) => {
    const IDS = idsFor(fleetSize);
    const random = prng(seed);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
    const clock = new FakeClock();
    const catalog = new TestCatalog();
    let counter = 0;
    const store = new MemoryLeaseStore({
      catalog,
      logger: silentLogger,
      clock,
      cooldownSeconds: BASE_MS / 1000,
      maxCooldownSeconds: MAX_MS / 1000,
      // The reference models one cooldown rule for every bad report; this walk checks the index, not the rule.
      singleCooldownWindow: true,
      random: () => 0.5,
      // Large enough that no report leaves the window during the walk: the reference counts all.
      statsWindowSeconds: 15_000,
      sessionIdleSeconds: 1_000_000,
      newID: () => `lease-${++counter}`,
    });
    let refCounter = 0;
    const ref = new Reference();
    const randomProxy = (id: string): ProxyRecord => {
      const attributes: Record<string, string> = {};
      if (random() < 0.9) attributes.geo = pick(['eu', 'us', 'ap']);
      if (random() < 0.7) attributes.purpose = pick(['crawl', 'api']);
      return proxy(id, {
        attributes,
        healthy: random() < 0.85,
        ip: random() < 0.05 ? '' : '10.0.0.1',
        phase: random() < 0.05 ? 'Deleting' : 'Ready',
        maxLeases: Math.floor(random() * 5),
        latencyMillis: pick([10, 20, 30, 40]),
      });
    };
    for (const id of IDS) if (random() < 0.7) ref.records.set(id, randomProxy(id));
    catalog.replaceAll([...ref.records.values()]);

    let grants = 0;
    let refusals = 0;
    for (let step = 0; step < 2500; step++) {
      const now = clock.now();
      const roll = random();
      const liveIDs = [...ref.leases.keys()];
      if (roll < 0.08) {
        const id = pick(IDS);
        const record = randomProxy(id);
        ref.records.set(id, record);
        catalog.upsert(record);
      } else if (roll < 0.1) {
        const id = pick(IDS);
        ref.records.delete(id);
        catalog.remove(id);
      } else if (roll < 0.55) {
        const req: LeaseRequest = {
          selector: pick(SELECTORS),
          ttlSeconds: 1 + Math.floor(random() * 20),
          ...(() => {
            const target = pick(TARGETS);
            return target === undefined ? {} : { target };
          })(),
          ...(() => {
            const session = pick(SESSIONS);
            return session === undefined ? {} : { session };
          })(),
        };
        const expected = ref.acquire(req, now, () => `lease-${++refCounter}`);
        const actual = await store.acquire(req);
        const seen = actual.granted
          ? {
              proxyID: actual.lease.proxyID,
              leaseID: actual.lease.id,
              moved: actual.session?.moved,
            }
          : { reason: actual.reason };
        expect({ step, ...seen }).toEqual({ step, ...expected });
        if (actual.granted) grants++;
        else refusals++;
      } else if (roll < 0.65 && liveIDs.length > 0) {
        const id = pick(liveIDs);
        ref.leases.delete(id);
        await store.release(id);
      } else if (roll < 0.8 && liveIDs.length > 0) {
        const id = pick(liveIDs);
        const result = pick<ReportResult>(['ok', 'banned', 'rate_limited']);
        const target = random() < 0.3 ? pick(TARGETS) : undefined;
        const expected = ref.report(id, result, target, now);
        const actual = await store.report(id, result, { target });
        expect({ step, until: actual === undefined ? 'gone' : actual.cooldownUntil?.getTime() }).toEqual({
          step,
          until: expected,
        });
      } else if (roll < 0.88 && liveIDs.length > 0) {
        const id = pick(liveIDs);
        const ttl = random() < 0.5 ? undefined : 1 + Math.floor(random() * 20);
        const expected = ref.renew(id, ttl, now);
        const actual = await store.renew(id, ttl);
        expect({ step, expiresAt: actual?.lease.expiresAt.getTime() }).toEqual({ step, expiresAt: expected });
      } else if (roll < 0.9) {
        const key = pick(SESSIONS.filter((s) => s !== undefined));
        ref.endSession(key);
        await store.endSession(key);
      } else {
        clock.advanceSeconds(Math.floor(random() * 3000) / 1000);
      }
      if (step % 100 === 0) {
        const usage = await store.usage(IDS);
        const loads = usage.map((u) => u.activeLeases);
        expect({ step, loads }).toEqual({ step, loads: IDS.map((id) => ref.load(id, clock.now())) });
      }
    }
    // The walk must have exercised both outcomes plenty (a large fleet rarely refuses).
    expect(grants).toBeGreaterThan(200);
    if (fleetSize < 100) expect(refusals).toBeGreaterThan(50);
  });
});
