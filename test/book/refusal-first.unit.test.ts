// The first refusal of a request costs the same at any fleet size (issue 47 item 4). The
// memory store reads no proxy's cooldown (its cooling counts per target: cooling-counts.ts).
// with every proxy full, or every proxy cooling down for the target, a request without a
// selector is refused by one acquire script (its first chunk of 4 and the fleet's counts:
// redis-scripts.ts's P:fleet, P:full, P:cdt), running the same commands at 100 proxies as at
// 1,000, instead of a walk that sends every proxy. A replica whose catalog differs from the
// book's registry walks (and answers right), and the sweep brings the registry back. A request
// with a selector, or a token scope, is refused from the counts of the classes it matches
// (proxy-classes.ts): the same commands at 100 and 1,000 matching proxies, beside free proxies
// of another class; the memory store asks the scope once per class, not once per proxy.
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Redis } from 'ioredis';
import type { AcquireResult, LeaseRequest, LeaseStore } from '../../book/lease-store.js';
import type { ProxyRecord } from '../../book/catalog.js';
import { connectRedis, whenReady } from '../../book/redis-connection.js';
import { MemoryLeaseStore } from '../../book/memory-lease-store.js';
import { RedisLeaseStore } from '../../book/redis-lease-store.js';
import { TargetBook } from '../../book/target-book.js';
import { scopeMatcher } from '../../book/token-scope.js';
import { parseExitIPTerm } from '../../book/exit-ip-match.js';
import { FreeProxyIndex } from '../../book/free-proxy-index.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';
import { eventually, FakeClock, proxy, silentLogger, TestCatalog } from './fixtures.js';

const TARGET = 'shop.example';
const request = (owner?: string): LeaseRequest => ({
  selector: {},
  ttlSeconds: 300,
  target: TARGET,
  ...(owner === undefined ? {} : { owner }),
});
const fleet = (size: number) =>
  Array.from({ length: size }, (_, i) => proxy(`ns/p${i}`, { maxLeases: 1, latencyMillis: i }));

/** An exit IP each, IPv4 in 10.0.0.0/8 or IPv6 in 2001:db8::/32. */
const exitOf = (family: 4 | 6, i: number) =>
  family === 4 ? `10.1.${i >> 8}.${i & 255}` : `2001:db8::${i.toString(16)}`;
const BLOCKS = { 4: parseExitIPTerm('10.0.0.0/8')!, 6: parseExitIPTerm('2001:db8::/32')! };
/** `size` proxies egressing from a block, and a tenth as many outside it, idle and ranked before them. */
const blocked = (family: 4 | 6, size: number) => [
  ...fleet(size).map((p, i) => ({ ...p, exitIP: exitOf(family, i) })),
  ...Array.from({ length: size / 10 }, (_, i) =>
    proxy(`ns/o${i}`, {
      maxLeases: 1,
      latencyMillis: 0,
      exitIP: family === 4 ? `192.0.2.${i}` : `2001:db9::${i}`,
    }),
  ),
];
const byBlock = (family: 4 | 6, owner?: string): LeaseRequest => ({
  ...request(owner),
  exitIP: BLOCKS[family],
});

async function fillBlock(store: LeaseStore, size: number, family: 4 | 6): Promise<void> {
  for (let i = 0; i < size; i++) {
    if (!(await store.acquire(byBlock(family))).granted) throw new Error(`lease ${i} refused`);
  }
}

async function banBlock(store: LeaseStore, size: number, family: 4 | 6): Promise<void> {
  for (let i = 0; i < size; i++) {
    const result = await store.acquire(byBlock(family));
    if (!result.granted) throw new Error(`lease ${i}: ${result.reason}`);
    await store.reportMany([{ leaseID: result.lease.id, result: 'banned', release: true }]);
  }
}
const byExit = [
  [4, 'all_busy', fillBlock],
  [4, 'all_cooling_down', banBlock],
  [6, 'all_busy', fillBlock],
  [6, 'all_cooling_down', banBlock],
] as const;

