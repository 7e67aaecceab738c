// What a refusal costs (issue 47 item 4): at 1,000 proxies every one full, or every one cooling
// down for the target, the first refusal walks them; the same request refused again while
// nothing changed walks nothing: the memory store reads no proxy's cooldown, the Redis store
// runs one small script (TIME and one HGET), whatever the fleet's size. The rule's edges
// (what ends a remembered refusal) are the contract's, on both stores.
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Redis } from 'ioredis';
import type { LeaseRequest, LeaseStore } from '../../book/lease-store.js';
import { MemoryLeaseStore } from '../../book/memory-lease-store.js';
import { connectRedis, whenReady } from '../../book/redis-connection.js';
import { RedisLeaseStore } from '../../book/redis-lease-store.js';
import { TargetBook } from '../../book/target-book.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';
import { eventually, proxy, silentLogger, TestCatalog } from './fixtures.js';

const FLEET = 1000;
const TARGET = 'shop.example';
const request = (): LeaseRequest => ({ selector: {}, ttlSeconds: 300, target: TARGET });
const fleet = () =>
  new TestCatalog(
    Array.from({ length: FLEET }, (_, i) => proxy(`ns/p${i}`, { maxLeases: 1, latencyMillis: i })),
  );

/** Every proxy banned for the target (and idle): each lease is reported banned and released. */
async function banEveryone(store: LeaseStore): Promise<void> {
  for (let i = 0; i < FLEET; i++) {
    const result = await store.acquire(request());
    if (!result.granted) throw new Error(`lease ${i}: ${result.reason}`);
    await store.reportMany([{ leaseID: result.lease.id, result: 'banned', release: true }]);
  }
}

async function fillEveryone(store: LeaseStore): Promise<void> {
  for (let i = 0; i < FLEET; i++) {
    if (!(await store.acquire(request())).granted) throw new Error(`lease ${i} refused`);
  }
}

describe('the memory store', () => {
  it.each([
    ['all_cooling_down', banEveryone],
    ['all_busy', fillEveryone],
  ] as const)('%s again reads no cooldown: the walk is not made again', async (reason, arrange) => {
    const store = new MemoryLeaseStore({ catalog: fleet(), logger: silentLogger });
    await arrange(store);
    const reads = jest.spyOn(TargetBook.prototype, 'coolingDown');
    const forTarget = jest.spyOn(TargetBook.prototype, 'forTarget');
    try {
      expect(await store.acquire(request())).toMatchObject({ granted: false, reason });
      const walked = reads.mock.calls.length + forTarget.mock.calls.length;
      expect(walked).toBeGreaterThan(0);
      for (let i = 0; i < 100; i++) expect(await store.acquire(request())).toMatchObject({ reason });
      expect(reads.mock.calls.length + forTarget.mock.calls.length).toBe(walked);
    } finally {
      reads.mockRestore();
      forTarget.mockRestore();
      store.close();
    }
  });
});

describe('the Redis store', () => {
  let server: RedisServer;
  let redis: Redis;
  beforeAll(async () => {
    server = await startRedisServer();
    redis = connectRedis({ url: server.url, logger: silentLogger, timeoutMs: 15_000 });
    await whenReady(redis);
  });
  afterAll(async () => {
    redis.disconnect();
    await server.stop();
  });

  it("another replica's release ends this replica's remembered all_busy at once", async () => {
    const catalog = () => new TestCatalog([proxy('ns/only', { maxLeases: 1 })]);
    const a = new RedisLeaseStore({
      redis,
      catalog: catalog(),
      logger: silentLogger,
      keyPrefix: 'cost-shared',
    });
    const b = new RedisLeaseStore({
      redis,
      catalog: catalog(),
      logger: silentLogger,
      keyPrefix: 'cost-shared',
    });
    try {
      const held = await b.acquire(request());
      if (!held.granted) throw new Error('expected a lease');
      for (let i = 0; i < 3; i++) expect(await a.acquire(request())).toMatchObject({ reason: 'all_busy' });
      await b.release(held.lease.id);
      expect((await a.acquire(request())).granted).toBe(true);
    } finally {
      a.close();
      b.close();
    }
  });

  it.each([
    ['all_cooling_down', banEveryone],
    ['all_busy', fillEveryone],
  ] as const)(
    '%s again runs TIME and one HGET in Redis, not a walk of the fleet',
    async (reason, arrange) => {
      const store = new RedisLeaseStore({
        redis,
        catalog: fleet(),
        logger: silentLogger,
        keyPrefix: `cost-${reason}`,
      });
      try {
        await arrange(store);
        // The first refusal walks; the second reads the version the third is checked against.
        for (let i = 0; i < 2; i++)
          expect(await store.acquire(request())).toMatchObject({ granted: false, reason });
        const monitor = await server.client().monitor();
        const ran: string[] = [];
        monitor.on('monitor', (_time: string, args: string[], source: string) => {
          if (source === 'lua') ran.push(args[0].toLowerCase());
        });
        const N = 20;
        for (let i = 0; i < N; i++)
          expect(await store.acquire(request())).toMatchObject({ granted: false, reason });
        await eventually(() => ran.length >= 2 * N);
        monitor.disconnect();
        expect(ran).toEqual(Array.from({ length: N }, () => ['time', 'hget']).flat());
      } finally {
        store.close();
      }
    },
  );
});
