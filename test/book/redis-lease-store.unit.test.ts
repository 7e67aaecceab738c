// What only the Redis store has: a real redis-server that goes away, freezes and comes back,
// the round trips each operation costs (Redis's own INFO commandstats), the key prefix that
// lets two operators share one Redis, and keys that all expire.
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import type { Redis } from 'ioredis';
import type { LeaseRequest } from '../../book/lease-store.js';
import { connectRedis } from '../../book/redis-connection.js';
import { RedisLeaseStore } from '../../book/redis-lease-store.js';
import { STORE_RETRY_AFTER_SECONDS } from '../../book/redis-script-runner.js';
import { StoreUnavailableError } from '../../book/store-unavailable.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';
import { eventually, proxy, silentLogger, TestCatalog } from './fixtures.js';

const request = (overrides: Partial<LeaseRequest> = {}): LeaseRequest => ({
  selector: {},
  ttlSeconds: 300,
  ...overrides,
});

let server: RedisServer;
let admin: Redis;
let books = 0;
const opened: { store?: RedisLeaseStore; redis: Redis }[] = [];

function open(options: { timeoutMs?: number; keyPrefix?: string; proxies?: number } = {}) {
  const redis = connectRedis({
    url: server.url,
    logger: silentLogger,
    timeoutMs: options.timeoutMs ?? 15_000,
  });
  const catalog = new TestCatalog(
    Array.from({ length: options.proxies ?? 3 }, (_, i) =>
      proxy(`ns/p${i}`, { latencyMillis: i, maxLeases: 2 }),
    ),
  );
  // Registered before the store: a constructor that throws (a bad keyPrefix) still leaves a
  // client, which would reconnect forever once the server stops and keep jest from exiting.
  const entry: (typeof opened)[number] = { redis };
  opened.push(entry);
  const store = new RedisLeaseStore({
    redis,
    catalog,
    logger: silentLogger,
    keyPrefix: options.keyPrefix ?? `unit-${++books}`,
  });
  entry.store = store;
  return { store, redis, catalog };
}

async function connected(redis: Redis): Promise<void> {
  await eventually(async () => (await redis.ping().catch(() => '')) === 'PONG', 15_000);
}

beforeAll(async () => {
  server = await startRedisServer();
  admin = server.client();
});

afterEach(() => {
  for (const { store, redis } of opened.splice(0)) {
    store?.close();
    redis.disconnect();
  }
});

afterAll(async () => {
  await server.stop();
});

