// The Crawlee integration against the real discovery API and a real Crawlee SessionPool:
// one lease per (session, host), reports, renewals, releases and going direct.
import { Configuration, Request, SessionPool } from 'crawlee';
import { DiscoveryApiError, DiscoveryClient } from '../../client/src/index.js';
import {
  hostOf,
  outcomeOf,
  ProxyOperatorConfiguration,
  renewalDelayMs,
  sessionKey,
} from '../../client/src/crawlee/index.js';
import { eventually, proxy } from '../discovery/fixtures.js';
import { startDiscoveryServer, type TestDiscoveryServer } from './discovery-server.js';

const A = proxy('ns/a', { ip: '10.0.0.1', latencyMillis: 10 });
const B = proxy('ns/b', { ip: '10.0.0.2', latencyMillis: 20 });
const urlOf = (p: typeof A) => `http://${p.ip}:3128`;

describe('ProxyOperatorConfiguration', () => {
  let server: TestDiscoveryServer;
  let config: ProxyOperatorConfiguration;
  let pool: SessionPool;

  let warnings: string[];
  const make = (options: Partial<ConstructorParameters<typeof ProxyOperatorConfiguration>[0]> = {}) =>
    new ProxyOperatorConfiguration({
      client: new DiscoveryClient({ baseUrl: server.baseUrl }),
      okReportIntervalMs: 60_000,
      log: { debug: () => undefined, warning: (message) => void warnings.push(message) },
      ...options,
    });
  const calls = (call: string) => server.requests.filter((r) => r.call === call);
  /** What the server granted: the lease's target, session key and proxy. */
  const granted = () =>
    calls('POST /v1/leases').map((r) => {
      const lease = r.response as { target: string | null; session?: { key: string }; proxy: { id: string } };
      return { target: lease.target, session: lease.session?.key, proxy: lease.proxy.id };
    });
  /** What the server recorded for each report. */
  const reported = () =>
    callsMatching(/^POST \/v1\/leases\/.+\/report$/).map((r) => {
      const report = r.response as { result: string; target: string | null };
      return { result: report.result, target: report.target };
    });
  const callsMatching = (pattern: RegExp) => server.requests.filter((r) => pattern.test(r.call));
  const request = (url: string) => ({ request: new Request({ url }) });
  const active = () => server.activeLeases();
  /** What the crawler's post-navigation hook receives, with only the fields the hook reads. */
  const navigated = (sessionId: string, url: string, proxyUrl: string, statusCode: number) =>
    config.postNavigationHook({
      request: { url },
      session: { id: sessionId },
      proxyInfo: { url: proxyUrl },
      response: { statusCode },
      crawler: { sessionPool: pool },
    });

  beforeAll(async () => {
    pool = await SessionPool.open(
      { persistenceOptions: { enable: false } },
      new Configuration({ persistStorage: false }),
    );
  });
  beforeEach(async () => {
    warnings = [];
    server = await startDiscoveryServer({ proxies: [A, B] });
    config = make();
  });
  afterEach(async () => {
    await config.close();
    await server.stop();
  });

  it('leases per session with the session id as key and the hostname as target', async () => {
    const info = await config.newProxyInfo('session_1', request('https://Shop.Example:8443/a?b=c'));
    expect(info?.url).toBe(urlOf(A));
    expect(info?.hostname).toBe(A.ip);
    expect(granted()).toEqual([{ target: 'shop.example', session: 'session_1', proxy: 'ns/a' }]);
    const expiresAt = Date.parse((calls('POST /v1/leases')[0].response as { expiresAt: string }).expiresAt);
    expect(expiresAt - Date.now()).toBeGreaterThan(290_000); // the default TTL, 300 s
  });

  it('shares one lease among concurrent requests of a session to a host', async () => {
    const urls = await Promise.all(
      Array.from({ length: 5 }, (_, i) => config.newUrl('session_1', request(`https://shop.example/${i}`))),
    );
    expect(new Set(urls)).toEqual(new Set([urlOf(A)]));
    expect(calls('POST /v1/leases')).toHaveLength(1);
    expect(await active()).toBe(1);
  });

  it('takes one lease per host and per session', async () => {
    await config.newUrl('s1', request('https://one.example/'));
    await config.newUrl('s1', request('https://two.example/'));
    await config.newUrl('s2', request('https://one.example/'));
    await config.newUrl('s1', request('https://one.example/again'));
    expect(granted().map(({ target, session }) => ({ target, session }))).toEqual([
      { target: 'one.example', session: 's1' },
      { target: 'two.example', session: 's1' },
      { target: 'one.example', session: 's2' },
    ]);
    expect(config.leases.activeLeases).toBe(3);
  });

  it('without a session pool, shares one lease per host and names no session', async () => {
    const urls = await Promise.all([
      config.newUrl(undefined, request('https://one.example/a')),
      config.newUrl(undefined, request('https://one.example/b')),
    ]);
    expect(urls).toEqual([urlOf(A), urlOf(A)]);
    expect(granted()).toEqual([{ target: 'one.example', session: undefined, proxy: 'ns/a' }]);
  });

  it('passes the selector and TTL', async () => {
    server.catalog.proxies = [A, proxy('ns/eu', { ip: '10.0.0.9', attributes: { geo: 'eu' } })];
    config = make({ selector: { geo: 'eu' }, ttlSeconds: 42 });
    expect(await config.newUrl('s', request('https://x.example/'))).toBe('http://10.0.0.9:3128');
    const expiresAt = Date.parse((calls('POST /v1/leases')[0].response as { expiresAt: string }).expiresAt);
    expect(expiresAt - Date.now()).toBeGreaterThan(40_000);
    expect(expiresAt - Date.now()).toBeLessThanOrEqual(42_000);
  });

  describe('reports', () => {
    it.each([
      { status: 403, result: 'banned' },
      { status: 401, result: 'banned' },
      { status: 429, result: 'rate_limited' },
    ])(
      '$status: reports $result once for the host, and moves every session off that proxy for it',
      async ({ status, result }) => {
        const host = 'https://shop.example/';
        expect(await config.newUrl('s1', request(host))).toBe(urlOf(A));
        expect(await config.newUrl('s2', request(host))).toBe(urlOf(B));
        expect(await config.newUrl('s3', request(host))).toBe(urlOf(A));
        // Three requests through A to shop.example come back refused at about the same time.
        await Promise.all([
          navigated('s1', `${host}1`, urlOf(A), status),
          navigated('s3', `${host}2`, urlOf(A), status),
          navigated('s1', `${host}3`, urlOf(A), status),
        ]);
        expect(reported()).toEqual([{ result, target: 'shop.example' }]);
        // Both sessions that held A for shop.example lease again and land elsewhere.
        expect(await config.newUrl('s1', request(host))).toBe(urlOf(B));
        expect(await config.newUrl('s3', request(host))).toBe(urlOf(B));
        // A is still fine for other hosts.
        expect(await config.newUrl('s4', request('https://third.example/'))).toBe(urlOf(A));
        expect(config.stats.moved).toBe(2);
        expect(config.stats).toMatchObject(
          result === 'banned'
            ? { reportedBanned: 1, reportedRateLimited: 0 }
            : { reportedBanned: 0, reportedRateLimited: 1 },
        );
      },
    );

    it('batches ok: no report per success, one per lease at the latest on close', async () => {
      const url = await config.newUrl('s1', request('https://shop.example/'));
      for (let i = 0; i < 10; i++) await navigated('s1', `https://shop.example/${i}`, url!, 200);
      expect(callsMatching(/report$/)).toHaveLength(0);
      await config.close();
      expect(reported()).toEqual([{ result: 'ok', target: 'shop.example' }]);
      expect(config.stats).toMatchObject({ successes: 10, okReports: 1 });
    });

    it('sends at most one ok per lease per interval', async () => {
      config = make({ okReportIntervalMs: 200 });
      const url = await config.newUrl('s1', request('https://shop.example/'));
      const started = Date.now();
      while (Date.now() - started < 700) {
        await navigated('s1', 'https://shop.example/p', url!, 200);
        await new Promise((r) => setTimeout(r, 10));
      }
      const oks = callsMatching(/report$/).length;
      expect(oks).toBeGreaterThanOrEqual(2);
      expect(oks).toBeLessThanOrEqual(4);
      expect(config.stats.successes).toBeGreaterThan(oks * 5);
    });

    it('ignores responses through a proxy it did not lease, and 5xx', async () => {
      await config.newUrl('s1', request('https://shop.example/'));
      await navigated('s1', 'https://shop.example/', 'http://10.9.9.9:3128', 403);
      await navigated('s1', 'https://shop.example/', urlOf(A), 503);
      await config.close();
      expect(callsMatching(/report$/)).toHaveLength(0);
    });
  });

  it('releases the leases of a retired session and ends it on the server', async () => {
    const session = await pool.getSession();
    const other = await pool.getSession();
    const url = await config.newUrl(session.id, request('https://one.example/'));
    await config.newUrl(session.id, request('https://two.example/'));
    await config.newUrl(other.id, request('https://one.example/'));
    await navigated(session.id, 'https://one.example/', url!, 200); // the hook subscribes to the pool
    expect(await active()).toBe(3);
    session.retire();
    await eventually(
      async () => (await active()) === 1 && calls(`DELETE /v1/sessions/${session.id}`).length === 1,
    );
    expect(callsMatching(/^DELETE \/v1\/leases\//)).toHaveLength(2);
    expect(config.leases.activeLeases).toBe(1);
  });

  describe('renewal', () => {
    it('renews a lease in use before it expires, and lets an idle one go', async () => {
      config = make({ ttlSeconds: 3 });
      const busy = await config.newUrl('busy', request('https://shop.example/'));
      await config.newUrl('idle', request('https://shop.example/'));
      // Keep "busy" in use for longer than its TTL.
      const started = Date.now();
      while (Date.now() - started < 4_500) {
        expect(await config.newUrl('busy', request('https://shop.example/'))).toBe(busy);
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(callsMatching(/\/renew$/).length).toBeGreaterThanOrEqual(2);
      expect(calls('POST /v1/leases')).toHaveLength(2); // busy kept its lease throughout
      expect(config.stats.renewed).toBeGreaterThanOrEqual(2);
      expect(await active()).toBe(1); // idle was released at its first renewal point
      expect(config.leases.activeLeases).toBe(1);
    });

    it('leases again when the server forgot the lease (an operator restart)', async () => {
      config = make({ ttlSeconds: 3 });
      await config.newUrl('s', request('https://shop.example/'));
      const [first] = calls('POST /v1/leases');
      await server.store.release((first.response as { leaseID: string }).leaseID);
      await eventually(() => config.leases.activeLeases === 0, 5_000);
      await config.newUrl('s', request('https://shop.example/'));
      expect(calls('POST /v1/leases')).toHaveLength(2);
    });
  });

  describe('when nothing is leasable', () => {
    beforeEach(() => {
      server.catalog.proxies = [];
    });

    it("returns null (go direct) when asked to, and Crawlee's proxy info is then undefined", async () => {
      config = make({ whenNoneLeasable: 'direct' });
      expect(await config.newUrl('s', request('https://shop.example/'))).toBeUndefined();
      expect(await config.newProxyInfo('s', request('https://shop.example/'))).toBeUndefined();
      expect(config.leases.activeLeases).toBe(0);
    });

    it('fails the request with the server code by default', async () => {
      const err = await config.newUrl('s', request('https://shop.example/')).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DiscoveryApiError);
      expect(err).toMatchObject({ code: 'no_match' });
    });

    it('retries all_busy before giving up', async () => {
      server.catalog.proxies = [proxy('ns/one', { ip: '10.0.0.7', maxLeases: 1 })];
      config = make({ retryAllBusy: { retries: 20, baseDelayMs: 10, maxDelayMs: 30 } });
      await config.newUrl('holder', request('https://shop.example/'));
      setTimeout(() => void config.leases.sessionEnded('holder'), 100);
      expect(await config.newUrl('waiter', request('https://shop.example/'))).toBe('http://10.0.0.7:3128');
    });
  });

  it('releases everything on close and refuses to lease afterwards', async () => {
    await config.newUrl('s1', request('https://one.example/'));
    await config.newUrl('s2', request('https://two.example/'));
    expect(await active()).toBe(2);
    await config.close();
    expect(await active()).toBe(0);
    await expect(config.newUrl('s3', request('https://one.example/'))).rejects.toThrow(/closed/);
  });

  it('warns on close when leases were taken but the hook was never installed', async () => {
    await config.newUrl('s1', request('https://one.example/'));
    await config.close();
    expect(warnings).toEqual([expect.stringMatching(/postNavigationHook was never called/)]);
  });

  it('stops following the session pool once closed', async () => {
    const session = await pool.getSession();
    const url = await config.newUrl(session.id, request('https://one.example/'));
    await navigated(session.id, 'https://one.example/', url!, 200);
    await config.close();
    session.retire();
    await new Promise((r) => setTimeout(r, 100));
    expect(calls(`DELETE /v1/sessions/${session.id}`)).toHaveLength(0);
    expect(warnings).toEqual([]);
  });
});

describe('the pure rules', () => {
  const banned = new Set([401, 403]);
  const rateLimited = new Set([429]);
  it.each([
    [200, 'ok'],
    [204, 'ok'],
    [301, 'ok'],
    [401, 'banned'],
    [403, 'banned'],
    [429, 'rate_limited'],
    [404, undefined],
    [500, undefined],
    [502, undefined],
  ])('a %p response means %p', (status, outcome) => {
    expect(outcomeOf(status, banned, rateLimited)).toBe(outcome);
  });

  it.each([
    { ttlS: 300, leftS: 300, dueS: 200 },
    { ttlS: 300, leftS: 150, dueS: 50 },
    { ttlS: 300, leftS: 90, dueS: 0 },
    { ttlS: 3, leftS: 3, dueS: 2 },
  ])('a $ttlS s lease with $leftS s left is renewed in $dueS s', ({ ttlS, leftS, dueS }) => {
    const now = 1_000_000;
    expect(renewalDelayMs(now + leftS * 1000, ttlS * 1000, now)).toBe(dueS * 1000);
  });

  it.each([
    ['https://Shop.Example:8443/x', 'shop.example'],
    ['http://[::1]:8080/', '::1'],
    ['http://127.0.0.1:9/', '127.0.0.1'],
    ['not a url', undefined],
    [undefined, undefined],
  ])('hostOf(%p) is %p', (url, host) => {
    expect(hostOf(url)).toBe(host);
  });

  it.each([
    ['session_AbC123xyz0', 'session_AbC123xyz0'],
    ['user@example.com:42', 'user@example.com:42'],
  ])('keeps the Crawlee-style id %p', (id, key) => {
    expect(sessionKey(id)).toBe(key);
  });

  it.each(['has space', 'x'.repeat(129), 'ünïcode', ''])('hashes %p into a valid, stable key', (id) => {
    const key = sessionKey(id);
    expect(key).toMatch(/^[A-Za-z0-9._:@-]{1,128}$/);
    expect(sessionKey(id)).toBe(key);
  });
});
