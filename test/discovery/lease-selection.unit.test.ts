import type { ProxyRecord } from '../../discovery/catalog.js';
import { isLeasable, selectProxy } from '../../discovery/lease-selection.js';
import { matchesSelector } from '../../discovery/selector.js';
import { proxy } from './fixtures.js';

const idle = { load: () => 0, coolingDown: () => false };

describe('which proxies may ever be leased', () => {
  it.each<[string, Partial<ProxyRecord>, boolean]>([
    ['a healthy proxy with an IP and capacity', {}, true],
    ['an unhealthy proxy', { healthy: false }, false],
    ['a proxy without an IP yet', { ip: '' }, false],
    ['a list-only proxy (maxLeases 0)', { maxLeases: 0 }, false],
    ['a proxy being deleted, even if still healthy', { phase: 'Deleting' }, false],
  ])('%s → %s', (_case, overrides, leasable) => {
    expect(isLeasable(proxy('ns/a', overrides))).toBe(leasable);
  });
});

describe('selector matching', () => {
  it.each<[Record<string, string>, Record<string, string>, boolean]>([
    [{ geo: 'eu' }, {}, true],
    [{ geo: 'eu', purpose: 'crawl' }, { geo: 'eu' }, true],
    [{ geo: 'eu', purpose: 'crawl' }, { geo: 'eu', purpose: 'crawl' }, true],
    [{ geo: 'eu' }, { geo: 'us' }, false],
    [{ geo: 'eu' }, { purpose: 'crawl' }, false],
    [{ geo: 'EU' }, { geo: 'eu' }, false],
    [{}, { toString: 'x' }, false],
  ])('attributes %j, selector %j → %s', (attributes, selector, matches) => {
    expect(matchesSelector(attributes, selector)).toBe(matches);
  });
});

describe('least-loaded selection', () => {
  it.each<[string, Array<[string, number, number]>, string]>([
    // [id, live leases, latency]
    [
      'fewest live leases wins over lower latency',
      [
        ['ns/a', 2, 10],
        ['ns/b', 1, 900],
      ],
      'ns/b',
    ],
    [
      'equal load: lowest latency wins',
      [
        ['ns/a', 1, 300],
        ['ns/b', 1, 20],
      ],
      'ns/b',
    ],
    [
      'equal load and latency: lowest id wins',
      [
        ['ns/b', 0, 50],
        ['ns/a', 0, 50],
      ],
      'ns/a',
    ],
    [
      'full proxies are skipped however fast',
      [
        ['ns/a', 5, 1],
        ['ns/b', 4, 999],
      ],
      'ns/b',
    ],
  ])('%s', (_case, table, expected) => {
    const loads = new Map(table.map(([id, load]) => [id, load]));
    const candidates = table.map(([id, , latencyMillis]) => proxy(id, { latencyMillis, maxLeases: 5 }));
    const selection = selectProxy(candidates, {}, { load: (id) => loads.get(id)!, coolingDown: () => false });
    expect(selection).toEqual({ proxy: expect.objectContaining({ id: expected }) });
  });

  it('only considers proxies matching the selector', () => {
    const candidates = [
      proxy('ns/us', { attributes: { geo: 'us' }, latencyMillis: 1 }),
      proxy('ns/eu', { attributes: { geo: 'eu' } }),
    ];
    expect(selectProxy(candidates, { geo: 'eu' }, idle)).toEqual({
      proxy: expect.objectContaining({ id: 'ns/eu' }),
    });
  });
});

describe('why nothing was selected', () => {
  const a = proxy('ns/a', { maxLeases: 1 });
  const b = proxy('ns/b', { maxLeases: 1 });
  it.each<[string, ProxyRecord[], string[], string[], string]>([
    // [case, candidates, full ids, cooling ids, reason]
    ['empty catalog', [], [], [], 'no_match'],
    [
      'only unleasable proxies',
      [proxy('ns/x', { healthy: false }), proxy('ns/y', { maxLeases: 0 })],
      [],
      [],
      'no_match',
    ],
    ['every match is full', [a, b], ['ns/a', 'ns/b'], [], 'all_busy'],
    ['every match is cooling down', [a, b], [], ['ns/a', 'ns/b'], 'all_cooling_down'],
    [
      'some full, the rest cooling down: busy (retrying soon may help)',
      [a, b],
      ['ns/a'],
      ['ns/b'],
      'all_busy',
    ],
    ['full and cooling down at once counts as cooling down', [a], ['ns/a'], ['ns/a'], 'all_cooling_down'],
  ])('%s → %s', (_case, candidates, full, cooling, reason) => {
    const state = {
      load: (id: string) => (full.includes(id) ? 1 : 0),
      coolingDown: (id: string) => cooling.includes(id),
    };
    expect(selectProxy(candidates, {}, state)).toEqual({ reason });
  });
});