describe('the Redis lease store', () => {
  it('never stores proxy credentials in Redis: a replica reads them from its catalog', async () => {
    const { store, catalog, redis } = open({ keyPrefix: 'no-credentials' });
    await connected(redis);
    const secret = 'proxy-password-never-in-redis';
    catalog.proxies = catalog.proxies.map((p) => ({
      ...p,
      credentials: { username: 'crawler', password: secret },
    }));
    const granted = await store.acquire({ selector: {}, ttlSeconds: 60, owner: 'team-a', session: 's' });
    if (!granted.granted) throw new Error(granted.reason);
    expect(granted.lease.proxy.credentials?.password).toBe(secret);
    await store.report(granted.lease.id, 'banned', { target: 'shop.example' }, 'team-a');
    const everything: string[] = [];
    for (const key of await admin.keys('{no-credentials}*')) {
      everything.push(key);
      const type = await admin.type(key);
      if (type === 'string') everything.push((await admin.get(key)) ?? '');
      if (type === 'hash') everything.push(JSON.stringify(await admin.hgetall(key)));
      if (type === 'zset') everything.push(JSON.stringify(await admin.zrange(key, '0', '-1')));
      if (type === 'set') everything.push(JSON.stringify(await admin.smembers(key)));
    }
    expect(everything.length).toBeGreaterThan(0);
    expect(everything.join('\n')).not.toContain(secret);
    expect(everything.join('\n')).not.toContain('crawler');
    // What the book gives back still carries them, from this replica's catalog.
    expect((await store.get(granted.lease.id, 'team-a'))?.proxy.credentials?.password).toBe(secret);
    expect((await store.renew(granted.lease.id, 60, 'team-a'))?.lease.proxy.credentials?.password).toBe(
      secret,
    );
  });

  describe('round trips (INFO commandstats)', () => {
    async function calls(): Promise<Map<string, number>> {
      const info = await admin.info('commandstats');
      const out = new Map<string, number>();
      for (const m of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) out.set(m[1], Number(m[2]));
      return out;
    }

    it('one EVALSHA per lease, per release, per renew and per report, and nothing else', async () => {
      const { store, redis } = open();
      await connected(redis);
      // Warm the script cache (a fresh server answers NOSCRIPT once per script).
      const warm = await store.acquire(request());
      if (!warm.granted) throw new Error('expected a lease');
      await store.renew(warm.lease.id);
      await store.report(warm.lease.id, 'ok');
      await store.release(warm.lease.id);
      await store.endSession('s1');
      // MONITOR tells what each client sent from what the scripts ran ("lua").
      const monitor = await server.monitor();
      const sent: string[] = [];
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        if (source !== 'lua') sent.push(args[0].toLowerCase());
      });
      await admin.config('RESETSTAT');
      const N = 50;
      for (let i = 0; i < N; i++) {
        const result = await store.acquire(request({ target: 'example.com' }));
        if (!result.granted) throw new Error('expected a lease');
        await store.release(result.lease.id);
      }
      expect((await calls()).get('evalsha')).toBe(2 * N);
      await admin.config('RESETSTAT');
      const held = await store.acquire(request());
      if (!held.granted) throw new Error('expected a lease');
      await store.renew(held.lease.id);
      await store.report(held.lease.id, 'banned', { target: 'example.com' });
      await store.endSession('s1');
      expect((await calls()).get('evalsha')).toBe(4);
      await eventually(() => sent.filter((c) => c === 'info').length === 2);
      monitor.disconnect();
      // Besides the test's own CONFIG and INFO, the store sent EVALSHA and nothing else.
      expect(sent.filter((c) => c !== 'config' && c !== 'info')).toEqual(Array(2 * N + 4).fill('evalsha'));
    });
  });

  describe("what an acquire reads (its load strings' flags)", () => {
    /** The MGETs the scripts ran while `run` ran, as lists of keys. */
    async function mgets(run: () => Promise<void>): Promise<string[][]> {
      const monitor = await server.monitor();
      const seen: string[][] = [];
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        if (source === 'lua' && args[0].toLowerCase() === 'mget') seen.push(args.slice(1));
      });
      await run();
      // MONITOR's stream lags the replies: an ECHO from the admin connection marks the end.
      let done = false;
      monitor.on('monitor', (_time: string, args: string[]) => {
        if (args[0].toLowerCase() === 'echo' && args[1] === 'mgets-end') done = true;
      });
      await admin.echo('mgets-end');
      await eventually(() => done);
      monitor.disconnect();
      return seen;
    }

    it('reads one load string per candidate, and a hold or a cooldown only where its proxy may have one', async () => {
      const { store, redis } = open({ keyPrefix: 'flags', proxies: 3 });
      await connected(redis);
      // Every proxy leased once: each has its load string.
      const warm = await Promise.all([0, 1, 2].map(() => store.acquire(request())));
      for (const lease of warm) if (lease.granted) await store.release(lease.lease.id);
      const quiet = await mgets(async () => {
        const lease = await store.acquire(request({ target: 't.example' }));
        if (!lease.granted) throw new Error('expected a lease');
        await store.release(lease.lease.id);
      });
      expect(quiet).toEqual([['{flags}:ld:ns/p0', '{flags}:ld:ns/p1', '{flags}:ld:ns/p2']]);
      // A ban of ns/p0 for t.example and a hold on ns/p1: their next acquire reads those too.
      const banned = await store.acquire(request());
      const held = await store.acquire(request());
      if (!banned.granted || !held.granted) throw new Error('expected two leases');
      await store.report(banned.lease.id, 'banned', { target: 't.example' });
      await store.report(held.lease.id, 'unreachable');
      await store.release(banned.lease.id);
      await store.release(held.lease.id);
      let chosen = '';
      const flagged = await mgets(async () => {
        const lease = await store.acquire(request({ target: 't.example' }));
        if (!lease.granted) throw new Error('expected a lease');
        chosen = lease.lease.proxyID;
      });
      expect(flagged).toEqual([
        ['{flags}:ld:ns/p0', '{flags}:ld:ns/p1', '{flags}:ld:ns/p2'],
        // The cooldown key's target follows a \0 (the monitor undoes MONITOR's \x00 escape).
        ['{flags}:cd:ns/p0\x00t.example', '{flags}:hold:ns/p1'],
      ]);
      expect(chosen).toBe('ns/p2');
    });
  });

  describe('when Redis is unreachable', () => {
    afterEach(async () => {
      server.resume();
      await server.start().catch(() => {});
    });

    it('fails every call with StoreUnavailableError at once while Redis is down, and recovers by itself', async () => {
      const { store, redis } = open();
      await connected(redis);
      const held = await store.acquire(request({ ttlSeconds: 600 }));
      expect(held.granted).toBe(true);
      await server.kill();
      const started = Date.now();
      for (const call of [
        () => store.acquire(request()),
        () => store.release('x'),
        () => store.renew('x'),
        () => store.report('x', 'ok'),
        () => store.usage(['ns/p0']),
        () => store.totals(),
      ]) {
        const err = await call().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(StoreUnavailableError);
        expect((err as StoreUnavailableError).retryAfterSeconds).toBe(STORE_RETRY_AFTER_SECONDS);
      }
      expect(Date.now() - started).toBeLessThan(2000);
      // Back (empty: this test server keeps nothing on disk): the store answers again, and the
      // scripts are loaded again on the first NOSCRIPT.
      await server.start();
      await eventually(
        async () => (await store.acquire(request()).catch(() => undefined))?.granted === true,
        15_000,
      );
    });

    it('a frozen Redis (connection open, no answer) fails the call within the timeout, not later', async () => {
      const { store, redis } = open({ timeoutMs: 300 });
      await connected(redis);
      await store.acquire(request());
      server.pause();
      const started = Date.now();
      await expect(store.acquire(request())).rejects.toBeInstanceOf(StoreUnavailableError);
      const took = Date.now() - started;
      expect(took).toBeGreaterThanOrEqual(250);
      expect(took).toBeLessThan(1500);
      server.resume();
      await eventually(
        async () => (await store.acquire(request()).catch(() => undefined))?.granted === true,
        15_000,
      );
    });
  });

  describe('sharing one Redis', () => {
    it('two key prefixes are two books; one prefix is one book for every replica', async () => {
      const a1 = open({ keyPrefix: 'operator-a', proxies: 1 });
      const a2 = open({ keyPrefix: 'operator-a', proxies: 1 });
      const b = open({ keyPrefix: 'operator-b', proxies: 1 });
      await connected(a1.redis);
      // ns/p0 takes two leases: one from each replica of operator-a fills it...
      expect((await a1.store.acquire(request())).granted).toBe(true);
      expect((await a2.store.acquire(request())).granted).toBe(true);
      expect(await a1.store.acquire(request())).toEqual({ granted: false, reason: 'all_busy' });
      expect(await a2.store.acquire(request())).toEqual({ granted: false, reason: 'all_busy' });
      // ...and operator-b's book knows nothing of them.
      expect((await b.store.acquire(request())).granted).toBe(true);
      expect((await b.store.totals()).activeLeases).toBe(1);
      expect((await a2.store.totals()).activeLeases).toBe(2);
    });

    it('a session bound through one replica is honoured through another, and moves there when its proxy is full', async () => {
      const a = open({ keyPrefix: 'sessions', proxies: 3 });
      const b = open({ keyPrefix: 'sessions', proxies: 3 });
      await connected(a.redis);
      const first = await a.store.acquire(request({ session: 'k1' }));
      if (!first.granted) throw new Error('expected a lease');
      expect(first.lease.proxyID).toBe('ns/p0');
      // b never saw k1: it still leases on ns/p0 (one slot left), then moves when it is full.
      expect(await b.store.acquire(request({ session: 'k1' }))).toMatchObject({
        lease: { proxyID: 'ns/p0' },
        session: { key: 'k1', moved: false },
      });
      expect(await b.store.acquire(request({ session: 'k1' }))).toMatchObject({
        lease: { proxyID: 'ns/p1' },
        session: { key: 'k1', moved: true },
      });
      // a's memory of the binding is stale now; Redis's answer wins.
      expect(await a.store.acquire(request({ session: 'k1' }))).toMatchObject({
        lease: { proxyID: 'ns/p1' },
        session: { key: 'k1', moved: false },
      });
    });

    it("a down hold outlives one replica's status catching up: another replica whose cache lags never leases the dead proxy", async () => {
      const a = open({ keyPrefix: 'lagging', proxies: 1 });
      const b = open({ keyPrefix: 'lagging', proxies: 1 });
      await connected(a.redis);
      const address = '10.0.0.1:3128';
      await a.store.observeHealth('ns/p0', { kind: 'down', address });
      // a's cache has the status the engine wrote (unhealthy); b's still shows it healthy.
      a.catalog.proxies = [
        proxy('ns/p0', { latencyMillis: 0, maxLeases: 2, healthy: false, phase: 'Unhealthy' }),
      ];
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await b.store.acquire(request())).toEqual({ granted: false, reason: 'no_match' });
      expect((await b.store.usage(['ns/p0']))[0].held).toBe('down');
      // The proxy recovers: the status turns healthy in a's cache, the hold goes, b leases it.
      a.catalog.proxies = [proxy('ns/p0', { latencyMillis: 0, maxLeases: 2 })];
      await eventually(async () => (await b.store.acquire(request())).granted, 30_000);
    });

    it("one token's lease quota holds across replicas: the book counts its leases, whichever replica granted or released them", async () => {
      const a = open({ keyPrefix: 'quota', proxies: 3 });
      const b = open({ keyPrefix: 'quota', proxies: 3 });
      await connected(a.redis);
      const mine = request({ owner: 'team-a', leaseQuota: 3 });
      const answers = [];
      for (const store of [a.store, b.store, a.store, b.store, a.store, b.store])
        answers.push(await store.acquire(mine));
      expect(answers.map((r) => (r.granted ? 'granted' : r.reason))).toEqual([
        ...Array(3).fill('granted'),
        ...Array(3).fill('lease_quota'),
      ]);
      // Released through the other replica: room at once, through either.
      const first = answers[0];
      if (!first.granted) throw new Error('expected a lease');
      expect(await b.store.release(first.lease.id, 'team-a')).toBe(true);
      expect((await a.store.acquire(mine)).granted).toBe(true);
      expect(await b.store.acquire(mine)).toEqual({ granted: false, reason: 'lease_quota', held: 3 });
    });

    it('a rolling update: a lease an older replica released (its key gone, the count not told) makes room; one it granted joins the count when renewed', async () => {
      const { store, redis } = open({ keyPrefix: 'quota-rolling', proxies: 3 });
      await connected(redis);
      const mine = request({ owner: 'team-a', leaseQuota: 2 });
      const held = [];
      for (let i = 0; i < 2; i++) {
        const r = await store.acquire(mine);
        if (!r.granted) throw new Error('expected a lease');
        held.push(r.lease.id);
      }
      // An older replica's release: the lease key goes, P:tl is not told.
      await admin.del(`{quota-rolling}:lease:team-a.${held[0]}`);
      const third = await store.acquire(mine);
      expect(third.granted).toBe(true);
      expect(await store.acquire(mine)).toMatchObject({ reason: 'lease_quota', held: 2 });
      // An older replica's grant: a lease the count does not hold (taken out here), until renewed.
      await admin.zrem('{quota-rolling}:tl:team-a', `team-a.${held[1]}`);
      expect((await store.acquire(mine)).granted).toBe(true);
      await store.renew(held[1], undefined, 'team-a');
      expect(await store.acquire(mine)).toMatchObject({ reason: 'lease_quota', held: 3 });
    });

    it('refuses a key prefix that is not a plain name, naming the option', () => {
      expect(() => open({ keyPrefix: '{x}' })).toThrow(/keyPrefix must match/);
    });
  });

  it('puts an expiry on every key it writes', async () => {
    const { store, redis } = open({ keyPrefix: 'expiry' });
    await connected(redis);
    const held = await store.acquire(request({ session: 's1', target: 'example.com' }));
    if (!held.granted) throw new Error('expected a lease');
    await store.report(held.lease.id, 'banned');
    await store.report(held.lease.id, 'ok', { target: 'other.example' });
    // A token's lease with its quota: the token's lease count (P:tl:<owner>) expires too.
    const other = await store.acquire(request({ owner: 'team-a', leaseQuota: 5 }));
    if (!other.granted) throw new Error('expected a lease');
    await store.report(other.lease.id, 'unreachable', {}, 'team-a');
    await store.totals();
    const keys = await admin.keys('{expiry}:*');
    expect(keys.length).toBeGreaterThan(8);
    const persistent = [];
    for (const key of keys) if ((await admin.pttl(key)) < 0) persistent.push(key);
    expect(persistent).toEqual([]);
  });
});
