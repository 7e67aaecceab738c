// A token's lease and cooldown quotas at the gateway door, behind two gateway replicas (each a
// process of its own: its own ledger) on one real Redis book, beside the API's door: the
// book counts the token's leases and cooldowns, so the quota is one for every replica and
// both doors (each replica counting its own let a token hold its quota at each).
import { describe, expect, it } from '@jest/globals';
import { TenantLedger } from '../../book/tenant-quotas.js';
import { OPEN_POLICY } from '../../book/token-scope.js';
import { gatewayBook } from '../../handlers/gateway-book.js';
import { proxy, TestCatalog } from '../book/fixtures.js';
import { redisReplicas } from '../book/redis-replicas.js';

const QUOTAS = { leases: 3, sessions: 100, cooldowns: 2, reportsPerSecond: 100 };
const TARGET = 'shop.example';

const books = redisReplicas();
let prefixes = 0;

/** `n` replicas of one book, each a process with its own ledger (its quotas' limits). */
async function replicas(n: number) {
  const keyPrefix = `gateway-quotas-${++prefixes}`;
  const out = [];
  for (let i = 0; i < n; i++) {
    const catalog = new TestCatalog(
      Array.from({ length: 4 }, (_, j) => proxy(`ns/p${j}`, { latencyMillis: j, maxLeases: 10 })),
    );
    const store = await books.open({ catalog, keyPrefix });
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
