// The Redis book's wire format on the replica's side, and how a store's scripts are put
// together: pure functions, one table each.
import { describe, expect, it } from '@jest/globals';
import type { ProxyRecord } from '../../book/catalog.js';
import {
  acquireArgs,
  type CountedBy,
  decodeAcquireReply,
  decodeLease,
  decodeReleaseReply,
  oldestBucket,
  rankCandidates,
  windowCounts,
} from '../../book/redis-book-codec.js';
import { blocksFor, buildScripts, type ScriptSettings } from '../../book/redis-scripts.js';
import { proxy } from './fixtures.js';

describe('rankCandidates and acquireArgs', () => {
  const json = (r: ProxyRecord) => `{${r.id}}`;
  const a = proxy('ns/a', { latencyMillis: 30, maxLeases: 2 });
  const b = proxy('ns/b', { latencyMillis: 10, maxLeases: 3 });
  const c = proxy('ns/c', { latencyMillis: 10, maxLeases: 1 });
  const head = ['lease-1', '60', '120000'];
  it.each([
    ['no candidates', [], [...head, '0', '']],
    ['one', [a], [...head, '1', '', 'ns/a', '2', '{ns/a}']],
    [
      'latency first, then id: the order is the rank',
      [a, c, b],
      [...head, '3', '', ...['ns/b', '3', '{ns/b}'], ...['ns/c', '1', '{ns/c}'], ...['ns/a', '2', '{ns/a}']],
    ],
  ])('%s', (_name, chunk, expected) => {
    const ranked = rankCandidates(chunk);
    expect(acquireArgs('lease-1', '60', '120000', '', '{}', ranked, json, '', 'none', '')).toEqual(expected);
  });

  it.each([
    ['all defaults: nothing after the candidates', ['', '{}', '', 'none', ''], []],
    ['a target', ['t.example', '{}', '', 'none', ''], ['t.example']],
    ['a selector', ['', '{"geo":"eu"}', '', 'none', ''], ['', '{"geo":"eu"}']],
    ['a session to check', ['', '{}', 's1', 'check', ''], ['', '{}', 's1', 'check']],
    ['a session known moved', ['', '{}', 's1', 'moved', ''], ['', '{}', 's1', 'moved']],
    ['a bound proxy known gone', ['t', '{}', 's1', 'check', 'ns/z'], ['t', '{}', 's1', 'check', 'ns/z']],
  ] as const)('%s', (_name, [target, selector, session, mode, gone], tail) => {
    expect(
      acquireArgs('lease-1', '60', '120000', target, selector, [a], json, session, mode, gone).slice(8),
    ).toEqual(tail);
  });

  it.each<[string, CountedBy, string[]]>([
    [
      'a fingerprint: every default sent before it',
      { fleet: { count: 3, a: 7, b: 9 } },
      ['', '{}', '', 'none', '', '', '3', '7', '9'],
    ],
    ['an empty fleet: no fingerprint', { fleet: { count: 0, a: 0, b: 0 } }, []],
    [
      'classes: no fingerprint, their ids, then their union figures (counts summed, sums XORed)',
      {
        classes: [
          { id: '00000001000000a2', figures: '2 5 6', exits: 2 },
          { id: '00000003000000b4', figures: '1 9 9', exits: 0 },
        ],
      },
      ['', '{}', '', 'none', '', '', '', '', '', '00000001000000a2,00000003000000b4', `3 ${5 ^ 9} ${6 ^ 9}`],
    ],
    [
      "classes and a block: then the block's keys and each class's members with an exit",
      {
        classes: [
          { id: '00000001000000a2', figures: '2 5 6', exits: 2 },
          { id: '00000003000000b4', figures: '1 9 9', exits: 0 },
        ],
        block: { first: '4cb007100', last: '4cb007107' },
      },
      [
        '',
        '{}',
        '',
        'none',
        '',
        '',
        '',
        '',
        '',
        '00000001000000a2,00000003000000b4',
        `3 ${5 ^ 9} ${6 ^ 9}`,
        '4cb007100',
        '4cb007107',
        '2,0',
      ],
    ],
    ['no class: nothing', { classes: [] }, []],
  ])('%s', (_name, counts, tail) => {
    expect(
      acquireArgs('lease-1', '60', '120000', '', '{}', [a], json, '', 'none', '', '', counts).slice(8),
    ).toEqual(tail);
  });

  it('leaves the chunk it was given as it was', () => {
    const chunk = [a, b];
    rankCandidates(chunk);
    expect(chunk).toEqual([a, b]);
  });
});

