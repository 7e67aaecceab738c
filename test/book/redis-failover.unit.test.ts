// Issue 47 item 5: a managed Redis fails over by promoting a replica and moving its address;
// the demoted primary keeps the old TCP connections open and answers every write READONLY.
// Here the address is a loopback forwarder whose target moves, as a managed endpoint's does.
import { afterEach, describe, expect, it } from '@jest/globals';
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { Redis } from 'ioredis';
import type { LeaseRequest } from '../../book/lease-store.js';
import { connectRedis } from '../../book/redis-connection.js';
import { RedisLeaseStore } from '../../book/redis-lease-store.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';
import { eventually, proxy, silentLogger, TestCatalog } from './fixtures.js';

const request: LeaseRequest = { selector: {}, ttlSeconds: 300 };

/** A TCP address whose destination can move; connections already made stay where they went. */
async function movableAddress(
  firstPort: number,
): Promise<{ port: number; moveTo(port: number): void; close(): Promise<void> }> {
  let target = firstPort;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(target, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    port: (server.address() as { port: number }).port,
    moveTo(port) {
      target = port;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function replicaOf(replica: RedisServer, primary: RedisServer): Promise<void> {
  await replica.client().replicaof('127.0.0.1', primary.port);
  await eventually(
    async () => /master_link_status:up/.test(await replica.client().info('replication')),
    15_000,
  );
}

describe('a Redis failover', () => {
  it('after the address moves to the promoted replica, leases are granted again within seconds', async () => {
    const a = await startRedisServer();
    const b = await startRedisServer();
    cleanups.push(
      () => a.stop(),
      () => b.stop(),
    );
    await replicaOf(b, a);
    const address = await movableAddress(a.port);
    cleanups.push(() => address.close());

    const redis: Redis = connectRedis({
      url: `redis://127.0.0.1:${address.port}`,
      logger: silentLogger,
      timeoutMs: 2000,
    });
    const store = new RedisLeaseStore({
      redis,
      catalog: new TestCatalog([proxy('ns/p0', { maxLeases: 100 }), proxy('ns/p1', { maxLeases: 100 })]),
      logger: silentLogger,
      keyPrefix: 'failover',
    });
    cleanups.push(() => {
      store.close();
      redis.disconnect();
    });
    await eventually(async () => (await redis.ping().catch(() => '')) === 'PONG', 15_000);
    expect((await store.acquire(request)).granted).toBe(true);

    // The failover: B promoted, A demoted to B's replica, the address moved to B. The
    // store's connection still leads to A.
    await b.client().replicaof('NO', 'ONE');
    await a.client().replicaof('127.0.0.1', b.port);
    address.moveTo(b.port);
    await eventually(async () => /master_link_status:up/.test(await a.client().info('replication')), 15_000);

    const failedOver = Date.now();
    let refused = 0;
    await eventually(async () => {
      try {
        if ((await store.acquire(request)).granted) return true;
      } catch {
        refused += 1;
      }
      return false;
    }, 10_000);
    // The first write after the failover met READONLY: at least one 503, then a lease from B.
    expect(refused).toBeGreaterThanOrEqual(1);
    expect(Date.now() - failedOver).toBeLessThan(5000);
    expect(await b.client().dbsize()).toBeGreaterThan(0);
  });
});