/** `size` proxies of pool a, and a tenth as many of pool b, idle and ranked before them. */
const pooled = (size: number) => [
  ...fleet(size).map((p) => ({ ...p, attributes: { pool: 'a' } })),
  ...Array.from({ length: size / 10 }, (_, i) =>
    proxy(`ns/b${i}`, { maxLeases: 1, latencyMillis: 0, attributes: { pool: 'b' } }),
  ),
];
const poolA = { pool: 'a' };
/** Pool a named by a selector (with a new session: it selects as without one), or by a token scope (its own calls counted). */
function named(how: 'selector' | 'scope' | 'session', owner: string, calls = { n: 0 }): LeaseRequest {
  const admits = scopeMatcher({ selector: poolA });
  if (how === 'scope') return { ...request(owner), within: (p) => (calls.n++, admits(p)) };
  return { ...request(owner), selector: poolA, ...(how === 'session' ? { session: owner } : {}) };
}

async function fillPoolA(store: LeaseStore, size: number): Promise<void> {
  for (let i = 0; i < size; i++) {
    if (!(await store.acquire({ ...request(), selector: poolA })).granted)
      throw new Error(`lease ${i} refused`);
  }
}

async function banPoolA(store: LeaseStore, size: number): Promise<void> {
  for (let i = 0; i < size; i++) {
    const result = await store.acquire({ ...request(), selector: poolA });
    if (!result.granted) throw new Error(`lease ${i}: ${result.reason}`);
    await store.reportMany([{ leaseID: result.lease.id, result: 'banned', release: true }]);
  }
}
const byClass = [
  ['selector', 'all_busy', fillPoolA],
  ['selector', 'all_cooling_down', banPoolA],
  ['scope', 'all_busy', fillPoolA],
  ['scope', 'all_cooling_down', banPoolA],
  ['session', 'all_busy', fillPoolA],
  ['session', 'all_cooling_down', banPoolA],
] as const;

/**
 * `size` proxies of pool a egressing from the IPv4 block, and a tenth as many each of pool a
 * outside it and of pool b inside it, idle and ranked before them.
 */
const mixed = (size: number) => [
  ...fleet(size).map((p, i) => ({ ...p, exitIP: exitOf(4, i), attributes: poolA })),
  ...Array.from({ length: size / 10 }, (_, i) => [
    proxy(`ns/o${i}`, { maxLeases: 1, latencyMillis: 0, exitIP: `192.0.2.${i}`, attributes: poolA }),
    proxy(`ns/b${i}`, { maxLeases: 1, latencyMillis: 0, exitIP: `10.2.0.${i}`, attributes: { pool: 'b' } }),
  ]).flat(),
];
/** Pool a and the block, pool a named by a selector (a session too) or a token scope. */
const mixedRequest = (
  how: 'selector' | 'scope' | 'session',
  owner: string,
  calls = { n: 0 },
): LeaseRequest => ({
  ...named(how, owner, calls),
  exitIP: BLOCKS[4],
});

const blockOfPoolA: LeaseRequest = { ...request(), selector: poolA, exitIP: BLOCKS[4] };

async function fillMixed(store: LeaseStore, size: number): Promise<void> {
  for (let i = 0; i < size; i++) {
    if (!(await store.acquire(blockOfPoolA)).granted) throw new Error(`lease ${i} refused`);
  }
}

async function banMixed(store: LeaseStore, size: number): Promise<void> {
  for (let i = 0; i < size; i++) {
    const result = await store.acquire(blockOfPoolA);
    if (!result.granted) throw new Error(`lease ${i}: ${result.reason}`);
    await store.reportMany([{ leaseID: result.lease.id, result: 'banned', release: true }]);
  }
}
const byMixed = [
  ['selector', 'all_busy', fillMixed],
  ['selector', 'all_cooling_down', banMixed],
  ['scope', 'all_busy', fillMixed],
  ['scope', 'all_cooling_down', banMixed],
  ['session', 'all_busy', fillMixed],
  ['session', 'all_cooling_down', banMixed],
] as const;

async function fillEveryone(store: LeaseStore, size: number): Promise<void> {
  for (let i = 0; i < size; i++) {
    if (!(await store.acquire(request())).granted) throw new Error(`lease ${i} refused`);
  }
}

async function banEveryone(store: LeaseStore, size: number): Promise<void> {
  for (let i = 0; i < size; i++) {
    const result = await store.acquire(request());
    if (!result.granted) throw new Error(`lease ${i}: ${result.reason}`);
    await store.reportMany([{ leaseID: result.lease.id, result: 'banned', release: true }]);
  }
}

