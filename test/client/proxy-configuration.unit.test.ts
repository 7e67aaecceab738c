// The Crawlee integration against the real discovery API and a real Crawlee SessionPool:
// one lease per (session, host), reports, renewals, releases and going direct.
import { jest } from '@jest/globals';
import { AsyncLocalStorage } from 'node:async_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Configuration, ProxyConfiguration, Request, SessionPool } from '@crawlee/core';
import { Agent } from 'undici';
import { DiscoveryApiError, DiscoveryClient } from '../../client/src/index.js';
import {
  isProxyFailure,
  outcomeOf,
  ProxyOperatorConfiguration,
  retryAfterSeconds,
  renewalDelayMs,
  sessionKey,
} from '../../client/src/crawlee/index.js';
import { isSooner, mayJoin, type Turn } from '../../client/src/crawlee/session-leases.js';
import { unpaced } from '../../client/src/crawlee/site-pace.js';
import { eventually, proxy } from '../book/fixtures.js';
import { startDiscoveryServer, startPredatingFront, type TestDiscoveryServer } from './discovery-server.js';

const A = proxy('ns/a', { ip: '10.0.0.1', latencyMillis: 10 });
const B = proxy('ns/b', { ip: '10.0.0.2', latencyMillis: 20 });
const urlOf = (p: typeof A) => `http://${p.ip}:3128`;

