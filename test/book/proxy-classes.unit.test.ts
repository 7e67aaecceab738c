// Proxy classes (proxy-classes.ts): proxies alike in namespace and attributes are one class; a
// selector or a token scope admits a class whole; a request matching more classes than the
// bound is not counted (undefined: the caller walks).
import { describe, expect, it } from '@jest/globals';
import type { ProxyRecord } from '../../book/catalog.js';
import { classID } from '../../book/fleet-fingerprint.js';
import { classKey, classMatcher, ProxyClasses } from '../../book/proxy-classes.js';
import { RedisFleetFeed } from '../../book/redis-fleet-feed.js';
import { scopeMatcher } from '../../book/token-scope.js';
import { proxy, silentLogger } from './fixtures.js';

describe('classKey', () => {
  it.each<[string, ProxyRecord, ProxyRecord, boolean]>([
    [
      'the same namespace and attributes, other name, address, cap and health',
      proxy('ns/a', { attributes: { pool: 'a', region: 'eu' } }),
      proxy('ns/b', {
        attributes: { pool: 'a', region: 'eu' },
        ip: '10.9.9.9',
        maxLeases: 7,
        healthy: false,
      }),
      true,
    ],
    [
      'the same attributes in another order',
      proxy('ns/a', { attributes: { pool: 'a', region: 'eu' } }),
      proxy('ns/b', { attributes: { region: 'eu', pool: 'a' } }),
      true,
    ],
    [
      'another namespace',
      proxy('ns/a', { attributes: { pool: 'a' } }),
      proxy('other/a', { attributes: { pool: 'a' } }),
      false,
    ],
    [
      'another value',
      proxy('ns/a', { attributes: { pool: 'a' } }),
      proxy('ns/b', { attributes: { pool: 'b' } }),
      false,
    ],
    [
      'one attribute more',
      proxy('ns/a', { attributes: { pool: 'a' } }),
      proxy('ns/b', { attributes: { pool: 'a', region: 'eu' } }),
      false,
    ],
    [
      'no attributes beside an empty value',
      proxy('ns/a', { attributes: {} }),
      proxy('ns/b', { attributes: { pool: '' } }),
      false,
    ],
    [
      'separators inside keys and values cannot join two pairs into one',
      proxy('ns/a', { attributes: { 'a","b': 'c' } }),
      proxy('ns/b', { attributes: { a: 'b","c' } }),
      false,
    ],
  ])('%s', (_name, x, y, same) => {
    expect(classKey(x) === classKey(y)).toBe(same);
    expect(classID(classKey(x)) === classID(classKey(y))).toBe(same);
  });

  it("names a class in the book by 16 hex digits (the registry entry's last field)", () => {
    expect(classID(classKey(proxy('ns/a', { attributes: { pool: 'a' } })))).toMatch(/^[0-9a-f]{16}$/);
  });
});

describe('classMatcher: whatever a selector or a scope reads is the class', () => {
  const sample = proxy('crawl-a/p1', { attributes: { pool: 'a', region: 'eu' } });
  it.each<[string, Record<string, string>, ((p: ProxyRecord) => boolean) | undefined, boolean]>([
    ['no selector, no scope', {}, undefined, true],
    ['a selector it holds', { pool: 'a' }, undefined, true],
    ['a selector of two pairs it holds', { pool: 'a', region: 'eu' }, undefined, true],
    ['a selector with another value', { pool: 'b' }, undefined, false],
    ['a selector with a key it lacks', { zone: 'x' }, undefined, false],
    ['a scope of its namespace', {}, scopeMatcher({ namespaces: ['crawl-a'] }), true],
    ['a scope of other namespaces', {}, scopeMatcher({ namespaces: ['crawl-b'] }), false],
    ['a scope selecting it', {}, scopeMatcher({ selector: { region: 'eu' } }), true],
    [
      'a selector it holds, a scope it is outside',
      { pool: 'a' },
      scopeMatcher({ selector: { region: 'us' } }),
      false,
    ],
  ])('%s', (_name, selector, within, expected) => {
    expect(classMatcher(selector, within)(sample)).toBe(expected);
  });
});

