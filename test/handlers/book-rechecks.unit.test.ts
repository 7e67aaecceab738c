// The shared book's suspicions and the health engine's rechecks (issue 47, items 1 and 2), with
// real parts: a real redis-server (the Redis store on Redis's own TIME, no test clock), the
// memory store, a real HealthEngine probing through real forward proxies on loopback, and the
// runner's own wiring (handlers/book-rechecks.ts).
import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Redis } from 'ioredis';
import pino from 'pino';
import { Registry } from 'prom-client';
import { followBookRechecks } from '../../handlers/book-rechecks.js';
import { HealthEngine, type ProbeTarget } from '../../health/index.js';
import { systemClock, type Clock } from '../../health/clock.js';
import type { LeaseStore, ProxyStanding, ProxyUsage } from '../../book/lease-store.js';
import { MemoryLeaseStore } from '../../book/memory-lease-store.js';
import { connectRedis } from '../../book/redis-connection.js';
import { RedisLeaseStore } from '../../book/redis-lease-store.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';
import { proxy, silentLogger, TestCatalog } from '../book/fixtures.js';
import { TestForwardProxy } from '../health/forward-proxy.js';
import { startHttpTarget, type TestTarget } from '../health/targets.js';

const RECHECK_MILLIS = 1000;
const SKEWS = [-5000, 5000];

let server: RedisServer;
let redis: Redis;
let target: TestTarget;
let books = 0;
const cleanup: Array<() => unknown> = [];

beforeAll(async () => {
  server = await startRedisServer();
  redis = connectRedis({ url: server.url, logger: silentLogger, timeoutMs: 15_000 });
  await redis.ping().catch(async () => {
    await new Promise((resolve) => redis.once('ready', resolve));
  });
  target = await startHttpTarget();
});

afterEach(async () => {
  jest.restoreAllMocks();
  for (const undo of cleanup.splice(0).reverse()) await undo();
});

afterAll(async () => {
  redis.disconnect();
  await server.stop();
  await target.close();
});

type Kind = 'redis' | 'memory';

/** A store of this kind on its own clock: Redis's TIME (no test clock), or the process's. */
function book(
  kind: Kind,
  catalog: TestCatalog,
  options: { suspicionTimeoutSeconds?: number } = {},
): LeaseStore {
  if (kind === 'memory') {
    const store = new MemoryLeaseStore({ catalog, logger: silentLogger, ...options });
    cleanup.push(() => store.close());
    return store;
  }
  const store = new RedisLeaseStore({
    redis,
    catalog,
    logger: silentLogger,
    keyPrefix: `rechecks-${++books}`,
    ...options,
  });
  cleanup.push(() => store.close());
  return store;
}

async function forwardProxies(n: number): Promise<TestForwardProxy[]> {
  const out: TestForwardProxy[] = [];
  for (let i = 0; i < n; i++) {
    const p = await TestForwardProxy.start('healthy');
    cleanup.push(() => p.close());
    out.push(p);
  }
  return out;
}

const keyOf = (p: TestForwardProxy) => `ns/p${p.port}`;

/** The catalog's records for these proxies (healthy, at their loopback address). */
const records = (ps: TestForwardProxy[]) =>
  ps.map((p) => proxy(keyOf(p), { ip: '127.0.0.1', port: p.port, latencyMillis: p.port }));

/**
 * A health engine on `clock` probing these proxies (scheduled probes far away: only a
 * recheck can end a suspicion within the test), wired to the store as the runner wires it.
 */
function engine(store: LeaseStore, ps: TestForwardProxy[], clock: Clock = systemClock): HealthEngine {
  const e = new HealthEngine({
    logger: pino({ level: 'silent' }),
    registry: new Registry(),
    clock,
    jitter: 0,
    random: () => 0.99,
    recheckIntervalMillis: RECHECK_MILLIS,
  });
  const targets = new Map<string, ProbeTarget>();
  for (const p of ps) {
    const t: ProbeTarget = {
      key: keyOf(p),
      host: '127.0.0.1',
      port: p.port,
      probeURL: target.url,
      intervalSeconds: 600,
      timeoutSeconds: 2,
      failureThreshold: 2,
      successThreshold: 1,
      expectedStatusCodes: [204],
    };
    targets.set(t.key, t);
    e.upsert(t);
  }
  const unwire = followBookRechecks({
    engine: e,
    store,
    probedAddress: (key) => {
      const t = targets.get(key);
      return t && `${t.host}:${t.port}`;
    },
    tell: (key, observation) => void store.observeHealth(key, observation),
  });
  e.start();
  cleanup.push(() => e.stop(), unwire);
  return e;
}

/** Leases each proxy once (the catalog's latency order) and reports it unreachable. */
async function raise(store: LeaseStore, n: number): Promise<string[]> {
  const leaseIDs: string[] = [];
  for (let i = 0; i < n; i++) {
    const result = await store.acquire({ selector: {}, ttlSeconds: 3600 });
    if (!result.granted) throw new Error(`no lease: ${result.reason}`);
    expect(await store.report(result.lease.id, 'unreachable')).toMatchObject({
      suspect: true,
      probeRequested: true,
    });
    leaseIDs.push(result.lease.id);
  }
  return leaseIDs;
}

