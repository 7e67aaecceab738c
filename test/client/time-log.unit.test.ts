// The times a pace remembers (client/src/crawlee/time-log.ts): an immutable log that appends
// without copying when it can.
import { TimeLog } from '../../client/src/crawlee/time-log.js';

/** `remember` each of `times` in turn, keeping those after `keepMs` before each and at most `cap`. */
const grown = (log: TimeLog, times: number[], keepMs = Infinity, cap = 256) =>
  times.reduce((l, t) => l.remember(t, t - keepMs, cap), log);

describe('a time log', () => {
  it.each<[string, number[], number, number, number, number[]]>([
    // name, times before, now, keepMs, cap, times after
    ['adds the new time last', [1, 2], 3, Infinity, 256, [1, 2, 3]],
    ['starts from empty', [], 5, Infinity, 256, [5]],
    ['drops the times at or before now - keepMs', [1, 2, 3, 4], 10, 7, 256, [4, 10]],
    ['drops every old time', [1, 2], 100, 10, 256, [100]],
    ['keeps at most cap times, dropping the oldest', [1, 2, 3], 4, Infinity, 3, [2, 3, 4]],
    ['a cap of one keeps only the new time', [1, 2, 3], 4, Infinity, 1, [4]],
  ])('%s', (_name, before, now, keepMs, cap, after) => {
    expect(
      TimeLog.of(before)
        .remember(now, now - keepMs, cap)
        .toArray(),
    ).toEqual(after);
  });

  it('leaves the log it grew from as it was', () => {
    const base = grown(TimeLog.empty, [1, 2, 3]);
    const next = base.remember(4, 1, 256);
    expect(base.toArray()).toEqual([1, 2, 3]);
    expect(next.toArray()).toEqual([2, 3, 4]);
    expect(TimeLog.empty.toArray()).toEqual([]);
  });

  it('two logs grown from one log each keep their own time (the second copies)', () => {
    const base = grown(TimeLog.empty, [1, 2]);
    const a = base.remember(3, 0, 256);
    const b = base.remember(4, 0, 256);
    expect([base.toArray(), a.toArray(), b.toArray()]).toEqual([
      [1, 2],
      [1, 2, 3],
      [1, 2, 4],
    ]);
    expect(a.remember(5, 0, 256).toArray()).toEqual([1, 2, 3, 5]);
  });

  it('stays bounded over a long crawl: what it holds and its length agree with a plain array', () => {
    let log = TimeLog.empty;
    let plain: number[] = [];
    for (let t = 1; t <= 100_000; t++) {
      log = log.remember(t, t - 500, 256);
      plain = [...plain.filter((x) => x > t - 500), t].slice(-256);
    }
    expect(log.toArray()).toEqual(plain);
    expect(log.length).toBe(256);
    // The dropped head is let go once it outgrows what the log keeps.
    expect(log.buffered).toBeLessThanOrEqual(2 * 256 + 1);
  });

  it('does not change the times it was made of', () => {
    const times = [1, 2, 3];
    TimeLog.of(times).remember(4, 0, 256);
    expect(times).toEqual([1, 2, 3]);
  });
});