describe('ProxyClasses', () => {
  const a1 = proxy('ns/a1', { attributes: { pool: 'a', region: 'eu' } });
  const a2 = proxy('ns/a2', { attributes: { region: 'eu', pool: 'a' } });
  const b1 = proxy('ns/b1', { attributes: { pool: 'b', region: 'eu' } });
  const c1 = proxy('other/c1', { attributes: { pool: 'a', region: 'eu' } });
  const keysOf = (found: { sample: ProxyRecord; members: number }[] | undefined) =>
    found?.map(({ sample, members }) => `${sample.id}×${members}`).sort();

  it.each<
    [
      string,
      ProxyRecord[],
      string[],
      Record<string, string>,
      ((p: ProxyRecord) => boolean) | undefined,
      string[] | undefined,
    ]
  >([
    // [case, joined, left (ids), selector, scope, classes found: "sample×members"]
    ['no selector: every class', [a1, a2, b1, c1], [], {}, undefined, ['ns/a1×2', 'ns/b1×1', 'other/c1×1']],
    [
      'a selector: the classes holding it',
      [a1, a2, b1, c1],
      [],
      { pool: 'a' },
      undefined,
      ['ns/a1×2', 'other/c1×1'],
    ],
    ['a term no class holds: none', [a1, b1], [], { pool: 'z' }, undefined, []],
    [
      'a scope narrows them',
      [a1, a2, b1, c1],
      [],
      { pool: 'a' },
      scopeMatcher({ namespaces: ['ns'] }),
      ['ns/a1×2'],
    ],
    ['a member left: counted one less', [a1, a2, b1], ['ns/a2'], { pool: 'a' }, undefined, ['ns/a1×1']],
    [
      'every member left: the class is gone',
      [a1, a2, b1],
      ['ns/a1', 'ns/a2'],
      { region: 'eu' },
      undefined,
      ['ns/b1×1'],
    ],
  ])('%s', (_name, joined, left, selector, within, expected) => {
    const classes = new ProxyClasses(() => ({}));
    for (const record of joined) classes.join(record);
    for (const id of left) classes.leave(classKey(joined.find((r) => r.id === id)!));
    expect(keysOf(classes.matching(selector, within))).toEqual(expected);
  });

  it('more classes than the bound: undefined (walk); up to it: all of them', () => {
    const classes = new ProxyClasses(() => ({}));
    for (let i = 0; i < 5; i++) classes.join(proxy(`ns/p${i}`, { attributes: { pool: 'a', n: String(i) } }));
    expect(classes.matching({ pool: 'a' }, undefined, 5)).toHaveLength(5);
    expect(classes.matching({ pool: 'a' }, undefined, 4)).toBeUndefined();
    // The bound counts matches, not the classes looked at.
    expect(classes.matching({ pool: 'a', n: '3' }, undefined, 1)).toHaveLength(1);
  });

  it("keeps each class's own counts", () => {
    const classes = new ProxyClasses(() => ({ free: 0 }));
    classes.join(a1).data.free++;
    classes.join(a2).data.free++;
    classes.join(b1);
    expect(classes.get(a2)?.data.free).toBe(2);
    expect(classes.get(b1)?.data.free).toBe(0);
    expect(classes.size).toBe(2);
  });
});

describe("RedisFleetFeed.matchingClasses: this replica's figures of the classes a request matches", () => {
  const feed = () => {
    const sent: string[][] = [];
    const f = new RedisFleetFeed({
      send: async (args) => void sent.push(args),
      read: async () => [],
      logger: silentLogger,
    });
    return { f, sent };
  };
  const a1 = proxy('ns/a1', { attributes: { pool: 'a' }, maxLeases: 2 });
  const a2 = proxy('ns/a2', { attributes: { pool: 'a' }, maxLeases: 2 });
  const az = proxy('ns/az', { attributes: { pool: 'a', zone: 'z' }, maxLeases: 2 });
  const idOf = (record: ProxyRecord) => classID(classKey(record));

  it('each matched class once, with its members counted; a class that comes later is matched at once', async () => {
    const { f } = feed();
    f.set(a1.id, a1);
    f.set(a2.id, a2);
    const first = f.matchingClasses({ pool: 'a' }, undefined);
    expect(first).toEqual([{ id: idOf(a1), figures: expect.stringMatching(/^2 \d+ \d+$/), exits: 0 }]);
    f.set(az.id, az);
    expect(
      f
        .matchingClasses({ pool: 'a' }, undefined)
        ?.map(({ id }) => id)
        .sort(),
    ).toEqual([idOf(a1), idOf(az)].sort());
    // A member gone: its class's figures change, the class stays.
    f.set(a2.id, undefined);
    expect(f.matchingClasses({ pool: 'a' }, undefined)?.find(({ id }) => id === idOf(a1))?.figures).toMatch(
      /^1 \d+ \d+$/,
    );
    // Its last member gone: the class is no longer matched.
    f.set(az.id, undefined);
    expect(f.matchingClasses({ pool: 'a' }, undefined)?.map(({ id }) => id)).toEqual([idOf(a1)]);
    f.close();
  });

  it('counts per class the members with an exit IP known, through exit changes, relabels and leaves', () => {
    const { f } = feed();
    const exits = (pool: string) => f.matchingClasses({ pool }, undefined)?.map(({ exits: n }) => n) ?? [];
    f.set(a1.id, { ...a1, exitIP: '203.0.113.1' });
    f.set(a2.id, a2);
    expect(exits('a')).toEqual([1]);
    f.set(a2.id, { ...a2, exitIP: '203.0.113.2' });
    expect(exits('a')).toEqual([2]);
    f.set(a2.id, { ...a2, exitIP: 'not an address' });
    expect(exits('a')).toEqual([1]);
    f.set(a1.id, { ...a1, exitIP: '203.0.113.1', attributes: { pool: 'b' } });
    expect([exits('a'), exits('b')]).toEqual([[0], [1]]);
    f.set(a1.id, undefined);
    expect(exits('b')).toEqual([]);
    f.close();
  });

  it("tells the book a member's class, and a relabelled member again", async () => {
    const { f, sent } = feed();
    f.set(a1.id, a1);
    await f.settled();
    f.set(a1.id, { ...a1, attributes: { pool: 'b' } });
    await f.settled();
    expect(sent.map((args) => args[5])).toEqual([idOf(a1), idOf({ ...a1, attributes: { pool: 'b' } })]);
    f.close();
  });
});
