import { WorkQueue } from '../../framework/core/queue.js';
import { MAX_TIMER_MS, sleep } from '../../framework/utils/sleep.js';

const tick = () => new Promise((r) => setImmediate(r));

describe('WorkQueue', () => {
  it('de-duplicates a key added many times before it is processed', async () => {
    const q = new WorkQueue();
    for (let i = 0; i < 50; i++) q.add('ns/a');
    q.add('ns/b');
    expect(q.length).toBe(2);
    expect(await q.get()).toBe('ns/a');
    expect(await q.get()).toBe('ns/b');
  });

  it('never hands a key to two workers at once; a re-add during processing runs once more afterwards', async () => {
    const q = new WorkQueue();
    q.add('k');
    const first = await q.get();
    q.add('k');
    q.add('k');
    expect(q.length).toBe(0); // held back while 'k' is processing
    q.done(first!);
    expect(q.length).toBe(1);
    expect(await q.get()).toBe('k');
  });

  it('runs at most `concurrency` workers and serializes each key', async () => {
    const q = new WorkQueue();
    let running = 0;
    let maxRunning = 0;
    const perKey = new Map<string, number>();
    let maxPerKey = 0;
    const runs = q.run(3, async (key) => {
      running++;
      perKey.set(key, (perKey.get(key) ?? 0) + 1);
      maxRunning = Math.max(maxRunning, running);
      maxPerKey = Math.max(maxPerKey, perKey.get(key)!);
      await new Promise((r) => setTimeout(r, 5));
      perKey.set(key, perKey.get(key)! - 1);
      running--;
    });
    for (let round = 0; round < 5; round++) {
      for (let i = 0; i < 10; i++) q.add(`k${i % 4}`);
      await new Promise((r) => setTimeout(r, 3));
    }
    await new Promise((r) => setTimeout(r, 100));
    q.shutDown();
    await runs;
    expect(maxRunning).toBe(3);
    expect(maxPerKey).toBe(1);
  });

  it('delays addAfter and keeps only the earliest pending delay per key', async () => {
    const q = new WorkQueue();
    q.addAfter('k', 10_000);
    q.addAfter('k', 20);
    q.addAfter('k', 5_000);
    expect(q.length).toBe(0);
    const started = Date.now();
    expect(await q.get()).toBe('k');
    expect(Date.now() - started).toBeLessThan(4_000);
    q.shutDown();
  });

  // A Node timer holds at most 2^31-1 ms; a longer one fired after 1 ms, so a Proxy requeued
  // for its rotation in 30 days was reconciled again at once, over and over.
  it.each([
    ['just beyond what one timer holds', MAX_TIMER_MS + 1],
    ['30 days', 30 * 24 * 3600 * 1000],
    ['365 days', 365 * 24 * 3600 * 1000],
  ])('waits out an addAfter of %s instead of firing at once', async (_case, ms) => {
    const q = new WorkQueue();
    q.addAfter('k', ms);
    await new Promise((r) => setTimeout(r, 50));
    expect(q.length).toBe(0);
    q.shutDown();
  });

  it.each([
    ['just beyond what one timer holds', MAX_TIMER_MS + 1],
    ['30 days', 30 * 24 * 3600 * 1000],
  ])('sleeps through a wait of %s, and an abort still ends it', async (_case, ms) => {
    const abort = new AbortController();
    let woke = false;
    const slept = sleep(ms, abort.signal).then(() => (woke = true));
    await new Promise((r) => setTimeout(r, 50));
    expect(woke).toBe(false);
    abort.abort();
    await slept;
    expect(woke).toBe(true);
  });

  it.each([
    [1, 10],
    [2, 20],
    [3, 40],
    [4, 80],
    [5, 100],
    [6, 100],
  ])('backs a failing key off exponentially: failure %i waits %i ms (cap 100)', (failures, expected) => {
    const q = new WorkQueue({ backoffBaseMs: 10, backoffMaxMs: 100 });
    let delay = 0;
    for (let i = 0; i < failures; i++) delay = q.addRateLimited('k');
    expect(delay).toBe(expected);
    q.shutDown();
  });

  it('forgets the failure count on success', () => {
    const q = new WorkQueue({ backoffBaseMs: 10, backoffMaxMs: 1000 });
    q.addRateLimited('k');
    q.addRateLimited('k');
    q.forget('k');
    expect(q.retries('k')).toBe(0);
    expect(q.addRateLimited('k')).toBe(10);
    q.shutDown();
  });

  it('applies the overall rate limit on top of per-key backoff', () => {
    const q = new WorkQueue({ backoffBaseMs: 1, backoffMaxMs: 1, qps: 1, burst: 2 });
    const delays = ['a', 'b', 'c', 'd'].map((k) => q.addRateLimited(k));
    expect(delays[0]).toBe(1);
    expect(delays[1]).toBe(1);
    expect(delays[2]).toBeGreaterThan(500);
    expect(delays[3]).toBeGreaterThan(delays[2]);
    q.shutDown();
  });

  it('wakes idle workers with undefined on shutdown and ignores later adds', async () => {
    const q = new WorkQueue();
    const waiting = q.get();
    q.shutDown();
    expect(await waiting).toBeUndefined();
    q.add('k');
    await tick();
    expect(q.length).toBe(0);
  });
});
