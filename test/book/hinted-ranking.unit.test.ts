// The Redis store's ranking raises lazily and lowers at once; its walk must still be exactly
// the (hinted load, latency, id) order. A seeded random walk of hints, catalog changes and
// partial walks compares every walk with a plain sort of the fleet.
import { describe, expect, it } from '@jest/globals';
import type { ProxyRecord } from '../../book/catalog.js';
import { HintedRanking, MAX_LAGGING } from '../../book/hinted-ranking.js';
import { matchesSelector } from '../../book/selector.js';
import { proxy } from './fixtures.js';
import { seededRandom as prng } from '../harness/seeded-random.js';

const SELECTORS: Record<string, string>[] = [{}, { geo: 'eu' }, { geo: 'us', purpose: 'crawl' }];

function fleet(count: number, random: () => number): ProxyRecord[] {
  return Array.from({ length: count }, (_, i) =>
    proxy(`ns/p${String(i).padStart(3, '0')}`, {
      latencyMillis: Math.floor(random() * 20),
      attributes: { geo: random() < 0.5 ? 'eu' : 'us', purpose: random() < 0.5 ? 'crawl' : 'api' },
    }),
  );
}

/** What the walk must yield: a plain sort of the matching proxies. */
function reference(
  records: Map<string, ProxyRecord>,
  hints: Map<string, number>,
  selector: Record<string, string>,
): string[] {
  const load = (id: string) => hints.get(id) ?? 0;
  return [...records.values()]
    .filter((r) => matchesSelector(r.attributes, selector))
    .sort(
      (a, b) =>
        load(a.id) - load(b.id) ||
        a.latencyMillis - b.latencyMillis ||
        (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
    )
    .map((r) => r.id);
}

describe('HintedRanking', () => {
  it('walks in (hinted load, latency, id) order after raises, lowers and catalog changes', () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const random = prng(seed);
      const ranking = new HintedRanking();
      const records = new Map<string, ProxyRecord>();
      const hints = new Map<string, number>();
      const all = fleet(40, random);
      for (const record of all.slice(0, 30)) {
        records.set(record.id, record);
        ranking.add(record);
      }
      for (let step = 0; step < 2000; step++) {
        const record = all[Math.floor(random() * all.length)];
        const roll = random();
        if (roll < 0.6) {
          // Mostly small loads, as a lease and a release move them.
          const load = Math.max(0, (hints.get(record.id) ?? 0) + (random() < 0.5 ? 1 : -1));
          if (load === 0) hints.delete(record.id);
          else hints.set(record.id, load);
          ranking.hint(record.id, load);
        } else if (roll < 0.7) {
          const next = { ...record, latencyMillis: Math.floor(random() * 20) };
          all[all.indexOf(record)] = next;
          records.set(next.id, next);
          ranking.add(next);
        } else if (roll < 0.75) {
          records.delete(record.id);
          ranking.delete(record.id);
        } else {
          const selector = SELECTORS[Math.floor(random() * SELECTORS.length)];
          const expected = reference(records, hints, selector);
          // A walk taken only in part (as a lease takes its first chunk) must agree as far as it goes.
          const take = random() < 0.5 ? expected.length : Math.floor(random() * 5);
          const walked = ranking.candidates(selector, undefined, take).map((r) => r.id);
          expect(walked).toEqual(expected.slice(0, take));
          // Stepping over some (as a later round steps over what earlier ones sent).
          const skip = new Set(expected.filter((_, i) => i % 3 === 0));
          expect(
            ranking.candidates(selector, undefined, take, (id) => skip.has(id)).map((r) => r.id),
          ).toEqual(expected.filter((id) => !skip.has(id)).slice(0, take));
        }
      }
    }
  });

  it('answers hints, records and the busy proxies', () => {
    const ranking = new HintedRanking();
    const a = proxy('ns/a');
    ranking.add(a);
    ranking.hint('ns/a', 2);
    ranking.hint('ns/z', 1);
    expect(ranking.load('ns/a')).toBe(2);
    expect(ranking.load('ns/b')).toBe(0);
    expect(ranking.record('ns/a')).toBe(a);
    expect(ranking.record('ns/z')).toBeUndefined();
    expect(ranking.busy().sort()).toEqual(['ns/a', 'ns/z']);
    ranking.hint('ns/a', 0);
    expect(ranking.busy()).toEqual(['ns/z']);
  });

  it('keeps no more than MAX_LAGGING raised proxies unplaced, and still walks them in order', () => {
    const ranking = new HintedRanking();
    const records = Array.from({ length: MAX_LAGGING + 50 }, (_, i) =>
      proxy(`ns/p${String(i).padStart(4, '0')}`, { latencyMillis: i }),
    );
    for (const record of records) ranking.add(record);
    for (const record of records) ranking.hint(record.id, 1);
    ranking.hint(records[10].id, 0);
    const walked = ranking.candidates({}, undefined, records.length).map((r) => r.id);
    expect(walked[0]).toBe(records[10].id);
    expect(walked.slice(1)).toEqual(records.filter((_, i) => i !== 10).map((r) => r.id));
  });
});
