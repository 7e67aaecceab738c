// The client learns the server's verdicts (issue 45 item 2): a lease that sent a request and
// heard nothing back is checked with the server (a renewal, whose answer carries the proxy's
// standing), and the leases of an unhealthy, suspect or draining proxy go, though no error
// path reported anything; no new session joins a silent lease meanwhile.
import { Configuration, Request, SessionPool } from '@crawlee/core';
import { DiscoveryClient } from '../../client/src/index.js';
import { ProxyOperatorConfiguration } from '../../client/src/crawlee/index.js';
import { eventually, proxy } from '../book/fixtures.js';
import { startDiscoveryServer, type TestDiscoveryServer } from './discovery-server.js';

const A = proxy('ns/a', { ip: '10.0.0.1', latencyMillis: 10 });
const B = proxy('ns/b', { ip: '10.0.0.2', latencyMillis: 20 });
const urlOf = (p: typeof A) => `http://${p.ip}:3128`;
const host = 'https://shop.example/';

describe("the client learns the server's verdicts", () => {
  let server: TestDiscoveryServer;
  let config: ProxyOperatorConfiguration;
  let pool: SessionPool;
  const request = (url: string) => ({ request: new Request({ url }) });
  const calls = (call: RegExp) => server.requests.filter((r) => call.test(r.call));
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
    server = await startDiscoveryServer({ proxies: [A, B] });
    config = new ProxyOperatorConfiguration({
      client: new DiscoveryClient({ baseUrl: server.baseUrl }),
      standingCheckMs: 150,
      leaseAhead: false,
      log: { debug: () => undefined, warning: () => undefined },
    });
  });
  afterEach(async () => {
    await config.close();
    await server.stop();
  });

  it.each<[string, Partial<typeof A>]>([
    ['unhealthy', { healthy: false, phase: 'Unhealthy' }],
    // Rotation drains a proxy: the record says so, and its phase is Draining.
    ['draining', { phase: 'Draining', draining: true }],
  ])(
    'a silent lease on a proxy the server now calls %s is dropped within a check, with no error reported',
    async (_, change) => {
      expect(await config.newUrl('s1', request(host))).toBe(urlOf(A));
      // The request through A never comes back (a dead proxy, and no errorHandler wired).
      server.catalog.proxies = [{ ...A, ...change }, B];
      await eventually(() => config.leases.activeLeases === 0, 30_000);
      expect(config.stats).toMatchObject({ droppedByVerdict: 1, reportedUnreachable: 0 });
      expect(calls(/^POST \/v1\/leases\/.+\/renew$/)).toHaveLength(1);
      await eventually(async () => (await server.activeLeases()) === 0, 30_000); // released on the server too
      // The session's next request goes elsewhere.
      expect(await config.newUrl('s1', request(host))).toBe(urlOf(B));
    },
  );

  it('a lease whose requests come back is never checked', async () => {
    for (let i = 0; i < 5; i++) {
      expect(await config.newUrl('s1', request(host))).toBe(urlOf(A));
      await navigated('s1', `${host}${i}`, urlOf(A), i === 2 ? 404 : 200);
      await new Promise((r) => setTimeout(r, 100));
    }
    await new Promise((r) => setTimeout(r, 400));
    expect(calls(/^POST \/v1\/leases\/.+\/renew$/)).toHaveLength(0);
    expect(config.leases.activeLeases).toBe(1);
  });

  it('a silent lease on a healthy proxy stays, checked at most every two check intervals, and joined by no new session', async () => {
    const shared = new ProxyOperatorConfiguration({
      client: new DiscoveryClient({ baseUrl: server.baseUrl }),
      standingCheckMs: 150,
      log: { debug: () => undefined, warning: () => undefined },
    });
    try {
      server.catalog.proxies = [A];
      expect(await shared.newUrl('s1', request(host))).toBe(urlOf(A));
      await new Promise((r) => setTimeout(r, 1_000));
      const renews = calls(/^POST \/v1\/leases\/.+\/renew$/).length;
      expect(renews).toBeGreaterThanOrEqual(1);
      expect(renews).toBeLessThanOrEqual(4);
      expect(shared.leases.activeLeases).toBe(1);
      // A's only lease is silent: a new session does not join it, it asks for its own (and
      // with leasing ahead it waits for A's next slot instead of joining).
      server.catalog.proxies = [A, B];
      expect(await shared.newUrl('s2', request(host))).toBe(urlOf(B));
    } finally {
      await shared.close();
    }
  });
});
