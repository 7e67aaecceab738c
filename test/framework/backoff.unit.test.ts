import { ExponentialBackoff } from '../../framework/utils/backoff.js';
import { TokenBucket } from '../../framework/utils/token-bucket.js';
import { jittered } from '../../framework/utils/sleep.js';

describe('ExponentialBackoff', () => {
  it('doubles per consecutive failure up to the cap, per key', () => {
    const b = new ExponentialBackoff<string>(1000, 300_000);
    const seq = Array.from({ length: 12 }, () => b.next('a'));
    expect(seq).toEqual([
      1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000, 300000, 300000, 300000,
    ]);
    expect(b.next('b')).toBe(1000);
  });

  it('never overflows for a key failing forever', () => {
    const b = new ExponentialBackoff<string>(1, 50);
    for (let i = 0; i < 5000; i++) b.next('x');
    expect(b.next('x')).toBe(50);
  });

  it.each([
    [0, 10],
    [-1, 10],
    [10, 5],
    [Number.NaN, 10],
  ])('rejects base=%p max=%p with a clear error', (base, max) => {
    expect(() => new ExponentialBackoff(base, max)).toThrow(/backoff: need 0 < baseMs <= maxMs/);
  });
});

describe('TokenBucket', () => {
  it('lets a burst through, then spaces requests at the rate', () => {
    let now = 0;
    const bucket = new TokenBucket(2, 3, () => now);
    expect([bucket.reserve(), bucket.reserve(), bucket.reserve()]).toEqual([0, 0, 0]);
    expect(bucket.reserve()).toBe(500);
    expect(bucket.reserve()).toBe(1000);
    now = 10_000; // refilled (to the burst size only)
    expect([bucket.reserve(), bucket.reserve(), bucket.reserve(), bucket.reserve()]).toEqual([0, 0, 0, 500]);
  });

  it('rejects a non-positive rate', () => {
    expect(() => new TokenBucket(0, 1)).toThrow(/token bucket/);
  });
});

describe('jittered', () => {
  it.each([
    [0, 500],
    [0.5, 1000],
    [1, 1500],
  ])('with random()=%p and jitter 0.5 gives %p ms of 1000', (random, expected) => {
    expect(jittered(1000, 0.5, () => random)).toBe(expected);
  });
});
