// The gateway on real parts (gateway-world.ts): authentication, routing through the book,
import { request as httpRequest } from 'node:http';
// sessions, bans, dead upstreams, caps, reports by session, leases released.
import { jest } from '@jest/globals';
import { OPEN_POLICY, type TokenPolicy } from '../../book/token-scope.js';
import { basic, PROXY_IPS, startWorld, until, viaGateway, viaTunnel, type World } from './gateway-world.js';

let world: World;
afterEach(async () => {
  await world?.close();
});

const url = (w: World, path = '/') => `http://127.0.0.1:${w.site.httpPort}${path}`;

describe("a token's scope (the tokens file's)", () => {
  it.each<[string, TokenPolicy, string[]]>([
    ['every proxy by default', OPEN_POLICY, ['127.0.0.2', '127.0.0.3', '127.0.0.4']],
    [
      'a selector: only the proxies it matches',
      { scope: { selector: { geo: 'us' } }, rotationTrusted: false },
      ['127.0.0.2'],
    ],
    [
      'a namespace no proxy is in: nothing, never a request without a proxy',
      { scope: { namespaces: ['other'] }, rotationTrusted: false },
      [],
    ],
  ])('%s', async (_, policy, exits) => {
    world = await startWorld({}, 5, policy);
    const seen = new Set<string>();
    for (let i = 0; i < 9; i++) {
      const answer = await viaGateway(world.port, url(world), basic(`session-s${i}`));
      if (answer.status === 200) seen.add(answer.body.trim());
    }
    expect([...seen].sort()).toEqual(exits);
    expect(world.site.seen.every((ip) => exits.includes(ip))).toBe(true);
  });
});

