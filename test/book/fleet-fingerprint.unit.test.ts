// The figures a replica and the Redis book's fleet registry compare (fleet-fingerprint.ts):
// equal for the same (id, cap) members in any order, different when any member or cap is.
import { describe, expect, it } from '@jest/globals';
import { FleetFingerprint, memberHash } from '../../book/fleet-fingerprint.js';

function of(steps: [string, number | undefined][]) {
  const fp = new FleetFingerprint();
  for (const [id, cap] of steps) fp.set(id, cap);
  return fp.get();
}

describe('memberHash', () => {
  it.each([
    ['ns/a', 1],
    ['ns/a', 2],
    ['ns/b', 1],
    ['ns/a\u00001', 0],
  ])('%s with cap %d: two 31-bit numbers (positive in Lua`s signed 32-bit bit ops)', (id, cap) => {
    for (const h of memberHash(id, cap)) {
      expect(Number.isInteger(h)).toBe(true);
      expect(h).toBeGreaterThanOrEqual(0);
      expect(h).toBeLessThan(2 ** 31);
    }
  });

  it('differs with the id or the cap', () => {
    const hashes = [memberHash('ns/a', 1), memberHash('ns/a', 2), memberHash('ns/b', 1)].map(String);
    expect(new Set(hashes).size).toBe(3);
  });
});

describe('FleetFingerprint', () => {
  const a1: [string, number] = ['ns/a', 1];
  const b3: [string, number] = ['ns/b', 3];
  const c2: [string, number] = ['ns/c', 2];
  it.each<[string, [string, number | undefined][], [string, number | undefined][], boolean]>([
    ['the same members in another order', [a1, b3, c2], [c2, a1, b3], true],
    ['one member left and came back', [a1, b3], [a1, b3, ['ns/b', undefined], b3], true],
    ['a cap changed and changed back', [a1, b3], [a1, ['ns/b', 5], b3], true],
    ['a member set twice', [a1, a1], [a1], true],
    ['a member missing', [a1, b3], [a1], false],
    ['a cap differs', [a1, b3], [a1, ['ns/b', 4]], false],
    ['another member of the same count', [a1, b3], [a1, c2], false],
    ['a member removed that never was', [a1], [a1, ['ns/z', undefined]], true],
  ])('%s: equal = %s', (_name, x, y, equal) => {
    if (equal) expect(of(x)).toEqual(of(y));
    else expect(of(x)).not.toEqual(of(y));
  });

  it('is all zeros with no member, and counts its members', () => {
    expect(of([])).toEqual({ count: 0, a: 0, b: 0 });
    expect(of([a1, ['ns/a', undefined]])).toEqual({ count: 0, a: 0, b: 0 });
    expect(of([a1, b3, c2]).count).toBe(3);
  });
});

describe('FleetFingerprint per class', () => {
  it.each<[string, [string, number | undefined, string][], [string, number | undefined, string][], boolean]>([
    [
      'the same members of a class in another order',
      [
        ['ns/a', 1, 'c'],
        ['ns/b', 2, 'c'],
      ],
      [
        ['ns/b', 2, 'c'],
        ['ns/a', 1, 'c'],
      ],
      true,
    ],
    [
      'a member in another class',
      [
        ['ns/a', 1, 'c'],
        ['ns/b', 2, 'c'],
      ],
      [
        ['ns/a', 1, 'c'],
        ['ns/b', 2, 'd'],
      ],
      false,
    ],
    [
      'a member moved out and back',
      [['ns/a', 1, 'c']],
      [
        ['ns/a', 1, 'c'],
        ['ns/a', 1, 'd'],
        ['ns/a', 1, 'c'],
      ],
      true,
    ],
    [
      'a member gone',
      [
        ['ns/a', 1, 'c'],
        ['ns/b', 2, 'c'],
      ],
      [
        ['ns/a', 1, 'c'],
        ['ns/b', 2, 'c'],
        ['ns/b', undefined, ''],
      ],
      false,
    ],
  ])("%s: class c's figures equal = %s", (_name, x, y, equal) => {
    const figures = (steps: [string, number | undefined, string][]) => {
      const fp = new FleetFingerprint();
      for (const [id, cap, cls] of steps) fp.set(id, cap, cls);
      return { c: fp.ofClass('c'), all: fp.get() };
    };
    if (equal) expect(figures(x)).toEqual(figures(y));
    else expect(figures(x).c).not.toEqual(figures(y).c);
  });

  it("a member's exit is in its hashes: the fleet's figures tell a new exit IP, and none known is as before exits", () => {
    const fp = new FleetFingerprint();
    fp.set('ns/a', 1, 'c', '4cb007101');
    const before = fp.get();
    fp.set('ns/a', 1, 'c', '4cb007102');
    expect(fp.get()).not.toEqual(before);
    expect(fp.ofClass('c')).not.toEqual({ count: 0, a: 0, b: 0 });
    fp.set('ns/a', 1, 'c', '4cb007101');
    expect(fp.get()).toEqual(before);
    expect(memberHash('ns/a', 1, 'c', '')).toEqual(memberHash('ns/a', 1, 'c'));
    expect(fp.member('ns/a')?.exit).toBe('4cb007101');
  });

  it("a member's class is in its hashes: the fleet's figures tell a class change too", () => {
    const fp = new FleetFingerprint();
    fp.set('ns/a', 1, 'c');
    const before = fp.get();
    fp.set('ns/a', 1, 'd');
    expect(fp.get()).not.toEqual(before);
    expect(fp.ofClass('c')).toEqual({ count: 0, a: 0, b: 0 });
    expect(fp.ofClass('d').count).toBe(1);
  });
});
