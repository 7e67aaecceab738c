import { Registry } from 'prom-client';
import { countedSince, registerBookMetrics } from '../../book/book-metrics.js';
import { MemoryLeaseStore } from '../../book/memory-lease-store.js';
import { proxy, silentLogger, TestCatalog } from './fixtures.js';

// Issue 47 item 6: every replica of a shared book reads the same totals; only the one the
// operator designates (the acting leader) exports them, so a sum across replicas counts once.
const BOOK_SERIES = [
  'proxy_operator_leases_active',
  'proxy_operator_sessions_active',
  'proxy_operator_cooldowns_active',
  'proxy_operator_suspect_proxies',
];

async function values(registry: Registry): Promise<Record<string, number[]>> {
  const out: Record<string, number[]> = {};
  for (const name of BOOK_SERIES)
    out[name] = (await registry.getSingleMetric(name)!.get()).values.map((v) => v.value);
  return out;
}

describe("the book's figures", () => {
  it.each<[string, boolean, Record<string, number[]>]>([
    [
      'from the designated replica: its totals',
      true,
      {
        proxy_operator_leases_active: [2],
        proxy_operator_sessions_active: [1],
        proxy_operator_cooldowns_active: [0],
        proxy_operator_suspect_proxies: [0],
      },
    ],
    [
      // An unlabelled gauge always has its one series; 0 keeps every sum() right.
      'from any other replica: 0',
      false,
      {
        proxy_operator_leases_active: [0],
        proxy_operator_sessions_active: [0],
        proxy_operator_cooldowns_active: [0],
        proxy_operator_suspect_proxies: [0],
      },
    ],
  ])('%s', async (_, exported, expected) => {
    const store = new MemoryLeaseStore({
      catalog: new TestCatalog([proxy('ns/a'), proxy('ns/b')]),
      logger: silentLogger,
    });
    await store.acquire({ selector: {}, ttlSeconds: 60 });
    await store.acquire({ selector: {}, ttlSeconds: 60, session: 's1' });
    const registry = new Registry();
    registerBookMetrics(registry, store, () => exported);
    expect(await values(registry)).toEqual(expected);
  });

  it('a replica that stops being the designated one stops counting the book', async () => {
    const store = new MemoryLeaseStore({ catalog: new TestCatalog([proxy('ns/a')]), logger: silentLogger });
    await store.acquire({ selector: {}, ttlSeconds: 60 });
    const registry = new Registry();
    let leads = true;
    registerBookMetrics(registry, store, () => leads);
    expect((await values(registry)).proxy_operator_leases_active).toEqual([1]);
    leads = false;
    expect((await values(registry)).proxy_operator_leases_active).toEqual([0]);
  });
});

describe("what a counter following the book's totals adds", () => {
  it.each([
    ['the first read', 0, 5, 5],
    ['the total grew', 5, 8, 3],
    ['unchanged', 8, 8, 0],
    // A Redis restart that kept nothing: the book counts from 0 again.
    ['the book started again, 2 since', 8, 2, 2],
    ['the book started again, nothing since', 8, 0, 0],
  ])('%s (last %d, now %d): adds %d', (_, lastSeen, total, added) => {
    expect(countedSince(lastSeen, total)).toBe(added);
  });
});