describe('authentication: never an open proxy', () => {
  beforeEach(async () => {
    world = await startWorld();
  });

  it.each<[string, string | undefined, string, RegExp]>([
    ['no credentials', undefined, 'proxy_auth_required', /missing Proxy-Authorization header/],
    ['a wrong token', basic('', 'not-the-token-0123456'), 'invalid_token', /not a discovery API token/],
    ['a Bearer header', 'Bearer x', 'malformed_credentials', /expected "Basic/],
    ['an unknown option', basic('sesion-abc'), 'invalid_username', /unknown option "sesion"/],
    ['a bad TTL', basic('ttl-forever'), 'invalid_username', /ttl must be/],
  ])(
    '%s: 407 with the code in a header and a JSON body, on plain HTTP and CONNECT',
    async (_n, auth, code, message) => {
      for (const answer of [
        await viaGateway(world.port, url(world), auth),
        await viaTunnel(world.port, world.site.httpsPort, world.site.ca, auth),
      ]) {
        expect(answer.status).toBe(407);
        expect(answer.headers['proxy-authenticate']).toBe('Basic realm="proxy-operator gateway"');
        expect(answer.headers['x-gateway-error']).toMatch(new RegExp(`^${code}: `));
        expect(JSON.parse(answer.body)).toEqual({ error: code, message: expect.stringMatching(message) });
      }
      // Nothing reached the site, and no lease was taken.
      expect(world.site.seen).toEqual([]);
      expect((await world.store.totals()).activeLeases).toBe(0);
    },
  );

  it('answers requests for its own paths with 404, not as a proxy', async () => {
    const answer = await viaGateway(world.port, '/anything', basic(''));
    expect(answer.status).toBe(404);
    expect(JSON.parse(answer.body).error).toBe('not_found');
  });
});

describe('routing through the book', () => {
  beforeEach(async () => {
    world = await startWorld();
  });

  it('carries plain HTTP and CONNECT through a leased proxy, adding its credentials itself', async () => {
    const plain = await viaGateway(world.port, url(world), basic(''));
    expect(plain.status).toBe(200);
    expect(PROXY_IPS).toContain(plain.body.trim());
    const tunnel = await viaTunnel(world.port, world.site.httpsPort, world.site.ca, basic(''));
    expect(tunnel.status).toBe(200);
    expect(PROXY_IPS).toContain(tunnel.body.trim());
    // Every upstream required credentials the client never sent.
    for (const fp of world.proxies.values()) expect(fp.stats.refusedAuth).toBe(0);
  });

  it('keeps a session on one exit IP per target, over HTTP and over tunnels', async () => {
    const ips = new Set<string>();
    for (let i = 0; i < 6; i++)
      ips.add((await viaGateway(world.port, url(world), basic('session-s1'))).body.trim());
    expect(ips.size).toBe(1);
    const tunnelIPs = new Set<string>();
    for (let i = 0; i < 4; i++)
      tunnelIPs.add(
        (await viaTunnel(world.port, world.site.httpsPort, world.site.ca, basic('session-t1'))).body.trim(),
      );
    expect(tunnelIPs.size).toBe(1);
  });

  it('selects by attribute from the username', async () => {
    for (let i = 0; i < 4; i++)
      expect((await viaGateway(world.port, url(world), basic('geo-us'))).body.trim()).toBe('127.0.0.2');
  });

  it('reports a ban on plain HTTP: the site sees no more requests from that proxy, the session moves', async () => {
    const first = (await viaGateway(world.port, url(world), basic('session-b1'))).body.trim();
    world.site.banned.add(first);
    const banned = await viaGateway(world.port, url(world), basic('session-b1'));
    expect(banned.status).toBe(403); // the site's answer is the client's to see
    world.site.seen.length = 0;
    for (let i = 0; i < 6; i++) {
      const next = await viaGateway(world.port, url(world), basic('session-b1'));
      expect(next.status).toBe(200);
    }
    expect(world.site.seen).not.toContain(first);
    expect(new Set(world.site.seen).size).toBe(1);
    const standing = await world.store.standing(`fleet/p${PROXY_IPS.indexOf(first)}`);
    expect(standing.cooldowns.map((c) => c.target)).toEqual(['127.0.0.1']);
  });

  it('reports a rate limit with its Retry-After', async () => {
    const limited = await viaGateway(world.port, url(world, '/slow-limit'), basic('session-r1'));
    expect(limited.status).toBe(429);
    await until(async () => (await world.store.totals()).activeCooldowns === 1);
  });
});

describe('failures made invisible', () => {
  it('a dead upstream costs the client 0 failed requests, HTTP and CONNECT', async () => {
    world = await startWorld({ maxAttempts: 3 });
    const ip = (await viaGateway(world.port, url(world), basic('session-d1'))).body.trim();
    const tunnelIP = (
      await viaTunnel(world.port, world.site.httpsPort, world.site.ca, basic('session-d2'))
    ).body.trim();
    await world.proxies.get(ip)!.close();
    if (tunnelIP !== ip) await world.proxies.get(tunnelIP)!.close();
    const after = await viaGateway(world.port, url(world), basic('session-d1'));
    expect(after.status).toBe(200);
    expect(after.body.trim()).not.toBe(ip);
    const tunnel = await viaTunnel(world.port, world.site.httpsPort, world.site.ca, basic('session-d2'));
    expect(tunnel.status).toBe(200);
    expect([ip, tunnelIP]).not.toContain(tunnel.body.trim());
    // The dead ones are suspect in the book: leased to nobody until probed again.
    expect((await world.store.totals()).suspectProxies).toBe(new Set([ip, tunnelIP]).size);
    const metrics = await world.registry.getSingleMetricAsString(
      'proxy_operator_gateway_upstream_retries_total',
    );
    expect(metrics).toMatch(/carrier="http"} 1/);
  });

  it('says 502 upstream_failed when every attempt fails, never sending without a proxy', async () => {
    world = await startWorld({ maxAttempts: 2 });
    for (const fp of world.proxies.values()) await fp.close();
    const answer = await viaGateway(world.port, url(world), basic(''));
    expect(answer.status).toBe(502);
    expect(answer.headers['x-gateway-error']).toMatch(/^upstream_failed: 2 upstream proxies failed in a row/);
    expect(world.site.seen).toEqual([]);
    const third = await viaGateway(world.port, url(world), basic(''));
    // The third proxy was all that was left (two are suspect); it was dead too, and then none
    // was leasable: 503, still nothing sent without a proxy.
    expect(third.status).toBe(503);
    expect(third.headers['x-gateway-error']).toMatch(/^no_match: no leasable proxy/);
    expect(world.site.seen).toEqual([]);
  });

  it("a site that is down (the upstream's 502 to CONNECT) is the site's failure, not the proxy's", async () => {
    world = await startWorld();
    const answer = await new Promise<{ status: number; error?: string }>((resolve, reject) => {
      const req = httpRequest({
        host: '127.0.0.1',
        port: world.port,
        method: 'CONNECT',
        path: '127.0.0.1:1', // nothing listens there
        headers: { 'proxy-authorization': basic('') },
        agent: false,
      });
      req.on('error', reject);
      req.on('connect', (res) =>
        resolve({ status: res.statusCode ?? 0, error: res.headers['x-gateway-error'] as string }),
      );
      req.end();
    });
    expect(answer.status).toBe(502);
    expect(answer.error).toMatch(/^site_unreachable: /);
    expect((await world.store.totals()).suspectProxies).toBe(0);
  });
});