describe('decodeAcquireReply', () => {
  const reply = (...fields: (string | number)[]) => fields.join('\u0000');
  const [a, b, c] = [proxy('ns/a'), proxy('ns/b'), proxy('ns/c')];
  it.each([
    [
      'a lease on the only candidate, no slots',
      reply('ok', 'ns/a', 1000, 61000, 0, 1, ''),
      [a],
      {
        kind: 'ok',
        proxyID: 'ns/a',
        proxy: a,
        now: 1000,
        expiresAt: 61000,
        moved: false,
        load: 1,
        slots: [],
        hints: [['ns/a', 0]],
      },
    ],
    [
      'a lease: loads of the busy candidates by their place, the rest idle, then slots (spaces inside)',
      reply('ok', 'ns/b', 1000, 61000, 1, 2, '1:1', '3 1 0 0 0', '4 0 1 0 0'),
      [b, c],
      {
        kind: 'ok',
        proxyID: 'ns/b',
        proxy: b,
        now: 1000,
        expiresAt: 61000,
        moved: true,
        load: 2,
        slots: ['3 1 0 0 0', '4 0 1 0 0'],
        hints: [
          ['ns/b', 1],
          ['ns/c', 0],
        ],
      },
    ],
    [
      'a held candidate has no hint',
      reply('ok', 'ns/c', 1000, 61000, 0, 1, '1:h'),
      [b, c],
      {
        kind: 'ok',
        proxyID: 'ns/c',
        proxy: c,
        now: 1000,
        expiresAt: 61000,
        moved: false,
        load: 1,
        slots: [],
        hints: [['ns/c', 0]],
      },
    ],
    ['the session is bound elsewhere', reply('need', 'ns/z'), [a], { kind: 'need', proxyID: 'ns/z' }],
    ['the owner holds its lease quota', reply('quota', 3), [a], { kind: 'quota', held: 3 }],
    [
      'none in this chunk, no cooldown',
      reply('none', 3, 0, 0, -1, '1:5,2:5,3:5', 0),
      [a, b, c],
      {
        kind: 'none',
        leasable: 3,
        cooling: 0,
        moved: false,
        waitMs: -1,
        hints: [
          ['ns/a', 5],
          ['ns/b', 5],
          ['ns/c', 5],
        ],
        whole: false,
      },
    ],
    [
      'none, cooling, the session moved, no candidate looked at',
      reply('none', 2, 2, 1, 1500, '', 0),
      [],
      { kind: 'none', leasable: 2, cooling: 2, moved: true, waitMs: 1500, hints: [], whole: false },
    ],
    [
      "none, and the fleet's counts answer for every proxy not sent",
      reply('none', 10000, 120, 0, 2500, '1:1', 1),
      [a],
      {
        kind: 'none',
        leasable: 10000,
        cooling: 120,
        moved: false,
        waitMs: 2500,
        hints: [['ns/a', 1]],
        whole: true,
      },
    ],
  ] as const)('%s', (_name, raw, ids, expected) => {
    expect(decodeAcquireReply(raw, ids)).toEqual(expected);
  });

  it('refuses an answer it does not know, or a choice it did not send', () => {
    expect(() => decodeAcquireReply('what\u0000ever', [])).toThrow(/unexpected acquire reply/);
    expect(() => decodeAcquireReply(reply('ok', 'ns/z', 1000, 61000, 0, 1, ''), [a])).toThrow(/not sent/);
  });
});

describe('decodeReleaseReply', () => {
  it.each([
    ['an unknown lease', null, undefined],
    ['its proxy and its leases now', 'ns/a\u00002', { proxyID: 'ns/a', load: 2 }],
    ['the last one', 'ns/a\u00000', { proxyID: 'ns/a', load: 0 }],
    ['a lease that had ended (not counted there any more)', 'ns/a\u0000-1', { proxyID: 'ns/a', load: -1 }],
  ] as const)('%s', (_name, raw, expected) => {
    expect(decodeReleaseReply(raw)).toEqual(expected);
  });
});

describe('decodeLease', () => {
  const record = proxy('ns/a');
  const value = (target: string, session: string) =>
    [
      'ns/a',
      '10.0.0.1:3128',
      '60',
      '1000',
      '61000',
      target,
      '{"geo":"eu"}',
      JSON.stringify(record),
      session,
    ].join('\u0000');
  const base = {
    id: 'L1',
    proxyID: 'ns/a',
    proxy: record,
    selector: { geo: 'eu' },
    ttlSeconds: 60,
    acquiredAt: new Date(1000),
    expiresAt: new Date(61000),
  };
  it.each([
    ['no target, no session', value('', ''), base],
    ['a target', value('example.com', ''), { ...base, target: 'example.com' }],
    ['a session', value('', 'k1'), { ...base, session: 'k1' }],
    ['a session holding the separator', value('', 'a\u0000b'), { ...base, session: 'a\u0000b' }],
  ])('%s', (_name, raw, expected) => {
    expect(decodeLease('L1', raw)).toEqual(expected);
  });
});