/** What `run` costs Redis, seen by MONITOR: the scripts sent and the commands they ran. */
async function cost(
  server: RedisServer,
  redis: Redis,
  run: () => Promise<unknown>,
): Promise<{ scripts: number; commands: string[]; sent: string[][] }> {
  const monitor = await server.monitor();
  const marker = `end-${Math.random()}`;
  let scripts = 0;
  const commands: string[] = [];
  const sent: string[][] = [];
  let ended = false;
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (ended) return;
    if (source === 'lua') commands.push(args[0].toLowerCase());
    else if (args[0].toLowerCase() === 'echo' && args[1] === marker) ended = true;
    else if (args[0].toLowerCase() === 'evalsha') {
      scripts++;
      sent.push(args);
    }
  });
  try {
    await run();
    await redis.echo(marker);
    await eventually(() => ended);
  } finally {
    monitor.disconnect();
  }
  return { scripts, commands, sent };
}

describe("the memory store's first refusal", () => {
  it.each([
    ['all_busy', fillEveryone],
    ['all_cooling_down', banEveryone],
  ] as const)("%s reads no proxy's cooldown at 100 or 1,000 proxies", async (reason, arrange) => {
    for (const size of [100, 1000]) {
      const store = new MemoryLeaseStore({ catalog: new TestCatalog(fleet(size)), logger: silentLogger });
      await arrange(store, size);
      const cooling = jest.spyOn(TargetBook.prototype, 'coolingDown');
      const entries = jest.spyOn(TargetBook.prototype, 'forTarget');
      try {
        expect(await store.acquire(request(`first-${size}`))).toMatchObject({ granted: false, reason });
        expect(cooling).not.toHaveBeenCalled();
        expect(entries).not.toHaveBeenCalled();
      } finally {
        cooling.mockRestore();
        entries.mockRestore();
        store.close();
      }
    }
  });
});

describe("the memory store's first refusal by exit-IP block", () => {
  it.each(byExit)(
    "IPv%s, %s: no proxy's cooldown read, no leasable proxy counted one by one, at 100 or 1,000 proxies",
    async (family, reason, arrange) => {
      for (const size of [100, 1000]) {
        const store = new MemoryLeaseStore({
          catalog: new TestCatalog(blocked(family, size)),
          logger: silentLogger,
        });
        await arrange(store, size, family);
        const cooling = jest.spyOn(TargetBook.prototype, 'coolingDown');
        const entries = jest.spyOn(TargetBook.prototype, 'forTarget');
        const counted = jest.spyOn(FreeProxyIndex.prototype, 'countLeasable');
        try {
          expect(await store.acquire(byBlock(family, `first-${size}`))).toMatchObject({
            granted: false,
            reason,
          });
          expect(cooling).not.toHaveBeenCalled();
          expect(entries).not.toHaveBeenCalled();
          expect(counted).not.toHaveBeenCalled();
        } finally {
          cooling.mockRestore();
          entries.mockRestore();
          counted.mockRestore();
          store.close();
        }
      }
    },
  );
});

describe("the memory store's first refusal of a class", () => {
  it.each(byClass)(
    "a %s, %s: the scope asked once per class, no proxy's cooldown read, at 100 or 1,000 proxies",
    async (how, reason, arrange) => {
      for (const size of [100, 1000]) {
        const store = new MemoryLeaseStore({ catalog: new TestCatalog(pooled(size)), logger: silentLogger });
        await arrange(store, size);
        const cooling = jest.spyOn(TargetBook.prototype, 'coolingDown');
        const entries = jest.spyOn(TargetBook.prototype, 'forTarget');
        const calls = { n: 0 };
        try {
          expect(await store.acquire(named(how, `first-${size}`, calls))).toMatchObject({
            granted: false,
            reason,
          });
          expect(cooling).not.toHaveBeenCalled();
          expect(entries).not.toHaveBeenCalled();
          // Two classes (pool a, pool b): the scope is asked of one member of each, no more.
          expect(calls.n).toBeLessThanOrEqual(2);
        } finally {
          cooling.mockRestore();
          entries.mockRestore();
          store.close();
        }
      }
    },
  );
});

