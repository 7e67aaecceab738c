// The gateway on the Redis lease book (a real redis-server on loopback): a second gateway
// process on the same book, and the book going away mid-request and coming back.
import type { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { ApiTokens } from '../../book/api-tokens.js';
import { connectRedis } from '../../book/redis-connection.js';
import { RedisLeaseStore } from '../../book/redis-lease-store.js';
import { Gateway } from '../../gateway/gateway-server.js';
import { gatewayBook, gatewayTokens } from '../../handlers/gateway-book.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';
import { silentLogger, type TestCatalog } from '../book/fixtures.js';
import {
  askInside,
  basic,
  PROXY_IPS,
  startWorld,
  TOKEN,
  tunnelThrough,
  until,
  viaGateway,
  type World,
} from './gateway-world.js';

let server: RedisServer;
let books = 0;
const clients: Redis[] = [];
const stores: RedisLeaseStore[] = [];
let world: World | undefined;
let second: Gateway | undefined;

beforeAll(async () => {
  server = await startRedisServer();
});
afterEach(async () => {
  await second?.close();
  await world?.close();
  for (const s of stores.splice(0)) s.close();
  for (const c of clients.splice(0)) c.disconnect();
  world = second = undefined;
});
afterAll(async () => {
  await server.stop();
});

/** A store on its own connection (as a process of its own has), on the book `prefix`. */
function redisStore(catalog: TestCatalog, prefix: string): RedisLeaseStore {
  const redis = connectRedis({ url: server.url, logger: silentLogger, timeoutMs: 1000 });
  clients.push(redis);
  const store = new RedisLeaseStore({ redis, catalog, logger: silentLogger, keyPrefix: prefix });
  stores.push(store);
  return store;
}

/** Every connection made so far is ready (a connection fails fast while it is not). */
const ready = () => until(() => clients.every((c) => c.status === 'ready'), 10_000);

async function redisWorld(maxLeases: number): Promise<{ world: World; prefix: string }> {
  const prefix = `gw-${++books}`;
  const w = await startWorld({ idleMs: 300 }, maxLeases, undefined, undefined, undefined, {
    store: (catalog) => redisStore(catalog, prefix),
  });
  await w.store.start();
  await ready();
  return { world: w, prefix };
}

/** A second gateway process: its own store and connection on the same book and proxies. */
async function secondGateway(w: World, prefix: string): Promise<{ gateway: Gateway; port: number }> {
  const store = redisStore(w.catalog, prefix);
  await store.start();
  await ready();
  const gateway = new Gateway({
    book: gatewayBook(store, w.catalog),
    tokens: gatewayTokens(ApiTokens.single(TOKEN, 'team-a')),
    registry: new Registry(),
    logger: silentLogger,
    options: { connectTimeoutMs: 1000, idleMs: 300 },
  });
  const { port } = await gateway.listen('127.0.0.1', 0);
  return { gateway, port };
}

describe('two gateway processes on one Redis book', () => {
  it("count against each proxy's maxLeases together: 3 slots, a fourth tunnel rides its gateway's own lease", async () => {
    const made = await redisWorld(1);
    world = made.world;
    const other = await secondGateway(world, made.prefix);
    second = other.gateway;
    const port = world.site.httpPort;
    const t1 = await tunnelThrough(world, port);
    const t2 = await tunnelThrough({ port: other.port }, port);
    const t3 = await tunnelThrough(world, port);
    const exits = [await askInside(t1), await askInside(t2), await askInside(t3)];
    expect(new Set(exits)).toEqual(new Set(PROXY_IPS));
    // The book is full (each gateway's leases count): the second gateway shares the lease it
    // holds, as when one gateway fills it; no proxy carries a second lease.
    const t4 = await tunnelThrough({ port: other.port }, port);
    expect(await askInside(t4)).toBe(exits[1]);
    expect((await world.store.totals()).activeLeases).toBe(3);
    expect(
      (await world.store.usage(['fleet/p0', 'fleet/p1', 'fleet/p2'])).map((u) => u.activeLeases),
    ).toEqual([1, 1, 1]);
    for (const t of [t1, t2, t3, t4]) t.destroy();
    await until(async () => (await world!.store.totals()).activeLeases === 0);
  });
});

describe('the Redis book going away mid-request and coming back', () => {
  it('an open tunnel carries on; new requests get 503 store_unavailable, then 200 once Redis is back', async () => {
    const made = await redisWorld(2);
    world = made.world;
    const w = world;
    const url = `http://127.0.0.1:${w.site.httpPort}/`;
    const open = await tunnelThrough(w, w.site.httpPort);
    expect(PROXY_IPS).toContain(await askInside(open));
    await server.kill();
    // The tunnel goes through a proxy already: nothing is sent without one.
    expect(PROXY_IPS).toContain(await askInside(open));
    const down = await viaGateway(w.port, `${url}?down`, basic('session-other'));
    expect([down.status, JSON.parse(down.body).error, down.headers['retry-after']]).toEqual([
      503,
      'store_unavailable',
      '1',
    ]);
    // The cause is the log's: the Redis client's text names the store's address.
    expect(JSON.parse(down.body).message).not.toMatch(/\d+\.\d+\.\d+\.\d+|ECONN|ETIMEDOUT|:\d+/);
    await server.start();
    await until(async () => (await viaGateway(w.port, url, basic('session-later'))).status === 200, 15_000);
    expect(PROXY_IPS).toContain(await askInside(open));
    open.destroy();
  });
});
