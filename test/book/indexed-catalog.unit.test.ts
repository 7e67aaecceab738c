import type { CatalogChange, ProxyRecord } from '../../book/catalog.js';
import { IndexedCatalog } from '../../book/indexed-catalog.js';
import { parseExitIPTerm } from '../../book/exit-ip-match.js';
import { proxy } from './fixtures.js';

function catalogOf(records: ProxyRecord[]) {
  const catalog = new IndexedCatalog();
  const changes: CatalogChange[] = [];
  catalog.replaceAll(records);
  catalog.subscribe((change) => changes.push(change));
  return { catalog, changes };
}

const ids = (records: readonly ProxyRecord[]) => records.map((r) => r.id);

describe('IndexedCatalog', () => {
  const fleet = () => [
    proxy('ns/c', { attributes: { geo: 'eu', purpose: 'crawl' } }),
    proxy('ns/a', { attributes: { geo: 'eu', purpose: 'api' } }),
    proxy('ns/b', { attributes: { geo: 'us', purpose: 'crawl' }, healthy: false }),
    proxy('other/a', { attributes: {} }),
  ];

  it.each<[string, Parameters<IndexedCatalog['list']>[0], string[]]>([
    ['everything, sorted by id', {}, ['ns/a', 'ns/b', 'ns/c', 'other/a']],
    ['one attribute', { selector: { geo: 'eu' } }, ['ns/a', 'ns/c']],
    ['every attribute pair', { selector: { geo: 'eu', purpose: 'crawl' } }, ['ns/c']],
    ['pairs in any order', { selector: { purpose: 'crawl', geo: 'eu' } }, ['ns/c']],
    ['an unknown value', { selector: { geo: 'mars' } }, []],
    ['an unknown key', { selector: { team: 'x' } }, []],
    ['healthy only', { healthy: true }, ['ns/a', 'ns/c', 'other/a']],
    ['unhealthy with a selector', { healthy: false, selector: { purpose: 'crawl' } }, ['ns/b']],
    ['a key that is an Object.prototype member', { selector: { toString: 'x' } }, []],
  ])('lists %s', (_case, filter, expected) => {
    expect(ids(catalogOf(fleet()).catalog.list(filter))).toEqual(expected);
  });

  it('filters by exit IP (unknown: never), each term its own cached list', () => {
    const { catalog } = catalogOf([
      proxy('ns/a', { exitIP: '203.0.113.7', attributes: { geo: 'eu' } }),
      proxy('ns/b', { exitIP: '203.0.113.9' }),
      proxy('ns/c', { attributes: { geo: 'eu' } }),
    ]);
    const term = (t: string) => parseExitIPTerm(t)!;
    expect(ids(catalog.list({ exitIP: term('203.0.113.0/24') }))).toEqual(['ns/a', 'ns/b']);
    expect(ids(catalog.list({ exitIP: term('203.0.113.9') }))).toEqual(['ns/b']);
    expect(ids(catalog.list({ exitIP: term('203.0.113.0/24'), selector: { geo: 'eu' } }))).toEqual(['ns/a']);
    expect(ids(catalog.list({ selector: { geo: 'eu' } }))).toEqual(['ns/a', 'ns/c']);
    expect(ids(catalog.list({ exitIP: term('0.0.0.0/0') }))).toEqual(['ns/a', 'ns/b']);
  });

  it('serves a repeated list from its cache until the catalog changes', () => {
    const { catalog } = catalogOf(fleet());
    const first = catalog.list({ selector: { geo: 'eu' } });
    expect(catalog.list({ selector: { geo: 'eu' } })).toBe(first);
    catalog.upsert(proxy('ns/d', { attributes: { geo: 'eu' } }));
    const second = catalog.list({ selector: { geo: 'eu' } });
    expect(second).not.toBe(first);
    expect(ids(second)).toEqual(['ns/a', 'ns/c', 'ns/d']);
  });

  it.each<[string, boolean, Partial<ProxyRecord>, Partial<ProxyRecord>]>([
    [
      'the same credentials',
      false,
      { credentials: { username: 'u', password: 'p' } },
      { credentials: { username: 'u', password: 'p' } },
    ],
    [
      'a rotated password',
      true,
      { credentials: { username: 'u', password: 'p' } },
      { credentials: { username: 'u', password: 'q' } },
    ],
    [
      'another username',
      true,
      { credentials: { username: 'u', password: 'p' } },
      { credentials: { username: 'v', password: 'p' } },
    ],
    ['credentials added', true, {}, { credentials: { username: 'u', password: 'p' } }],
    ['credentials removed', true, { credentials: { username: 'u', password: 'p' } }, {}],
  ])('an update with %s is a change: %p', (_case, changed, before, after) => {
    const { catalog, changes } = catalogOf([proxy('ns/a', before)]);
    catalog.upsert(proxy('ns/a', after));
    expect(changes.length > 0).toBe(changed);
    expect(catalog.get('ns/a')!.credentials).toEqual(changed ? after.credentials : before.credentials);
  });

  it('bumps its version and tells subscribers about every real change, and only those', () => {
    const { catalog, changes } = catalogOf(fleet());
    const v0 = catalog.version();
    catalog.upsert(proxy('ns/a', { attributes: { geo: 'eu', purpose: 'api' } }));
    expect(catalog.version()).toBe(v0);
    expect(changes).toEqual([]);

    const before = catalog.get('ns/a')!;
    catalog.upsert(proxy('ns/a', { attributes: { geo: 'us' } }));
    expect(catalog.version()).toBe(v0 + 1);
    expect(changes).toEqual([{ before, after: proxy('ns/a', { attributes: { geo: 'us' } }) }]);
    expect(ids(catalog.list({ selector: { geo: 'eu' } }))).toEqual(['ns/c']);
    expect(ids(catalog.list({ selector: { geo: 'us' } }))).toEqual(['ns/a', 'ns/b']);

    catalog.remove('ns/c');
    catalog.remove('ns/c');
    expect(catalog.version()).toBe(v0 + 2);
    expect(changes[1]).toEqual({ before: expect.objectContaining({ id: 'ns/c' }) });
    expect(catalog.get('ns/c')).toBeUndefined();
    expect(ids(catalog.list())).toEqual(['ns/a', 'ns/b', 'other/a']);
  });

  it('hands out frozen records, so no reader can change what others see', () => {
    const { catalog } = catalogOf(fleet());
    const record = catalog.get('ns/a')!;
    expect(Object.isFrozen(record)).toBe(true);
    expect(Object.isFrozen(record.attributes)).toBe(true);
  });

  it('replaceAll applies only the difference', () => {
    const { catalog, changes } = catalogOf(fleet());
    catalog.replaceAll([...fleet().filter((p) => p.id !== 'ns/b'), proxy('ns/e')]);
    expect(changes.map((c) => [c.before?.id, c.after?.id])).toEqual([
      ['ns/b', undefined],
      [undefined, 'ns/e'],
    ]);
  });

  it('stops telling a listener that unsubscribed', () => {
    const catalog = new IndexedCatalog();
    const seen: CatalogChange[] = [];
    const unsubscribe = catalog.subscribe((c) => seen.push(c));
    catalog.upsert(proxy('ns/a'));
    unsubscribe();
    catalog.upsert(proxy('ns/b'));
    expect(seen).toHaveLength(1);
  });
});
