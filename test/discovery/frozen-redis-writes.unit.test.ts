// A Redis frozen mid-write (SIGSTOP; issue 47 item 3). Two discovery replicas (the real app,
// each with its own RedisLeaseStore and connection) share one real redis-server; a real
// client writes while Redis is frozen and gets 503 outcome_unknown: the script is in Redis's
// socket and runs when it resumes. The retry carries the same request id (Idempotency-Key),
// through the other replica or the client's own retries, and gets that first outcome: no
// phantom lease, every ban counted once.
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import type { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { DiscoveryApiError, DiscoveryClient } from '../../client/src/index.js';
import { createDiscoveryApp } from '../../discovery/app.js';
import { ANONYMOUS_OWNER } from '../../book/lease-owner.js';
import { connectRedis, whenReady } from '../../book/redis-connection.js';
import { RedisLeaseStore } from '../../book/redis-lease-store.js';
import { DiscoveryServer } from '../../discovery/server.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';
import { eventually, proxy, silentLogger, TestCatalog } from '../book/fixtures.js';

const REDIS_TIMEOUT_MS = 300;
const COOLDOWN_SECONDS = 900;

interface Replica {
  store: RedisLeaseStore;
  redis: Redis;
  server: DiscoveryServer;
  url: string;
}

let redis: RedisServer;
let admin: Redis;
let books = 0;
const replicas: Replica[] = [];

async function startReplicas(prefix: string): Promise<[Replica, Replica]> {
  const started: Replica[] = [];
  for (let i = 0; i < 2; i++) {
    const connection = connectRedis({ url: redis.url, logger: silentLogger, timeoutMs: REDIS_TIMEOUT_MS });
    await whenReady(connection);
    const catalog = new TestCatalog([proxy('ns/p0', { maxLeases: 5 }), proxy('ns/p1', { latencyMillis: 5 })]);
    const store = new RedisLeaseStore({
      redis: connection,
      catalog,
      logger: silentLogger,
      keyPrefix: prefix,
      cooldownSeconds: COOLDOWN_SECONDS,
    });
    const app = createDiscoveryApp({
      catalog,
      leases: store,
      logger: silentLogger,
      registry: new Registry(),
    });
    const server = new DiscoveryServer(app, { host: '127.0.0.1', port: 0 }, silentLogger);
    await server.start();
    // As the process does: the scripts are in Redis before the first call (else a write sent
    // while Redis is frozen would be the EVALSHA's NOSCRIPT, applied by nobody).
    await store.start();
    await store.loadScripts();
    started.push({ store, redis: connection, server, url: server.url });
  }
  replicas.push(...started);
  return started as [Replica, Replica];
}

/** Freezes Redis for the call, and resumes it once the call has failed. */
async function whileFrozen<T>(call: () => Promise<T>): Promise<T | unknown> {
  redis.pause();
  try {
    return await call().catch((err: unknown) => err);
  } finally {
    redis.resume();
    await eventually(async () => (await admin.ping().catch(() => '')) === 'PONG', 10_000);
  }
}

const client = (replica: Replica, unavailableRetries = 0) =>
  new DiscoveryClient({ baseUrl: replica.url, unavailableRetries, timeoutMs: 15_000 });

beforeAll(async () => {
  redis = await startRedisServer();
  admin = redis.client();
});

afterEach(async () => {
  redis.resume();
  for (const { store, redis: connection, server } of replicas.splice(0)) {
    await store.stop();
    store.close();
    await server.stop();
    connection.disconnect();
  }
});

afterAll(async () => {
  await redis.stop();
});

describe('a Redis frozen mid-write (SIGSTOP), then resumed', () => {
  it('a lease whose answer was lost, retried through the other replica with its request id: one lease', async () => {
    const [a, b] = await startReplicas(`frozen-${++books}`);
    const failed = await whileFrozen(() => client(a).lease({ ttlSeconds: 60 }, { requestID: 'lease-1' }));
    // The write reached Redis and no answer came: the API says the outcome is unknown.
    expect(failed).toBeInstanceOf(DiscoveryApiError);
    expect(failed).toMatchObject({ status: 503, code: 'outcome_unknown', retryAfterSeconds: 1 });
    // Resumed, Redis ran the frozen script: the book holds that lease, which nobody was told of.
    await eventually(async () => (await b.store.totals()).activeLeases === 1, 30_000);
    const lease = await client(b).lease({ ttlSeconds: 60 }, { requestID: 'lease-1' });
    // The retry gets it, not a second one: no phantom lease holds a slot.
    expect((await b.store.totals()).activeLeases).toBe(1);
    expect(await a.store.get(lease.leaseID, ANONYMOUS_OWNER)).toBeDefined();
    await client(a).release(lease.leaseID);
    expect((await a.store.totals()).activeLeases).toBe(0);
  });

  it("a ban the client itself retries across the freeze: counted once, one cooldown, the streak's first rest", async () => {
    const [a] = await startReplicas(`frozen-${++books}`);
    const lease = await client(a).lease({ ttlSeconds: 60, target: 'shop.example' });
    redis.pause();
    // The client retries each 503 after its Retry-After (1 s), the same request id every time;
    // every attempt sent while frozen waits in Redis's socket and runs when it resumes.
    const answer = client(a, 20).report(lease.leaseID, 'banned');
    await new Promise((resolve) => setTimeout(resolve, 2500));
    redis.resume();
    const report = await answer;
    const { usage, cooldowns, now } = await a.store.standing(lease.proxy.id);
    expect(usage.stats.banned).toBe(1);
    expect(cooldowns).toEqual([expect.objectContaining({ target: 'shop.example' })]);
    expect(cooldowns[0].until).toBe(Date.parse(report.cooldownUntil!));
    // One ban's rest (±10 %), not a doubled streak's.
    expect(cooldowns[0].until - now).toBeLessThanOrEqual(COOLDOWN_SECONDS * 1100);
  });

  it('a batch frozen mid-write is applied whole, once: its retry through the other replica records nothing again', async () => {
    const [a, b] = await startReplicas(`frozen-${++books}`);
    const first = await client(a).lease({ ttlSeconds: 60, target: 'shop.example' });
    const second = await client(a).lease({ ttlSeconds: 60, target: 'shop.example' });
    const batch = [
      { leaseID: first.leaseID, result: 'ok' as const },
      { leaseID: second.leaseID, result: 'banned' as const, release: true },
    ];
    const failed = await whileFrozen(() => client(a).reportMany(batch, { requestID: 'batch-1' }));
    expect(failed).toMatchObject({ status: 503, code: 'outcome_unknown' });
    const { items } = await client(b).reportMany(batch, { requestID: 'batch-1' });
    expect(items).toEqual([
      expect.objectContaining({ leaseID: first.leaseID, result: 'ok' }),
      expect.objectContaining({ leaseID: second.leaseID, result: 'banned', released: true }),
    ]);
    const stats = (await b.store.usage([first.proxy.id, second.proxy.id])).map((u) => u.stats);
    expect(stats.reduce((n, s) => n + s.ok, 0)).toBe(1);
    expect(stats.reduce((n, s) => n + s.banned, 0)).toBe(1);
    expect((await b.store.totals()).activeLeases).toBe(1);
  });
});