describe("the memory store's first refusal of an exit-IP block with a selector or a scope", () => {
  it.each(byMixed)(
    "a %s, %s: no proxy's cooldown read, none counted one by one, the scope asked once per class, at 100 or 1,000 proxies",
    async (how, reason, arrange) => {
      for (const size of [100, 1000]) {
        const store = new MemoryLeaseStore({ catalog: new TestCatalog(mixed(size)), logger: silentLogger });
        await arrange(store, size);
        const cooling = jest.spyOn(TargetBook.prototype, 'coolingDown');
        const entries = jest.spyOn(TargetBook.prototype, 'forTarget');
        const counted = jest.spyOn(FreeProxyIndex.prototype, 'countLeasable');
        const free = jest.spyOn(FreeProxyIndex.prototype, 'free');
        const calls = { n: 0 };
        try {
          expect(await store.acquire(mixedRequest(how, `first-${size}`, calls))).toMatchObject({
            granted: false,
            reason,
          });
          expect(cooling).not.toHaveBeenCalled();
          expect(entries).not.toHaveBeenCalled();
          expect(counted).not.toHaveBeenCalled();
          expect(free).not.toHaveBeenCalled();
          // Two classes (pool a, pool b): the scope is asked of one member of each, no more.
          expect(calls.n).toBeLessThanOrEqual(2);
        } finally {
          cooling.mockRestore();
          entries.mockRestore();
          counted.mockRestore();
          free.mockRestore();
          store.close();
        }
      }
    },
  );
});

