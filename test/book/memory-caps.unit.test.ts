// The worst a client can make the in-memory book hold, measured: every cap filled (sessions,
// (proxy, target) entries, per-proxy statistics) stays well inside the operator's heap
// (charts/operator-chart.ts: 160 MiB old space, ~52 MiB in use at 1,000 proxies).
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { OPERATOR_MEMORY } from '../../charts/operator-chart.js';
import { MemoryLeaseStore } from '../../book/memory-lease-store.js';
import { DEFAULT_MAX_SESSIONS } from '../../book/session-book.js';
import { MAX_TARGET_ENTRIES, MAX_TARGETS_PER_PROXY } from '../../book/target-book.js';
import { FakeClock, proxy, silentLogger, TestCatalog } from './fixtures.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const heapMiB = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed / 2 ** 20;
};

/** Half the room the heap has beside what the operator uses at 1,000 proxies. */
const BUDGET_MiB = (OPERATOR_MEMORY.oldSpaceMiB - 52) / 2;

it(`a client filling every cap of the memory store costs under ${BUDGET_MiB} MiB of heap`, async () => {
  const proxies = Array.from({ length: MAX_TARGET_ENTRIES / MAX_TARGETS_PER_PROXY + 1 }, (_, i) =>
    proxy(`ns/p${i}`, { maxLeases: 1_000_000, latencyMillis: i }),
  );
  const clock = new FakeClock();
  const before = heapMiB();
  const store = new MemoryLeaseStore({ catalog: new TestCatalog(proxies), logger: silentLogger, clock });
  // Every session the cap allows, each bound to a proxy (its lease released: the binding stays).
  for (let i = 0; i < DEFAULT_MAX_SESSIONS; i++) {
    const result = await store.acquire({
      selector: {},
      ttlSeconds: 60,
      session: `session-${i}-${'x'.repeat(40)}`,
    });
    if (!result.granted) throw new Error(result.reason);
    await store.release(result.lease.id);
  }
  // Every (proxy, target) entry the caps allow, and then some: junk targets with long names.
  let capped = 0;
  for (const p of proxies) {
    const held = await store.acquire({ selector: {}, ttlSeconds: 3600 });
    if (!held.granted) throw new Error(held.reason);
    for (let t = 0; t < MAX_TARGETS_PER_PROXY + 10; t++) {
      const outcome = await store.report(held.lease.id, 'banned', {
        target: `junk-${p.id}-${t}-${'y'.repeat(60)}.example`,
      });
      if (outcome?.capped === true) capped++;
    }
  }
  const totals = await store.totals();
  expect(totals.activeSessions).toBe(DEFAULT_MAX_SESSIONS);
  expect(totals.activeCooldowns).toBe(MAX_TARGET_ENTRIES);
  expect(capped).toBeGreaterThan(0);
  const used = heapMiB() - before;
  expect(used).toBeLessThan(BUDGET_MiB);
  store.close();
});
