// What a refusal costs (issue 47 item 4): at 1,000 proxies every one full, or every one cooling
// down for the target, the first refusal walks them; the same request refused again while
// nothing changed walks nothing: the memory store reads no proxy's cooldown, the Redis store
// runs one small script (TIME and one HGET), whatever the fleet's size. Identical refusals
// arriving together share one walk (single flight), and a walk slower than the memo's bound
// is still remembered (the bound counts from its answer): at 10,000 proxies under 32
// concurrent refusers, both happen. The rule's edges (what ends a remembered refusal) are the
// contract's, on both stores.
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Redis } from 'ioredis';
import type { LeaseRequest, LeaseStore } from '../../book/lease-store.js';
import { MemoryLeaseStore } from '../../book/memory-lease-store.js';
import { connectRedis, whenReady } from '../../book/redis-connection.js';
import { RedisLeaseStore } from '../../book/redis-lease-store.js';
import { StoreUnavailableError } from '../../book/store-unavailable.js';
import { TargetBook } from '../../book/target-book.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';
import { eventually, FakeClock, proxy, silentLogger, TestCatalog } from './fixtures.js';
import { REFUSAL_MEMO_MILLIS } from '../../book/refusal-memo.js';

const FLEET = 1000;
const TARGET = 'shop.example';
// A selector every proxy matches, over 40 classes (a slot each: proxy-classes.ts), more than
// the counts take (MAX_COUNTED_CLASSES): these requests walk (the counts answer the others:
// refusal-first.unit.test.ts), which is what the memo and single flight are for.
const selector = { pool: 'all' };
const attributes = (i: number) => ({ ...selector, slot: String(i % 40) });
const request = (): LeaseRequest => ({ selector, ttlSeconds: 300, target: TARGET });
const fleet = () =>
  new TestCatalog(
    Array.from({ length: FLEET }, (_, i) =>
      proxy(`ns/p${i}`, { maxLeases: 1, latencyMillis: i, attributes: attributes(i) }),
    ),
  );

/** Every proxy banned for the target (and idle): each lease is reported banned and released. */
async function banEveryone(store: LeaseStore): Promise<void> {
  for (let i = 0; i < FLEET; i++) {
    const result = await store.acquire(request());
    if (!result.granted) throw new Error(`lease ${i}: ${result.reason}`);
    await store.reportMany([{ leaseID: result.lease.id, result: 'banned', release: true }]);
  }
}

async function fillEveryone(store: LeaseStore, size = FLEET): Promise<void> {
  for (let i = 0; i < size; i++) {
    if (!(await store.acquire(request())).granted) throw new Error(`lease ${i} refused`);
  }
}

/** A clock that moves `step` ms each time it is read: a walk of several reads takes long. */
class SteppingClock extends FakeClock {
  step = 0;
  override now(): number {
    const now = super.now();
    this.advanceSeconds(this.step / 1000);
    return now;
  }
}

/**
 * The scripts (their SHAs, in order) the store's connection sends Redis while `run` runs:
 * MONITOR's view, closed by an ECHO on the same connection after it.
 */
async function scriptsSent(
  server: RedisServer,
  redis: Redis,
  run: () => Promise<unknown>,
): Promise<string[]> {
  const monitor = await server.monitor();
  const marker = `end-${Math.random()}`;
  const shas: string[] = [];
  let ended = false;
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (source === 'lua' || ended) return;
    if (args[0].toLowerCase() === 'echo' && args[1] === marker) ended = true;
    else if (args[0].toLowerCase() === 'evalsha') shas.push(args[1]);
  });
  try {
    await run();
    await redis.echo(marker);
    await eventually(() => ended);
  } finally {
    monitor.disconnect();
  }
  return shas;
}