describe("the Redis store's first refusal", () => {
  let server: RedisServer;
  let redis: Redis;
  let books = 0;
  beforeAll(async () => {
    server = await startRedisServer();
    redis = connectRedis({ url: server.url, logger: silentLogger, timeoutMs: 15_000 });
    await whenReady(redis);
  });
  afterAll(async () => {
    redis.disconnect();
    await server.stop();
  });

  async function book(
    size: number,
    arrange: (store: LeaseStore, size: number) => Promise<void>,
    proxies = fleet(size),
  ) {
    const store = new RedisLeaseStore({
      redis,
      catalog: new TestCatalog(proxies),
      logger: silentLogger,
      keyPrefix: `first-${++books}`,
    });
    await store.fleetSettled();
    await arrange(store, size);
    return store;
  }

  it.each([
    ['all_busy', fillEveryone],
    ['all_cooling_down', banEveryone],
  ] as const)('%s: one script, the same commands at 100 and 1,000 proxies', async (reason, arrange) => {
    const seen: { scripts: number; commands: string[]; sent: string[][] }[] = [];
    for (const size of [100, 1000]) {
      const store = await book(size, arrange);
      try {
        // A new owner: a shape this replica never refused, so no remembered refusal answers.
        seen.push(
          await cost(server, redis, async () =>
            expect(await store.acquire(request(`first-${size}`))).toMatchObject({ granted: false, reason }),
          ),
        );
      } finally {
        store.close();
      }
    }
    const [small, large] = seen;
    expect(small.scripts).toBe(1);
    expect(large.scripts).toBe(1);
    expect(large.commands).toEqual(small.commands);
    // The first chunk's reads and the counts: a few commands, not one per proxy.
    expect(large.commands.length).toBeLessThan(12);
    // EVALSHA sha numkeys key leaseID ttl life count: every proxy hinted full to this replica
    // (it filled them), all_busy asks the counts with no candidate; all_cooling_down's proxies
    // are idle, so its first chunk goes with them.
    expect(large.sent[0][7]).toBe(reason === 'all_busy' ? '0' : '4');
  });

  it.each(byClass)(
    'a %s, %s: one script, the same commands at 100 and 1,000 matching proxies',
    async (how, reason, arrange) => {
      const seen: { scripts: number; commands: string[]; sent: string[][] }[] = [];
      for (const size of [100, 1000]) {
        const store = await book(size, arrange, pooled(size));
        try {
          seen.push(
            await cost(server, redis, async () =>
              expect(await store.acquire(named(how, `first-${size}`))).toMatchObject({
                granted: false,
                reason,
              }),
            ),
          );
        } finally {
          store.close();
        }
      }
      const [small, large] = seen;
      expect(small.scripts).toBe(1);
      expect(large.scripts).toBe(1);
      expect(large.commands).toEqual(small.commands);
      expect(large.commands.length).toBeLessThan(16);
      // The one class matched goes as its id and figures, not its members.
      expect(large.sent[0].length).toBe(small.sent[0].length);
    },
  );

  it.each(byMixed)(
    'a block and a %s, %s: one script, the same commands at 100 and 1,000 matching proxies',
    async (how, reason, arrange) => {
      const seen: { scripts: number; commands: string[]; sent: string[][] }[] = [];
      for (const size of [100, 1000]) {
        const store = await book(size, arrange, mixed(size));
        try {
          seen.push(
            await cost(server, redis, async () =>
              expect(await store.acquire(mixedRequest(how, `first-${size}`))).toMatchObject({
                granted: false,
                reason,
              }),
            ),
          );
        } finally {
          store.close();
        }
      }
      const [small, large] = seen;
      expect(small.scripts).toBe(1);
      expect(large.scripts).toBe(1);
      expect(large.commands).toEqual(small.commands);
      expect(large.commands.length).toBeLessThan(24);
      // The classes' ids, their union's figures, the block's keys and their exit counts: the
      // same number of arguments, whatever the number of proxies.
      expect(large.sent[0].length).toBe(small.sent[0].length);
      expect(large.sent[0].slice(-3, -1)).toEqual(small.sent[0].slice(-3, -1));
    },
  );

  it('a block and a selector no proxy of which egresses from it: no_match, one script at 100 and 1,000', async () => {
    for (const size of [100, 1000]) {
      // Pool b's proxies egress from 10.2.0.0/16, pool a's elsewhere: each part alone matches.
      const store = await book(size, async () => {}, mixed(size));
      const request: LeaseRequest = {
        ...named('selector', `empty-${size}`),
        exitIP: parseExitIPTerm('10.2.0.0/16')!,
      };
      try {
        expect((await store.acquire({ ...request, selector: { pool: 'b' } })).granted).toBe(true);
        const seen = await cost(server, redis, async () =>
          expect(await store.acquire(request)).toEqual({ granted: false, reason: 'no_match' }),
        );
        expect(seen.scripts).toBe(1);
        // Counted in the by-class exit sets (the empty chunk's walk would say the same).
        expect(seen.commands).toContain('zlexcount');
      } finally {
        store.close();
      }
    }
  });

  it.each(byExit)(
    'an IPv%s block, %s: one script, the same commands at 100 and 1,000 proxies in it',
    async (family, reason, arrange) => {
      const seen: { scripts: number; commands: string[]; sent: string[][] }[] = [];
      for (const size of [100, 1000]) {
        const store = await book(size, (s, n) => arrange(s, n, family), blocked(family, size));
        try {
          seen.push(
            await cost(server, redis, async () =>
              expect(await store.acquire(byBlock(family, `first-${size}`))).toMatchObject({
                granted: false,
                reason,
              }),
            ),
          );
        } finally {
          store.close();
        }
      }
      const [small, large] = seen;
      expect(small.scripts).toBe(1);
      expect(large.scripts).toBe(1);
      expect(large.commands).toEqual(small.commands);
      expect(large.commands.length).toBeLessThan(16);
      // The block goes as its first and last keys after the fleet's fingerprint, not its members.
      expect(large.sent[0].slice(-2)).toEqual(small.sent[0].slice(-2));
      expect(large.sent[0].length).toBe(small.sent[0].length);
    },
  );

  it.each([
    ['all_busy', fillPoolA],
    ['all_cooling_down', banPoolA],
  ] as const)(
    'eight classes, %s: one script, their ids and union figures in two arguments, the same commands at 100 and 1,000',
    async (reason, arrange) => {
      const zoned = (size: number) =>
        pooled(size).map((p) =>
          p.attributes.pool === 'a'
            ? { ...p, attributes: { pool: 'a', zone: String(Number(p.id.slice(4)) % 8) } }
            : p,
        );
      const seen: { scripts: number; commands: string[]; sent: string[][] }[] = [];
      for (const size of [100, 1000]) {
        const store = await book(size, arrange, zoned(size));
        try {
          seen.push(
            await cost(server, redis, async () =>
              expect(await store.acquire(named('selector', `eight-${size}`))).toMatchObject({
                granted: false,
                reason,
              }),
            ),
          );
          // A grant matching nine classes that are the whole fleet (a scope admitting all): one
          // script with the fleet's fingerprint (three numbers), not the classes.
          const granted = await cost(server, redis, async () =>
            expect(await store.acquire({ ...request('all'), within: () => true })).toMatchObject({
              granted: true,
            }),
          );
          expect(granted.scripts).toBe(1);
          expect(granted.sent[0].slice(-3).map(Number)).toEqual([
            size + size / 10,
            expect.any(Number),
            expect.any(Number),
          ]);
          expect(granted.sent[0].some((arg) => /^[0-9a-f]{16}(,[0-9a-f]{16})*$/.test(arg))).toBe(false);
        } finally {
          store.close();
        }
      }
      const [small, large] = seen;
      expect(small.scripts).toBe(1);
      expect(large.scripts).toBe(1);
      expect(large.commands).toEqual(small.commands);
      // The eight classes' ids, then their union's figures: pool a's size at each fleet size.
      const [ids, union] = large.sent[0].slice(-2);
      expect(ids.split(',')).toHaveLength(8);
      expect(union).toMatch(/^1000 \d+ \d+$/);
      expect(small.sent[0].at(-1)).toMatch(/^100 \d+ \d+$/);
    },
  );

  it('a request matching more classes than the bound walks, and answers right', async () => {
    // 40 classes of pool a (a zone each), every proxy full.
    const zoned = fleet(80).map((p, i) => ({ ...p, attributes: { pool: 'a', zone: `z${i % 40}` } }));
    const store = await book(80, fillPoolA, zoned);
    try {
      const walked = await cost(server, redis, async () =>
        expect(await store.acquire(named('selector', 'many'))).toMatchObject({
          granted: false,
          reason: 'all_busy',
        }),
      );
      expect(walked.scripts).toBeGreaterThan(1);
      // One zone: one class, counted.
      const counted = await cost(server, redis, async () =>
        expect(await store.acquire({ ...request('one'), selector: { pool: 'a', zone: 'z7' } })).toMatchObject(
          { granted: false, reason: 'all_busy' },
        ),
      );
      expect(counted.scripts).toBe(1);
    } finally {
      store.close();
    }
  });

  it("a class's counts follow another replica's leases, releases, relabels and holds", async () => {
    // Twenty proxies of pool a: replica b's chunk of 4 never reaches p19, so b's answers about
    // it come from the class's counts alone; a count wrong by one mark refuses a free p19.
    const proxies = (p19 = 'a') =>
      pooled(20).map((p) => (p.id === 'ns/p19' ? { ...p, attributes: { pool: p19 } } : p));
    const catalogs = [new TestCatalog(proxies()), new TestCatalog(proxies())];
    const keyPrefix = `first-${++books}`;
    const [a, b] = catalogs.map(
      (catalog) => new RedisLeaseStore({ redis, catalog, logger: silentLogger, keyPrefix }),
    );
    const settled = () => Promise.all([a.fleetSettled(), b.fleetSettled()]);
    const refusedAtB = async (owner: string) =>
      (
        await cost(server, redis, async () =>
          expect(await b.acquire(named('selector', owner))).toMatchObject({
            granted: false,
            reason: 'all_busy',
          }),
        )
      ).scripts;
    try {
      await settled();
      const leases = new Map<string, string>();
      for (let i = 0; i < 20; i++) {
        const result = await a.acquire({ ...request(), selector: poolA });
        if (!result.granted) throw new Error(`lease ${i} refused`);
        leases.set(result.lease.proxyID, result.lease.id);
      }
      expect(await refusedAtB('b1')).toBe(1);
      // p19 leaves the class and comes back, still full: its mark goes with it both ways.
      for (const pool of ['b', 'a']) {
        for (const catalog of catalogs) catalog.proxies = proxies(pool);
        await settled();
      }
      expect(await refusedAtB('b2')).toBe(1);
      // Another class's proxy held: pool a is still counted.
      const q = await a.acquire({ ...request(), selector: { pool: 'b' } });
      if (!q.granted) throw new Error('pool b refused');
      await a.report(q.lease.id, 'unreachable');
      await a.release(q.lease.id);
      expect(await refusedAtB('b3')).toBe(1);
      // p19 leaves the class still full (its mark leaves with it), then a frees p18: b, which
      // never sent it, is granted it.
      for (const catalog of catalogs) catalog.proxies = proxies('b');
      await settled();
      await a.release(leases.get('ns/p18')!);
      expect(await b.acquire(named('selector', 'b4'))).toMatchObject({
        granted: true,
        lease: { proxyID: 'ns/p18' },
      });
      // p19 back in the class, then freed by a: granted to b's scope.
      for (const catalog of catalogs) catalog.proxies = proxies('a');
      await settled();
      await a.release(leases.get('ns/p19')!);
      expect(await b.acquire(named('scope', 'b5'))).toMatchObject({
        granted: true,
        lease: { proxyID: 'ns/p19' },
      });
    } finally {
      a.close();
      b.close();
    }
  });

  it("a class's cooling counts follow another replica's bans and a new egress", async () => {
    const proxies = (p19ip = '10.0.0.1') =>
      pooled(20).map((p) => (p.id === 'ns/p19' ? { ...p, ip: p19ip } : p));
    const catalogs = [new TestCatalog(proxies()), new TestCatalog(proxies())];
    const keyPrefix = `first-${++books}`;
    const [a, b] = catalogs.map(
      (catalog) => new RedisLeaseStore({ redis, catalog, logger: silentLogger, keyPrefix }),
    );
    try {
      await Promise.all([a.fleetSettled(), b.fleetSettled()]);
      await banPoolA(a, 20);
      const refused = await cost(server, redis, async () =>
        expect(await b.acquire(named('selector', 'b1'))).toMatchObject({
          granted: false,
          reason: 'all_cooling_down',
        }),
      );
      expect(refused.scripts).toBe(1);
      // p19 on a new address: what the old one earned is forgotten (egress.ts), its class's
      // count with it; b, whose chunk never held p19, is granted it.
      for (const catalog of catalogs) catalog.proxies = proxies('10.0.9.19');
      await Promise.all([a.egressSettled(), b.egressSettled()]);
      expect(await b.acquire(named('scope', 'b2'))).toMatchObject({
        granted: true,
        lease: { proxyID: 'ns/p19' },
      });
    } finally {
      a.close();
      b.close();
    }
  });

  it('all_cooling_down says when the first cooldown ends, as the walk did', async () => {
    const store = await book(100, banEveryone);
    try {
      const counted = await store.acquire(request('counted'));
      // The registry gone (as a Redis emptied would lose it): the same request walks.
      await redis.del(`{first-${books}}:fleet`, `{first-${books}}:fleet-sum`);
      let walked: AcquireResult | undefined;
      const seen = await cost(server, redis, async () => (walked = await store.acquire(request('walked'))));
      expect(seen.scripts).toBeGreaterThan(1);
      expect(counted).toMatchObject({ granted: false, reason: 'all_cooling_down' });
      expect(walked).toMatchObject({ granted: false, reason: 'all_cooling_down' });
      if (counted.granted || walked === undefined || walked.granted) throw new Error('refused above');
      // Read a moment apart on Redis's clock: the same end, give or take that moment.
      expect(Math.abs(counted.retryAfterMs! - walked.retryAfterMs!)).toBeLessThan(1000);
    } finally {
      store.close();
    }
  });

  it('ended full marks leave P:full and their exit twins in P:xfull together (the sweep, or a refusal by block)', async () => {
    const clock = new FakeClock();
    const prefix = `first-${++books}`;
    const store = new RedisLeaseStore({
      redis,
      catalog: new TestCatalog(blocked(4, 10)),
      logger: silentLogger,
      keyPrefix: prefix,
      clock,
    });
    const marks = async () => [await redis.zcard(`{${prefix}}:full`), await redis.zcard(`{${prefix}}:xfull`)];
    try {
      await store.fleetSettled();
      expect(await redis.zcard(`{${prefix}}:xip`)).toBe(11);
      const fill = async () => {
        for (let i = 0; i < 10; i++)
          expect((await store.acquire({ ...byBlock(4), ttlSeconds: 60 })).granted).toBe(true);
      };
      await fill();
      expect(await marks()).toEqual([10, 10]);
      clock.advanceSeconds(61);
      await store.sweep();
      expect(await marks()).toEqual([0, 0]);
      // Full again, ended again: the next request by block, hinted full, asks the counts
      // first, which take the ten ended marks out before counting (not all full: the walk
      // then grants one, marked full: the only mark left).
      await fill();
      clock.advanceSeconds(61);
      expect(await store.acquire(byBlock(4, 'after'))).toMatchObject({ granted: true });
      expect(await marks()).toEqual([1, 1]);
    } finally {
      store.close();
    }
  });

  it("a replica whose catalog is not the book's registry walks, and answers right", async () => {
    const size = 100;
    const a = await book(size, fillEveryone);
    // b's catalog lacks p99 (its cache behind or ahead): its fingerprint is not the registry's.
    const b = new RedisLeaseStore({
      redis,
      catalog: new TestCatalog(fleet(size).slice(0, size - 1)),
      logger: silentLogger,
      keyPrefix: `first-${books}`,
    });
    const refusal = async (store: RedisLeaseStore, owner: string) =>
      (
        await cost(server, redis, async () =>
          expect(await store.acquire(request(owner))).toMatchObject({ granted: false, reason: 'all_busy' }),
        )
      ).scripts;
    try {
      await b.fleetSettled();
      expect(await refusal(a, 'a1')).toBe(1);
      expect(await refusal(b, 'b1')).toBeGreaterThan(1);
      // b's sweep makes the registry its view (p99 out): now b counts and a walks.
      await b.sweep();
      expect(await refusal(b, 'b2')).toBe(1);
      expect(await refusal(a, 'a2')).toBeGreaterThan(1);
      // And back with a's sweep: p99 in again, marked full again (its live leases fill its cap).
      await a.sweep();
      expect(await refusal(a, 'a3')).toBe(1);
    } finally {
      a.close();
      b.close();
    }
  });

  it("a block with a selector stays counted while a member's class and exit change and change back", async () => {
    const catalog = new TestCatalog(mixed(100));
    const store = new RedisLeaseStore({
      redis,
      catalog,
      logger: silentLogger,
      keyPrefix: `first-${++books}`,
    });
    const refused = (owner: string) => async () =>
      expect(await store.acquire(mixedRequest('selector', owner))).toMatchObject({
        granted: false,
        reason: 'all_busy',
      });
    // ns/p0 (full, in the block) relabelled to pool b, then moved out of the block, then back.
    const moved = (change: Partial<ProxyRecord>) =>
      mixed(100).map((p) => (p.id === 'ns/p0' ? { ...p, ...change } : p));
    try {
      await store.fleetSettled();
      await fillMixed(store, 100);
      let owners = 0;
      for (const records of [
        moved({ attributes: { pool: 'b' } }),
        mixed(100),
        moved({ exitIP: '192.0.2.200' }),
        mixed(100),
      ]) {
        catalog.proxies = records;
        await store.fleetSettled();
        // Each time the book's by-class exit sets are the catalog's: one script, no walk.
        expect((await cost(server, redis, refused(`moved-${++owners}`))).scripts).toBe(1);
      }
    } finally {
      store.close();
    }
  });

  it('a book from before the by-class exit sets walks a block with a selector, and counts it once its registry is sent again', async () => {
    const store = await book(100, fillMixed, mixed(100));
    const key = (name: string) => `{first-${books}}:${name}`;
    const refused = (owner: string) => async () =>
      expect(await store.acquire(mixedRequest('selector', owner))).toMatchObject({
        granted: false,
        reason: 'all_busy',
      });
    try {
      // What an older version left: no P:cxip, P:cxfull, P:cxcd (docs/redis.md's upgrade note).
      await redis.del(key('cxip'), key('cxfull'), key(`cxcd:${TARGET}`));
      expect((await cost(server, redis, refused('x'))).scripts).toBeGreaterThan(1);
      // The note's step: the registry and its sums deleted, each replica's sweep sends it again.
      await redis.del(key('fleet'), key('fleet-sum'), key('class-sum'));
      await store.sweep();
      expect((await cost(server, redis, refused('y'))).scripts).toBe(1);
    } finally {
      store.close();
    }
  });

  it('a book that lost its registry (a Redis emptied) walks until the sweep sends it again', async () => {
    const store = await book(100, fillEveryone);
    try {
      await redis.del(`{first-${books}}:fleet`, `{first-${books}}:fleet-sum`);
      const walked = await cost(server, redis, async () =>
        expect(await store.acquire(request('x'))).toMatchObject({ granted: false, reason: 'all_busy' }),
      );
      expect(walked.scripts).toBeGreaterThan(1);
      await store.sweep();
      const counted = await cost(server, redis, async () =>
        expect(await store.acquire(request('y'))).toMatchObject({ granted: false, reason: 'all_busy' }),
      );
      expect(counted.scripts).toBe(1);
    } finally {
      store.close();
    }
  });
});