describe('caps, idle release and draining', () => {
  it('a proxy carries at most maxLeases leases; when all are held, a request shares one; 0 leases once the clients are gone', async () => {
    world = await startWorld({ idleMs: 200 }, 1);
    const open = [];
    for (let i = 0; i < 3; i++)
      open.push(await viaTunnel(world.port, world.site.httpsPort, world.site.ca, basic(''), true));
    expect(new Set(open.map((t) => t.body.trim())).size).toBe(3); // one tunnel per proxy
    // The book is full: the fourth shares a held lease (lease-sharing.unit.test.ts), adding none.
    const fourth = await viaTunnel(world.port, world.site.httpsPort, world.site.ca, basic(''));
    expect(fourth.status).toBe(200);
    expect((await world.store.totals()).activeLeases).toBe(3);
    // Options this gateway holds no lease for: nothing to share.
    const other = await viaTunnel(world.port, world.site.httpsPort, world.site.ca, basic('geo-us'));
    expect(other.status).toBe(503);
    expect(other.headers['x-gateway-error']).toMatch(/^all_busy: /);
    expect(other.headers['retry-after']).toBe('1');
    for (const t of open) t.close!();
    await until(() => world.gateway.openTunnels === 0);
    expect((await viaTunnel(world.port, world.site.httpsPort, world.site.ca, basic(''))).status).toBe(200);
    await until(async () => (await world.store.totals()).activeLeases === 0);
    expect(world.gateway.leasesHeld).toBe(0);
  });

  it('drains open tunnels at close, then releases every lease', async () => {
    world = await startWorld({ idleMs: 60_000 });
    const tunnel = await viaTunnel(
      world.port,
      world.site.httpsPort,
      world.site.ca,
      basic('session-g1'),
      true,
    );
    expect((await world.store.totals()).activeLeases).toBe(1);
    const closing = world.gateway.close(5000);
    let closed = false;
    void closing.then(() => (closed = true));
    await new Promise((r) => setTimeout(r, 200));
    expect(closed).toBe(false); // the tunnel holds it open within the grace period
    tunnel.close!();
    await closing;
    expect((await world.store.totals()).activeLeases).toBe(0);
  });
});

describe('reporting inside a tunnel by session', () => {
  it('moves the session off the reported proxy for that target', async () => {
    world = await startWorld();
    const tunnel = await viaTunnel(
      world.port,
      world.site.httpsPort,
      world.site.ca,
      basic('session-k1'),
      true,
    );
    const before = tunnel.body.trim();
    const report = await fetch(`http://127.0.0.1:${world.port}/v1/sessions/k1/report`, {
      method: 'POST',
      headers: { authorization: `Bearer gateway-test-token-0123456789`, 'content-type': 'application/json' },
      body: JSON.stringify({ target: '127.0.0.1', result: 'banned' }),
    });
    expect(report.status).toBe(200);
    expect(await report.json()).toEqual({
      session: 'k1',
      target: '127.0.0.1',
      result: 'banned',
      proxy: `fleet/p${PROXY_IPS.indexOf(before)}`,
    });
    tunnel.close!();
    const after = await viaTunnel(world.port, world.site.httpsPort, world.site.ca, basic('session-k1'));
    expect(after.status).toBe(200);
    expect(after.body.trim()).not.toBe(before);
  });

  it('answers 503 store_unavailable, as requests do, when the book cannot be reached', async () => {
    world = await startWorld();
    const tunnel = await viaTunnel(
      world.port,
      world.site.httpsPort,
      world.site.ca,
      basic('session-k2'),
      true,
    );
    jest.spyOn(world.store, 'report').mockRejectedValue(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
    const report = await fetch(`http://127.0.0.1:${world.port}/v1/sessions/k2/report`, {
      method: 'POST',
      headers: { authorization: `Bearer gateway-test-token-0123456789` },
      body: JSON.stringify({ target: '127.0.0.1', result: 'banned' }),
    });
    expect(report.status).toBe(503);
    expect(report.headers.get('retry-after')).toBe('1');
    expect(report.headers.get('x-gateway-error')).toMatch(/^store_unavailable: /);
    // The Redis client's text (the store's address) stays in the log.
    expect(await report.json()).toEqual({
      error: 'store_unavailable',
      message: 'the lease book cannot be reached; retry in a moment',
    });
    tunnel.close!();
  });

  it('says so when it holds no lease of that session', async () => {
    world = await startWorld();
    const report = await fetch(`http://127.0.0.1:${world.port}/v1/sessions/nobody/report`, {
      method: 'POST',
      headers: { authorization: `Bearer gateway-test-token-0123456789` },
      body: JSON.stringify({ target: '127.0.0.1', result: 'banned' }),
    });
    expect(report.status).toBe(404);
    expect(((await report.json()) as { error: string }).error).toBe('session_not_held');
  });
});
