// A token's lease and cooldown quotas at the gateway door, behind two gateway replicas (each a
// process of its own: its own ledger) on one real Redis book, beside the API's door: the
// book counts the token's leases and cooldowns, so the quota is one for every replica and
// both doors (each replica counting its own let a token hold its quota at each).
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import type { Redis } from 'ioredis';
import { connectRedis } from '../../book/redis-connection.js';
import { RedisLeaseStore } from '../../book/redis-lease-store.js';
import { TenantLedger } from '../../book/tenant-quotas.js';
import { OPEN_POLICY } from '../../book/token-scope.js';
import { gatewayBook } from '../../handlers/gateway-book.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';
import { eventually, proxy, silentLogger, TestCatalog } from '../book/fixtures.js';

const QUOTAS = { leases: 3, sessions: 100, cooldowns: 2, reportsPerSecond: 100 };
const TARGET = 'shop.example';

let server: RedisServer;
let books = 0;
const opened: { store: RedisLeaseStore; redis: Redis }[] = [];

beforeAll(async () => {
  server = await startRedisServer();
});

afterEach(() => {
  for (const { store, redis } of opened.splice(0)) {
    store.close();
    redis.disconnect();
  }
});

afterAll(async () => {
  await server.stop();
});

/** `n` replicas of one book, each a process with its own ledger (its quotas' limits). */
async function replicas(n: number) {
  const keyPrefix = `gateway-quotas-${++books}`;
  const out = [];
  for (let i = 0; i < n; i++) {
    const redis = connectRedis({ url: server.url, logger: silentLogger, timeoutMs: 15_000 });
    await eventually(async () => (await redis.ping().catch(() => '')) === 'PONG', 15_000);
    const catalog = new TestCatalog(
      Array.from({ length: 4 }, (_, j) => proxy(`ns/p${j}`, { latencyMillis: j, maxLeases: 10 })),
    );
    const store = new RedisLeaseStore({ redis, catalog, logger: silentLogger, keyPrefix });
    opened.push({ store, redis });
    await store.fleetSettled();
    const book = gatewayBook(
      store,
      catalog,
      () => OPEN_POLICY,
      () => {},
      undefined,
      new TenantLedger(QUOTAS, 60_000),
    );
    out.push({ store, book });
  }
  return out;
}

describe("a token's quotas at the gateway, over two replicas of one Redis book", () => {
  it(`holds ${QUOTAS.leases} leases in all, the API's counted with them`, async () => {
    const [a, b] = await replicas(2);
    const lease = (replica: typeof a) =>
      replica.book.lease({ owner: 'team-a', selector: {}, target: TARGET, ttlSeconds: 600 });
    // One through the API's door (the same book, its own quota with it), then the gateways.
    expect(
      (await a.store.acquire({ selector: {}, ttlSeconds: 600, owner: 'team-a', leaseQuota: 3 })).granted,
    ).toBe(true);
    const answers = [await lease(a), await lease(b), await lease(a), await lease(b)];
    expect(answers.map((r) => (r.granted ? 'granted' : r.reason))).toEqual([
      'granted',
      'granted',
      'lease_quota',
      'lease_quota',
    ]);
    expect((await lease(a)).granted ? 'granted' : 'refused').toBe('refused');
    // Another token is not held to team-a's count.
    const other = await b.book.lease({ owner: 'team-b', selector: {}, target: TARGET, ttlSeconds: 600 });
    expect(other.granted).toBe(true);
  });

  it(`keeps ${QUOTAS.cooldowns} cooldowns running in all: a ban through the second replica beyond them is refused`, async () => {
    const [a, b] = await replicas(2);
    const leases = [];
    for (const replica of [a, b, a]) {
      const r = await replica.book.lease({ owner: 'team-a', selector: {}, target: TARGET, ttlSeconds: 600 });
      if (!r.granted) throw new Error(r.reason);
      leases.push(r.leaseID);
    }
    const ban = (replica: typeof a, leaseID: string, target: string) =>
      replica.book.report(leaseID, 'banned', { target }, 'team-a');
    expect(await ban(a, leases[0], 'x.example')).toBeUndefined();
    expect(await ban(b, leases[1], 'y.example')).toBeUndefined();
    expect(await ban(a, leases[2], 'z.example')).toBe('cooldown_quota');
    // One of its own running pairs, through the other replica: no new one.
    expect(await ban(b, leases[0], 'x.example')).toBeUndefined();
  });
});