describe('the memory store, a walk slower than the bound', () => {
  it('is remembered all the same: the next refusal reads no cooldown', async () => {
    const clock = new FakeClock();
    const size = 40;
    const store = new MemoryLeaseStore({
      catalog: new TestCatalog(
        Array.from({ length: size }, (_, i) =>
          proxy(`ns/p${i}`, { maxLeases: 1, attributes: attributes(i) }),
        ),
      ),
      logger: silentLogger,
      clock,
    });
    // The walk over the target's cooldowns takes 1.5 bounds (a large fleet on a busy core).
    const forTarget = TargetBook.prototype.forTarget;
    const walks = jest.spyOn(TargetBook.prototype, 'forTarget').mockImplementation(function (
      this: TargetBook,
      ...args: Parameters<TargetBook['forTarget']>
    ) {
      clock.advanceSeconds((1.5 * REFUSAL_MEMO_MILLIS) / 1000);
      return forTarget.apply(this, args);
    });
    try {
      await fillEveryone(store, size);
      expect(await store.acquire(request())).toMatchObject({ reason: 'all_busy' });
      expect(walks).toHaveBeenCalledTimes(1);
      expect(await store.acquire(request())).toMatchObject({ reason: 'all_busy' });
      expect(walks).toHaveBeenCalledTimes(1);
    } finally {
      walks.mockRestore();
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
    const catalog = () => new TestCatalog([proxy('ns/only', { maxLeases: 1, attributes: attributes(0) })]);
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
        const monitor = await server.monitor();
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

  it.each([
    ['all_cooling_down', banEveryone],
    ['all_busy', fillEveryone],
  ] as const)(
    '%s from 20 requests at once, the remembered refusal expired: one walk between them',
    async (reason, arrange) => {
      const clock = new FakeClock();
      const store = new RedisLeaseStore({
        redis,
        catalog: fleet(),
        logger: silentLogger,
        keyPrefix: `flight-${reason}`,
        clock,
      });
      try {
        await arrange(store);
        // What one walk sends: a request of a new shape (another owner) walks the fleet.
        const walk = await scriptsSent(server, redis, async () =>
          expect(await store.acquire({ ...request(), owner: 'other' })).toMatchObject({ reason }),
        );
        expect(walk.length).toBeGreaterThan(1);
        expect(new Set(walk).size).toBe(1);

        for (let i = 0; i < 2; i++) expect(await store.acquire(request())).toMatchObject({ reason });
        clock.advanceSeconds((2 * REFUSAL_MEMO_MILLIS) / 1000);
        const N = 20;
        const burst = await scriptsSent(server, redis, async () => {
          const answers = await Promise.all(Array.from({ length: N }, () => store.acquire(request())));
          for (const answer of answers) expect(answer).toMatchObject({ granted: false, reason });
        });
        // Each request reads the version once (the refusal script); one of them walks.
        expect(burst.filter((sha) => sha === walk[0])).toHaveLength(walk.length);
        expect(burst.filter((sha) => sha !== walk[0])).toHaveLength(N);
        // And it is remembered: the next is answered with the refusal script alone.
        expect(await scriptsSent(server, redis, () => store.acquire(request()))).toHaveLength(1);
      } finally {
        store.close();
      }
    },
  );

  it('a walk slower than the bound is remembered all the same: the next refusal is one script', async () => {
    const clock = new SteppingClock();
    const size = 40; // chunks of 4, 32, 256: three acquire scripts per walk
    const store = new RedisLeaseStore({
      redis,
      catalog: new TestCatalog(
        Array.from({ length: size }, (_, i) =>
          proxy(`ns/p${i}`, { maxLeases: 1, attributes: attributes(i) }),
        ),
      ),
      logger: silentLogger,
      keyPrefix: 'flight-slow',
      clock,
    });
    try {
      await fillEveryone(store, size);
      for (let i = 0; i < 2; i++)
        expect(await store.acquire(request())).toMatchObject({ reason: 'all_busy' });
      clock.advanceSeconds((2 * REFUSAL_MEMO_MILLIS) / 1000);
      // Each read of the clock moves it 0.3 bound: the version read, the walk's three scripts
      // and its answer, then the next request's read: 1.5 bounds after the walk's start.
      clock.step = 0.3 * REFUSAL_MEMO_MILLIS;
      const walked = await scriptsSent(server, redis, async () =>
        expect(await store.acquire(request())).toMatchObject({ reason: 'all_busy' }),
      );
      expect(walked.length).toBeGreaterThan(2);
      const again = await scriptsSent(server, redis, async () =>
        expect(await store.acquire(request())).toMatchObject({ reason: 'all_busy' }),
      );
      expect(again).toEqual([walked[0]]);
    } finally {
      store.close();
    }
  });

  it('a shared walk that ends in a grant answers only its own request: the others walk', async () => {
    const clock = new FakeClock();
    const store = new RedisLeaseStore({
      redis,
      catalog: new TestCatalog([
        proxy('ns/a', { maxLeases: 1, attributes: attributes(0) }),
        proxy('ns/b', { maxLeases: 1, ip: '10.0.0.2', attributes: attributes(1) }),
      ]),
      logger: silentLogger,
      keyPrefix: 'flight-grant',
      clock,
    });
    try {
      expect((await store.acquire({ ...request(), ttlSeconds: 60 })).granted).toBe(true);
      expect((await store.acquire({ ...request(), ttlSeconds: 600 })).granted).toBe(true);
      for (let i = 0; i < 2; i++)
        expect(await store.acquire(request())).toMatchObject({ reason: 'all_busy' });
      // The first lease expires unreleased: a change the version does not count; the memo's
      // bound passes with it, so the three requests below walk (one) and share (two).
      clock.advanceSeconds(61);
      const answers = await Promise.all([1, 2, 3].map(() => store.acquire(request())));
      const grants = answers.filter((a) => a.granted);
      expect(grants).toHaveLength(1);
      expect(answers.filter((a) => !a.granted && a.reason === 'all_busy')).toHaveLength(2);
    } finally {
      store.close();
    }
  });

  it('a shared walk Redis froze under: the walker may have leased (outcome unknown), the others changed nothing', async () => {
    const conn = connectRedis({ url: server.url, logger: silentLogger, timeoutMs: 300 });
    await whenReady(conn);
    const clock = new FakeClock();
    const store = new RedisLeaseStore({
      redis: conn,
      catalog: fleet(),
      logger: silentLogger,
      keyPrefix: 'flight-frozen',
      clock,
    });
    const evalsha = conn.evalsha.bind(conn);
    let armed = false;
    let calls = 0;
    const spy = jest.spyOn(conn, 'evalsha').mockImplementation(((...args: Parameters<typeof evalsha>) => {
      // The third script after the memo expired: the walker's first chunk (after both
      // requests' version reads, answered): Redis freezes under it.
      if (armed && ++calls === 3) server.pause();
      return evalsha(...args);
    }) as typeof conn.evalsha);
    try {
      await fillEveryone(store);
      for (let i = 0; i < 2; i++)
        expect(await store.acquire(request())).toMatchObject({ reason: 'all_busy' });
      clock.advanceSeconds((2 * REFUSAL_MEMO_MILLIS) / 1000);
      armed = true;
      const [walker, waiter] = await Promise.allSettled([store.acquire(request()), store.acquire(request())]);
      server.resume();
      expect(walker).toMatchObject({ status: 'rejected', reason: { mayHaveApplied: true } });
      expect(waiter.status).toBe('rejected');
      const error = (waiter as PromiseRejectedResult).reason as StoreUnavailableError;
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(error.mayHaveApplied).toBe(false);
      expect(calls).toBe(3); // the waiter walked nothing of its own
    } finally {
      server.resume();
      spy.mockRestore();
      store.close();
      conn.disconnect();
    }
  });
});
