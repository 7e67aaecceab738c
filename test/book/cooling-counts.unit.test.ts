// The memory store's cooling counts per target (cooling-counts.ts): a proxy counted while its
// cooldown runs, extended in place, gone when it ends or the proxy is dropped.
import { describe, expect, it } from '@jest/globals';
import { CoolingCounts } from '../../book/cooling-counts.js';

type Step = ['set', string, string, number] | ['drop', string];

describe('CoolingCounts', () => {
  it.each<[string, Step[], number, number, number | undefined]>([
    // [case, steps, now, count for t, first end for t]
    ['nothing counted', [], 0, 0, undefined],
    [
      'two cooling',
      [
        ['set', 'a', 't', 100],
        ['set', 'b', 't', 200],
      ],
      50,
      2,
      100,
    ],
    [
      'one ended',
      [
        ['set', 'a', 't', 100],
        ['set', 'b', 't', 200],
      ],
      100,
      1,
      200,
    ],
    [
      'all ended',
      [
        ['set', 'a', 't', 100],
        ['set', 'b', 't', 200],
      ],
      200,
      0,
      undefined,
    ],
    [
      'extended: counted once, to its new end',
      [
        ['set', 'a', 't', 100],
        ['set', 'a', 't', 300],
      ],
      150,
      1,
      300,
    ],
    ['another target is not this one', [['set', 'a', 'u', 100]], 0, 0, undefined],
    [
      'dropped (left the index)',
      [
        ['set', 'a', 't', 100],
        ['set', 'b', 't', 200],
        ['drop', 'a'],
      ],
      0,
      1,
      200,
    ],
    [
      'dropped and set again',
      [
        ['set', 'a', 't', 100],
        ['drop', 'a'],
        ['set', 'a', 't', 150],
      ],
      0,
      1,
      150,
    ],
    [
      'counted again after it ended',
      [
        ['set', 'a', 't', 100],
        ['set', 'a', 't', 400],
      ],
      300,
      1,
      400,
    ],
  ])('%s', (_case, steps, now, count, firstEnd) => {
    const counts = new CoolingCounts();
    for (const step of steps) {
      if (step[0] === 'set') counts.set(step[1], step[2], step[3]);
      else counts.dropProxy(step[1]);
    }
    expect(counts.count('t', now)).toBe(count);
    expect(counts.firstEnd('t', now)).toBe(firstEnd);
  });

  it('a cooldown that ended and was pruned is counted when it starts again', () => {
    const counts = new CoolingCounts();
    counts.set('a', 't', 100);
    expect(counts.count('t', 150)).toBe(0);
    counts.set('a', 't', 400);
    expect(counts.count('t', 150)).toBe(1);
  });
});
