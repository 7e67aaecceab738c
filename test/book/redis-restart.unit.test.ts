// A Redis that keeps nothing on disk forgets the book when it restarts (docs/redis.md): what
// a lease's holder and the next client get, and the counters that follow the book's totals,
// which must go on counting what happens afterwards, not stay flat until the new totals pass
// the old ones.
import { afterEach, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { registerBookMetrics } from '../../book/book-metrics.js';
import { connectRedis } from '../../book/redis-connection.js';
import { RedisLeaseStore } from '../../book/redis-lease-store.js';
import { startRedisServer } from '../harness/redis-server.js';
import { eventually, proxy, silentLogger, TestCatalog } from './fixtures.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function raised(registry: Registry): Promise<number> {
  const values = (await registry.getSingleMetric('proxy_operator_suspicions_total')!.get()).values;
  return values.find((v) => v.labels.outcome === 'raised')?.value ?? 0;
}

async function startStore(maxLeases = 10) {
  const server = await startRedisServer();
  cleanups.push(() => server.stop());
  const redis = connectRedis({ url: server.url, logger: silentLogger, timeoutMs: 1000 });
  const store = new RedisLeaseStore({
    redis,
    catalog: new TestCatalog([proxy('ns/a', { maxLeases }), proxy('ns/b'), proxy('ns/c')]),
    logger: silentLogger,
    keyPrefix: 'restart',
  });
  cleanups.push(() => {
    store.close();
    redis.disconnect();
  });
  await eventually(async () => (await redis.ping().catch(() => '')) === 'PONG', 15_000);
  return { server, store };
}

describe('a Redis restart that lost the book', () => {
  it("a lease held across it is gone: its holder learns at its next renew or report (the API's 404), and its proxy is leased again meanwhile", async () => {
    const { server, store } = await startStore(1);
    const held = await store.acquire({ selector: {}, ttlSeconds: 300, exclude: new Set(['ns/b', 'ns/c']) });
    if (!held.granted) throw new Error('no lease');
    expect(held.lease.proxyID).toBe('ns/a');
    await server.kill();
    await server.start();
    await eventually(async () => (await store.totals().catch(() => undefined)) !== undefined, 15_000);
    const next = await store.acquire({ selector: {}, ttlSeconds: 300, exclude: new Set(['ns/b', 'ns/c']) });
    expect(next).toMatchObject({ granted: true, lease: { proxyID: 'ns/a' } });
    expect(await store.renew(held.lease.id, 300)).toBeUndefined();
    expect(await store.report(held.lease.id, 'ok')).toBeUndefined();
  });
});

describe("the book's counters across a Redis restart that lost the book", () => {
  it('suspicions raised after the restart are counted (2 before, 1 after: the counter reads 3)', async () => {
    const { server, store } = await startStore();
    const registry = new Registry();
    registerBookMetrics(registry, store, () => true);
    const suspect = async (): Promise<void> => {
      const lease = await store.acquire({ selector: {}, ttlSeconds: 60 });
      if (!lease.granted) throw new Error(`no lease: ${lease.reason}`);
      await store.report(lease.lease.id, 'unreachable');
    };

    await suspect();
    await suspect();
    expect(await raised(registry)).toBe(2);

    await server.kill();
    await server.start();
    await eventually(async () => (await store.totals().catch(() => undefined)) !== undefined, 15_000);
    expect((await store.totals()).suspicionsRaised).toBe(0);
    expect(await raised(registry)).toBe(2);

    await suspect();
    expect((await store.totals()).suspicionsRaised).toBe(1);
    expect(await raised(registry)).toBe(3);
  });
});
