// Hostile clients of the closed API, through the real server on loopback: wrong and missing
// tokens, another token's lease IDs and session keys, a flood beyond the rate limit, bodies
// that are too large or not JSON, a report storm over many targets. Every answer must be a
// clear 4xx JSON error (never a 5xx), no token may appear in an answer or a log line, and the
// storm must neither grow the info log nor the heap beyond the Deployment's memory limit.
import { Pool } from 'undici';
import { OPERATOR_MEMORY } from '../../charts/operator-chart.js';
import { ApiTokens } from '../../book/api-tokens.js';
import { startHarness, type CallResult, type Harness } from './api-harness.js';
import { eventually, proxy } from '../book/fixtures.js';

const TEAM_A = 'team-a-token-0123456789abcdef';
const TEAM_B = 'team-b-token-fedcba9876543210';
const as = (token: string) => ({ authorization: `Bearer ${token}` });

describe('hostile clients of the closed API', () => {
  let h: Harness;
  let tokens: ApiTokens;
  const answers: CallResult[] = [];
  async function call(token: string | undefined, method: string, path: string, body?: unknown) {
    const result = await h.call(method, path, {
      ...(body === undefined ? {} : { body }),
      headers: token === undefined ? {} : as(token),
    });
    answers.push(result);
    return result;
  }

  beforeEach(async () => {
    tokens = new ApiTokens(
      new Map([
        ['team-a', TEAM_A],
        ['team-b', TEAM_B],
      ]),
    );
    answers.length = 0;
    h = await startHarness({
      tokens,
      logLevel: 'debug',
      rateLimit: { ratePerSecond: 1_000_000, burst: 1_000_000 },
      proxies: [
        proxy('ns/a', { maxLeases: 10, latencyMillis: 1 }),
        proxy('ns/b', { maxLeases: 10, latencyMillis: 2 }),
      ],
    });
  });
  afterEach(async () => {
    await h.stop();
    // Nothing any client sent or was refused shows a token, in an answer or in the log.
    const everything = JSON.stringify(answers.map((a) => [a.headers, a.text])) + JSON.stringify(h.logLines());
    for (const token of [TEAM_A, TEAM_B, 'wrong-token-but-long-enough', TEAM_A.slice(0, 20)])
      expect(everything).not.toContain(token);
    expect(answers.filter((a) => a.status >= 500)).toEqual([]);
  });

  it.each([
    ['no Authorization header', undefined, /missing Authorization header/],
    ['a wrong token', 'wrong-token-but-long-enough', /^invalid bearer token$/],
    ['a prefix of a real token', TEAM_A.slice(0, 20), /^invalid bearer token$/],
    ['another scheme', 'Basic dGVhbS1hOnNlY3JldA==', /malformed Authorization header/],
  ])('401 unauthorized JSON for %s, echoing nothing', async (_case, token, message) => {
    const headers =
      token === undefined ? {} : token.startsWith('Basic ') ? { authorization: token } : as(token);
    for (const [method, path] of [
      ['GET', '/v1/proxies'],
      ['POST', '/v1/leases'],
      ['DELETE', '/v1/sessions/s1'],
      ['GET', '/v1/nowhere'],
    ]) {
      const result = await h.call(method, path, { headers });
      answers.push(result);
      expect(result.status).toBe(401);
      expect(result.headers['www-authenticate']).toMatch(/^Bearer /);
      expect(result.body).toEqual({ error: 'unauthorized', message: expect.stringMatching(message) });
    }
  });

  it("404 lease_not_found for another token's lease IDs, leaving the lease as it was", async () => {
    const granted = await call(TEAM_A, 'POST', '/v1/leases', { ttlSeconds: 60, target: 'example.com' });
    expect(granted.status).toBe(201);
    const { leaseID } = granted.body as { leaseID: string };
    for (const [method, path, body] of [
      ['POST', `/v1/leases/${leaseID}/renew`, { ttlSeconds: 3600 }],
      ['POST', `/v1/leases/${leaseID}/report`, { result: 'banned' }],
      ['POST', `/v1/leases/${leaseID}/report`, { result: 'unreachable' }],
    ] as const) {
      const result = await call(TEAM_B, method, path, body);
      expect(result.status).toBe(404);
      expect(result.body).toEqual({ error: 'lease_not_found', message: expect.stringContaining(leaseID) });
    }
    // Release by another token answers as for an unknown lease (issue 44): it ends nothing.
    expect((await call(TEAM_B, 'DELETE', `/v1/leases/${leaseID}`)).status).toBe(404);
    expect(await h.activeLeases('ns/a')).toBe(1);
    const list = await call(TEAM_A, 'GET', '/v1/proxies');
    expect(list.body).toMatchObject({
      items: [{ id: 'ns/a', activeLeases: 1, stats: { banned: 0, unreachable: 0 } }, { id: 'ns/b' }],
    });
    expect((list.body as { items: { held?: string }[] }).items[0].held).toBeUndefined();
    expect((await call(TEAM_A, 'POST', `/v1/leases/${leaseID}/renew`, {})).status).toBe(200);
    expect((await call(TEAM_A, 'DELETE', `/v1/leases/${leaseID}`)).status).toBe(204);
    expect(await h.activeLeases('ns/a')).toBe(0);
  });

  it("cannot see or end another token's session of the same key", async () => {
    const a = await call(TEAM_A, 'POST', '/v1/leases', { session: 'crawl-1' });
    expect(a.body).toMatchObject({ proxy: { id: 'ns/a' }, session: { key: 'crawl-1', moved: false } });
    // ns/a is busier now: team-b's crawl-1 is a session of its own, on the less loaded proxy.
    const b = await call(TEAM_B, 'POST', '/v1/leases', { session: 'crawl-1' });
    expect(b.body).toMatchObject({ proxy: { id: 'ns/b' }, session: { key: 'crawl-1', moved: false } });
    expect((await call(TEAM_B, 'DELETE', '/v1/sessions/crawl-1')).status).toBe(204);
    const again = await call(TEAM_A, 'POST', '/v1/leases', { session: 'crawl-1' });
    expect(again.body).toMatchObject({ proxy: { id: 'ns/a' }, session: { moved: false } });
  });

  it('a revoked token is refused at once; the other keeps working', async () => {
    expect((await call(TEAM_B, 'GET', '/v1/proxies')).status).toBe(200);
    tokens.replace(new Map([['team-a', TEAM_A]]));
    expect((await call(TEAM_B, 'GET', '/v1/proxies')).status).toBe(401);
    expect((await call(TEAM_A, 'GET', '/v1/proxies')).status).toBe(200);
  });

  it('oversized and malformed bodies: 4xx JSON naming what is wrong', async () => {
    for (const [rawBody, contentType, status, error, message] of [
      ['{"selector":', 'application/json', 400, 'invalid_json', /JSON/],
      ['[1,2]', 'application/json', 400, 'invalid_request', /must be a JSON object, got an array/],
      ['{"ttlSeconds":1e309}', 'application/json', 400, 'invalid_request', /ttlSeconds/],
      ['{"selector":{"a":1}}', 'application/json', 400, 'invalid_request', /selector\.a must be a string/],
      ['{"nope":1}', 'application/json', 400, 'invalid_request', /unknown field\(s\) 'nope'/],
      [
        JSON.stringify({ target: 'x'.repeat(100_000) }),
        'application/json',
        413,
        'payload_too_large',
        /exceeds/,
      ],
      ['<xml/>', 'application/xml', 400, 'invalid_json', /JSON/],
    ] as const) {
      const result = await h.call('POST', '/v1/leases', {
        rawBody,
        headers: { ...as(TEAM_A), 'content-type': contentType },
      });
      answers.push(result);
      expect([result.status, result.body]).toEqual([
        status,
        { error, message: expect.stringMatching(message) },
      ]);
    }
    expect((await call(TEAM_A, 'GET', `/v1/proxies?limit=${'9'.repeat(400)}`)).body).toMatchObject({
      error: 'invalid_request',
      message: expect.stringMatching(/^limit must be an integer from 1 to 1000, got string "9+\.\.\.$/),
    });
  });
});

describe('a flood beyond the rate limit', () => {
  it('429 JSON with Retry-After past the burst, counted per token; the other token is untouched', async () => {
    const tokens = new ApiTokens(
      new Map([
        ['team-a', TEAM_A],
        ['team-b', TEAM_B],
      ]),
    );
    const h = await startHarness({
      tokens,
      rateLimit: { ratePerSecond: 5, burst: 50 },
      // The rate limit alone: 32 lists at once would meet the concurrent-list cap first.
      maxConcurrentLists: 1000,
      proxies: [proxy('ns/a')],
    });
    const pool = new Pool(h.baseURL, { connections: 32 });
    try {
      const statuses = await Promise.all(
        Array.from({ length: 400 }, async () => {
          const res = await pool.request({ path: '/v1/proxies', method: 'GET', headers: as(TEAM_A) });
          const body = (await res.body.json()) as { error?: string; message?: string };
          if (res.statusCode === 429) {
            expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
            expect(body).toEqual({
              error: 'too_many_requests',
              message: expect.stringMatching(
                /^token 'team-a' is over its rate limit of 5 requests\/s \(burst 50\)/,
              ),
            });
          }
          return res.statusCode;
        }),
      );
      // The burst, plus what refilled while the flood ran.
      const ok = statuses.filter((s) => s === 200).length;
      expect(ok).toBeGreaterThanOrEqual(50);
      expect(ok).toBeLessThan(70);
      expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
      expect((await h.call('GET', '/v1/proxies', { headers: as(TEAM_B) })).status).toBe(200);
      const metrics = await h.registry.getSingleMetricAsString('proxy_operator_discovery_throttled_total');
      expect(metrics).toContain(`proxy_operator_discovery_throttled_total{token="team-a"} ${400 - ok}`);
      expect(metrics).not.toContain('team-b');
    } finally {
      await pool.close();
      await h.stop();
    }
  });
});

describe('more lists at once than a token may have', () => {
  it('429 JSON with Retry-After: 1 beyond the cap, counted per token; the other token and other routes are untouched', async () => {
    const tokens = new ApiTokens(
      new Map([
        ['team-a', TEAM_A],
        ['team-b', TEAM_B],
      ]),
    );
    const h = await startHarness({ tokens, maxConcurrentLists: 2, proxies: [proxy('ns/a'), proxy('ns/b')] });
    // Held in flight: each list (both proxies' usage; a single GET asks for one) waits on a
    // store call the test releases.
    const gates: (() => void)[] = [];
    const usage = h.store.usage.bind(h.store);
    h.store.usage = async (ids) => {
      if (ids.length > 1) await new Promise<void>((resolve) => gates.push(resolve));
      return usage(ids);
    };
    const pool = new Pool(h.baseURL, { connections: 8 });
    const list = (token: string) => pool.request({ path: '/v1/proxies', method: 'GET', headers: as(token) });
    try {
      const held = [list(TEAM_A), list(TEAM_A)];
      await eventually(() => gates.length === 2);
      const refused = await list(TEAM_A);
      expect(refused.statusCode).toBe(429);
      expect(refused.headers['retry-after']).toBe('1');
      expect(await refused.body.json()).toEqual({
        error: 'too_many_requests',
        message:
          "token 'team-a' already has 2 lists of /v1/proxies in flight (the most one token may have); retry after 1 s",
      });
      // Another token lists; a single GET is no list.
      const other = list(TEAM_B);
      await eventually(() => gates.length === 3);
      const single = await pool.request({ path: '/v1/proxies/ns/a', method: 'GET', headers: as(TEAM_A) });
      expect(single.statusCode).toBe(200);
      await single.body.dump();
      for (const open of gates) open();
      for (const res of await Promise.all([...held, other])) {
        expect(res.statusCode).toBe(200);
        await res.body.dump();
      }
      // The slots are back: a list after them is answered.
      const after = list(TEAM_A);
      await eventually(() => gates.length === 4);
      gates[3]();
      expect((await after).statusCode).toBe(200);
      const metrics = await h.registry.getSingleMetricAsString('proxy_operator_discovery_throttled_total');
      expect(metrics).toContain('proxy_operator_discovery_throttled_total{token="team-a"} 1');
      expect(metrics).not.toContain('team-b');
    } finally {
      for (const open of gates) open();
      await pool.close();
      await h.stop();
    }
  });
});

describe('a report storm over many targets', () => {
  it('20,000 banned and rate_limited reports on 20,000 targets: no 5xx, one info line at most, memory in bounds', async () => {
    const tokens = ApiTokens.single(TEAM_A, 'team-a');
    const h = await startHarness({
      tokens,
      rateLimit: { ratePerSecond: 1_000_000, burst: 1_000_000 },
      proxies: [proxy('ns/a', { maxLeases: 100 })],
      // The book's own caps are under test here: the token's quotas (tenants.unit.test.ts) lifted.
      app: { quotas: { leases: 1000, sessions: 10_000, cooldowns: 1_000_000, reportsPerSecond: 1_000_000 } },
    });
    const pool = new Pool(h.baseURL, { connections: 32 });
    const heapBefore = process.memoryUsage().heapUsed;
    try {
      const lease = await h.call('POST', '/v1/leases', { body: { ttlSeconds: 3600 }, headers: as(TEAM_A) });
      const { leaseID } = lease.body as { leaseID: string };
      const statuses = new Map<number, number>();
      let next = 0;
      const worker = async () => {
        while (next < 20_000) {
          const i = next++;
          const res = await pool.request({
            path: `/v1/leases/${leaseID}/report`,
            method: 'POST',
            headers: { ...as(TEAM_A), 'content-type': 'application/json' },
            body: JSON.stringify({
              result: i % 2 === 0 ? 'banned' : 'rate_limited',
              target: `site-${i}.storm.example`,
            }),
          });
          await res.body.dump();
          statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
        }
      };
      await Promise.all(Array.from({ length: 32 }, worker));
      expect(Object.fromEntries(statuses)).toEqual({ 200: 20_000 });
      // The harness logs at info: the per-report lines are debug, the summary at most once a minute.
      const info = h.logLines().filter((l) => (l.level as number) >= 30);
      expect(info.filter((l) => JSON.stringify(l).includes('storm.example'))).toEqual([]);
      expect(info.length).toBeLessThanOrEqual(3);
      // The book caps what client-chosen targets may take; the heap stays far inside the limit.
      const grownMiB = (process.memoryUsage().heapUsed - heapBefore) / 2 ** 20;
      expect(grownMiB).toBeLessThan(OPERATOR_MEMORY.limitMiB - OPERATOR_MEMORY.measuredSteadyMiB);
      expect((await h.store.totals()).activeCooldowns).toBeLessThanOrEqual(10_000);
    } finally {
      await pool.close();
      await h.stop();
    }
  }, 60_000);
});
