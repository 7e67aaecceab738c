// The memory store's cooling counts per target (cooling-counts.ts): a proxy counted while its
// cooldown runs, extended in place, gone when it ends or the proxy is dropped.
import { describe, expect, it } from '@jest/globals';
import { CoolingCounts } from '../../book/cooling-counts.js';
import { blockRange, exitMember, parseExitIPTerm } from '../../book/exit-ip-match.js';

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

  it.each<
    [
      string,
      ['set', string, string, number, string?][],
      number,
      [number, number | undefined],
      [number, number | undefined],
    ]
  >([
    // [case, steps (proxy, target, until, class), now, [count, first end] of class c for t, of class d for t]
    [
      'counted for its class and target',
      [
        ['set', 'a', 't', 100, 'c'],
        ['set', 'b', 't', 200, 'd'],
      ],
      50,
      [1, 100],
      [1, 200],
    ],
    ['not for another target', [['set', 'a', 'u', 100, 'c']], 50, [0, undefined], [0, undefined]],
    [
      'two of a class: the first end',
      [
        ['set', 'a', 't', 300, 'c'],
        ['set', 'b', 't', 200, 'c'],
      ],
      50,
      [2, 200],
      [0, undefined],
    ],
    [
      'ended: gone from its class too',
      [
        ['set', 'a', 't', 100, 'c'],
        ['set', 'b', 't', 200, 'c'],
      ],
      150,
      [1, 200],
      [0, undefined],
    ],
    [
      'extended: its class sees the new end',
      [
        ['set', 'a', 't', 100, 'c'],
        ['set', 'a', 't', 300, 'c'],
      ],
      150,
      [1, 300],
      [0, undefined],
    ],
    [
      'its class changed: counted in the new one only',
      [
        ['set', 'a', 't', 100, 'c'],
        ['set', 'a', 't', 100, 'd'],
      ],
      50,
      [0, undefined],
      [1, 100],
    ],
    [
      'no class given: counted for the target alone',
      [['set', 'a', 't', 100]],
      50,
      [0, undefined],
      [0, undefined],
    ],
  ])('per class: %s', (_case, steps, now, inC, inD) => {
    const counts = new CoolingCounts();
    for (const [, proxyID, target, until, cls] of steps) counts.set(proxyID, target, until, cls);
    expect([counts.countIn('c', 't', now), counts.firstEndIn('c', 't', now)]).toEqual(inC);
    expect([counts.countIn('d', 't', now), counts.firstEndIn('d', 't', now)]).toEqual(inD);
  });

  it('a proxy dropped leaves its target and its class, and an ended one leaves both however it is counted', () => {
    const counts = new CoolingCounts();
    counts.set('a', 't', 100, 'c');
    counts.set('b', 't', 200, 'c');
    counts.dropProxy('a');
    expect([counts.count('t', 0), counts.countIn('c', 't', 0)]).toEqual([1, 1]);
    // Counted through its class after it ended: gone from the target's count as well.
    expect(counts.countIn('c', 't', 250)).toBe(0);
    counts.set('b', 't', 300, 'c');
    expect([counts.count('t', 250), counts.countIn('c', 't', 250)]).toEqual([1, 1]);
  });

  it('counts by exit-IP block: an ended one, a dropped one and one moved to another exit leave it', () => {
    const counts = new CoolingCounts();
    const block = blockRange(parseExitIPTerm('203.0.113.0/24')!);
    const exit = (id: string, ip: string) => exitMember({ id, exitIP: ip });
    counts.set('a', 't', 100, 'c', exit('a', '203.0.113.1'));
    counts.set('b', 't', 200, 'c', exit('b', '203.0.113.2'));
    counts.set('o', 't', 200, 'c', exit('o', '198.51.100.1'));
    counts.set('n', 't', 200, 'c');
    counts.set('u', 'u', 200, 'c', exit('u', '203.0.113.9'));
    expect(counts.countBlock('t', block, 50)).toBe(2);
    expect(counts.countBlock('t', block, 100)).toBe(1);
    counts.set('b', 't', 300, 'c', exit('b', '198.51.100.2'));
    expect(counts.countBlock('t', block, 100)).toBe(0);
    expect(counts.count('t', 100)).toBe(3);
    counts.set('b', 't', 300, 'c', exit('b', '203.0.113.2'));
    expect(counts.countBlock('t', block, 100)).toBe(1);
    counts.dropProxy('b');
    expect(counts.countBlock('t', block, 100)).toBe(0);
    expect(counts.countBlock('u', block, 100)).toBe(1);
  });
});