/** A full collection, as `node --expose-gc`'s gc(). */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

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
    calls('POST /v1/leases')
      .filter((r) => (r.response as { proxy?: unknown } | undefined)?.proxy !== undefined)
      .map((r) => {
        const lease = r.response as {
          target: string | null;
          session?: { key: string };
          proxy: { id: string };
        };
        return { target: lease.target, session: lease.session?.key, proxy: lease.proxy.id };
      });
  /** What the server recorded for each report. */
  const reported = () =>
    callsMatching(/^POST \/v1\/(leases\/.+\/report|reports)$/).flatMap((r) => {
      // A batch (POST /v1/reports) answers each of its reports in order.
      const answers = r.call.endsWith('/reports')
        ? (r.response as { items: { result?: string; target?: string | null }[] }).items
        : [r.response as { result: string; target: string | null }];
      return answers
        .filter((a) => a.result !== undefined)
        .map((a) => ({ result: a.result, target: a.target }));
    });
  const releasedByReport = () =>
    callsMatching(/^POST \/v1\/leases\/.+\/report$/)
      .map((r) => r.response as { result: string; target: string | null; released?: true })
      .filter((report) => report.released === true)
      .map(({ result, target, released }) => ({ result, target, released }));
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
    // Most tests pin one lease per session (each new session waits for its own) so that a
    // report's effect shows in where each session's lease is; leasing ahead, the default, has
    // its own tests below.
    config = make({ leaseAhead: false });
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

  it("answers a session's next request from its lease, without a call, as Crawlee's own proxy info", async () => {
    await config.newProxyInfo('session_1', request('https://shop.example/a'));
    const before = server.requests.length;
    const info = await config.newProxyInfo('session_1', request('https://shop.example/b'));
    expect(server.requests.length).toBe(before);
    const crawlee = await new ProxyConfiguration({ proxyUrls: [urlOf(A)] }).newProxyInfo('session_1');
    expect(info).toEqual(crawlee);
  });

  it('rejects, never throws, when the proxy URL the server sent does not parse: first request or ready lease', async () => {
    server.catalog.proxies = [proxy('ns/bad', { ip: 'not a host' })];
    config = make({ leaseAhead: false });
    const answers = [];
    for (let i = 0; i < 2; i++) {
      let pending: Promise<unknown> | undefined;
      expect(
        () => (pending = config.newProxyInfo('session_1', request(`https://shop.example/${i}`))),
      ).not.toThrow();
      answers.push(
        await pending!.then(
          () => 'resolved',
          (err: unknown) => err,
        ),
      );
    }
    // Node's own invalid-URL error, rejected as Crawlee's newProxyInfo would.
    expect(answers).toMatchObject([{ code: 'ERR_INVALID_URL' }, { code: 'ERR_INVALID_URL' }]);
  });

  it('shares one lease among concurrent requests of a session to a host', async () => {
    const urls = await Promise.all(
      Array.from({ length: 5 }, (_, i) => config.newUrl('session_1', request(`https://shop.example/${i}`))),
    );
    expect(new Set(urls)).toEqual(new Set([urlOf(A)]));
    expect(calls('POST /v1/leases')).toHaveLength(1);
    expect(await active()).toBe(1);
  });

  it('hands a session its live lease at once, without a promise, and leaves leasing and rests to proxyUrl', async () => {
    const page = 'https://shop.example/';
    expect(config.leases.readyUrl('s1', 'shop.example')).toBeUndefined(); // no lease yet
    expect(await config.newUrl('s1', request(page))).toBe(urlOf(A));
    expect(config.leases.readyUrl('s1', 'shop.example')).toBe(urlOf(A));
    expect(config.leases.readyUrl('s1', 'other.example')).toBeUndefined(); // a lease is per host
    await navigated('s1', page, urlOf(A), 429); // A rests for the host
    expect(config.leases.readyUrl('s1', 'shop.example')).toBeUndefined();
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

    it('429: reports rate_limited once for the host; the sessions on that proxy send through a leased proxy with room meanwhile', async () => {
      // A minute's rest, which the test skips by moving the client's clock: a request that
      // waited for it could not hide in a slow machine's noise.
      let skew = 0;
      await config.close();
      config = make({ leaseAhead: false, now: () => Date.now() + skew });
      const host = 'https://shop.example/';
      expect(await config.newUrl('s1', request(host))).toBe(urlOf(A));
      expect(await config.newUrl('s2', request(host))).toBe(urlOf(B));
      expect(await config.newUrl('s3', request(host))).toBe(urlOf(A));
      // The site let two through A before it objected: a pace of 2 a second, which B adopts
      // with one token left (s2's request spent the other).
      await navigated('s1', `${host}a`, urlOf(A), 200);
      await navigated('s3', `${host}b`, urlOf(A), 200);
      const throttled = (session: string, path: string) =>
        config.postNavigationHook({
          request: { url: `${host}${path}` },
          session: { id: session },
          proxyInfo: { url: urlOf(A) },
          response: { statusCode: 429, headers: { 'retry-after': '60' } },
        });
      await Promise.all([throttled('s1', '1'), throttled('s3', '2'), throttled('s1', '3')]);
      // The two successes on A's leases are reported first, so the 429's streak stands.
      await eventually(() => reported().length === 3);
      expect(reported()).toEqual([
        { result: 'ok', target: 'shop.example' },
        { result: 'ok', target: 'shop.example' },
        { result: 'rate_limited', target: 'shop.example' },
      ]);
      // The leases stay and s1 stays on A; while A rests its next request goes through B,
      // waiting at most for B's pace, never for A's minute (stats.pacedMs adds up every wait).
      expect(await config.newUrl('s1', request(host))).toBe(urlOf(B));
      expect(config.stats.pacedMs).toBeLessThan(60_000);
      expect(await active()).toBe(3);
      expect(calls('POST /v1/leases')).toHaveLength(3);
      // After the rest, s1 is back on its own proxy.
      skew += 61_000;
      expect(await config.newUrl('s1', request(host))).toBe(urlOf(A));
      // Other hosts never wait for it.
      const paced = config.stats.paced;
      expect(await config.newUrl('s4', request('https://third.example/'))).toMatch(
        /^http:\/\/10\.0\.0\.[12]:3128$/,
      );
      expect(config.stats.paced).toBe(paced);
      expect(config.stats).toMatchObject({ reportedRateLimited: 1, reportedBanned: 0 });
    });

    /**
     * A configuration on a clock the test moves. A pace test asserts which requests went by
     * each moment of that clock, which a stalled machine cannot change (it only makes them go
     * later in real time).
     */
    async function onAClock() {
      const start = Date.now();
      let now = start;
      await config.close();
      config = make({ leaseAhead: false, now: () => now });
      let went = 0;
      return {
        start,
        /** Sets the clock to `ms` after the start. */
        at: (ms: number) => void (now = start + ms),
        /** Sends `count` requests of `session` to `host`, each expected through `url`. */
        send: (count: number, session: string, host: string, url: string | undefined) =>
          Promise.all(
            Array.from({ length: count }, async () => {
              expect(await config.newUrl(session, request(host))).toBe(url);
              went++;
            }),
          ),
        /** How many went once the clock reads `ms` and every waiting request looked at it again. */
        wentBy: async (ms: number) => {
          now = start + ms;
          await new Promise((r) => setTimeout(r, 400));
          return went;
        },
        /** Sets the clock to `ms` and waits until `count` went in all. */
        until: async (ms: number, count: number) => {
          now = start + ms;
          await eventually(() => went === count);
        },
      };
    }

    it('after a 429 the proxy keeps the pace the site allowed: what succeeded per Retry-After, then spaced', async () => {
      const clock = await onAClock();
      const host = 'https://shop.example/';
      const url = await config.newUrl('s1', request(host));
      for (let i = 0; i < 3; i++) await navigated('s1', `${host}${i}`, url!, 200);
      await config.postNavigationHook({
        request: { url: `${host}3` },
        session: { id: 's1' },
        proxyInfo: { url: url! },
        response: { statusCode: 429, headers: { 'retry-after': '1' } },
      });
      // The rest ends when the server's cooldown does (its clock: the report's cooldownUntil).
      await eventually(() => config.stats.reportedRateLimited === 1);
      const report = callsMatching(/report$/).find(
        (r) => (r.response as { result?: string }).result === 'rate_limited',
      )!.response as { cooldownUntil: string };
      const rest = Date.parse(report.cooldownUntil) - clock.start;
      // None goes while the proxy rests. The site allowed three per second: the bucket holds
      // 2.7 of them when the rest ends (0.3 of a token is held back for the requests' varying
      // travel, FIRST_HEADROOM), so two go at once, the third 0.1 s later, then one per third
      // of a second.
      clock.at(rest - 10);
      const all = clock.send(5, 's1', host, url);
      expect(await clock.wentBy(rest - 10)).toBe(0);
      await clock.until(rest, 2);
      expect(await clock.wentBy(rest + 90)).toBe(2);
      await clock.until(rest + 101, 3);
      expect(await clock.wentBy(rest + 420)).toBe(3);
      await clock.until(rest + 440, 4);
      expect(await clock.wentBy(rest + 760)).toBe(4);
      await clock.until(rest + 770, 5);
      await all;
      expect(calls('POST /v1/leases')).toHaveLength(1);
    });

    it('a proxy leased for a site another proxy learned the pace of starts at that pace, without a 429 of its own', async () => {
      const clock = await onAClock();
      const host = 'https://shop.example/';
      const first = await config.newUrl('s1', request(host));
      for (let i = 0; i < 3; i++) await navigated('s1', `${host}${i}`, first!, 200);
      await config.postNavigationHook({
        request: { url: `${host}3` },
        session: { id: 's1' },
        proxyInfo: { url: first! },
        response: { statusCode: 429, headers: { 'retry-after': '1' } },
      });
      const second = await config.newUrl('s2', request(host));
      expect(second).not.toBe(first);
      // Four more while the first proxy still rests (its second of Retry-After): all through
      // the second, which the site allows three a second, as it did the first. Its bucket
      // holds what the first proxy's does when full, 2.7 (see the test before), less the
      // lease's first request above: one goes at once, the next 0.1 s later, then one per
      // third of a second. Before, it went unpaced until a 429 of its own.
      const all = clock.send(4, 's2', host, second);
      expect(await clock.wentBy(0)).toBe(1);
      expect(await clock.wentBy(90)).toBe(1);
      await clock.until(101, 2);
      expect(await clock.wentBy(420)).toBe(2);
      await clock.until(440, 3);
      expect(await clock.wentBy(760)).toBe(3);
      await clock.until(770, 4);
      await all;
      expect(config.stats).toMatchObject({ reportedRateLimited: 1 });
    });

    it('batches ok: no report per success, one per lease at the latest on close', async () => {
      const url = await config.newUrl('s1', request('https://shop.example/'));
      for (let i = 0; i < 10; i++) await navigated('s1', `https://shop.example/${i}`, url!, 200);
      expect(callsMatching(/report$/)).toHaveLength(0);
      await config.close();
      expect(reported()).toEqual([{ result: 'ok', target: 'shop.example' }]);
      expect(config.stats).toMatchObject({ successes: 10, okReports: 1, released: 1 });
      // The last ok carries the release: one call, not a report and a DELETE.
      expect(releasedByReport()).toHaveLength(1);
      expect(callsMatching(/^DELETE \/v1\/leases\//)).toHaveLength(0);
      expect(await active()).toBe(0);
    });

    describe('the oks of every lease go in one call per interval', () => {
      const batches = () => callsMatching(/^POST \/v1\/reports$/);
      const succeedOnThree = async () => {
        for (const session of ['s1', 's2', 's3']) {
          const url = await config.newUrl(session, request('https://shop.example/'));
          await navigated(session, `https://shop.example/${session}`, url!, 200);
        }
      };

      it('three leases with successes: one POST /v1/reports of three oks, no report per lease', async () => {
        config = make({ leaseAhead: false, okReportIntervalMs: 100 });
        await succeedOnThree();
        expect(await active()).toBe(3);
        // The server records a report before its answer reaches the client's stats.
        await eventually(() => reported().length === 3 && config.stats.okReports === 3);
        expect(batches()).toHaveLength(1);
        expect(callsMatching(/^POST \/v1\/leases\/.+\/report$/)).toHaveLength(0);
        expect(reported()).toEqual(
          Array.from({ length: 3 }, () => ({ result: 'ok', target: 'shop.example' })),
        );
        expect(config.stats).toMatchObject({ successes: 3, okReports: 3 });
        // Nothing new to report: no more calls, and close releases without an ok.
        await new Promise((r) => setTimeout(r, 250));
        await config.close();
        expect(batches()).toHaveLength(1);
        expect(reported()).toHaveLength(3);
        expect(callsMatching(/^DELETE \/v1\/leases\//)).toHaveLength(3);
      });

      it('against an operator without POST /v1/reports: one report per lease from then on, no ok lost', async () => {
        const older = await startPredatingFront(server.baseUrl, { route: '/v1/reports' });
        try {
          config = make({
            leaseAhead: false,
            okReportIntervalMs: 100,
            client: new DiscoveryClient({ baseUrl: older.baseUrl }),
          });
          await succeedOnThree();
          await eventually(() => reported().length === 3);
          await succeedOnThree();
          // The server records a report before its answer reaches the client's stats.
          await eventually(() => reported().length === 6 && config.stats.okReports === 6);
          expect(older.refused).toBe(1);
          expect(callsMatching(/^POST \/v1\/leases\/.+\/report$/)).toHaveLength(6);
          expect(config.stats).toMatchObject({ successes: 6, okReports: 6 });
          expect(warnings).toEqual([
            'the discovery API predates POST /v1/reports: ok reports go one per lease',
          ]);
        } finally {
          await config.close();
          await older.stop();
        }
      });
    });

    it('against an operator that predates release on a report: the ok and the release go in two calls, asked once', async () => {
      const older = await startPredatingFront(server.baseUrl, { field: 'release' });
      try {
        config = make({ client: new DiscoveryClient({ baseUrl: older.baseUrl }) });
        // One release (a retired session's), then another (on close): only the first asks.
        const first = await pool.getSession();
        const url = await config.newUrl(first.id, request('https://one.example/'));
        await navigated(first.id, 'https://one.example/', url!, 200);
        first.retire();
        await eventually(async () => (await active()) === 0);
        const second = await config.newUrl('s2', request('https://two.example/'));
        await navigated('s2', 'https://two.example/', second!, 200);
        await config.close();
        expect(older.refused).toBe(1);
        expect(reported()).toEqual([
          { result: 'ok', target: 'one.example' },
          { result: 'ok', target: 'two.example' },
        ]);
        expect(callsMatching(/^DELETE \/v1\/leases\//)).toHaveLength(2);
        expect(config.stats).toMatchObject({ successes: 2, okReports: 2, released: 2 });
        expect(await active()).toBe(0);
        expect(warnings).toEqual(['the discovery API predates release on report: releasing in two calls']);
      } finally {
        await older.stop();
      }
    });

    it.each([
      { status: 403, result: 'banned' },
      { status: 429, result: 'rate_limited' },
    ])(
      '$status after successes: their ok goes first, so the server sees $result last and its streak stands',
      async ({ status, result }) => {
        const host = 'https://shop.example/';
        const url = await config.newUrl('s1', request(host));
        for (let i = 0; i < 3; i++) await navigated('s1', `${host}${i}`, url!, 200);
        await navigated('s1', `${host}3`, url!, status);
        await eventually(() => reported().length === 2);
        await config.close();
        expect(reported()).toEqual([
          { result: 'ok', target: 'shop.example' },
          { result, target: 'shop.example' },
        ]);
      },
    );

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
    // The lease with a success to report ends in that ok report; the other in a DELETE.
    expect(callsMatching(/^DELETE \/v1\/leases\//)).toHaveLength(1);
    expect(releasedByReport()).toEqual([{ result: 'ok', target: 'one.example', released: true }]);
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

    it("a live lease's renewal timer does not hold the request that took the lease", async () => {
      // A timer keeps the async context it was made in: Crawlee's crawling context (request,
      // response, body) lives in one, so a renewal timer made there held it for 2/3 of the TTL.
      const crawling = new AsyncLocalStorage<{ body: string }>();
      /** Per renewal call: whether it ran in a request's context. */
      const renewedInRequest: boolean[] = [];
      class Recording extends DiscoveryClient {
        override renew(...args: Parameters<DiscoveryClient['renew']>) {
          renewedInRequest.push(crawling.getStore() !== undefined);
          return super.renew(...args);
        }
      }
      // A socket, too, keeps the context it was opened in, for as long as it is kept alive
      // (a pool's few, not one per lease): here the one connection is opened beforehand.
      const dispatcher = new Agent({ connections: 1 });
      const client = new Recording({ baseUrl: server.baseUrl, dispatcher });
      config = make({ client, ttlSeconds: 3, okReportIntervalMs: 100 });
      await client.listProxies();
      let context: WeakRef<object> | undefined;
      await crawling.run({ body: 'x'.repeat(1 << 20) }, async () => {
        context = new WeakRef(crawling.getStore()!);
        const url = await config.newUrl('s', request('https://shop.example/')); // sets the renewal timer
        await navigated('s', 'https://shop.example/', url!, 200); // sets the ok timer
      });
      await eventually(() => config.stats.okReports === 1 && renewedInRequest.length === 1, 30_000);
      expect(renewedInRequest).toEqual([false]);
      expect(config.leases.activeLeases).toBe(1); // the lease and its next renewal timer live on
      await new Promise((r) => setImmediate(r)); // a WeakRef holds its target until the job ends
      collectGarbage();
      expect(context!.deref() === undefined).toBe(true);
      await config.close();
      await dispatcher.close();
    });

    it('leases again when the server forgot the lease (an operator restart)', async () => {
      config = make({ ttlSeconds: 3 });
      const url = await config.newUrl('s', request('https://shop.example/'));
      await navigated('s', 'https://shop.example/', url!, 200); // in use: its renewal is sent
      const [first] = calls('POST /v1/leases');
      await server.store.release((first.response as { leaseID: string }).leaseID);
      // The renewal is due 2 s in; the wait is generous because CI runs this beside the
      // integration suites on two cores (5 s once timed out there).
      await eventually(() => config.leases.activeLeases === 0, 30_000);
      expect(callsMatching(/\/renew$/)).toHaveLength(1); // the 404 that told it
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

    it('waits for a free slot when every proxy is full and there is no lease of that host to share', async () => {
      server.catalog.proxies = [proxy('ns/one', { ip: '10.0.0.7', maxLeases: 1 })];
      config = make({ retryAllBusy: { retries: 20, baseDelayMs: 10, maxDelayMs: 30 } });
      await config.newUrl('holder', request('https://shop.example/'));
      setTimeout(() => void config.leases.sessionEnded('holder'), 100);
      expect(await config.newUrl('waiter', request('https://other.example/'))).toBe('http://10.0.0.7:3128');
    });

    it('fails with all_busy once the wait is over', async () => {
      server.catalog.proxies = [proxy('ns/one', { ip: '10.0.0.7', maxLeases: 1 })];
      config = make({ maxWaitMs: 50, retryAllBusy: { retries: 100, baseDelayMs: 5, maxDelayMs: 10 } });
      await config.newUrl('holder', request('https://shop.example/'));
      const err = await config.newUrl('waiter', request('https://other.example/')).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'all_busy' });
    });
  });

  describe('leasing ahead (the default)', () => {
    beforeEach(async () => {
      await config.close();
      config = make();
    });

    it('a new session of a host with a live lease joins it at once; a lease is asked for in the background for the next', async () => {
      const host = 'https://shop.example/';
      expect(await config.newUrl('s1', request(host))).toBe(urlOf(A));
      expect(calls('POST /v1/leases')).toHaveLength(1);
      // s2 does not wait for a lease request: it joins A, and one more lease is asked for.
      expect(await config.newUrl('s2', request(host))).toBe(urlOf(A));
      await eventually(async () => (await active()) === 2 && config.leases.activeLeases === 2);
      // The lease asked ahead (not keyed by a session) goes to the next new session.
      expect(await config.newUrl('s3', request(host))).toBe(urlOf(B));
      expect(granted()).toEqual([
        { target: 'shop.example', session: 's1', proxy: 'ns/a' },
        { target: 'shop.example', session: undefined, proxy: 'ns/b' },
      ]);
      expect(config.stats).toMatchObject({ leased: 2 });
    });

    it('asks ahead at most twice per host, and not once the server said full', async () => {
      server.catalog.proxies = [A, B].map((p) => ({ ...p, maxLeases: 1 }));
      const host = 'https://shop.example/';
      await config.newUrl('s1', request(host));
      await Promise.all(Array.from({ length: 20 }, (_, i) => config.newUrl(`s${i + 2}`, request(host))));
      await eventually(async () => (await active()) === 2);
      for (let i = 0; i < 20; i++) await config.newUrl(`t${i}`, request(host));
      // One lease in the path, one ahead that was granted, at most a few refused: no flood.
      expect(calls('POST /v1/leases').length).toBeLessThanOrEqual(4);
      expect(await active()).toBe(2);
    });

    it('stops asking ahead once the server, asked for a proxy the host does not hold, has none: the sessions share what the fleet gave', async () => {
      server.catalog.proxies = [A, B].map((p) => ({ ...p, maxLeases: 5 }));
      const host = 'https://shop.example/';
      const urls = [await config.newUrl('s0', request(host))];
      // s1 joins A and one lease is asked ahead, excluding A (B); s2 joins B and one more is
      // asked, excluding A and B: every other proxy excluded, the server refuses.
      for (const [i, asked] of [
        [1, 2],
        [2, 3],
      ] as const) {
        urls.push(await config.newUrl(`s${i}`, request(host)));
        await eventually(() => calls('POST /v1/leases').length === asked);
      }
      expect(granted().map((g) => g.proxy)).toEqual(['ns/a', 'ns/b']);
      expect(calls('POST /v1/leases')[2]!.response).toMatchObject({ error: 'all_busy' });
      // Every session after shares those two leases: no more asks, though 8 slots are free.
      for (let i = 3; i < 20; i++) urls.push(await config.newUrl(`s${i}`, request(host)));
      await new Promise((r) => setTimeout(r, 200));
      expect(calls('POST /v1/leases')).toHaveLength(3);
      expect(new Set(urls)).toEqual(new Set([urlOf(A), urlOf(B)]));
      expect(config.stats.leased).toBe(2);
    });

    it('two asks ahead in flight at once granted the same proxy: the second lease goes back, and the proxy takes one session until a page comes back', async () => {
      server.catalog.proxies = [A, B].map((p) => ({ ...p, maxLeases: 5 }));
      const host = 'https://shop.example/';
      const s0 = await config.newUrl('s0', request(host));
      await navigated('s0', host, s0!, 200); // a page came back through A
      // s1 and s2 join A at once; each asks one lease ahead, both excluding A (all the host
      // held when they left): the server's only other proxy, B, is granted to both.
      expect(await config.newUrl('s1', request(host))).toBe(urlOf(A));
      expect(await config.newUrl('s2', request(host))).toBe(urlOf(A));
      await eventually(() => granted().length === 3);
      expect(granted().map((g) => g.proxy)).toEqual(['ns/a', 'ns/b', 'ns/b']);
      await eventually(async () => (await active()) === 2);
      expect(config.stats.grantedTwice).toBe(1);
      expect(config.leases.activeLeases).toBe(2);
      // B is new to the site (banned there, for all the crawl knows yet): one session tries
      // it, the next joins A, which carried a page.
      const next = [await config.newUrl('s3', request(host)), await config.newUrl('s4', request(host))];
      expect(next.filter((u) => u === urlOf(B))).toHaveLength(1);
    });

    // Issue 48: the server's least used proxy counts every owner's leases. Another team's on
    // B and C make A, which this host holds, the least used: asked without its proxies
    // excluded, the server handed A back and the host stopped asking at one proxy of three.
    const C = proxy('ns/c', { ip: '10.0.0.3', latencyMillis: 30 });
    const otherTeamOnBAndC = async () => {
      server.catalog.proxies = [A, B, C].map((p) => ({ ...p, maxLeases: 10 }));
      for (let i = 0; i < 6; i++) {
        const result = await server.store.acquire({
          selector: {},
          ttlSeconds: 300,
          owner: 'team-b',
          exclude: new Set(['ns/a']),
        });
        expect(result.granted).toBe(true);
      }
    };
    const crawl = async (sessions: number) => {
      const host = 'https://shop.example/';
      for (let i = 0; i < sessions; i++) {
        await config.newUrl(`s${i}`, request(host));
        await new Promise((r) => setTimeout(r, 20));
      }
    };

    it("another team's leases do not stop the host from spreading: it asks ahead until it holds every proxy", async () => {
      await otherTeamOnBAndC();
      await crawl(8);
      await eventually(() => new Set(granted().map((g) => g.proxy)).size === 3);
      expect(new Set(granted().map((g) => g.proxy))).toEqual(new Set(['ns/a', 'ns/b', 'ns/c']));
      // Each grant a proxy new to the host, then one refusal: covered, no more asks.
      expect(granted()).toHaveLength(3);
      await crawl(8);
      expect(calls('POST /v1/leases')).toHaveLength(4);
    });

    it('against an operator that predates exclude: asks ahead without it, asked once, as before', async () => {
      await otherTeamOnBAndC();
      const older = await startPredatingFront(server.baseUrl, { field: 'exclude' });
      try {
        config = make({ client: new DiscoveryClient({ baseUrl: older.baseUrl }) });
        await crawl(8);
        // The least used proxy is A again: without exclude the host stops at the proxy it holds.
        await eventually(() => granted().length === 2);
        expect(granted().map((g) => g.proxy)).toEqual(['ns/a', 'ns/a']);
        await crawl(8);
        expect(older.refused).toBe(1);
        expect(warnings).toEqual(['the discovery API predates exclude on a lease: asking ahead without it']);
      } finally {
        await config.close();
        await older.stop();
      }
    });

    it('a lease no page has come back through yet takes one new session; the next ones join a lease that carried a page', async () => {
      server.catalog.proxies = [A, B].map((p) => ({ ...p, maxLeases: 1 }));
      const host = 'https://shop.example/';
      expect(await config.newUrl('s1', request(host))).toBe(urlOf(A));
      // s2 joins A, the only lease, and B is asked for ahead.
      expect(await config.newUrl('s2', request(host))).toBe(urlOf(A));
      // The client has B once the server's answer arrived, which is after the server counts it.
      await eventually(async () => (await active()) === 2 && config.leases.activeLeases === 2);
      await navigated('s1', `${host}1`, urlOf(A), 200);
      // B has no session: the next new session tries it.
      expect(await config.newUrl('s3', request(host))).toBe(urlOf(B));
      // A carried a page, B has not yet: B keeps its one session, though A has more.
      const joined = [];
      for (const s of ['s4', 's5', 's6']) joined.push(await config.newUrl(s, request(host)));
      expect(joined).toEqual([urlOf(A), urlOf(A), urlOf(A)]);
      // Once B carried a page it is a lease like any other: the least shared.
      await navigated('s3', `${host}3`, urlOf(B), 200);
      expect(await config.newUrl('s7', request(host))).toBe(urlOf(B));
      expect(await config.newUrl('s8', request(host))).toBe(urlOf(B));
    });

    it('a burst of new sessions sends one request through a proxy new to the crawl: a ban there costs one 403', async () => {
      server.catalog.proxies = [A, B].map((p) => ({ ...p, maxLeases: 1 }));
      const host = 'https://shop.example/';
      await config.newUrl('s1', request(host));
      await navigated('s1', `${host}1`, urlOf(A), 200);
      await config.newUrl('s2', request(host));
      await eventually(async () => (await active()) === 2 && config.leases.activeLeases === 2);
      const burst = ['s3', 's4', 's5', 's6'];
      const urls = await Promise.all(burst.map((s) => config.newUrl(s, request(host))));
      expect(urls.filter((u) => u === urlOf(B))).toHaveLength(1);
      await navigated(burst[urls.indexOf(urlOf(B))]!, `${host}2`, urlOf(B), 403);
      expect(reported()).toEqual([{ result: 'banned', target: 'shop.example' }]);
      // The burst's other sessions were never on B: their next requests go through A.
      for (const s of burst.filter((_, i) => urls[i] !== urlOf(B)))
        expect(await config.newUrl(s, request(host))).toBe(urlOf(A));
    });

    it('a request waiting for the pace of every leased proxy of the site leases another proxy and goes through it at once', async () => {
      const host = 'https://shop.example/';
      expect(await config.newUrl('s1', request(host))).toBe(urlOf(A));
      for (let i = 0; i < 3; i++) await navigated('s1', `${host}${i}`, urlOf(A), 200);
      await config.postNavigationHook({
        request: { url: `${host}3` },
        session: { id: 's1' },
        proxyInfo: { url: urlOf(A) },
        response: { statusCode: 429, headers: { 'retry-after': '60' } },
      });
      // A rests for a minute; B, not leased yet, has the whole pace of the site: the request
      // waits only for B's lease to come, never for A's rest (stats.pacedMs adds up every wait).
      expect(await config.newUrl('s1', request(host))).toBe(urlOf(B));
      expect(config.stats.pacedMs).toBeLessThan(60_000);
      expect(granted()).toEqual([
        { target: 'shop.example', session: 's1', proxy: 'ns/a' },
        { target: 'shop.example', session: undefined, proxy: 'ns/b' },
      ]);
    });

    it('asks for another proxy while pacing only until the server has none to add', async () => {
      server.catalog.proxies = [{ ...A, maxLeases: 5 }];
      const host = 'https://shop.example/';
      expect(await config.newUrl('s1', request(host))).toBe(urlOf(A));
      await config.postNavigationHook({
        request: { url: `${host}0` },
        session: { id: 's1' },
        proxyInfo: { url: urlOf(A) },
        response: { statusCode: 429, headers: { 'retry-after': '1' } },
      });
      // While A rests for the site the server has nothing to add (all_cooling_down): one ask.
      await Promise.all(Array.from({ length: 2 }, () => config.newUrl('s1', request(host))));
      expect(calls('POST /v1/leases')).toHaveLength(2);
      expect(calls('POST /v1/leases')[1]!.response).toMatchObject({ error: 'all_cooling_down' });
    });

    it('a pace-driven ask, the proxies leased for the site excluded, refused, is the last for a while', async () => {
      server.catalog.proxies = [{ ...A, maxLeases: 5 }];
      const host = 'https://shop.example/';
      expect(await config.newUrl('s1', request(host))).toBe(urlOf(A));
      await navigated('s1', `${host}0`, urlOf(A), 200);
      await config.postNavigationHook({
        request: { url: `${host}1` },
        session: { id: 's1' },
        proxyInfo: { url: urlOf(A) },
        response: { statusCode: 429, headers: { 'retry-after': '1' } },
      });
      // After the rest, one a second through A: the waits ask once, excluding A (another
      // lease on it adds no pace): the server has no other proxy.
      await new Promise((r) => setTimeout(r, 1_100));
      await Promise.all(Array.from({ length: 3 }, () => config.newUrl('s1', request(host))));
      await eventually(() => calls('POST /v1/leases').length === 2);
      expect(granted().map((g) => g.proxy)).toEqual(['ns/a']);
      expect(calls('POST /v1/leases')[1]!.response).toMatchObject({ error: 'all_busy' });
      await Promise.all(Array.from({ length: 2 }, () => config.newUrl('s1', request(host))));
      expect(calls('POST /v1/leases')).toHaveLength(2);
    });

    it('close() also releases a lease still being asked for ahead', async () => {
      const host = 'https://shop.example/';
      await config.newUrl('s1', request(host));
      await config.newUrl('s2', request(host));
      await config.close();
      expect(calls('POST /v1/leases')).toHaveLength(2);
      expect(await active()).toBe(0);
    });
  });

  describe('fewer slots than sessions (Crawlee defaults: 1,000 sessions)', () => {
    it('new sessions share live leases of the host instead of failing, with one 409 per second at most', async () => {
      server.catalog.proxies = [A, B].map((p) => ({ ...p, maxLeases: 2 }));
      const urls = await Promise.all(
        Array.from({ length: 40 }, (_, i) => config.newUrl(`s${i}`, request('https://shop.example/'))),
      );
      expect(new Set(urls)).toEqual(new Set([urlOf(A), urlOf(B)]));
      expect(await active()).toBe(4);
      expect(config.stats.shared).toBe(36);
      // At most four lease requests per host are out at once, and a refusal is remembered for a
      // second: one round of 409s, then the other sessions share without asking.
      const refusals = server.requests.filter((r) => r.call === 'POST /v1/leases').length - 4;
      expect(refusals).toBeGreaterThan(0);
      expect(refusals).toBeLessThanOrEqual(5);
      expect(config.stats.busy).toBe(refusals);
      // Shared leases are spread evenly: each of the four carries ten sessions.
      const perURL = new Map<string, number>();
      for (const url of urls) perURL.set(url!, (perURL.get(url!) ?? 0) + 1);
      expect([...perURL.values()]).toEqual([20, 20]);
    });

    it('a lease stays while any session on it lives, and goes with the last', async () => {
      server.catalog.proxies = [{ ...A, maxLeases: 1 }];
      await config.newUrl('first', request('https://shop.example/'));
      await config.newUrl('second', request('https://shop.example/'));
      expect(config.stats.shared).toBe(1);
      await config.leases.sessionEnded('first');
      expect(await active()).toBe(1);
      expect(await config.newUrl('second', request('https://shop.example/'))).toBe(urlOf(A));
      await config.leases.sessionEnded('second');
      expect(await active()).toBe(0);
    });

    it('maxLeases caps the leases one configuration takes; the rest share', async () => {
      config = make({ maxLeases: 1 });
      await config.newUrl('s1', request('https://shop.example/'));
      await config.newUrl('s2', request('https://shop.example/'));
      expect(await active()).toBe(1);
      expect(calls('POST /v1/leases')).toHaveLength(1);
    });
  });

  describe('a proxy that cannot carry the request (errorHandler)', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:3128'), { code: 'ECONNREFUSED' });
    const failed = (sessionId: string, url: string, proxyUrl: string, error: unknown) =>
      config.errorHandler(
        {
          request: { url },
          session: { id: sessionId },
          proxyInfo: { url: proxyUrl },
          crawler: { sessionPool: pool },
        },
        error,
      );

    it('reports unreachable once, moves every session off it, and the retry never lands on it', async () => {
      expect(await config.newUrl('s1', request('https://one.example/'))).toBe(urlOf(A));
      expect(await config.newUrl('s2', request('https://two.example/'))).toBe(urlOf(B));
      expect(await config.newUrl('s3', request('https://two.example/'))).toBe(urlOf(A));
      await Promise.all([
        failed('s1', 'https://one.example/', urlOf(A), refused),
        failed('s3', 'https://two.example/', urlOf(A), refused),
      ]);
      expect(reported()).toEqual([{ result: 'unreachable', target: 'one.example' }]);
      expect(config.stats.reportedUnreachable).toBe(1);
      // Every lease on A is gone, for every host; new sessions and old ones land on B.
      expect(await active()).toBe(1);
      for (const [session, url] of [
        ['s1', 'one'],
        ['s3', 'two'],
        ['s9', 'three'],
      ] as const) {
        expect(await config.newUrl(session, request(`https://${url}.example/`))).toBe(urlOf(B));
      }
    });

    it.each([
      ['a timeout', new Error('request timed out after 30 seconds.')],
      ['an HTTP error of the site', new Error('Request blocked - received 500 status code.')],
    ])('ignores %s', async (_case, error) => {
      await config.newUrl('s1', request('https://one.example/'));
      await failed('s1', 'https://one.example/', urlOf(A), error);
      expect(reported()).toEqual([]);
      expect(await active()).toBe(1);
    });

    it('a proxy the server leases back after the report is believed again (a probe passed)', async () => {
      server.catalog.proxies = [A];
      await config.newUrl('s1', request('https://one.example/'));
      await failed('s1', 'https://one.example/', urlOf(A), refused);
      const [suspicion] = await new Promise<string[]>((resolve) =>
        server.store.onProbeRequest((_id, _address, token) => resolve([token])),
      );
      await server.store.observeHealth('ns/a', { kind: 'probe_passed', address: '10.0.0.1:3128', suspicion });
      expect(await config.newUrl('s2', request('https://one.example/'))).toBe(urlOf(A));
    });
  });

  /** Session s1 leases the only proxy, A, and the shop answers it 429 with Retry-After: 1. */
  async function onlyProxyRateLimited(): Promise<void> {
    server.catalog.proxies = [A];
    const url = await config.newUrl('s1', request('https://shop.example/'));
    await config.postNavigationHook({
      request: { url: 'https://shop.example/x' },
      session: { id: 's1' },
      proxyInfo: { url: url! },
      response: { statusCode: 429, headers: { 'retry-after': '1' } },
    });
  }

  it('paces instead of failing when every proxy rests for the site after rate limits', async () => {
    await onlyProxyRateLimited();
    const started = Date.now();
    // The only proxy rests for a second: the next request waits for it instead of throwing.
    expect(await config.newUrl('s2', request('https://shop.example/y'))).toBe(urlOf(A));
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(config.stats.paced).toBe(1);
    const refusal = calls('POST /v1/leases').find(
      (r) => (r.response as { error?: string }).error === 'all_cooling_down',
    );
    expect(refusal).toBeDefined();
  });

  it('counts one paced wait per request, however many sleeps the wait takes', async () => {
    let now = Date.now();
    await config.close();
    config = make({ leaseAhead: false, now: () => now });
    await onlyProxyRateLimited();
    const rested = now;
    const waited = config.newUrl('s2', request('https://shop.example/y'));
    // Every sleep ends short of the turn by this clock (as a timer may, by Date.now(), by a
    // millisecond): the request sleeps again and again until the clock says the turn has come.
    now = rested + 990;
    await new Promise((r) => setTimeout(r, 1300));
    now = rested + 10_000;
    expect(await waited).toBe(urlOf(A));
    expect(config.stats.paced).toBe(1);
  });

  it('counts one paced wait per request when the server says twice that every proxy rests', async () => {
    await onlyProxyRateLimited();
    // Crawlee retires a session on a 429: its lease goes, and the next session has none to
    // share, so it waits on the server's all_cooling_down.
    await config.leases.sessionEnded('s1');
    const started = Date.now();
    const waited = config.newUrl('s2', request('https://shop.example/y'));
    // While it waits, another crawler's 429 through the same proxy makes it rest longer.
    await new Promise((r) => setTimeout(r, 300));
    const other = new DiscoveryClient({ baseUrl: server.baseUrl });
    const lease = await other.lease({ target: 'elsewhere.example' });
    await other.report(lease.leaseID, 'rate_limited', { target: 'shop.example', retryAfterSeconds: 2 });
    await other.release(lease.leaseID);
    expect(await waited).toBe(urlOf(A));
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_000);
    const refusals = calls('POST /v1/leases').filter(
      (r) => (r.response as { error?: string }).error === 'all_cooling_down',
    );
    expect(refusals.length).toBeGreaterThanOrEqual(2);
    expect(config.stats.paced).toBe(1);
  });

  /**
   * A configuration on a clock the test sets, sessions s1 and s2 on the two proxies for
   * `page`; `answer` feeds the hook a response through a proxy at `at` (a 429 says
   * Retry-After: 1).
   */
  async function twoProxiesOnAClock(page: string, at: number) {
    let now = at;
    await config.close();
    config = make({ leaseAhead: false, now: () => now });
    const first = (await config.newUrl('s1', request(page)))!;
    const second = (await config.newUrl('s2', request(page)))!;
    expect(second).not.toBe(first);
    return {
      first,
      second,
      setNow: (t: number) => void (now = t),
      answer: async (session: string, proxyUrl: string, statusCode: number, when = now) => {
        now = when;
        await config.postNavigationHook({
          request: { url: page },
          session: { id: session },
          proxyInfo: { url: proxyUrl },
          response: { statusCode, headers: statusCode === 429 ? { 'retry-after': '1' } : {} },
        });
      },
    };
  }

  it("sends a request through another leased proxy's token before probing its own proxy for a higher limit", async () => {
    const start = Date.now();
    const page = 'https://shop.example/';
    const { first: own, second: other, answer, setNow } = await twoProxiesOnAClock(page, start - 500);
    // The site allowed three requests a second through each proxy.
    for (let i = 0; i < 3; i++) await answer('s1', own, 200);
    for (let i = 0; i < 3; i++) await answer('s2', other, 200);
    await answer('s1', own, 429, start);
    await answer('s2', other, 429, start);
    // Long after: the own proxy's two whole tokens go (three less the headroom); the next
    // request may only probe it (no 429 for more than PROBE_AFTER_PERIODS periods), while the
    // other proxy has tokens.
    setNow(start + 6_000);
    expect(await config.newUrl('s1', request(page))).toBe(own);
    expect(await config.newUrl('s1', request(page))).toBe(own);
    expect(await config.newUrl('s1', request(page))).toBe(other);
  });

  it('a proxy whose own successes showed less of the site takes the limit another proxy showed', async () => {
    const start = Date.now();
    const page = 'https://shop.example/';
    const { first: sparse, second: dense, answer, setNow } = await twoProxiesOnAClock(page, start - 1_000);
    // The site allows three a second per source. Through the first proxy three requests went
    // 400 ms apart and the fourth got a 429: by themselves they show only two a second.
    for (const at of [start - 900, start - 500, start - 100]) await answer('s1', sparse, 200, at);
    await answer('s1', sparse, 429, start);
    // Through the second, three went within 20 ms before its 429: the site allows three.
    for (const at of [start - 20, start - 10, start]) await answer('s2', dense, 200, at);
    await answer('s2', dense, 429, start);
    // Both rests over: the first proxy has the three-a-second bucket too (three less the
    // headroom: two whole tokens), not the one whole token of two a second.
    setNow(start + 1_000);
    expect(await config.newUrl('s1', request(page))).toBe(sparse);
    expect(await config.newUrl('s1', request(page))).toBe(sparse);
    expect(await config.newUrl('s1', request(page))).toBe(dense);
  });

  it('a probe shows the limit it went out from, and a proxy that lowered its own limit takes it', async () => {
    const start = Date.now();
    const page = 'https://shop.example/';
    const { first: a, second: b, answer, setNow } = await twoProxiesOnAClock(page, start - 1_000);
    // A shows three a second (three within 20 ms, then a 429).
    for (const at of [start - 20, start - 10, start]) await answer('s1', a, 200, at);
    await answer('s1', a, 429, start);
    // B gets a 429 after one success in its period: the site seems to allow less now, and
    // B's limit falls to one (what a lowered limit shows resets what was shown).
    await answer('s2', b, 200, start + 100);
    await answer('s2', b, 429, start + 200);
    // Quiet periods later: A spends its two whole tokens, B's one token goes, and the next
    // request probes A: three held for five quiet periods.
    const later = start + 6_000;
    setNow(later);
    const sent = [];
    for (let i = 0; i < 4; i++) sent.push(await config.newUrl('s1', request(page)));
    expect(sent).toEqual([a, a, b, a]);
    // B has the three-a-second bucket again: two whole tokens, not one.
    setNow(later + 10_000);
    expect(await config.newUrl('s2', request(page))).toBe(b);
    expect(await config.newUrl('s2', request(page))).toBe(b);
  });

  it('when no proxy has a token, the probe goes through the proxy a probe raised before, and its refusal shows the limit for every proxy', async () => {
    const start = Date.now();
    const page = 'https://shop.example/';
    const { first: a, second: b, answer, setNow } = await twoProxiesOnAClock(page, start - 1_000);
    // The site allows three a second per source. Through each proxy three requests went
    // 400 ms apart before a 429: by themselves they show two a second, the limit both learn.
    for (const [session, proxyUrl] of [
      ['s1', a],
      ['s2', b],
    ] as const) {
      for (const at of [start - 900, start - 500, start - 100]) await answer(session, proxyUrl, 200, at);
      await answer(session, proxyUrl, 429, start);
    }
    // Quiet periods later: each proxy has one whole token (two less the headroom); then A's
    // session probes A, and the site lets the probe through: A's limit is three, B's two.
    let now = start + 6_000;
    setNow(now);
    const first = [];
    for (let i = 0; i < 3; i++) first.push(await config.newUrl('s1', request(page)));
    expect(first).toEqual([a, b, a]);
    await answer('s1', a, 200, now);
    // Quiet periods later again, B's session asks: B's token and A's two go, and then either
    // proxy could probe. The probe goes through A, the proxy a probe raised.
    now += 6_000;
    setNow(now);
    const second = [];
    for (let i = 0; i < 4; i++) second.push(await config.newUrl('s2', request(page)));
    expect(second).toEqual([b, a, a, a]);
    // The site refuses A's probe of four: three held for A, so B takes three as well (two
    // whole tokens once the rests are over, not one).
    await answer('s2', a, 429, now);
    setNow(now + 10_000);
    expect(await config.newUrl('s2', request(page))).toBe(b);
    expect(await config.newUrl('s2', request(page))).toBe(b);
  });

  it('passes the Retry-After of a 429 with the report', async () => {
    const url = await config.newUrl('s1', request('https://shop.example/'));
    await config.postNavigationHook({
      request: { url: 'https://shop.example/x' },
      session: { id: 's1' },
      proxyInfo: { url: url! },
      response: { statusCode: 429, headers: { 'retry-after': '45' } },
    });
    // The report goes in the background (the hook does not wait for it).
    await eventually(() => callsMatching(/report$/).length === 1);
    const report = callsMatching(/report$/)[0].response as { cooldownUntil: string };
    expect(Date.parse(report.cooldownUntil) - Date.now()).toBeGreaterThan(40_000);
  });

  describe("the lease rides on the request's ProxyInfo to the hook", () => {
    /** The hook as Crawlee calls it: with the ProxyInfo newProxyInfo gave the request. */
    const through = (
      sessionId: string,
      url: string,
      proxyInfo: { url?: string } | undefined,
      statusCode = 200,
    ) =>
      config.postNavigationHook({
        request: { url },
        session: { id: sessionId },
        proxyInfo,
        response: { statusCode },
        crawler: { sessionPool: pool },
      });

    it('a success is counted on the lease that carried it, with no lookup of the session', async () => {
      await config.newProxyInfo('s1', request('https://shop.example/'));
      const lookups = jest.spyOn(config.leases, 'succeeded');
      for (let i = 0; i < 10; i++) {
        const info = await config.newProxyInfo('s1', request(`https://shop.example/${i}`));
        await through('s1', `https://shop.example/${i}`, info);
      }
      expect(lookups).not.toHaveBeenCalled();
      await config.close();
      expect(reported()).toEqual([{ result: 'ok', target: 'shop.example' }]);
      expect(config.stats).toMatchObject({ successes: 10, okReports: 1, released: 1 });
    });

    it('a success whose carrying lease ended mid-request is counted all the same', async () => {
      await config.newProxyInfo('s1', request('https://shop.example/'));
      const info = await config.newProxyInfo('s1', request('https://shop.example/a'));
      await config.leases.sessionEnded('s1');
      await through('s1', 'https://shop.example/a', info);
      expect(config.stats.successes).toBe(1);
    });

    it("a ProxyInfo another configuration made is counted here, never on the other's lease", async () => {
      const other = make({ leaseAhead: false });
      try {
        await other.newProxyInfo('s1', request('https://shop.example/'));
        const info = await other.newProxyInfo('s1', request('https://shop.example/a'));
        await through('s1', 'https://shop.example/a', info);
        expect(config.stats.successes).toBe(1);
        expect(other.stats.successes).toBe(0);
      } finally {
        await other.close();
      }
      // The other's lease had no success: its release carried no ok.
      expect(reported()).toEqual([]);
    });
  });

  it('counts a success whose lease ended mid-request', async () => {
    const url = await config.newUrl('s1', request('https://shop.example/'));
    await config.leases.sessionEnded('s1');
    await navigated('s1', 'https://shop.example/', url!, 200);
    expect(config.stats.successes).toBe(1);
  });

  it('close() leaves no lease and no session on the server', async () => {
    await Promise.all(
      Array.from({ length: 6 }, (_, i) => config.newUrl(`s${i}`, request(`https://h${i % 2}.example/`))),
    );
    await config.close();
    expect(await active()).toBe(0);
    expect((await server.store.totals()).activeSessions).toBe(0);
    expect(config.leases.activeServerSessions).toBe(0);
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
    // close() ends the server-side session it started; a retirement after it sends nothing more.
    expect(calls(`DELETE /v1/sessions/${session.id}`)).toHaveLength(1);
    session.retire();
    await new Promise((r) => setTimeout(r, 100));
    expect(calls(`DELETE /v1/sessions/${session.id}`)).toHaveLength(1);
    expect(warnings).toEqual([]);
  });
});

describe('the pure rules', () => {
  it.each<[string, unknown, boolean]>([
    ['a refused connection (code)', Object.assign(new Error('x'), { code: 'ECONNREFUSED' }), true],
    [
      'a reset (cause)',
      new Error('wrapped', { cause: Object.assign(new Error('y'), { code: 'ECONNRESET' }) }),
      true,
    ],
    // A CONNECT the proxy itself refused is its failure; a 502/504 is the site's (the proxy could not reach it).
    [
      "Crawlee's SessionError text, the proxy refusing",
      new Error('Proxy responded with 407 Proxy Authentication Required: 0 bytes'),
      true,
    ],
    [
      "Crawlee's SessionError text, the proxy forbidding",
      new Error('Proxy responded with 403 Forbidden: 0 bytes'),
      true,
    ],
    [
      "Crawlee's SessionError text, the site unreachable (502)",
      new Error('Proxy responded with 502 Bad Gateway: 0 bytes'),
      false,
    ],
    [
      "Crawlee's SessionError text, the site timing out (504)",
      new Error('Proxy responded with 504 Gateway Timeout: 0 bytes'),
      false,
    ],
    ['a tunnel failure', new Error('ERR_TUNNEL_CONNECTION_FAILED'), true],
    ['a socket hang up', new Error('socket hang up'), true],
    ['a navigation timeout', new Error('request timed out after 30 seconds.'), false],
    [
      'a DNS failure of the site',
      Object.assign(new Error('getaddrinfo ENOTFOUND shop.example'), { code: 'ENOTFOUND' }),
      false,
    ],
    ['nothing', undefined, false],
  ])('isProxyFailure: %s → %s', (_case, error, expected) => {
    expect(isProxyFailure(error)).toBe(expected);
  });

  it.each<[string, boolean, number, boolean]>([
    ['a new lease, no session yet: its first session tries it', false, 0, true],
    ['a new lease with a session on trial: the next go elsewhere', false, 1, false],
    ['a lease that carried a page, any sessions', true, 7, true],
    ['a lease that carried a page, its sessions gone', true, 0, true],
  ])('mayJoin: %s', (_case, carried, sessions, expected) => {
    expect(mayJoin({ carried, bindings: { size: sessions } })).toBe(expected);
  });

  /** A turn: a token now, a probe now (of a proxy whose limit is now `limit`), or a wait. */
  const token: Turn = { waitMs: 0, probe: false };
  const probeTo = (limit: number): Turn => ({
    waitMs: 0,
    probe: true,
    admitted: { pace: { ...unpaced, limit }, probe: true },
  });
  const waitOf = (waitMs: number): Turn => ({ waitMs, probe: false });
  it.each<[string, Turn, Turn, boolean]>([
    ['a token now beats a probe now', token, probeTo(3), true],
    ['a probe now does not beat a token now', probeTo(3), token, false],
    ['a probe now beats a wait', probeTo(3), waitOf(5), true],
    ['a shorter wait beats a longer one', waitOf(5), waitOf(50), true],
    ['a token does not beat a token', token, token, false],
    ['the probe of a proxy a probe raised beats the probe of one it did not', probeTo(4), probeTo(3), true],
    ['the probe of a proxy at the lower limit does not beat it', probeTo(3), probeTo(4), false],
    ['probes of proxies at the same limit: the first found stays', probeTo(3), probeTo(3), false],
  ])('isSooner: %s', (_case, a, b, expected) => {
    expect(isSooner(a, b)).toBe(expected);
  });

  it.each<[string | undefined, number | undefined]>([
    ['120', 120],
    [' 7 ', 7],
    ['0', 0],
    ['999999', 86_400],
    ['Wed, 01 Jan 2025 00:01:30 GMT', 90],
    ['Wed, 01 Jan 2025 00:00:00 GMT', 0],
    ['soon', undefined],
    [undefined, undefined],
  ])('retryAfterSeconds(%j) = %j', (value, expected) => {
    const now = Date.parse('2025-01-01T00:00:00Z');
    expect(retryAfterSeconds(value === undefined ? {} : { 'retry-after': value }, now)).toBe(expected);
  });

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
