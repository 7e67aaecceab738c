// The discovery API over real HTTP on loopback, against a fake catalog.
import type { ProxyRecord } from '../../book/catalog.js';
import { StoreUnavailableError } from '../../book/store-unavailable.js';
import { startHarness, type Harness } from './api-harness.js';
import { proxy } from '../book/fixtures.js';

const fleet = (): ProxyRecord[] => [
  proxy('ns/eu-crawl', {
    ip: '10.0.0.1',
    attributes: { geo: 'eu', purpose: 'crawl' },
    latencyMillis: 80,
    maxLeases: 2,
  }),
  proxy('ns/eu-api', { ip: '10.0.0.2', attributes: { geo: 'eu', purpose: 'api' }, latencyMillis: 40 }),
  proxy('ns/us-crawl', { ip: '10.0.0.3', attributes: { geo: 'us', purpose: 'crawl' }, latencyMillis: 20 }),
  proxy('ns/us-down', { ip: '10.0.0.4', attributes: { geo: 'us' }, healthy: false, phase: 'Unhealthy' }),
  proxy('ns/list-only', { ip: '10.0.0.5', attributes: { geo: 'ap' }, maxLeases: 0 }),
];

const NO_REPORTS = { windowSeconds: 900, ok: 0, banned: 0, rate_limited: 0, unreachable: 0 };

interface LeaseBody {
  leaseID: string;
  proxy: Record<string, unknown> & { id: string };
  expiresAt: string;
  target: string | null;
  session?: { key: string; moved: boolean };
}

