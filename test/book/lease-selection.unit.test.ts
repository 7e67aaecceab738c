import type { ProxyRecord } from '../../book/catalog.js';
import { anyLeasable, isLeasable, refusal, selectProxy, type Candidate } from '../../book/lease-selection.js';
import type { LeaseRequest, OutcomeCounts } from '../../book/lease-store.js';
import { parseExitIPTerm } from '../../book/exit-ip-match.js';
import { matchesSelector } from '../../book/selector.js';
import { proxy } from './fixtures.js';

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

/** [id, live leases, latency, cooling down?, recent counts for the target when it failed there] */
type Row = [string, number, number, boolean?, OutcomeCounts?];

/** The candidates in the order the index hands them out: (load, latency, id). */
function ordered(rows: Row[]): Candidate[] {
  return rows
    .map(([id, load, latencyMillis]) => ({ proxy: proxy(id, { latencyMillis, maxLeases: 10 }), load }))
    .sort((a, b) =>
      a.load !== b.load
        ? a.load - b.load
        : a.proxy.latencyMillis !== b.proxy.latencyMillis
          ? a.proxy.latencyMillis - b.proxy.latencyMillis
          : a.proxy.id < b.proxy.id
            ? -1
            : 1,
    );
}

function select(rows: Row[]): string | undefined {
  const byID = new Map(rows.map((row) => [row[0], row]));
  return selectProxy(ordered(rows), {
    coolingDown: (id) => byID.get(id)![3] === true,
    failingRecord: (id) => byID.get(id)![4],
  })?.proxy.id;
}

const failed = (ok: number, banned: number, rateLimited = 0): OutcomeCounts => ({
  ok,
  banned,
  rate_limited: rateLimited,
  unreachable: 0,
});

describe('selection', () => {
  it.each<[string, Row[], string | undefined]>([
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
      'a proxy cooling down for the target is skipped',
      [
        ['ns/a', 0, 10, true],
        ['ns/b', 3, 900],
      ],
      'ns/b',
    ],
    ['every proxy cooling down: none', [['ns/a', 0, 10, true]], undefined],
    [
      'equally loaded: a clean record for the target beats a faster proxy that failed there',
      [
        ['ns/fast', 1, 10, false, failed(9, 1)],
        ['ns/clean', 1, 500],
      ],
      'ns/clean',
    ],
    [
      'equally loaded and all failed: the lowest failure ratio wins',
      [
        ['ns/a', 0, 10, false, failed(1, 1)],
        ['ns/b', 0, 500, false, failed(9, 0, 1)],
        ['ns/c', 0, 900, false, failed(0, 3)],
      ],
      'ns/b',
    ],
    [
      'equal failure ratios: lowest latency wins',
      [
        ['ns/a', 0, 300, false, failed(1, 1)],
        ['ns/b', 0, 100, false, failed(2, 2)],
      ],
      'ns/b',
    ],
    [
      'load still comes first: a failed proxy with fewer leases beats a clean busier one',
      [
        ['ns/failed', 0, 10, false, failed(0, 2)],
        ['ns/clean', 1, 10],
      ],
      'ns/failed',
    ],
    [
      'a cooling proxy is skipped even when its record is better',
      [
        ['ns/cooling', 0, 10, true],
        ['ns/failed', 0, 20, false, failed(1, 1)],
      ],
      'ns/failed',
    ],
  ])('%s', (_case, rows, expected) => {
    expect(select(rows)).toBe(expected);
  });
});

describe('why nothing was leased', () => {
  it.each<[string, number, number, string]>([
    // [case, leasable matches, of them cooling down for the target, reason]
    ['nothing leasable matches', 0, 0, 'no_match'],
    ['every match is full', 2, 0, 'all_busy'],
    ['every match is cooling down', 2, 2, 'all_cooling_down'],
    ['some full, the rest cooling down: busy (retrying soon may help)', 2, 1, 'all_busy'],
  ])('%s → %s', (_case, leasable, cooling, reason) => {
    expect(refusal(leasable, cooling)).toBe(reason);
  });
});

describe('which requests every leasable proxy could take (refused from counts, without a walk)', () => {
  it.each<[string, Pick<LeaseRequest, 'selector' | 'exitIP' | 'within'>, boolean]>([
    ['no selector, exit IP or scope', { selector: {} }, true],
    ['a selector', { selector: { geo: 'eu' } }, false],
    ['an exit IP', { selector: {}, exitIP: parseExitIPTerm('203.0.113.7') }, false],
    ['a token scope, even one that admits every proxy', { selector: {}, within: () => true }, false],
  ])('%s → %s', (_case, request, expected) => {
    expect(anyLeasable(request)).toBe(expected);
  });
});
