// The per-address wrong-token limit behind several replicas of one Redis book: each replica's
// SourceLimiter (the count both doors of a process share) also counts every failure in the
// book, so a guesser spreading its attempts over N replicas gets one burst, not N; when Redis
// is away each process's own count still limits it, and nobody is locked out for it.
import { describe, expect, it } from '@jest/globals';
import { DEFAULT_FAILED_AUTH_LIMITS, SourceLimiter } from '../../discovery/source-limiter.js';
import { FakeClock, TestCatalog } from '../book/fixtures.js';
import { redisReplicas } from '../book/redis-replicas.js';

const { burst, ratePerSecond } = DEFAULT_FAILED_AUTH_LIMITS;
const GUESSER = '203.0.113.7';

const books = redisReplicas();
let prefixes = 0;

/** `n` replicas of one book (one key prefix): each its own process's limiter, on one clock. */
async function replicas(n: number, shared: boolean, clock = new FakeClock()) {
  const keyPrefix = `limits-${++prefixes}`;
  const limiters: SourceLimiter[] = [];
  for (let i = 0; i < n; i++) {
    const store = await books.open({ catalog: new TestCatalog([]), keyPrefix, clock });
    const limiter = new SourceLimiter(DEFAULT_FAILED_AUTH_LIMITS, () => clock.now());
    if (shared) limiter.share((address, l) => store.countFailedAuth(address, l.ratePerSecond, l.burst));
    limiters.push(limiter);
  }
  return { limiters, clock };
}

/** A guesser's attempts spread round-robin over the replicas, one at a time: those checked (not refused first). */
async function guesses(limiters: SourceLimiter[], attempts: number, from = GUESSER): Promise<number> {
  let checked = 0;
  for (let i = 0; i < attempts; i++) {
    const limiter = limiters[i % limiters.length];
    if (limiter.blocked(from) !== undefined) continue;
    checked++;
    limiter.failed(from);
    await limiter.settled();
  }
  return checked;
}

describe('wrong tokens per source address, across replicas of one Redis book', () => {
  it.each([
    // Each process counting alone: one burst per replica (the bound before the shared count).
    { replicas: 1, shared: false, checked: burst },
    { replicas: 3, shared: false, checked: 3 * burst },
    // Counted in the book too: one burst in all, however many replicas; each other replica
    // checks one more before its first answer from the book tells it (charged there).
    { replicas: 1, shared: true, checked: burst },
    { replicas: 2, shared: true, checked: burst + 1 },
    { replicas: 3, shared: true, checked: burst + 2 },
  ])(
    '$replicas replica(s), shared: $shared: of 200 guesses at one instant, $checked are checked',
    async ({ replicas: n, shared, checked }) => {
      const { limiters } = await replicas(n, shared);
      expect(await guesses(limiters, 200)).toBe(checked);
    },
  );

  it(`after the burst, ${ratePerSecond}/s in all across the replicas, not per replica`, async () => {
    const { limiters, clock } = await replicas(3, true);
    await guesses(limiters, 200);
    let checked = 0;
    // Ten seconds, ten steps a second: every replica tried at every step.
    for (let step = 0; step < 100; step++) {
      clock.advanceSeconds(0.1);
      checked += await guesses(limiters, 3);
    }
    // 50 refilled over the 10 s; a replica whose view was stale may let one through, charged.
    expect(checked).toBeGreaterThanOrEqual(ratePerSecond * 10 - 2);
    expect(checked).toBeLessThanOrEqual(ratePerSecond * 10 + 3);
  });

  it('another address is not limited by the guesser, and an address that stops is free again within (burst + 1) / rate s', async () => {
    const { limiters, clock } = await replicas(2, true);
    await guesses(limiters, 200);
    expect(limiters.map((l) => l.blocked('198.51.100.1'))).toEqual([undefined, undefined]);
    clock.advanceSeconds((burst + 1) / ratePerSecond);
    expect(await guesses(limiters, 1)).toBe(1);
  });

  it("with Redis down the process's own count limits the address (one burst per replica), and no address is locked out for it", async () => {
    const { limiters } = await replicas(2, true);
    await books.server().kill();
    try {
      expect(await guesses(limiters, 200)).toBe(2 * burst);
      expect(limiters.map((l) => l.blocked('198.51.100.2'))).toEqual([undefined, undefined]);
    } finally {
      await books.server().start();
    }
  });
});