describe('discovery API', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await startHarness({ proxies: fleet() });
  });
  afterEach(async () => {
    await h.stop();
  });

  const lease = async (body: unknown = {}) => {
    const response = await h.call('POST', '/v1/leases', { body });
    expect(response.status).toBe(201);
    return response.body as LeaseBody;
  };
  const ids = (body: unknown) => (body as { items: { id: string }[] }).items.map((item) => item.id);

  describe('GET /v1/proxies', () => {
    it('lists every proxy, sorted by id, with its live lease count', async () => {
      await lease({ selector: { purpose: 'crawl', geo: 'eu' } });
      const response = await h.call('GET', '/v1/proxies');
      expect(response.status).toBe(200);
      const items = (response.body as { items: Record<string, unknown>[] }).items;
      expect(items.map((item) => item.id)).toEqual([
        'ns/eu-api',
        'ns/eu-crawl',
        'ns/list-only',
        'ns/us-crawl',
        'ns/us-down',
      ]);
      expect(items[1]).toEqual({
        id: 'ns/eu-crawl',
        ip: '10.0.0.1',
        port: 3128,
        attributes: { geo: 'eu', purpose: 'crawl' },
        phase: 'Ready',
        healthy: true,
        latencyMillis: 80,
        activeLeases: 1,
        maxLeases: 2,
        stats: NO_REPORTS,
      });
    });

    it.each([
      ['?attr.geo=eu', ['ns/eu-api', 'ns/eu-crawl']],
      ['?attr.geo=eu&attr.purpose=crawl', ['ns/eu-crawl']],
      ['?attr.purpose=crawl', ['ns/eu-crawl', 'ns/us-crawl']],
      ['?healthy=true&attr.geo=us', ['ns/us-crawl']],
      ['?healthy=false', ['ns/us-down']],
      ['?attr.geo=mars', []],
      ['?attr.geo=EU', []],
      ['?attr.team%20name=x', []],
    ])('filters %s', async (query, expected) => {
      const response = await h.call('GET', `/v1/proxies${query}`);
      expect(response.status).toBe(200);
      expect(ids(response.body)).toEqual(expected);
    });

    it.each([
      ['?healthy=yes', /healthy must be 'true' or 'false'/],
      ['?healthy=', /healthy must be/],
      ['?geo=eu', /unknown query parameter 'geo'/],
      ['?attr.=eu', /unknown query parameter 'attr\.'/],
      ['?attr.geo=eu&attr.geo=us', /'attr\.geo' is given more than once/],
      ['?exitIP=203.0.113.7/24', /^exitIP must be an IP address or a CIDR block without host bits/],
      ['?exitIP=eu', /^exitIP must be/],
      ['?exitIP=', /^exitIP must be/],
      ['?exitIP=10.0.0.0/33', /^exitIP must be/],
      ['?exitIP=10.0.0.1&exitIP=10.0.0.2', /'exitIP' is given more than once/],
    ])('rejects %s with 400 naming the problem', async (query, message) => {
      const response = await h.call('GET', `/v1/proxies${query}`);
      expect(response.status).toBe(400);
      expect(response.body).toEqual({ error: 'invalid_request', message: expect.stringMatching(message) });
    });

    describe("by exit IP: the lease request's term, as a query parameter", () => {
      let x: Harness;
      beforeEach(async () => {
        x = await startHarness({
          proxies: [
            proxy('ns/a', { ip: '10.0.0.1', exitIP: '203.0.113.7', attributes: { geo: 'eu' } }),
            proxy('ns/b', { ip: '10.0.0.2', exitIP: '203.0.113.200', attributes: { geo: 'us' } }),
            proxy('ns/c', { ip: '10.0.0.3', exitIP: '198.51.100.1', attributes: { geo: 'eu' } }),
            proxy('ns/d', { ip: '10.0.0.4', exitIP: '2001:db8::4', healthy: false, phase: 'Unhealthy' }),
            // Its exit IP is not known: never in any block.
            proxy('ns/e', { ip: '10.0.0.5', attributes: { geo: 'eu' } }),
          ],
        });
      });
      afterEach(async () => {
        await x.stop();
      });

      it.each([
        ['?exitIP=203.0.113.7', ['ns/a']],
        ['?exitIP=203.0.113.0/24', ['ns/a', 'ns/b']],
        ['?exitIP=203.0.113.0%2F24', ['ns/a', 'ns/b']],
        ['?exitIP=203.0.113.0/24&attr.geo=eu', ['ns/a']],
        ['?exitIP=0.0.0.0/0', ['ns/a', 'ns/b', 'ns/c']],
        ['?exitIP=2001:db8::/32', ['ns/d']],
        ['?exitIP=2001:db8::/32&healthy=true', []],
        ['?exitIP=192.0.2.0/24', []],
        ['?exitIP=203.0.113.0/24&limit=1', ['ns/a']],
      ])('filters %s', async (query, expected) => {
        const response = await x.call('GET', `/v1/proxies${query}`);
        expect(response.status).toBe(200);
        expect(ids(response.body)).toEqual(expected);
      });

      it('pages through the filtered list', async () => {
        const first = await x.call('GET', '/v1/proxies?exitIP=203.0.113.0/24&limit=1');
        const token = (first.body as { continue: string }).continue;
        expect(token).toEqual(expect.any(String));
        const second = await x.call('GET', `/v1/proxies?exitIP=203.0.113.0/24&limit=1&continue=${token}`);
        expect(second.body).toEqual({
          items: [expect.objectContaining({ id: 'ns/b', exitIP: '203.0.113.200' })],
        });
      });
    });
  });

  describe('POST /v1/leases', () => {
    it('leases the least-loaded, then fastest, matching proxy and says where and until when', async () => {
      const response = await h.call('POST', '/v1/leases', {
        body: { selector: { geo: 'eu' }, ttlSeconds: 60, target: 'Example.COM' },
      });
      expect(response.status).toBe(201);
      expect(response.body).toEqual({
        leaseID: expect.any(String),
        proxy: {
          id: 'ns/eu-api',
          ip: '10.0.0.2',
          port: 3128,
          url: 'http://10.0.0.2:3128',
          attributes: { geo: 'eu', purpose: 'api' },
          phase: 'Ready',
          healthy: true,
          latencyMillis: 40,
          activeLeases: 1,
          maxLeases: 5,
          stats: NO_REPORTS,
        },
        expiresAt: new Date(h.clock.now() + 60_000).toISOString(),
        target: 'example.com',
      });
      expect((await lease({ selector: { geo: 'eu' } })).proxy.id).toBe('ns/eu-crawl');
    });

    it('never gives a proxy the body excludes; every match excluded is a 409 all_busy', async () => {
      expect((await lease({ selector: { geo: 'eu' }, exclude: ['ns/eu-api'] })).proxy.id).toBe('ns/eu-crawl');
      const refused = await h.call('POST', '/v1/leases', {
        body: { selector: { geo: 'eu' }, exclude: ['ns/eu-api', 'ns/eu-crawl'] },
      });
      expect(refused.status).toBe(409);
      expect(refused.body).toMatchObject({ error: 'all_busy' });
    });

    it.each([
      ['an empty JSON object', { rawBody: '{}', headers: { 'content-type': 'application/json' } }],
      ['no body at all', {}],
      [
        "curl -d's form content type",
        { rawBody: '{"ttlSeconds":300}', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
      ],
    ])('accepts %s and applies the default TTL of 300 s', async (_case, options) => {
      const response = await h.call('POST', '/v1/leases', options);
      expect(response.status).toBe(201);
      expect((response.body as LeaseBody).expiresAt).toBe(new Date(h.clock.now() + 300_000).toISOString());
    });

    it('brackets IPv6 addresses in the proxy url', async () => {
      h.catalog.proxies = [proxy('ns/v6', { ip: '2001:db8::1', port: 8080 })];
      expect((await lease()).proxy.url).toBe('http://[2001:db8::1]:8080');
    });

    it.each([
      [
        'nothing matches the selector',
        { selector: { geo: 'mars' } },
        'no_match',
        /no healthy, leasable proxies matching selector \{"geo":"mars"\}/,
      ],
      [
        'the only match is unhealthy',
        { selector: { geo: 'us', purpose: undefined } },
        'all_busy',
        /maxLeases/,
      ],
      ['the only match is list-only', { selector: { geo: 'ap' } }, 'no_match', /no healthy, leasable/],
    ])('409 when %s', async (_case, body, error, message) => {
      if (error === 'all_busy') {
        // Fill ns/us-crawl, the only healthy leasable geo=us proxy; ns/us-down must not be used instead.
        for (let i = 0; i < 5; i++) await lease({ selector: { geo: 'us' } });
      }
      const response = await h.call('POST', '/v1/leases', { body });
      expect(response.status).toBe(409);
      expect(response.body).toEqual({ error, message: expect.stringMatching(message) });
    });

    it('409 all_cooling_down when every match is cooling down for the target, while other targets still lease', async () => {
      const first = await lease({ selector: { geo: 'us' }, target: 'example.com' });
      expect(
        (await h.call('POST', `/v1/leases/${first.leaseID}/report`, { body: { result: 'banned' } })).status,
      ).toBe(200);
      const refused = await h.call('POST', '/v1/leases', {
        body: { selector: { geo: 'us' }, target: 'EXAMPLE.com' },
      });
      expect(refused.status).toBe(409);
      expect(refused.body).toEqual({
        error: 'all_cooling_down',
        message: expect.stringContaining("target 'example.com'"),
      });
      expect((await lease({ selector: { geo: 'us' }, target: 'other.org' })).proxy.id).toBe('ns/us-crawl');
    });

    it.each<[string, unknown, RegExp]>([
      ['ttlSeconds 0', { ttlSeconds: 0 }, /ttlSeconds must be an integer from 1 to 3600, got 0/],
      ['ttlSeconds above the maximum', { ttlSeconds: 3601 }, /ttlSeconds .* got 3601/],
      ['a fractional ttlSeconds', { ttlSeconds: 1.5 }, /ttlSeconds .* got 1.5/],
      ['ttlSeconds as a string', { ttlSeconds: '300' }, /ttlSeconds .* got "300"/],
      ['ttlSeconds null', { ttlSeconds: null }, /ttlSeconds .* got null/],
      ['a selector that is an array', { selector: ['geo'] }, /selector must be an object .* got an array/],
      [
        'a selector value that is a number',
        { selector: { geo: 1 } },
        /selector\.geo must be a string, got number 1/,
      ],
      ['an empty selector key', { selector: { '': 'x' } }, /selector keys must not be empty/],
      ['an unknown field', { selector: {}, ttl: 5 }, /unknown field\(s\) 'ttl'/],
      ['a target that is a number', { target: 42 }, /target must be a string/],
      ['an empty target', { target: '  ' }, /target must be 1 to 253 printable characters/],
      ['a target with spaces', { target: 'exa mple.com' }, /target must be/],
      ['a body that is an array', [], /request body must be a JSON object, got an array/],
      ['a selector that is null', { selector: null }, /selector must be an object .* got null/],
      [
        'exclude that is not an array',
        { exclude: 'ns/a' },
        /exclude must be an array of proxy ids .* got string "ns\/a"/,
      ],
      [
        'exclude of more than 100 ids',
        { exclude: Array.from({ length: 101 }, (_, i) => `ns/p${i}`) },
        /exclude has 101 proxy ids; at most 100/,
      ],
      [
        'an exclude item that is a number',
        { exclude: ['ns/a', 7] },
        /exclude\[1\] must be a proxy id .* got number 7/,
      ],
      ['an exclude item without a namespace', { exclude: ['a'] }, /exclude\[0\] must be a proxy id/],
      ['exclude with a session', { exclude: ['ns/a'], session: 's1' }, /exclude does not go with session/],
    ])('400 for %s', async (_case, body, message) => {
      const response = await h.call('POST', '/v1/leases', {
        rawBody: JSON.stringify(body),
        headers: { 'content-type': 'application/json' },
      });
      expect(response.status).toBe(400);
      expect(response.body).toEqual({ error: 'invalid_request', message: expect.stringMatching(message) });
    });

    it.each<[string, number, string, string | Buffer, Record<string, string>, RegExp]>([
      ['malformed JSON', 400, 'invalid_json', '{"selector":', {}, /not valid JSON/],
      ['a bare JSON string (strict mode)', 400, 'invalid_json', '"hello"', {}, /not valid JSON/],
      ['a JSON null body (strict mode)', 400, 'invalid_json', 'null', {}, /not valid JSON/],
      [
        'a body over 16kb',
        413,
        'payload_too_large',
        JSON.stringify({ selector: { k: 'x'.repeat(20_000) } }),
        {},
        /exceeds 16kb/,
      ],
      [
        'an unsupported charset',
        415,
        'unsupported_media_type',
        '{}',
        { 'content-type': 'application/json; charset=klingon' },
        /charset/,
      ],
      [
        'an unsupported content encoding',
        415,
        'unsupported_media_type',
        '{}',
        { 'content-encoding': 'zstd-nope' },
        /encoding/,
      ],
    ])('%s → %i %s', async (_case, status, error, rawBody, headers, message) => {
      const response = await h.call('POST', '/v1/leases', {
        rawBody,
        headers: { 'content-type': 'application/json', ...headers },
      });
      expect(response.status).toBe(status);
      expect(response.body).toEqual({ error, message: expect.stringMatching(message) });
    });

    it('honours a configured maximum TTL', async () => {
      const small = await startHarness({ proxies: fleet(), maxTTLSeconds: 60 });
      try {
        expect((await small.call('POST', '/v1/leases', { body: { ttlSeconds: 60 } })).status).toBe(201);
        // The built-in 300 s default shrinks to fit the smaller maximum.
        const defaulted = await small.call('POST', '/v1/leases', { body: {} });
        expect((defaulted.body as LeaseBody).expiresAt).toBe(
          new Date(small.clock.now() + 60_000).toISOString(),
        );
        const response = await small.call('POST', '/v1/leases', { body: { ttlSeconds: 61 } });
        expect(response.body).toEqual({
          error: 'invalid_request',
          message: expect.stringContaining('from 1 to 60'),
        });
      } finally {
        await small.stop();
      }
    });
  });

  describe('a leased proxy that turns unhealthy or disappears', () => {
    it.each([
      [
        'turns unhealthy',
        (p: ProxyRecord[]) =>
          p.map((x) => (x.id === 'ns/us-crawl' ? { ...x, healthy: false, phase: 'Unhealthy' } : x)),
      ],
      ['is deleted', (p: ProxyRecord[]) => p.filter((x) => x.id !== 'ns/us-crawl')],
    ])('%s: is not leased again, but its lease can still be reported and released', async (_case, change) => {
      const held = await lease({ selector: { geo: 'us' } });
      expect(held.proxy.id).toBe('ns/us-crawl');
      h.catalog.proxies = change(h.catalog.proxies);
      expect((await h.call('POST', '/v1/leases', { body: { selector: { geo: 'us' } } })).body).toMatchObject({
        error: 'no_match',
      });
      expect(ids((await h.call('GET', '/v1/proxies?healthy=true&attr.geo=us')).body)).toEqual([]);
      const report = await h.call('POST', `/v1/leases/${held.leaseID}/report`, { body: { result: 'ok' } });
      expect(report.status).toBe(200);
      expect((await h.call('DELETE', `/v1/leases/${held.leaseID}`)).status).toBe(204);
    });
  });

  describe('GET /v1/proxies/{namespace}/{name}', () => {
    it('answers one proxy, the same object as its list item', async () => {
      const held = await lease({ selector: { geo: 'us' } });
      await h.call('POST', `/v1/leases/${held.leaseID}/report`, { body: { result: 'ok' } });
      const one = await h.call('GET', '/v1/proxies/ns/us-crawl');
      expect(one.status).toBe(200);
      const listed = (await h.call('GET', '/v1/proxies?attr.geo=us&healthy=true')).body as {
        items: unknown[];
      };
      // The list item plus the explanation (leasability.ts).
      const { leasable, target, reasons, ...item } = one.body as Record<string, unknown>;
      expect(listed.items).toEqual([item]);
      expect({ leasable, target, reasons }).toEqual({ leasable: true, target: null, reasons: [] });
      expect(one.body).toMatchObject({
        id: 'ns/us-crawl',
        activeLeases: 1,
        stats: { windowSeconds: 900, ok: 1, banned: 0, rate_limited: 0, unreachable: 0 },
      });
    });

    it('says why a proxy is not leased: every reason, cooldowns by target with their end', async () => {
      const held = await lease({ selector: { geo: 'eu', purpose: 'crawl' }, ttlSeconds: 3600 });
      const second = await lease({ selector: { geo: 'eu', purpose: 'crawl' } });
      const start = h.clock.now();
      await h.call('POST', `/v1/leases/${held.leaseID}/report`, {
        body: { result: 'banned', target: 'a.example' },
      });
      await h.call('POST', `/v1/leases/${second.leaseID}/report`, {
        body: { result: 'rate_limited', retryAfterSeconds: 30 },
      });
      const explained = await h.call('GET', '/v1/proxies/ns/eu-crawl');
      expect(explained.status).toBe(200);
      expect(explained.body).toMatchObject({
        leasable: false,
        target: null,
        reasons: [
          { code: 'full', activeLeases: 2, maxLeases: 2, message: expect.any(String) },
          {
            code: 'cooling_down',
            cooldowns: [
              { target: null, until: new Date(start + 30_000).toISOString() },
              { target: 'a.example', until: expect.any(String) },
            ],
          },
        ],
      });
      await h.call('DELETE', `/v1/leases/${second.leaseID}`);
      // For another target the global pool's cooldown does not count; for a.example its own does.
      const forOther = await h.call('GET', '/v1/proxies/ns/eu-crawl?target=Other.Example');
      expect(forOther.body).toMatchObject({ leasable: true, target: 'other.example' });
      const forA = await h.call('GET', '/v1/proxies/ns/eu-crawl?target=a.example');
      expect(forA.body).toMatchObject({ leasable: false, target: 'a.example' });
      expect((forA.body as { reasons: { code: string }[] }).reasons.map((r) => r.code)).toEqual([
        'cooling_down',
      ]);
    });

    it.each<[string, Partial<ProxyRecord>, unknown]>([
      [
        'unhealthy, with its health reason',
        { healthy: false, phase: 'Unhealthy', healthReason: 'ProbeFailed' },
        { code: 'unhealthy', healthReason: 'ProbeFailed', phase: 'Unhealthy', message: expect.any(String) },
      ],
      ['draining', { draining: true }, { code: 'draining', message: expect.any(String) }],
      ['maxLeases 0', { maxLeases: 0 }, { code: 'leases_disabled', message: expect.any(String) }],
      ['being deleted', { phase: 'Deleting' }, { code: 'deleting', message: expect.any(String) }],
    ])('a proxy %s is not leasable and says so', async (_case, overrides, reason) => {
      h.catalog.proxies = [proxy('ns/x', overrides)];
      expect((await h.call('GET', '/v1/proxies/ns/x')).body).toMatchObject({
        leasable: false,
        reasons: [reason],
      });
    });

    it('a suspect proxy says so', async () => {
      const held = await lease({ selector: { geo: 'us', purpose: 'crawl' } });
      await h.call('POST', `/v1/leases/${held.leaseID}/report`, { body: { result: 'unreachable' } });
      expect((await h.call('GET', '/v1/proxies/ns/us-crawl')).body).toMatchObject({
        held: 'suspect',
        leasable: false,
        reasons: [{ code: 'suspect' }],
      });
    });

    it.each([
      ['?target=', 'target must be'],
      ['?target=a%20b', 'target must be'],
      ['?healthy=true', "unknown query parameter 'healthy'"],
      ['?target=a.example&target=b.example', 'more than once'],
    ])('400 invalid_request for the query %s', async (query, message) => {
      const response = await h.call('GET', `/v1/proxies/ns/us-crawl${query}`);
      expect(response.status).toBe(400);
      expect(response.body).toEqual({ error: 'invalid_request', message: expect.stringContaining(message) });
    });

    it.each(['/v1/proxies/ns/nope', '/v1/proxies/other/us-crawl'])(
      '404 proxy_not_found for %s',
      async (path) => {
        const response = await h.call('GET', path);
        expect(response.status).toBe(404);
        expect(response.body).toEqual({
          error: 'proxy_not_found',
          message: expect.stringContaining('does not exist'),
        });
      },
    );
  });

  describe('statistics', () => {
    it('shows report counts per proxy over the sliding window', async () => {
      const held = await lease({ selector: { geo: 'us' }, ttlSeconds: 3600 });
      const report = (result: string, target?: string) =>
        h.call('POST', `/v1/leases/${held.leaseID}/report`, { body: { result, target } });
      await report('ok');
      await report('banned', 'a.example');
      await report('rate_limited', 'b.example');
      await report('ok', 'c.example');
      const stats = async () =>
        ((await h.call('GET', '/v1/proxies/ns/us-crawl')).body as { stats: unknown }).stats;
      expect(await stats()).toEqual({
        windowSeconds: 900,
        ok: 2,
        banned: 1,
        rate_limited: 1,
        unreachable: 0,
      });
      h.clock.advanceSeconds(900);
      expect(await stats()).toEqual(NO_REPORTS);
    });
  });

  describe('POST /v1/leases/{id}/renew', () => {
    it('extends a live lease by its original TTL by default, keeping its slot', async () => {
      const held = await lease({ selector: { geo: 'us' }, ttlSeconds: 60, target: 'example.com' });
      h.clock.advanceSeconds(50);
      const renewed = await h.call('POST', `/v1/leases/${held.leaseID}/renew`);
      expect(renewed.status).toBe(200);
      expect(renewed.body).toEqual({ ...held, expiresAt: new Date(h.clock.now() + 60_000).toISOString() });
      h.clock.advanceSeconds(59);
      expect(
        (await h.call('POST', `/v1/leases/${held.leaseID}/report`, { body: { result: 'ok' } })).status,
      ).toBe(200);
    });

    it.each([
      ['a longer TTL', { ttlSeconds: 600 }, 600],
      ['a TTL shorter than what is left (never shortened)', { ttlSeconds: 10 }, 250],
      ['the maximum', { ttlSeconds: 3600 }, 3600],
    ])('with %s', async (_case, body, left) => {
      const held = await lease({ ttlSeconds: 300 });
      h.clock.advanceSeconds(50);
      const renewed = await h.call('POST', `/v1/leases/${held.leaseID}/renew`, { body });
      expect((renewed.body as LeaseBody).expiresAt).toBe(new Date(h.clock.now() + left * 1000).toISOString());
    });

    it.each<[string, unknown, RegExp]>([
      [
        'ttlSeconds above the maximum',
        { ttlSeconds: 3601 },
        /ttlSeconds must be an integer from 1 to 3600, got 3601/,
      ],
      ['ttlSeconds 0', { ttlSeconds: 0 }, /got 0/],
      ['an unknown field', { ttl: 5 }, /unknown field\(s\) 'ttl'; allowed: ttlSeconds/],
    ])('400 for %s', async (_case, body, message) => {
      const held = await lease();
      const response = await h.call('POST', `/v1/leases/${held.leaseID}/renew`, { body });
      expect(response.status).toBe(400);
      expect(response.body).toEqual({ error: 'invalid_request', message: expect.stringMatching(message) });
    });

    it('404 for an unknown, expired or released lease', async () => {
      const expired = await lease({ ttlSeconds: 10 });
      const released = await lease();
      await h.call('DELETE', `/v1/leases/${released.leaseID}`);
      h.clock.advanceSeconds(10);
      for (const id of ['never-issued', expired.leaseID, released.leaseID]) {
        const response = await h.call('POST', `/v1/leases/${id}/renew`, { body: { ttlSeconds: 60 } });
        expect(response.status).toBe(404);
        expect(response.body).toEqual({
          error: 'lease_not_found',
          message: `lease '${id}' is unknown, expired or released`,
        });
      }
    });

    it('renews a lease whose proxy was deleted, showing the proxy as it was, unhealthy and Deleting', async () => {
      const held = await lease({ selector: { geo: 'us' } });
      h.catalog.proxies = h.catalog.proxies.filter((p) => p.id !== 'ns/us-crawl');
      const renewed = await h.call('POST', `/v1/leases/${held.leaseID}/renew`);
      expect(renewed.status).toBe(200);
      expect((renewed.body as LeaseBody).proxy).toMatchObject({
        id: 'ns/us-crawl',
        url: 'http://10.0.0.3:3128',
        healthy: false,
        phase: 'Deleting',
      });
    });
  });

  describe('sticky sessions', () => {
    it('keeps a session on its proxy and says when it had to move', async () => {
      const first = await h.call('POST', '/v1/leases', {
        body: { selector: { geo: 'eu' }, session: 'crawlee_Ab-1.x:y@z' },
      });
      expect(first.body).toMatchObject({
        proxy: { id: 'ns/eu-api' },
        session: { key: 'crawlee_Ab-1.x:y@z', moved: false },
      });
      const again = await h.call('POST', '/v1/leases', {
        body: { selector: { geo: 'eu' }, session: 'crawlee_Ab-1.x:y@z' },
      });
      // ns/eu-crawl is less loaded now, but the session stays.
      expect(again.body).toMatchObject({
        proxy: { id: 'ns/eu-api', activeLeases: 2 },
        session: { moved: false },
      });
      h.catalog.proxies = h.catalog.proxies.map((p) =>
        p.id === 'ns/eu-api' ? { ...p, healthy: false, phase: 'Unhealthy' } : p,
      );
      const moved = await h.call('POST', '/v1/leases', {
        body: { selector: { geo: 'eu' }, session: 'crawlee_Ab-1.x:y@z' },
      });
      expect(moved.body).toMatchObject({
        proxy: { id: 'ns/eu-crawl' },
        session: { key: 'crawlee_Ab-1.x:y@z', moved: true },
      });
      // A move is a debug line (report-log.ts): client input never writes info lines one by one.
      expect(h.logLines().filter((l) => l.msg === 'session moved to another proxy')).toEqual([]);
    });

    it('a lease without a session has no session field; a renewal in one reports it unmoved', async () => {
      const plain = await lease();
      expect(plain).not.toHaveProperty('session');
      const inSession = await lease({ session: 's-1' });
      const renewed = await h.call('POST', `/v1/leases/${inSession.leaseID}/renew`);
      expect(renewed.body).toMatchObject({ session: { key: 's-1', moved: false } });
    });

    it.each<[string, unknown]>([
      ['an empty key', ''],
      ['a key with a space', 'a b'],
      ['a key with a slash', 'a/b'],
      ['a key of 129 characters', 'k'.repeat(129)],
      ['a number', 42],
      ['null', null],
    ])('400 for %s', async (_case, session) => {
      const response = await h.call('POST', '/v1/leases', { body: { session } });
      expect(response.status).toBe(400);
      expect(response.body).toEqual({
        error: 'invalid_request',
        message: expect.stringMatching(
          /^session must be 1 to 128 characters of letters, digits and \. _ : @ -, got /,
        ),
      });
    });

    it('accepts a key of 128 characters', async () => {
      expect((await h.call('POST', '/v1/leases', { body: { session: 'k'.repeat(128) } })).status).toBe(201);
    });

    it('DELETE /v1/sessions/{key} forgets the binding, keeps its leases, and answers 204 every time', async () => {
      const held = await lease({ selector: { geo: 'eu' }, session: 's-1' });
      expect(held.proxy.id).toBe('ns/eu-api');
      for (let i = 0; i < 2; i++) {
        const response = await h.call('DELETE', '/v1/sessions/s-1');
        expect(response.status).toBe(204);
        expect(response.text).toBe('');
      }
      expect((await h.call('POST', `/v1/leases/${held.leaseID}/renew`)).status).toBe(200);
      // A new session under the same key: placed by the least-loaded rule, not reported as moved.
      const next = await lease({ selector: { geo: 'eu' }, session: 's-1' });
      expect(next).toMatchObject({ proxy: { id: 'ns/eu-crawl' }, session: { moved: false } });
    });

    it('400 for DELETE of a session key that is not valid', async () => {
      const response = await h.call('DELETE', `/v1/sessions/${'k'.repeat(129)}`);
      expect(response.status).toBe(400);
      expect(response.body).toEqual({
        error: 'invalid_request',
        message: expect.stringMatching(/^session key must be/),
      });
    });
  });

  describe('DELETE /v1/leases/{id}', () => {
    it('releases early, freeing the slot (204); a lease that has ended answers 404', async () => {
      h.catalog.proxies = [proxy('ns/one', { maxLeases: 1 })];
      const held = await lease();
      expect((await h.call('POST', '/v1/leases')).status).toBe(409);
      const response = await h.call('DELETE', `/v1/leases/${held.leaseID}`);
      expect(response.status).toBe(204);
      expect(response.text).toBe('');
      const again = await h.call('DELETE', `/v1/leases/${held.leaseID}`);
      expect([again.status, (again.body as { error: string }).error]).toEqual([404, 'lease_not_found']);
      expect((await lease()).proxy.id).toBe('ns/one');
    });

    it('answers 404 lease_not_found for a lease that never existed', async () => {
      const response = await h.call('DELETE', '/v1/leases/never-issued');
      expect([response.status, (response.body as { error: string }).error]).toEqual([404, 'lease_not_found']);
    });
  });

  describe('POST /v1/leases/{id}/report', () => {
    it.each<[string, string | null, Record<string, unknown>, string | null, number | null]>([
      // [result, lease target, report body extra, cooldown key, cooldown seconds]
      ['banned', 'example.com', {}, 'example.com', 900],
      ['rate_limited', null, { target: 'Shop.example' }, 'shop.example', 10],
      ['rate_limited', 'example.com', { retryAfterSeconds: 42 }, 'example.com', 42],
      ['banned', 'example.com', { target: 'other.org' }, 'other.org', 900],
      ['banned', null, {}, null, 900],
      ['ok', 'example.com', {}, 'example.com', null],
    ])(
      '%s on a lease for %s (%j) cools down key %s for %s s',
      async (result, leaseTarget, extra, key, seconds) => {
        const held = await lease(leaseTarget === null ? {} : { target: leaseTarget });
        const response = await h.call('POST', `/v1/leases/${held.leaseID}/report`, {
          body: { result, ...extra },
        });
        expect(response.status).toBe(200);
        expect(response.body).toEqual({
          leaseID: held.leaseID,
          proxyID: held.proxy.id,
          result,
          target: key,
          cooldownUntil: seconds === null ? null : new Date(h.clock.now() + seconds * 1000).toISOString(),
        });
      },
    );

    describe('release: true, the last report and the release in one call', () => {
      const stats = async () =>
        ((await h.call('GET', '/v1/proxies/ns/one')).body as { stats: Record<string, number> }).stats;

      it.each<[string, Record<string, unknown>, string | null]>([
        // [result, report body extra, cooldown key the report applied]
        ['ok', { target: 'shop.example' }, 'shop.example'],
        ['banned', { target: 'shop.example' }, 'shop.example'],
        ['rate_limited', { target: 'shop.example', retryAfterSeconds: 5 }, 'shop.example'],
      ])('%s: the report counts, then the lease ends and its slot frees', async (result, extra, key) => {
        h.catalog.proxies = [proxy('ns/one', { maxLeases: 1 })];
        const held = await lease();
        const response = await h.call('POST', `/v1/leases/${held.leaseID}/report`, {
          body: { result, ...extra, release: true },
        });
        expect(response.status).toBe(200);
        expect(response.body).toMatchObject({ leaseID: held.leaseID, result, target: key, released: true });
        expect((await stats())[result]).toBe(1);
        expect((await h.call('POST', `/v1/leases/${held.leaseID}/renew`)).status).toBe(404);
        // The slot is free (for a target the report did not bench).
        expect((await lease({ target: 'other.example' })).proxy.id).toBe('ns/one');
      });

      it('a banned report with release still benches the proxy for the target', async () => {
        h.catalog.proxies = [proxy('ns/one', { maxLeases: 1 })];
        const held = await lease({ target: 'shop.example' });
        await h.call('POST', `/v1/leases/${held.leaseID}/report`, {
          body: { result: 'banned', release: true },
        });
        const refused = await h.call('POST', '/v1/leases', { body: { target: 'shop.example' } });
        expect(refused.body).toMatchObject({ error: 'all_cooling_down' });
      });

      it('release: false, or none, keeps the lease and says nothing of it', async () => {
        const held = await lease();
        for (const body of [{ result: 'ok', release: false }, { result: 'ok' }]) {
          const response = await h.call('POST', `/v1/leases/${held.leaseID}/report`, { body });
          expect(response.status).toBe(200);
          expect(response.body).not.toHaveProperty('released');
        }
        expect((await h.call('POST', `/v1/leases/${held.leaseID}/renew`)).status).toBe(200);
      });

      it('404 once released, and the report is not counted twice', async () => {
        h.catalog.proxies = [proxy('ns/one')];
        const held = await lease();
        const send = () =>
          h.call('POST', `/v1/leases/${held.leaseID}/report`, { body: { result: 'ok', release: true } });
        expect((await send()).status).toBe(200);
        expect((await send()).status).toBe(404);
        expect((await stats()).ok).toBe(1);
      });

      it.each([['yes'], [1], [null]])('400 for release %j, and the lease stays', async (value) => {
        const held = await lease();
        const response = await h.call('POST', `/v1/leases/${held.leaseID}/report`, {
          body: { result: 'ok', release: value },
        });
        expect(response.status).toBe(400);
        expect(response.body).toEqual({
          error: 'invalid_request',
          message: `release must be true or false, got ${JSON.stringify(value)}`,
        });
        expect((await h.call('POST', `/v1/leases/${held.leaseID}/renew`)).status).toBe(200);
      });
    });

    it('409 all_cooling_down says in Retry-After when the first cooldown for the target ends', async () => {
      h.catalog.proxies = [proxy('ns/one'), proxy('ns/two', { ip: '10.0.0.2' })];
      const one = await lease({ target: 'shop.example' });
      const two = await lease({ target: 'shop.example' });
      await h.call('POST', `/v1/leases/${one.leaseID}/report`, {
        body: { result: 'rate_limited', retryAfterSeconds: 30 },
      });
      await h.call('POST', `/v1/leases/${two.leaseID}/report`, {
        body: { result: 'rate_limited', retryAfterSeconds: 7 },
      });
      const refused = await h.call('POST', '/v1/leases', { body: { target: 'shop.example' } });
      expect(refused.status).toBe(409);
      expect(refused.body).toMatchObject({ error: 'all_cooling_down' });
      expect(refused.headers['retry-after']).toBe('7');
      h.clock.advanceSeconds(7);
      expect((await lease({ target: 'shop.example' })).proxy.id).toBe('ns/two');
    });

    it('a ban without any target benches the proxy only for leases that name no target', async () => {
      h.catalog.proxies = [proxy('ns/one')];
      const held = await lease();
      await h.call('POST', `/v1/leases/${held.leaseID}/report`, { body: { result: 'banned' } });
      expect((await h.call('POST', '/v1/leases', { body: {} })).body).toMatchObject({
        error: 'all_cooling_down',
        message: expect.stringContaining('the global pool'),
      });
      expect((await lease({ target: 'example.com' })).proxy.id).toBe('ns/one');
    });

    it('consecutive bans double the cooldown; an ok resets the streak', async () => {
      h.catalog.proxies = [proxy('ns/one', { maxLeases: 10 })];
      const held = await lease({ target: 'example.com', ttlSeconds: 3600 });
      const report = async (result: string) =>
        (await h.call('POST', `/v1/leases/${held.leaseID}/report`, { body: { result } })).body as {
          cooldownUntil: string | null;
        };
      const rest = async (result: string) => {
        const until = (await report(result)).cooldownUntil;
        return until === null ? null : (Date.parse(until) - h.clock.now()) / 1000;
      };
      expect(await rest('banned')).toBe(900);
      h.clock.advanceSeconds(900);
      expect(await rest('banned')).toBe(1800);
      h.clock.advanceSeconds(1800);
      expect(await rest('banned')).toBe(3600);
      expect(await rest('ok')).toBe(null);
      // Renewals keep the lease until the running cooldown is over.
      expect((await h.call('POST', `/v1/leases/${held.leaseID}/renew`)).status).toBe(200);
      h.clock.advanceSeconds(1800);
      expect((await h.call('POST', `/v1/leases/${held.leaseID}/renew`)).status).toBe(200);
      h.clock.advanceSeconds(1800);
      expect(await rest('banned')).toBe(900);
    });

    it('a rate limit paces: seconds doubling on its own streak, exactly a Retry-After, never lengthening a ban', async () => {
      h.catalog.proxies = [proxy('ns/one', { maxLeases: 10 })];
      const held = await lease({ target: 'example.com', ttlSeconds: 3600 });
      const rest = async (body: Record<string, unknown>) => {
        const response = await h.call('POST', `/v1/leases/${held.leaseID}/report`, { body });
        const until = (response.body as { cooldownUntil: string | null }).cooldownUntil;
        return until === null ? null : (Date.parse(until) - h.clock.now()) / 1000;
      };
      expect(await rest({ result: 'rate_limited' })).toBe(10);
      h.clock.advanceSeconds(10);
      expect(await rest({ result: 'rate_limited' })).toBe(20);
      h.clock.advanceSeconds(20);
      expect(await rest({ result: 'rate_limited', retryAfterSeconds: 90 })).toBe(90);
      h.clock.advanceSeconds(90);
      // The ban streak is its own: the first ban after three rate limits is still the first.
      expect(await rest({ result: 'banned' })).toBe(900);
      expect(await rest({ result: 'ok' })).toBe(null);
      h.clock.advanceSeconds(900);
      expect(await rest({ result: 'rate_limited' })).toBe(10);
    });

    it.each([
      [{ result: 'banned', retryAfterSeconds: 5 }, /retryAfterSeconds goes only with result rate_limited/],
      [
        { result: 'rate_limited', retryAfterSeconds: -1 },
        /retryAfterSeconds must be an integer from 0 to 86400/,
      ],
      [{ result: 'rate_limited', retryAfterSeconds: 1.5 }, /retryAfterSeconds must be an integer/],
      [{ result: 'rate_limited', retryAfterSeconds: '30' }, /retryAfterSeconds must be an integer/],
    ])('400 for %j', async (body, message) => {
      const held = await lease();
      const response = await h.call('POST', `/v1/leases/${held.leaseID}/report`, { body });
      expect(response.status).toBe(400);
      expect(response.body).toEqual({ error: 'invalid_request', message: expect.stringMatching(message) });
    });

    it('404 for an unknown, expired or released lease', async () => {
      const expired = await lease({ ttlSeconds: 10 });
      const released = await lease();
      await h.call('DELETE', `/v1/leases/${released.leaseID}`);
      h.clock.advanceSeconds(10);
      for (const id of ['never-issued', expired.leaseID, released.leaseID]) {
        const response = await h.call('POST', `/v1/leases/${id}/report`, { body: { result: 'banned' } });
        expect(response.status).toBe(404);
        expect(response.body).toEqual({
          error: 'lease_not_found',
          message: `lease '${id}' is unknown, expired or released`,
        });
      }
    });

    it.each<[string, unknown, RegExp]>([
      [
        'an unknown result',
        { result: 'blocked' },
        /result must be one of ok, rate_limited, banned, unreachable, got "blocked"/,
      ],
      ['a missing result', {}, /result must be one of .* got nothing/],
      ['an unknown field', { result: 'ok', reason: 'x' }, /unknown field\(s\) 'reason'/],
      ['a target of the wrong type', { result: 'ok', target: ['a'] }, /target must be a string/],
    ])('400 for %s', async (_case, body, message) => {
      const held = await lease();
      const response = await h.call('POST', `/v1/leases/${held.leaseID}/report`, { body });
      expect(response.status).toBe(400);
      expect(response.body).toEqual({ error: 'invalid_request', message: expect.stringMatching(message) });
    });
  });

  describe('POST /v1/reports', () => {
    const stats = async (id: string) =>
      ((await h.call('GET', `/v1/proxies/${id}`)).body as { stats: Record<string, number> }).stats;
    const send = (reports: unknown) => h.call('POST', '/v1/reports', { body: { reports } });

    it('records each report as its own call would, in order, and answers each in place', async () => {
      h.catalog.proxies = [
        proxy('ns/one', { maxLeases: 5 }),
        proxy('ns/two', { ip: '10.0.0.2', maxLeases: 5 }),
      ];
      const one = await lease({ selector: {}, target: 'shop.example' });
      const two = await lease({ target: 'shop.example' });
      expect(new Set([one.proxy.id, two.proxy.id])).toEqual(new Set(['ns/one', 'ns/two']));
      const response = await send([
        { leaseID: one.leaseID, result: 'ok' },
        { leaseID: two.leaseID, result: 'rate_limited', retryAfterSeconds: 5 },
        { leaseID: 'never-issued', result: 'ok' },
        { leaseID: one.leaseID, result: 'ok', target: 'other.example', release: true },
        { leaseID: one.leaseID, result: 'ok' },
      ]);
      expect(response.status).toBe(200);
      const cooled = new Date(h.clock.now() + 5000).toISOString();
      expect(response.body).toEqual({
        items: [
          {
            leaseID: one.leaseID,
            proxyID: one.proxy.id,
            result: 'ok',
            target: 'shop.example',
            cooldownUntil: null,
          },
          {
            leaseID: two.leaseID,
            proxyID: two.proxy.id,
            result: 'rate_limited',
            target: 'shop.example',
            cooldownUntil: cooled,
          },
          {
            leaseID: 'never-issued',
            error: 'lease_not_found',
            message: "lease 'never-issued' is unknown, expired or released",
          },
          {
            leaseID: one.leaseID,
            proxyID: one.proxy.id,
            result: 'ok',
            target: 'other.example',
            cooldownUntil: null,
            released: true,
          },
          // Released by the report before it: gone, as a separate call would have found it.
          {
            leaseID: one.leaseID,
            error: 'lease_not_found',
            message: `lease '${one.leaseID}' is unknown, expired or released`,
          },
        ],
      });
      expect(await stats(one.proxy.id)).toMatchObject({ ok: 2, rate_limited: 0 });
      expect(await stats(two.proxy.id)).toMatchObject({ ok: 0, rate_limited: 1 });
    });

    it.each<[string, unknown, string]>([
      ['no reports', undefined, 'reports must be an array of 1 to 100 reports, got nothing'],
      ['an empty batch', [], 'reports must be an array of 1 to 100 reports, got 0'],
      [
        'a batch over the cap',
        Array.from({ length: 101 }, () => ({ leaseID: 'x', result: 'ok' })),
        'got 101',
      ],
      [
        'reports that is not an array',
        { leaseID: 'x' },
        'reports must be an array of 1 to 100 reports, got an object',
      ],
      [
        'a report that is not an object',
        ['ok'],
        'reports[1]: a report must be a JSON object, got string "ok"',
      ],
      [
        'a report without leaseID',
        [{ result: 'ok' }],
        'reports[1]: leaseID must be a string of 1 to 128 characters',
      ],
      [
        'a report with an unknown field',
        [{ leaseID: 'x', result: 'ok', why: 'x' }],
        "reports[1]: unknown field(s) 'why'",
      ],
      [
        'a report with an unknown result',
        [{ leaseID: 'x', result: 'blocked' }],
        'reports[1]: result must be one of',
      ],
      [
        'retryAfterSeconds with a ban',
        [{ leaseID: 'x', result: 'banned', retryAfterSeconds: 3 }],
        'reports[1]: retryAfterSeconds goes only with result rate_limited',
      ],
    ])('400 for %s, naming it, and no report of the batch is recorded', async (_case, bad, message) => {
      h.catalog.proxies = [proxy('ns/one')];
      const held = await lease();
      const good = { leaseID: held.leaseID, result: 'banned' };
      const reports = Array.isArray(bad) && bad.length === 1 ? [good, ...bad] : bad;
      const response = await send(reports);
      expect(response.status).toBe(400);
      expect(response.body).toEqual({ error: 'invalid_request', message: expect.stringContaining(message) });
      expect(await stats('ns/one')).toEqual(NO_REPORTS);
    });

    it('a store that fails answers 503 and records none of the batch (one atomic step of the store)', async () => {
      let failing = false;
      const flaky = await startHarness({
        proxies: [proxy('ns/one', { maxLeases: 5 })],
        wrapStore: (store) =>
          new Proxy(store, {
            get(target, name) {
              // The store's one step for the batch fails; a store fails whole or not at all.
              if (name === 'reportMany' && failing) {
                return () => Promise.reject(new StoreUnavailableError('the store is unreachable', 1));
              }
              const value: unknown = Reflect.get(target, name, target);
              return typeof value === 'function'
                ? (value as (...a: unknown[]) => unknown).bind(target)
                : value;
            },
          }),
      });
      try {
        const granted = async () =>
          ((await flaky.call('POST', '/v1/leases', { body: {} })).body as LeaseBody).leaseID;
        const [a, b, c] = [await granted(), await granted(), await granted()];
        failing = true;
        const response = await flaky.call('POST', '/v1/reports', {
          body: { reports: [a, b, c].map((leaseID) => ({ leaseID, result: 'ok' })) },
        });
        expect(response.status).toBe(503);
        expect(response.body).toMatchObject({ error: 'store_unavailable' });
        const stats = (await flaky.call('GET', '/v1/proxies/ns/one')).body as { stats: { ok: number } };
        expect(stats.stats.ok).toBe(0);
      } finally {
        await flaky.stop();
      }
    });
  });

  describe('routing', () => {
    it.each([
      ['GET', '/'],
      ['GET', '/v1'],
      ['GET', '/v1/proxy'],
      ['POST', '/v2/leases'],
      ['GET', '/v1/leases/a/b/c'],
    ])('%s %s → 404 not_found', async (method, path) => {
      const response = await h.call(method, path);
      expect(response.status).toBe(404);
      expect(response.body).toEqual({ error: 'not_found', message: expect.stringContaining(path) });
    });

    it.each([
      ['POST', '/v1/proxies', 'GET, HEAD'],
      ['DELETE', '/v1/proxies', 'GET, HEAD'],
      ['GET', '/v1/leases', 'POST'],
      ['PUT', '/v1/leases', 'POST'],
      ['GET', '/v1/leases/abc', 'DELETE'],
      ['PATCH', '/v1/leases/abc', 'DELETE'],
      ['GET', '/v1/leases/abc/report', 'POST'],
      ['POST', '/openapi.json', 'GET, HEAD'],
    ])('%s %s → 405 with Allow: %s', async (method, path, allow) => {
      const response = await h.call(method, path);
      expect(response.status).toBe(405);
      expect(response.headers.allow).toBe(allow);
      expect(response.body).toEqual({ error: 'method_not_allowed', message: expect.stringContaining(allow) });
    });

    it('400 for a lease id that is not valid percent-encoding', async () => {
      const response = await h.call('DELETE', '/v1/leases/%E0%A4%A');
      expect(response.status).toBe(400);
      expect(response.body).toEqual({ error: 'invalid_request', message: expect.stringContaining('decode') });
    });
  });

  describe('server faults', () => {
    it('answer 500 internal with a JSON body, log the cause, and keep serving', async () => {
      const proxies = h.catalog.proxies;
      h.catalog.list = () => {
        throw new Error('cache not synced');
      };
      const response = await h.call('GET', '/v1/proxies');
      expect(response.status).toBe(500);
      expect(response.body).toEqual({ error: 'internal', message: 'internal error' });
      expect(h.logLines()).toContainEqual(
        expect.objectContaining({
          level: 50,
          msg: 'discovery request failed',
          err: expect.objectContaining({ message: 'cache not synced' }),
        }),
      );
      h.catalog.list = () => proxies;
      expect((await h.call('GET', '/v1/proxies')).status).toBe(200);
    });
  });

  describe('metrics', () => {
    const values = async (name: string) =>
      Object.fromEntries(
        (await h.registry.getSingleMetric(name)!.get()).values.map((v) => [
          Object.values(v.labels).join(','),
          v.value,
        ]),
      );

    it('counts lease requests by outcome and gauges live leases', async () => {
      const first = await lease({ ttlSeconds: 10 });
      await lease({ ttlSeconds: 100 });
      await h.call('POST', '/v1/leases', { body: { selector: { geo: 'mars' } } });
      await h.call('POST', '/v1/leases', { body: { ttlSeconds: 0 } });
      expect(await values('proxy_operator_lease_requests_total')).toEqual({
        granted: 2,
        no_match: 1,
        all_busy: 0,
        all_cooling_down: 0,
        store_unavailable: 0,
      });
      const gauge = () => h.registry.getSingleMetric('proxy_operator_leases_active')!.get();
      expect((await gauge()).values[0].value).toBe(2);
      await h.call('DELETE', `/v1/leases/${first.leaseID}`);
      expect((await gauge()).values[0].value).toBe(1);
      h.clock.advanceSeconds(100);
      expect((await gauge()).values[0].value).toBe(0);
    });

    it('counts each refusal under its own reason', async () => {
      await h.call('POST', '/v1/leases', { body: { selector: { geo: 'mars' } } });
      h.catalog.proxies = [proxy('ns/one', { maxLeases: 1 }), proxy('ns/two', { maxLeases: 1 })];
      const one = await lease({ selector: {}, target: 'shop.example', ttlSeconds: 100 });
      await h.call('POST', `/v1/leases/${one.leaseID}/report`, { body: { result: 'banned' } });
      await lease({ ttlSeconds: 100 });
      // ns/one cools down for shop.example and ns/two is full.
      await h.call('POST', '/v1/leases', { body: { target: 'shop.example' } });
      await h.call('POST', '/v1/leases', { body: { target: 'other.example' } });
      expect(await values('proxy_operator_lease_requests_total')).toEqual({
        granted: 2,
        no_match: 1,
        all_busy: 2,
        all_cooling_down: 0,
        store_unavailable: 0,
      });
      h.catalog.proxies = [proxy('ns/one', { maxLeases: 1 })];
      await h.call('DELETE', `/v1/leases/${one.leaseID}`);
      await h.call('POST', '/v1/leases', { body: { target: 'shop.example' } });
      expect((await values('proxy_operator_lease_requests_total')).all_cooling_down).toBe(1);
    });

    it('counts reports by result, and gauges running cooldowns and live sessions', async () => {
      const held = await lease({ session: 'crawl-1', ttlSeconds: 3000 });
      await lease({ session: 'crawl-2' });
      for (const result of ['ok', 'ok', 'banned', 'rate_limited']) {
        await h.call('POST', `/v1/leases/${held.leaseID}/report`, {
          body: { result, target: `${result}.example` },
        });
      }
      await h.call('POST', '/v1/leases/never-issued/report', { body: { result: 'banned' } });
      expect(await values('proxy_operator_lease_reports_total')).toEqual({
        ok: 2,
        banned: 1,
        rate_limited: 1,
        unreachable: 0,
      });
      expect(await values('proxy_operator_cooldowns_active')).toEqual({ '': 2 });
      expect(await values('proxy_operator_sessions_active')).toEqual({ '': 2 });
      await h.call('DELETE', '/v1/sessions/crawl-2');
      expect(await values('proxy_operator_sessions_active')).toEqual({ '': 1 });
      h.clock.advanceSeconds(900);
      expect(await values('proxy_operator_cooldowns_active')).toEqual({ '': 0 });
    });
  });
});

