// The tests' polling helper (framework/testing/eventually.ts).
import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { eventually } from '../../framework/testing/eventually.js';

afterEach(() => {
  jest.restoreAllMocks();
});

describe('eventually', () => {
  it('resolves with the first value that passes', async () => {
    let calls = 0;
    await expect(
      eventually('the third call', () => (++calls >= 3 ? calls : undefined), { intervalMs: 1 }),
    ).resolves.toBe(3);
  });

  it('rejects naming what it waited for and the last value, once the time is up', async () => {
    await expect(eventually('never', () => false, { timeoutMs: 30, intervalMs: 5 })).rejects.toThrow(
      'timed out after 30 ms waiting for never; last value false',
    );
  });

  it("rejects with the last attempt's own error when it threw", async () => {
    const check = () => {
      throw new Error('the diff');
    };
    await expect(eventually('a throw', check, { timeoutMs: 20, intervalMs: 5 })).rejects.toThrow('the diff');
  });

  it('waits its whole time when the wall clock steps forward meanwhile (a VM syncing its time)', async () => {
    // The wall clock reads true once (when the wait starts), then an hour ahead.
    const wall = Date.now();
    jest
      .spyOn(Date, 'now')
      .mockReturnValueOnce(wall)
      .mockReturnValue(wall + 3_600_000);
    const started = performance.now();
    await expect(
      eventually('200 ms', () => performance.now() - started >= 200, { timeoutMs: 30_000, intervalMs: 10 }),
    ).resolves.toBe(true);
  });
});
