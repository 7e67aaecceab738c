// A list page is written in one pass into a pooled buffer (proxy-view.ts, page-buffers.ts):
// its bytes are the JSON of the proxies' views, and the buffer goes back to the pool only
// once its response is done with it, so concurrent pages never share one.
import { Socket } from 'node:net';
import type { ProxyRecord } from '../../book/catalog.js';
import type { ProxyUsage } from '../../book/lease-store.js';
import { PageBuffers } from '../../discovery/page-buffers.js';
import { ProxyListSerializer, toProxyView } from '../../discovery/proxy-view.js';
import { startHarness, type Harness } from './api-harness.js';
import { eventually, proxy } from '../book/fixtures.js';

const IDLE: ProxyUsage = {
  activeLeases: 0,
  stats: { windowSeconds: 900, ok: 0, banned: 0, rate_limited: 0, unreachable: 0 },
};

describe('ProxyListSerializer', () => {
  const records: ProxyRecord[] = [
    proxy('ns/idle', { attributes: { geo: 'eu' } }),
    proxy('ns/busy', { attributes: { geo: 'us' }, exitIP: '203.0.113.7' }),
    proxy('ns/held', { attributes: { geo: 'zürich 🚀' }, healthy: false, phase: 'Unhealthy' }),
    proxy('ns/idle-too', { attributes: { city: 'São Paulo' } }),
  ];
  const usage: ProxyUsage[] = [
    IDLE,
    { activeLeases: 2, stats: { windowSeconds: 900, ok: 3, banned: 1, rate_limited: 0, unreachable: 0 } },
    { ...IDLE, held: 'suspect' },
    IDLE,
  ];

  it('writes the views of the proxies, busy, held, idle and non-ASCII alike, and the continue token', () => {
    const serializer = new ProxyListSerializer(new PageBuffers(64 * 1024));
    // Twice: the second page is written from the idle items' ready bytes.
    for (let round = 0; round < 2; round++) {
      const page = serializer.list(records, usage, 'next-token');
      expect(JSON.parse(page.toString('utf8'))).toEqual({
        items: records.map((r, i) => toProxyView(r, usage[i])),
        continue: 'next-token',
      });
      serializer.release(page);
    }
  });

  it('writes an empty page, and a last page without continue', () => {
    const serializer = new ProxyListSerializer();
    expect(serializer.list([], []).toString()).toBe('{"items":[]}');
    expect(JSON.parse(serializer.list(records.slice(0, 1), usage.slice(0, 1)).toString())).toEqual({
      items: [toProxyView(records[0], usage[0])],
    });
  });

  it('reuses a page buffer only once it is released', () => {
    const pool = new PageBuffers(64 * 1024);
    const serializer = new ProxyListSerializer(pool);
    const first = serializer.list(records, usage);
    const second = serializer.list(records, usage);
    expect(second.buffer).not.toBe(first.buffer);
    serializer.release(first);
    expect(serializer.list(records, usage).buffer).toBe(first.buffer);
    expect(pool.created).toBe(2);
  });

  it('refuses usage that does not match the proxies', () => {
    expect(() => new ProxyListSerializer().list(records, usage.slice(1))).toThrow(
      /usage for 3 proxies, expected 4/,
    );
  });
});

describe('list pages through the API', () => {
  const fleet = Array.from({ length: 500 }, (_, i) =>
    proxy(`ns/p-${String(i).padStart(4, '0')}`, { attributes: { geo: i % 2 === 0 ? 'eu' : 'us' } }),
  );
  let pool: PageBuffers;
  let h: Harness;
  beforeEach(async () => {
    pool = new PageBuffers();
    h = await startHarness({ proxies: fleet, pageBuffers: pool, maxConcurrentLists: 100 });
  });
  afterEach(async () => {
    await h.stop();
  });

  const pageThrough = async (query: string): Promise<string[]> => {
    const ids: string[] = [];
    let cont: string | undefined;
    do {
      const response = await h.call(
        'GET',
        `/v1/proxies?${query}${cont === undefined ? '' : `&continue=${cont}`}`,
      );
      expect(response.status).toBe(200);
      const body = response.body as { items: { id: string }[]; continue?: string };
      ids.push(...body.items.map((item) => item.id));
      cont = body.continue;
    } while (cont !== undefined);
    return ids;
  };

  it('gives a page buffer back once its response is written, and the next pages reuse it', async () => {
    await h.call('GET', '/v1/proxies?limit=50');
    await eventually(() => pool.size === 1);
    expect(await pageThrough('limit=50')).toEqual(fleet.map((p) => p.id));
    await eventually(() => pool.size === 1);
    expect(pool.created).toBe(1);
  });

  it('serves concurrent clients whole, distinct pages while buffers are reused', async () => {
    const filters = ['limit=7', 'limit=20&attr.geo=eu', 'limit=33&attr.geo=us', 'limit=200'];
    const expected = (filter: string) =>
      fleet.filter((p) => !filter.includes('geo') || filter.endsWith(p.attributes.geo)).map((p) => p.id);
    const runs = Array.from({ length: 16 }, (_, i) => filters[i % filters.length]);
    const results = await Promise.all(runs.map((filter) => pageThrough(filter)));
    results.forEach((ids, i) => expect(ids).toEqual(expected(runs[i])));
    // Every buffer came back; fewer were made than pages were served.
    await eventually(() => pool.size === Math.min(pool.created, pool.maxFree));
    expect(pool.created).toBeLessThanOrEqual(16);
  });

  it('takes its buffer back from a client that left before its page was written', async () => {
    const url = new URL(h.baseURL);
    for (let i = 0; i < 20; i++) {
      const socket = new Socket();
      await new Promise<void>((resolve) => socket.connect(Number(url.port), url.hostname, resolve));
      socket.write('GET /v1/proxies?limit=200 HTTP/1.1\r\nHost: x\r\n\r\n');
      socket.destroy();
    }
    expect(await pageThrough('limit=100')).toEqual(fleet.map((p) => p.id));
    await eventually(() => pool.size === Math.min(pool.created, pool.maxFree));
  });
});