describe('windowCounts', () => {
  it.each([
    ['no slots', [], 10, { ok: 0, banned: 0, rate_limited: 0, unreachable: 0 }],
    ['one slot inside', ['12 1 2 3 4'], 10, { ok: 1, banned: 2, rate_limited: 3, unreachable: 4 }],
    ['the oldest bucket counts', ['10 1 0 0 0'], 10, { ok: 1, banned: 0, rate_limited: 0, unreachable: 0 }],
    [
      'older ones do not',
      ['9 5 5 5 5', '11 1 0 0 1'],
      10,
      { ok: 1, banned: 0, rate_limited: 0, unreachable: 1 },
    ],
    ['slots add up', ['10 1 1 0 0', '24 2 0 1 0'], 10, { ok: 3, banned: 1, rate_limited: 1, unreachable: 0 }],
  ])('%s', (_name, slots, oldest, expected) => {
    expect(windowCounts(slots, oldest)).toEqual(expected);
  });
});

describe('oldestBucket', () => {
  it.each([
    [0, 1000, 15, -14],
    [14_999, 1000, 15, 0],
    [15_000, 1000, 15, 1],
    [60_000, 4000, 15, 1],
  ])('now %d, buckets of %d ms, %d of them: %d', (now, bucketMillis, buckets, expected) => {
    expect(oldestBucket(now, bucketMillis, buckets)).toBe(expected);
  });
});

describe('blocksFor', () => {
  it.each([
    ['nothing', [], []],
    ['the clock alone', ['now'], ['now']],
    [
      'what a block calls comes with it, in definition order',
      ['loads', 'keep'],
      ['now', 'int', 'keep', 'loads'],
    ],
    ['holds bring the clock, counters and load flags', ['holds'], ['now', 'count', 'flags', 'held', 'holds']],
    ['loads bring the clock, integers and keep-alives', ['loads'], ['now', 'int', 'keep', 'loads']],
    ['twice asked, once given', ['now', 'now'], ['now']],
  ])('%s', (_name, needs, expected) => {
    expect(blocksFor(needs)).toEqual(expected);
  });

  it('refuses a block it does not know', () => {
    expect(() => blocksFor(['nope'])).toThrow(/unknown script block nope/);
  });
});

describe('buildScripts', () => {
  const settings: ScriptSettings = {
    prefix: '{t}',
    windowMillis: 60_000,
    bucketMillis: 4000,
    idleMillis: 1_800_000,
    maxSessions: 100,
    banBaseMillis: 900_000,
    banMaxMillis: 3_600_000,
    rateLimitBaseMillis: 10_000,
    rateLimitMaxMillis: 120_000,
    singleCooldownWindow: false,
    suspicionMillis: 60_000,
    holdoffMillis: 5000,
    maxTargetsPerProxy: 64,
    maxTargetEntries: 1000,
    jitter: 0.1,
    buckets: 15,
    clockArgument: false,
  };

  it('bakes the settings and the prefix into the source', () => {
    const { acquire } = buildScripts(settings);
    expect(acquire.source).toContain("local P = '{t}'");
    expect(acquire.source).toContain('local MAX_SESSIONS = 100');
    expect(acquire.source).toContain('local JITTER = 0.1');
    expect(acquire.source).toContain("local K_BUSY = '{t}:busy'");
    expect(acquire.source).not.toContain(':leases');
  });

  it("takes a test's clock as its first argument only when the store has one", () => {
    expect(buildScripts(settings).acquire.source).toContain('local A = 0');
    expect(buildScripts({ ...settings, clockArgument: true }).acquire.source).toContain('local A = 1');
  });

  it.each([
    [
      'release reads no clock and defines one helper (the batch report releases with it too)',
      'release',
      ['local function release_one'],
      ['local NOW', 'local function recall'],
    ],
    ['acquire leaves the report helpers out', 'acquire', ['local function failing_ratio'], ['target_report']],
    ['report has the cooldown rules', 'report', ['local function target_report'], []],
  ] as const)('%s', (_name, script, has, hasNot) => {
    const { source } = buildScripts(settings)[script];
    for (const text of has) expect(source).toContain(text);
    for (const text of hasNot) expect(source).not.toContain(text);
  });

  it('different settings, different scripts', () => {
    const a = buildScripts(settings).acquire.source;
    expect(buildScripts({ ...settings, maxSessions: 101 }).acquire.source).not.toBe(a);
    expect(buildScripts({ ...settings }).acquire.source).toBe(a);
  });

  it('refuses a setting that is not a finite number', () => {
    expect(() => buildScripts({ ...settings, windowMillis: Number.NaN })).toThrow(/not a finite number/);
  });
});