/** Milliseconds until no proxy of these is held (fails after 10 s). */
async function untilLeasable(store: LeaseStore, ids: string[]): Promise<number> {
  const start = performance.now();
  for (;;) {
    const usage = await store.usage(ids);
    if (usage.every((u) => u.held === undefined)) return performance.now() - start;
    if (performance.now() - start > 10_000) throw new Error(`still held: ${JSON.stringify(usage)}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe.each<Kind>(['redis', 'memory'])('the %s book: rechecks survive any gap', (kind) => {
  it('suspicions raised while no engine listened each end within one recheck interval of its start', async () => {
    const ps = await forwardProxies(3);
    const catalog = new TestCatalog(records(ps));
    const store = book(kind, catalog);
    // The controller is stopped (a rollout, a leader change): nothing listens.
    const leaseIDs = await raise(store, 3);
    // A client re-reporting in the gap: the suspicion is not renewed nor a second one raised.
    for (const id of leaseIDs)
      expect(await store.report(id, 'unreachable')).toMatchObject({ probeRequested: false });
    expect((await store.usage(ps.map(keyOf))).map((u) => u.held)).toEqual(['suspect', 'suspect', 'suspect']);
    engine(store, ps);
    const took = await untilLeasable(store, ps.map(keyOf));
    expect(took).toBeLessThan(RECHECK_MILLIS);
    expect(await store.totals()).toMatchObject({
      suspectProxies: 0,
      suspicionsRaised: 3,
      suspicionsExpired: 0,
    });
  });

  it.each(SKEWS)(
    'a controller whose clock is off by %i ms still ends a suspicion within one recheck',
    async (skew) => {
      const ps = await forwardProxies(1);
      const store = book(kind, new TestCatalog(records(ps)));
      engine(store, ps, { ...systemClock, now: () => Date.now() + skew });
      if (store instanceof RedisLeaseStore) await store.subscribed();
      await raise(store, 1);
      expect(await untilLeasable(store, [keyOf(ps[0])])).toBeLessThan(RECHECK_MILLIS);
    },
  );
});

describe('the Redis book reads on one clock: a replica whose clock is off by ±5 s answers the same', () => {
  it.each(SKEWS)('usage and standing with the replica clock off by %i ms', async (skew) => {
    const catalog = new TestCatalog([proxy('ns/a', { maxLeases: 5 }), proxy('ns/b', { ip: '10.0.0.2' })]);
    // Everything here ends within 5 s: a clock off by 5 s would misread each of them.
    const store = book('redis', catalog, { suspicionTimeoutSeconds: 4 });
    const lease = async (ttlSeconds: number) => {
      const result = await store.acquire({ selector: {}, ttlSeconds });
      if (!result.granted) throw new Error(result.reason);
      return result.lease;
    };
    const short = await lease(3);
    expect(short.proxyID).toBe('ns/a');
    await store.report(short.id, 'rate_limited', { target: 'shop.example', retryAfterSeconds: 3 });
    const other = await lease(3);
    expect(other.proxyID).toBe('ns/b');
    await store.report(other.id, 'unreachable');
    const read = async (): Promise<[ProxyUsage[], Omit<ProxyStanding, 'now'>, number]> => {
      const usage = await store.usage(['ns/a', 'ns/b']);
      const { now, ...standing } = await store.standing('ns/a');
      return [usage, standing, now];
    };
    const before = Date.now();
    const [usage, standing, now] = await read();
    expect(usage.map((u) => [u.activeLeases, u.held])).toEqual([
      [1, undefined],
      [1, 'suspect'],
    ]);
    expect(standing.cooldowns).toEqual([{ target: 'shop.example', until: expect.any(Number), agreed: true }]);
    const real = Date.now;
    jest.spyOn(Date, 'now').mockImplementation(() => real() + skew);
    const [skewedUsage, skewedStanding, skewedNow] = await read();
    jest.restoreAllMocks();
    expect(skewedUsage).toEqual(usage);
    expect(skewedStanding).toEqual(standing);
    // The reading's time is Redis's, not the skewed one.
    expect(Math.abs(skewedNow - now)).toBeLessThan(Math.abs(skew) / 2);
    expect(now).toBeGreaterThanOrEqual(before - 1000);
  });
});

describe('the Redis book tells its listeners again after a reconnect', () => {
  it('a suspicion raised while the subscriber was disconnected still reaches the listener', async () => {
    const catalog = new TestCatalog([proxy('ns/a')]);
    const store = book('redis', catalog) as RedisLeaseStore;
    const requests: string[] = [];
    store.onProbeRequest((id) => requests.push(id));
    await store.subscribed();
    // Drop the subscriber's connection (as a network blip or a Redis restart would); the
    // report right after it is published to nobody while ioredis waits to reconnect.
    expect(Number(await redis.call('CLIENT', 'KILL', 'TYPE', 'pubsub'))).toBeGreaterThanOrEqual(1);
    const lease = await store.acquire({ selector: {}, ttlSeconds: 3600 });
    if (!lease.granted) throw new Error(lease.reason);
    expect(await store.report(lease.lease.id, 'unreachable')).toMatchObject({ probeRequested: true });
    const deadline = Date.now() + 5000;
    while (requests.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(requests).toContain('ns/a');
  });
});
