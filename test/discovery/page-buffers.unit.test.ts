// The pool list pages are written into: a buffer is reused only once given back, never
// handed out twice at once, and the pool keeps a bounded number.
import { PageBuffers } from '../../discovery/page-buffers.js';

describe('PageBuffers', () => {
  it('hands out a buffer of exactly the asked length, and reuses it once given back', () => {
    const pool = new PageBuffers(1024, 4);
    const first = pool.take(100);
    expect(first.length).toBe(100);
    pool.give(first);
    expect(pool.size).toBe(1);
    const second = pool.take(300);
    expect(second.length).toBe(300);
    expect(second.buffer).toBe(first.buffer);
    expect(pool.created).toBe(1);
  });

  it('never hands out a buffer that is still lent', () => {
    const pool = new PageBuffers(1024, 4);
    const lent = Array.from({ length: 5 }, () => pool.take(10));
    expect(new Set(lent.map((b) => b.buffer)).size).toBe(5);
    expect(pool.created).toBe(5);
  });

  it('ignores a buffer given back twice, and buffers it did not lend', () => {
    const pool = new PageBuffers(1024, 4);
    const page = pool.take(10);
    pool.give(page);
    pool.give(page);
    pool.give(Buffer.alloc(10));
    pool.give(new Uint8Array(new ArrayBuffer(1024)));
    expect(pool.size).toBe(1);
    // Given back twice, it would now go to two pages at once.
    expect(pool.take(10).buffer).not.toBe(pool.take(10).buffer);
  });

  it('keeps at most maxFree buffers; the rest are dropped', () => {
    const pool = new PageBuffers(1024, 2);
    const lent = Array.from({ length: 5 }, () => pool.take(10));
    for (const page of lent) pool.give(page);
    expect(pool.size).toBe(2);
  });

  it('allocates a page longer than its buffers for the caller alone', () => {
    const pool = new PageBuffers(1024, 2);
    const big = pool.take(5000);
    expect(big.length).toBe(5000);
    pool.give(big);
    expect(pool.size).toBe(0);
    expect(pool.created).toBe(0);
  });

  it('refuses nonsense sizes', () => {
    expect(() => new PageBuffers(0)).toThrow(/bufferBytes/);
    expect(() => new PageBuffers(1024, -1)).toThrow(/maxFree/);
  });
});
