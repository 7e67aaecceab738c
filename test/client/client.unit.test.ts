// The client against the real discovery API on loopback: every call, bearer auth, typed
// errors with the server's codes, timeouts, AbortSignal and the optional all_busy retry.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  backoffDelayMs,
  DiscoveryApiError,
  DiscoveryClient,
  DiscoveryTimeoutError,
  DiscoveryTransportError,
  isLeaseGone,
  isNoLease,
  type Proxy,
} from '../../client/src/index.js';
import { DEFAULT_LIST_LIMIT } from '../../discovery/request-parsing.js';
import { proxy } from '../book/fixtures.js';
import { startDiscoveryServer, type TestDiscoveryServer } from './discovery-server.js';

const TOKEN = 'client-test-token';

/** A server that accepts connections and never answers, or answers what `reply` says. */
async function rawServer(reply?: (res: import('node:http').ServerResponse) => void): Promise<{
  url: string;
  close(): Promise<void>;
}> {
  const server: Server = createServer((_req, res) => reply?.(res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

describe('DiscoveryClient against the real discovery API', () => {
  let server: TestDiscoveryServer;
  let client: DiscoveryClient;

  beforeEach(async () => {
    server = await startDiscoveryServer({
      token: TOKEN,
      proxies: [
        proxy('ns/a', { ip: '10.0.0.1', attributes: { geo: 'eu' }, latencyMillis: 10 }),
        proxy('ns/b', {
          ip: '10.0.0.2',
          attributes: { geo: 'us' },
          latencyMillis: 20,
          exitIP: '203.0.113.2',
        }),
        proxy('ns/c', { ip: '', healthy: false, phase: 'Provisioning', attributes: { geo: 'eu' } }),
      ],
    });
    client = new DiscoveryClient({ baseUrl: server.baseUrl, token: TOKEN });
  });
  afterEach(async () => {
    await server.stop();
  });

  describe('listProxies', () => {
    it.each([
      { query: {}, ids: ['ns/a', 'ns/b', 'ns/c'] },
      { query: { selector: { geo: 'eu' } }, ids: ['ns/a', 'ns/c'] },
      { query: { selector: { geo: 'eu' }, healthy: true }, ids: ['ns/a'] },
      { query: { healthy: false }, ids: ['ns/c'] },
      { query: { selector: { geo: 'mars' } }, ids: [] },
      { query: { exitIP: '203.0.113.0/24' }, ids: ['ns/b'] },
    ])('$query lists $ids', async ({ query, ids }) => {
      const items = await client.listProxies(query);
      expect(items.map((p) => p.id)).toEqual(ids);
    });

    it('returns every documented field, stats included', async () => {
      const [a] = await client.listProxies({ selector: { geo: 'eu' }, healthy: true });
      expect(a).toEqual({
        id: 'ns/a',
        ip: '10.0.0.1',
        port: 3128,
        attributes: { geo: 'eu' },
        phase: 'Ready',
        healthy: true,
        latencyMillis: 10,
        activeLeases: 0,
        maxLeases: 5,
        stats: { windowSeconds: expect.any(Number), ok: 0, banned: 0, rate_limited: 0, unreachable: 0 },
      });
    });
  });

  describe('pages', () => {
    // More than two default pages, in an order the catalog must sort: every page is followed.
    const COUNT = 2 * DEFAULT_LIST_LIMIT + 7;
    const ids = Array.from({ length: COUNT }, (_, i) => `pages/p-${String(i).padStart(5, '0')}`);
    const lists = () => server.requests.filter((r) => r.call === 'GET /v1/proxies');

    beforeEach(() => {
      server.catalog.proxies = [...ids].reverse().map((id) => proxy(id, { attributes: { fleet: 'pages' } }));
      server.requests.length = 0;
    });

    it.each([
      { pageSize: undefined, pages: 3 },
      { pageSize: 100, pages: Math.ceil(COUNT / 100) },
      { pageSize: 1000, pages: Math.ceil(COUNT / 1000) },
    ])(
      'listProxies follows every page (pageSize $pageSize: $pages requests)',
      async ({ pageSize, pages }) => {
        const items = await client.listProxies({ selector: { fleet: 'pages' }, pageSize });
        expect(items.map((p) => p.id)).toEqual(ids);
        expect(lists()).toHaveLength(pages);
        // Each request after the first passes back the previous answer's continue token, with
        // the same filter; the last answer has none.
        lists().forEach((r, i) => {
          const query = new URLSearchParams(r.query);
          expect(query.get('attr.fleet')).toBe('pages');
          expect(query.get('limit')).toBe(pageSize === undefined ? null : String(pageSize));
          const previous = i === 0 ? undefined : (lists()[i - 1].response as { continue?: string }).continue;
          expect(query.get('continue') ?? undefined).toBe(previous);
        });
        expect(lists().at(-1)!.response).not.toHaveProperty('continue');
      },
    );

    it('proxyPages yields one page per request, asking for the next only when it is wanted', async () => {
      const pages = client.proxyPages({ selector: { fleet: 'pages' }, pageSize: 400 });
      const first = await pages.next();
      if (first.done === true) throw new Error('proxyPages yielded no first page');
      const firstPage: Proxy[] = first.value;
      expect(firstPage.map((p) => p.id)).toEqual(ids.slice(0, 400));
      expect(lists()).toHaveLength(1);

      const seen = [...firstPage];
      for await (const page of pages) {
        // This page's request, and none ahead of it: every page before was a full 400.
        expect(lists()).toHaveLength(seen.length / 400 + 1);
        expect(page.length).toBeLessThanOrEqual(400);
        seen.push(...page);
      }
      expect(seen.map((p) => p.id)).toEqual(ids);
      expect(lists()).toHaveLength(Math.ceil(COUNT / 400));
    });

    it('proxyPages stops asking when the caller stops reading', async () => {
      for await (const page of client.proxyPages({ pageSize: 10 })) {
        expect(page).toHaveLength(10);
        break;
      }
      expect(lists()).toHaveLength(1);
    });
  });

  describe('getProxy', () => {
    it.each(['ns/b', { namespace: 'ns', name: 'b' }])('finds %p', async (ref) => {
      expect((await client.getProxy(ref)).ip).toBe('10.0.0.2');
    });

    it('says whether the proxy is leasable, for a target when asked', async () => {
      expect(await client.getProxy('ns/b')).toMatchObject({ leasable: true, target: null, reasons: [] });
      expect(await client.getProxy('ns/b', { target: 'Example.com' })).toMatchObject({
        leasable: true,
        target: 'example.com',
      });
    });

    it('throws proxy_not_found for a missing proxy', async () => {
      const err = await rejection(client.getProxy('ns/zzz'));
      expect(err).toBeInstanceOf(DiscoveryApiError);
      expect(err).toMatchObject({ status: 404, code: 'proxy_not_found' });
    });

    it.each(['nons', '/x', 'x/', 'a/b/c'])('rejects the malformed id %p before calling', async (id) => {
      await expect(client.getProxy(id)).rejects.toThrow(/namespace\/name/);
    });
  });

  describe('leases', () => {
    it('leases with selector, target, session and TTL', async () => {
      const before = Date.now();
      const lease = await client.lease({
        selector: { geo: 'eu' },
        target: 'Shop.Example',
        session: 'session_abc',
        ttlSeconds: 60,
      });
      expect(lease.proxy).toMatchObject({ id: 'ns/a', url: 'http://10.0.0.1:3128', activeLeases: 1 });
      expect(lease.target).toBe('shop.example');
      expect(lease.session).toEqual({ key: 'session_abc', moved: false });
      const expires = Date.parse(lease.expiresAt);
      expect(expires).toBeGreaterThanOrEqual(before + 59_000);
      expect(expires).toBeLessThanOrEqual(Date.now() + 61_000);
    });

    it('renews a live lease to a later expiry, and a released one is gone', async () => {
      const lease = await client.lease({ ttlSeconds: 5 });
      const renewed = await client.renew(lease.leaseID, { ttlSeconds: 120 });
      expect(renewed.leaseID).toBe(lease.leaseID);
      expect(Date.parse(renewed.expiresAt)).toBeGreaterThan(Date.parse(lease.expiresAt) + 100_000);
      await client.release(lease.leaseID);
      await client.release(lease.leaseID); // idempotent
      const err = await rejection(client.renew(lease.leaseID));
      expect(isLeaseGone(err)).toBe(true);
      expect(err).toMatchObject({ status: 404, code: 'lease_not_found' });
    });

    it('reports a ban, which cools the proxy down for that target only', async () => {
      const lease = await client.lease({ selector: { geo: 'eu' }, target: 'shop.example' });
      const report = await client.report(lease.leaseID, 'banned');
      expect(report).toMatchObject({
        leaseID: lease.leaseID,
        proxyID: 'ns/a',
        result: 'banned',
        target: 'shop.example',
      });
      expect(Date.parse(report.cooldownUntil!)).toBeGreaterThan(Date.now());
      const err = await rejection(client.lease({ selector: { geo: 'eu' }, target: 'shop.example' }));
      expect(isNoLease(err)).toBe(true);
      expect(err).toMatchObject({ status: 409, code: 'all_cooling_down' });
      await expect(client.lease({ selector: { geo: 'eu' }, target: 'other.example' })).resolves.toBeDefined();
    });

    it('sends a request id with every write: the same id is one lease and one ban, a new call another', async () => {
      const first = await client.lease({ target: 'shop.example' }, { requestID: 'job-7' });
      const again = await client.lease({ target: 'shop.example' }, { requestID: 'job-7' });
      expect(again.leaseID).toBe(first.leaseID);
      expect(await server.activeLeases()).toBe(1);
      // Without one, each call gets its own id: a second lease.
      expect((await client.lease({ target: 'shop.example' })).leaseID).not.toBe(first.leaseID);
      expect(await server.activeLeases()).toBe(2);
      const ban = await client.report(first.leaseID, 'banned', {}, { requestID: 'ban-7' });
      expect(await client.report(first.leaseID, 'banned', {}, { requestID: 'ban-7' })).toEqual(ban);
      expect((await client.getProxy(first.proxy.id)).stats.banned).toBe(1);
      // A malformed id is the server's 400 naming the header.
      const err = await rejection(client.release(first.leaseID, { requestID: 'not an id' }));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request' });
      expect((err as DiscoveryApiError).serverMessage).toMatch(/Idempotency-Key/);
    });

    it('reports ok without starting a cooldown', async () => {
      const lease = await client.lease({ target: 'shop.example' });
      expect(await client.report(lease.leaseID, 'ok', { target: 'shop.example' })).toMatchObject({
        result: 'ok',
        cooldownUntil: null,
      });
    });

    it('reports on several leases in one call, each answered in place, and can release with the report', async () => {
      const one = await client.lease({ target: 'shop.example' });
      const two = await client.lease({ target: 'shop.example' });
      const answer = await client.reportMany([
        { leaseID: one.leaseID, result: 'ok' },
        { leaseID: 'gone', result: 'ok' },
        { leaseID: two.leaseID, result: 'ok', release: true },
      ]);
      expect(answer.items).toEqual([
        expect.objectContaining({ leaseID: one.leaseID, result: 'ok', target: 'shop.example' }),
        {
          leaseID: 'gone',
          error: 'lease_not_found',
          message: "lease 'gone' is unknown, expired or released",
        },
        expect.objectContaining({ leaseID: two.leaseID, result: 'ok', released: true }),
      ]);
      expect(server.requests.filter((r) => r.call === 'POST /v1/reports')).toHaveLength(1);
      expect(isLeaseGone(await rejection(client.renew(two.leaseID)))).toBe(true);
    });

    it('a bad batch is a DiscoveryApiError naming the report', async () => {
      const err = await rejection(client.reportMany([{ leaseID: 'x', result: 'blocked' as 'ok' }]));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request' });
      expect((err as DiscoveryApiError).serverMessage).toMatch(/^reports\[0\]: result must be one of/);
    });

    it('ends a session, idempotently', async () => {
      await client.lease({ session: 'crawl-1' });
      await client.endSession('crawl-1');
      await client.endSession('crawl-1');
      expect(server.requests.filter((r) => r.call === 'DELETE /v1/sessions/crawl-1')).toHaveLength(2);
    });
  });

  describe('typed errors carry the server codes', () => {
    it.each([
      {
        call: (c: DiscoveryClient) => c.lease({ ttlSeconds: 0 }),
        status: 400,
        code: 'invalid_request',
        message: /ttlSeconds/,
      },
      {
        call: (c: DiscoveryClient) => c.lease({ selector: { geo: 'mars' } }),
        status: 409,
        code: 'no_match',
        message: /geo/,
      },
      {
        call: (c: DiscoveryClient) => c.report('no-such-lease', 'ok'),
        status: 404,
        code: 'lease_not_found',
        message: /no-such-lease/,
      },
      {
        call: (c: DiscoveryClient) => c.lease({ session: 'has space' }),
        status: 400,
        code: 'invalid_request',
        message: /session/,
      },
    ])('$code ($status)', async ({ call, status, code, message }) => {
      const err = await rejection(call(client));
      expect(err).toBeInstanceOf(DiscoveryApiError);
      expect(err).toMatchObject({ status, code });
      expect((err as DiscoveryApiError).serverMessage).toMatch(message);
    });

    it('all_busy when every match is at maxLeases', async () => {
      server.catalog.proxies = [proxy('ns/one', { maxLeases: 1 })];
      await client.lease();
      const err = await rejection(client.lease());
      expect(isNoLease(err)).toBe(true);
      expect(err).toMatchObject({ code: 'all_busy' });
    });

    it.each([
      { name: 'no token', token: undefined },
      { name: 'a wrong token', token: 'wrong' },
    ])('unauthorized with $name', async ({ token }) => {
      const anonymous = new DiscoveryClient({ baseUrl: server.baseUrl, token });
      const err = await rejection(anonymous.listProxies());
      expect(err).toMatchObject({ status: 401, code: 'unauthorized' });
    });
  });

  describe('retry of all_busy', () => {
    beforeEach(() => {
      server.catalog.proxies = [proxy('ns/one', { maxLeases: 1 })];
    });
    const leaseCalls = () => server.requests.filter((r) => r.call === 'POST /v1/leases').length;

    it('waits with backoff and gets the slot freed meanwhile', async () => {
      const held = await client.lease();
      setTimeout(() => void client.release(held.leaseID), 150);
      const lease = await client.lease(
        {},
        { retryAllBusy: { retries: 30, baseDelayMs: 20, maxDelayMs: 40 } },
      );
      expect(lease.proxy.id).toBe('ns/one');
      expect(leaseCalls()).toBeGreaterThan(2);
    });

    it('gives up after the configured retries with all_busy', async () => {
      await client.lease();
      const retrying = new DiscoveryClient({
        baseUrl: server.baseUrl,
        token: TOKEN,
        retryAllBusy: { retries: 3, baseDelayMs: 1 },
      });
      const err = await rejection(retrying.lease());
      expect(err).toMatchObject({ code: 'all_busy' });
      expect(leaseCalls()).toBe(1 + 4);
    });

    it('never retries other codes', async () => {
      const err = await rejection(
        client.lease({ selector: { geo: 'mars' } }, { retryAllBusy: { retries: 5 } }),
      );
      expect(err).toMatchObject({ code: 'no_match' });
      expect(leaseCalls()).toBe(1);
    });

    it('stops waiting when the signal aborts', async () => {
      await client.lease();
      const controller = new AbortController();
      setTimeout(() => controller.abort(new Error('crawler stopping')), 100);
      const err = await rejection(
        client.lease(
          {},
          { signal: controller.signal, retryAllBusy: { retries: 1000, baseDelayMs: 20, maxDelayMs: 20 } },
        ),
      );
      expect(err).toEqual(new Error('crawler stopping'));
    });
  });
});

describe("DiscoveryClient over a token's rate limit (429 too_many_requests)", () => {
  let server: TestDiscoveryServer;
  beforeEach(async () => {
    // One request a second: a three-page list gets 429s with Retry-After: 1 between its pages.
    server = await startDiscoveryServer({
      token: TOKEN,
      proxies: [proxy('ns/a'), proxy('ns/b'), proxy('ns/c')],
      rateLimit: { ratePerSecond: 1, burst: 1 },
    });
  });
  afterEach(async () => {
    await server.stop();
  });
  const refused = () =>
    server.requests.filter((r) => (r.response as { error?: string }).error === 'too_many_requests');

  it('waits for the Retry-After and sends the call again, so a list follows every page', async () => {
    const client = new DiscoveryClient({ baseUrl: server.baseUrl, token: TOKEN });
    const items = await client.listProxies({ pageSize: 1 });
    expect(items.map((p) => p.id)).toEqual(['ns/a', 'ns/b', 'ns/c']);
    expect(refused().length).toBeGreaterThanOrEqual(2);
  });

  it('retries a lease the server refused before doing anything, and it is granted once', async () => {
    const client = new DiscoveryClient({ baseUrl: server.baseUrl, token: TOKEN });
    await client.listProxies();
    const lease = await client.lease({ ttlSeconds: 30 });
    expect(refused()).toHaveLength(1);
    expect(await server.activeLeases()).toBe(1);
    await client.release(lease.leaseID);
  });

  it('gives up after tooManyRequestsRetries, with the code and the Retry-After', async () => {
    const client = new DiscoveryClient({ baseUrl: server.baseUrl, token: TOKEN, tooManyRequestsRetries: 0 });
    await client.listProxies();
    const err = await rejection(client.listProxies());
    expect(err).toBeInstanceOf(DiscoveryApiError);
    expect(err).toMatchObject({ status: 429, code: 'too_many_requests', retryAfterSeconds: 1 });
  });

  it('stops waiting when the signal aborts', async () => {
    const client = new DiscoveryClient({ baseUrl: server.baseUrl, token: TOKEN });
    await client.listProxies();
    const controller = new AbortController();
    const listing = client.listProxies({}, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('crawl stopped')), 100);
    await expect(listing).rejects.toThrow('crawl stopped');
  });

  it.each([-1, 1.5, Number.NaN])('refuses tooManyRequestsRetries %p', (retries) => {
    expect(() => new DiscoveryClient({ baseUrl: server.baseUrl, tooManyRequestsRetries: retries })).toThrow(
      /tooManyRequestsRetries must be a non-negative integer/,
    );
  });
});

describe('DiscoveryClient when the server misbehaves', () => {
  it('times out a call that gets no answer, per client and per call', async () => {
    const silent = await rawServer();
    try {
      const client = new DiscoveryClient({ baseUrl: silent.url, timeoutMs: 200 });
      const started = Date.now();
      const err = await rejection(client.listProxies());
      expect(err).toBeInstanceOf(DiscoveryTimeoutError);
      expect(err).toMatchObject({ call: 'GET /v1/proxies', timeoutMs: 200 });
      expect(Date.now() - started).toBeLessThan(5_000);
      await expect(client.lease({}, { timeoutMs: 50 })).rejects.toMatchObject({ timeoutMs: 50 });
    } finally {
      await silent.close();
    }
  });

  it('rejects with the caller signal reason when aborted, not a timeout', async () => {
    const silent = await rawServer();
    try {
      const client = new DiscoveryClient({ baseUrl: silent.url, timeoutMs: 10_000 });
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 50);
      const err = await rejection(client.listProxies({}, { signal: controller.signal }));
      expect((err as Error).name).toBe('AbortError');
      expect(err).not.toBeInstanceOf(DiscoveryTimeoutError);
    } finally {
      await silent.close();
    }
  });

  it('says so when the answer is not the API (a gateway page)', async () => {
    const gateway = await rawServer((res) =>
      res.writeHead(502, { 'content-type': 'text/html' }).end('<h1>bad gateway</h1>'),
    );
    try {
      const err = await rejection(new DiscoveryClient({ baseUrl: gateway.url }).listProxies());
      expect(err).toBeInstanceOf(DiscoveryTransportError);
      expect((err as Error).message).toMatch(/502 without an API error body/);
    } finally {
      await gateway.close();
    }
  });

  it('wraps a refused connection in a transport error', async () => {
    const gone = await rawServer();
    await gone.close();
    const err = await rejection(new DiscoveryClient({ baseUrl: gone.url }).listProxies());
    expect(err).toBeInstanceOf(DiscoveryTransportError);
    expect((err as Error).message).toMatch(/^GET \/v1\/proxies: /);
  });

  it.each(['not a url', 'ftp://x', ''])('refuses the base URL %p', (baseUrl) => {
    expect(() => new DiscoveryClient({ baseUrl })).toThrow(/baseUrl/);
  });
});

describe('backoffDelayMs (full jitter)', () => {
  it.each([
    { retry: 0, random: 0.5, base: 100, max: 5000, delay: 50 },
    { retry: 1, random: 0.5, base: 100, max: 5000, delay: 100 },
    { retry: 3, random: 0.999, base: 100, max: 5000, delay: 799 },
    { retry: 10, random: 0.5, base: 100, max: 5000, delay: 2500 },
    { retry: 2000, random: 0.5, base: 100, max: 5000, delay: 2500 },
    { retry: 4, random: 0, base: 100, max: 5000, delay: 0 },
  ])('retry $retry with random $random: $delay ms', ({ retry, random, base, max, delay }) => {
    expect(backoffDelayMs(retry, { baseDelayMs: base, maxDelayMs: max }, () => random)).toBe(delay);
  });
});