describe('discovery API authentication', () => {
  const TOKEN = 's3cret-token';
  let h: Harness;
  afterEach(async () => {
    await h.stop();
  });

  describe('with a token', () => {
    beforeEach(async () => {
      h = await startHarness({ proxies: fleet(), token: TOKEN });
    });

    it.each<[string, number, Record<string, string>]>([
      ['no Authorization header', 401, {}],
      ['a wrong token', 401, { authorization: 'Bearer nope' }],
      ['a token that is a prefix of the right one', 401, { authorization: 'Bearer s3cret' }],
      ['a longer token', 401, { authorization: `Bearer ${TOKEN}x` }],
      ['Basic auth', 401, { authorization: `Basic ${TOKEN}` }],
      ['the raw token without scheme', 401, { authorization: TOKEN }],
      ['the right token', 200, { authorization: `Bearer ${TOKEN}` }],
      ['the right token, lower-case scheme', 200, { authorization: `bearer ${TOKEN}` }],
    ])('%s → %i', async (_case, status, headers) => {
      const response = await h.call('GET', '/v1/proxies', { headers });
      expect(response.status).toBe(status);
      if (status === 401) {
        expect(response.body).toEqual({ error: 'unauthorized', message: expect.any(String) });
        expect(response.headers['www-authenticate']).toMatch(/^Bearer /);
      }
    });

    it.each([
      ['POST', '/v1/leases'],
      ['DELETE', '/v1/leases/x'],
      ['POST', '/v1/leases/x/report'],
      ['GET', '/v1/unknown'],
    ])('guards %s %s', async (method, path) => {
      expect((await h.call(method, path)).status).toBe(401);
    });

    it('tells right from wrong tokens however many different ones were tried before', async () => {
      const status = async (token: string) =>
        (await h.call('GET', '/v1/proxies', { headers: { authorization: `Bearer ${token}` } })).status;
      expect(await status(TOKEN)).toBe(200);
      // Past the per-address limit of failures (source-limiter.ts: a burst of 20) a wrong
      // token is answered 429 unhashed; the right one, presented before, still passes.
      const wrong = [];
      for (let i = 0; i < 40; i++) wrong.push(await status(`${TOKEN}${i}`));
      expect(wrong).toEqual([...Array<number>(20).fill(401), ...Array<number>(20).fill(429)]);
      expect(await status(TOKEN)).toBe(200);
      expect([401, 429]).toContain(await status(TOKEN.slice(0, -1)));
      expect(await status(TOKEN)).toBe(200);
    });

    it('serves the OpenAPI document without a token', async () => {
      expect((await h.call('GET', '/openapi.json')).status).toBe(200);
    });

    it('does not warn about disabled auth', () => {
      expect(h.logLines().filter((line) => line.level === 40)).toEqual([]);
    });
  });

  it.each([
    ['a trailing newline (a Secret made with --from-file)', 'file-token\n'],
    ['surrounding spaces and a CRLF', '  file-token\r\n'],
  ])('with %s: the trimmed token authenticates', async (_case, token) => {
    h = await startHarness({ proxies: fleet(), token });
    expect(
      (await h.call('GET', '/v1/proxies', { headers: { authorization: 'Bearer file-token' } })).status,
    ).toBe(200);
    expect((await h.call('GET', '/v1/proxies', { headers: { authorization: 'Bearer nope' } })).status).toBe(
      401,
    );
  });

  it.each([
    ['undefined', undefined],
    ['empty', ''],
    ['only whitespace', ' \n'],
  ])('with an %s token: serves without auth and warns loudly at start-up', async (_case, token) => {
    h = await startHarness({ proxies: fleet(), token });
    expect((await h.call('GET', '/v1/proxies')).status).toBe(200);
    expect(h.logLines()).toContainEqual(
      expect.objectContaining({ level: 40, msg: expect.stringMatching(/WITHOUT authentication/) }),
    );
  });
});
