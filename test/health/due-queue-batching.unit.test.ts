import { DueQueue } from '../../health/due-queue.js';
import { FakeClock } from './fake-clock.js';

/** Which keys the queue handed out at which time, with the time each was planned for. */
async function fired(batchMillis: number, due: Record<string, number>, until: number) {
  const clock = new FakeClock();
  const seen: Array<{ key: string; at: number; plannedAt: number }> = [];
  const queue = new DueQueue(
    clock,
    (key, plannedAt) => seen.push({ key, at: clock.now(), plannedAt }),
    batchMillis,
  );
  for (const [key, at] of Object.entries(due)) queue.schedule(key, at);
  queue.start();
  await clock.advance(until);
  return seen;
}

describe('DueQueue batching: keys due close together are handed out together', () => {
  const due = { a: 1000, b: 1050, c: 1199, d: 1201, e: 1500 };

  it.each<[string, number, Array<[string, number]>]>([
    [
      'without a window, each key at its own time',
      0,
      [
        ['a', 1000],
        ['b', 1050],
        ['c', 1199],
        ['d', 1201],
        ['e', 1500],
      ],
    ],
    [
      'with 200 ms, what is due within 200 ms of the first goes with it; the rest waits for its own time',
      200,
      [
        ['a', 1000],
        ['b', 1000],
        ['c', 1000],
        ['d', 1201],
        ['e', 1500],
      ],
    ],
  ])('%s', async (_what, batchMillis, expected) => {
    const seen = await fired(batchMillis, due, 2000);
    expect(seen.map((s) => [s.key, s.at])).toEqual(expected);
    // Early or not, every key keeps its planned time (the next interval counts from it).
    expect(seen.map((s) => s.plannedAt)).toEqual(Object.values(due));
  });

  it('never hands a key out before its time minus the window', async () => {
    const seen = await fired(200, { late: 5000 }, 4700);
    expect(seen).toEqual([]);
  });

  it('refuses a negative window', () => {
    expect(() => new DueQueue(new FakeClock(), () => undefined, -1)).toThrow(RangeError);
  });
});
