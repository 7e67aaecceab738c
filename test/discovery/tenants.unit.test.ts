// Teams share one fleet (issue 48): through the real server on loopback, what one token can
// and cannot do to another's crawl. Each rule here fails without its change: quotas that
// answer a code naming the quota and never touch another token's entries, scopes that hide
// proxies, targets private to the team that crawls them, and the per-address limit on
// requests without a valid token.
import { ApiTokens, readTokensFile } from '../../book/api-tokens.js';
import type { TenantQuotaLimits } from '../../book/tenant-quotas.js';
import { startHarness, type CallResult, type Harness, type HarnessOptions } from './api-harness.js';
import { proxy } from '../book/fixtures.js';

const TEAM_A = 'team-a-token-0123456789abcdef';
const TEAM_B = 'team-b-token-fedcba9876543210';
const as = (token: string) => ({ authorization: `Bearer ${token}` });
const QUOTAS: TenantQuotaLimits = { leases: 3, sessions: 2, cooldowns: 2, reportsPerSecond: 1000 };

/** Two tokens; team-b's line may carry options (a scope). */
function twoTeams(bOptions = ''): ApiTokens {
  const { tokens, policies } = readTokensFile(`team-a: ${TEAM_A}\nteam-b: ${TEAM_B} ${bOptions}\n`, 'tokens');
  return new ApiTokens(tokens, policies);
}

describe('two tenants on one fleet', () => {
  let h: Harness;
  const start = async (options: HarnessOptions) => {
    h = await startHarness({ tokens: twoTeams(), app: { quotas: QUOTAS }, ...options });
  };
  afterEach(() => h.stop());
  const call = (token: string, method: string, path: string, body?: unknown) =>
    h.call(method, path, { headers: as(token), ...(body === undefined ? {} : { body }) });
  const lease = async (token: string, body: Record<string, unknown> = {}) =>
    call(token, 'POST', '/v1/leases', { ttlSeconds: 60, ...body });
  const leaseID = (r: CallResult) => (r.body as { leaseID: string }).leaseID;
  const errorOf = (r: CallResult) => [r.status, (r.body as { error?: string }).error];

  describe('the lease quota', () => {
    it('answers 429 lease_quota at the quota; another token still leases; a release or an expiry makes room', async () => {
      await start({ proxies: [proxy('ns/a', { maxLeases: 100 })] });
      const held = [];
      for (let i = 0; i < QUOTAS.leases; i++) held.push(await lease(TEAM_A));
      expect(held.map((r) => r.status)).toEqual([201, 201, 201]);
      const refused = await lease(TEAM_A);
      expect(errorOf(refused)).toEqual([429, 'lease_quota']);
      expect(refused.headers['retry-after']).toBe('1');
      expect((refused.body as { message: string }).message).toMatch(/team-a.*3 live leases \(its quota\)/);
      expect((await lease(TEAM_B)).status).toBe(201);
      expect((await call(TEAM_A, 'DELETE', `/v1/leases/${leaseID(held[0])}`)).status).toBe(204);
      expect((await lease(TEAM_A)).status).toBe(201);
      expect((await lease(TEAM_A)).status).toBe(429);
      h.clock.advanceSeconds(61);
      expect((await lease(TEAM_A)).status).toBe(201);
    });
  });

  describe('the session quota', () => {
    it("a token's new session past its quota ends its own least recently used one, never another token's", async () => {
      await start({
        proxies: [
          proxy('ns/a', { maxLeases: 1000, latencyMillis: 1 }),
          proxy('ns/b', { maxLeases: 1000, latencyMillis: 2 }),
        ],
      });
      const b = await lease(TEAM_B, { session: 'b-1' });
      const boundB = (b.body as { proxy: { id: string } }).proxy.id;
      // team-a churns far more sessions than its quota; each lease is released at once.
      for (let i = 0; i < 20; i++) {
        const r = await lease(TEAM_A, { session: `a-${i}` });
        expect(r.status).toBe(201);
        await call(TEAM_A, 'DELETE', `/v1/leases/${leaseID(r)}`);
      }
      expect((await h.store.totals()).activeSessions).toBe(1 + QUOTAS.sessions);
      // Load the proxy team-b is bound to, so a rebinding would pick the other one.
      for (let i = 0; i < 2; i++) await lease(TEAM_A);
      const again = await lease(TEAM_B, { session: 'b-1' });
      expect(again.body).toMatchObject({ proxy: { id: boundB }, session: { key: 'b-1', moved: false } });
      expect(await h.registry.getSingleMetricAsString('proxy_operator_discovery_quota_total')).toContain(
        'proxy_operator_discovery_quota_total{token="team-a",quota="session"} 18',
      );
    });
  });

  describe('the cooldown quota', () => {
    it("refuses a token's new cooldown past its quota (429 cooldown_quota), extends its own, and never refuses another token's", async () => {
      await start({ proxies: [proxy('ns/a', { maxLeases: 100 })] });
      const id = leaseID(await lease(TEAM_A, { ttlSeconds: 3600 }));
      const report = (token: string, lid: string, target: string) =>
        call(token, 'POST', `/v1/leases/${lid}/report`, { result: 'banned', target });
      expect((await report(TEAM_A, id, 'junk-1.example')).status).toBe(200);
      expect((await report(TEAM_A, id, 'junk-2.example')).status).toBe(200);
      const refused = await report(TEAM_A, id, 'junk-3.example');
      expect(errorOf(refused)).toEqual([429, 'cooldown_quota']);
      expect((refused.body as { message: string }).message).toMatch(
        /keeps 2 cooldowns running \(its quota\)/,
      );
      // Its own running cooldown is extended (a streak), not refused.
      expect((await report(TEAM_A, id, 'junk-1.example')).status).toBe(200);
      // A batch is all or nothing: the 429 names the report past the quota, and none is recorded.
      const batch = await call(TEAM_A, 'POST', '/v1/reports', {
        reports: [
          { leaseID: id, result: 'ok', target: 'junk-1.example' },
          { leaseID: id, result: 'banned', target: 'junk-4.example' },
        ],
      });
      expect(errorOf(batch)).toEqual([429, 'cooldown_quota']);
      expect((batch.body as { message: string }).message).toMatch(
        /^reports\[1\] \(lease '[^']+'\): .*none of the 2 reports was recorded$/,
      );
      // team-b's real ban is recorded whatever team-a did.
      const idB = leaseID(await lease(TEAM_B));
      const banned = await report(TEAM_B, idB, 'shop.example');
      expect(banned.status).toBe(200);
      expect(banned.body).toMatchObject({ target: 'shop.example', cooldownUntil: expect.any(String) });
      expect(banned.body).not.toHaveProperty('capped');
      expect(errorOf(await lease(TEAM_B, { target: 'shop.example' }))).toEqual([409, 'all_cooling_down']);
      // Once team-a's own cooldowns end, it may start new ones.
      h.clock.advanceSeconds(3 * 3600);
      const id2 = leaseID(await lease(TEAM_A));
      expect((await report(TEAM_A, id2, 'junk-3.example')).status).toBe(200);
    });
  });

  describe('the report rate', () => {
    it('answers 429 report_quota past the token reports per second (batch items count one each); another token reports on', async () => {
      await start({
        proxies: [proxy('ns/a', { maxLeases: 100 })],
        app: { quotas: { ...QUOTAS, reportsPerSecond: 0.001 } },
      });
      const id = leaseID(await lease(TEAM_A));
      const reports = Array.from({ length: 100 }, () => ({ leaseID: id, result: 'ok' }));
      expect((await call(TEAM_A, 'POST', '/v1/reports', { reports })).status).toBe(200);
      const refused = await call(TEAM_A, 'POST', `/v1/leases/${id}/report`, { result: 'ok' });
      expect(errorOf(refused)).toEqual([429, 'report_quota']);
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(1);
      const idB = leaseID(await lease(TEAM_B));
      expect((await call(TEAM_B, 'POST', `/v1/leases/${idB}/report`, { result: 'ok' })).status).toBe(200);
    });
  });

  describe("a token's scope", () => {
    it.each([
      ['namespaces=team-b', 'team-b/y'],
      ['selector=pool=b', 'team-a/x2'],
      ['namespaces=team-b,other selector=pool=b', 'team-b/y'],
    ])('with "%s" a token lists, reads and leases only %s', async (options, inside) => {
      h = await startHarness({
        tokens: twoTeams(options),
        app: { quotas: { ...QUOTAS, leases: 100 } },
        proxies: [
          proxy('team-a/x', { maxLeases: 10, latencyMillis: 1, attributes: { pool: 'a' } }),
          proxy('team-a/x2', {
            maxLeases: 10,
            latencyMillis: 2,
            attributes: { pool: 'b' },
            credentials: { username: 'u', password: 'secret-of-x2' },
          }),
          proxy('team-b/y', {
            maxLeases: 10,
            latencyMillis: 3,
            attributes: options.includes('namespaces') ? { pool: 'b' } : {},
          }),
        ],
      });
      const ids = (r: CallResult) => (r.body as { items: { id: string }[] }).items.map((p) => p.id);
      expect(ids(await call(TEAM_B, 'GET', '/v1/proxies'))).toEqual([inside]);
      expect(ids(await call(TEAM_A, 'GET', '/v1/proxies'))).toEqual(['team-a/x', 'team-a/x2', 'team-b/y']);
      for (const id of ['team-a/x', 'team-a/x2', 'team-b/y'].filter((i) => i !== inside))
        expect(errorOf(await call(TEAM_B, 'GET', `/v1/proxies/${id}`))).toEqual([404, 'proxy_not_found']);
      expect((await call(TEAM_B, 'GET', `/v1/proxies/${inside}`)).status).toBe(200);
      // Ten leases fill the one proxy inside; the eleventh finds nothing, though others are free.
      for (let i = 0; i < 10; i++) {
        const r = await lease(TEAM_B, { session: i === 0 ? 's' : undefined });
        expect((r.body as { proxy: { id: string } }).proxy.id).toBe(inside);
      }
      expect((await lease(TEAM_B)).status).toBe(409);
      const a = await lease(TEAM_A);
      expect((a.body as { proxy: { id: string } }).proxy.id).not.toBe(inside);
    });

    it('keeps a proxy of another namespace out of a session bound before the scope narrowed', async () => {
      const tokens = twoTeams();
      h = await startHarness({
        tokens,
        app: { quotas: QUOTAS },
        proxies: [
          proxy('team-a/x', { maxLeases: 10, latencyMillis: 1 }),
          proxy('team-b/y', { maxLeases: 10, latencyMillis: 2 }),
        ],
      });
      const first = await lease(TEAM_B, { session: 's' });
      expect(first.body).toMatchObject({ proxy: { id: 'team-a/x' } });
      const narrowed = readTokensFile(`team-a: ${TEAM_A}\nteam-b: ${TEAM_B} namespaces=team-b\n`, 'tokens');
      tokens.replace(narrowed.tokens, narrowed.policies);
      const second = await lease(TEAM_B, { session: 's' });
      expect(second.body).toMatchObject({ proxy: { id: 'team-b/y' }, session: { moved: true } });
    });
  });

  describe('rotation on bans needs agreement', () => {
    it.each<[string, string, [string, string][], boolean]>([
      [
        'one token alone, however often',
        '',
        [
          [TEAM_A, 'x'],
          [TEAM_A, 'x'],
          [TEAM_A, 'x'],
        ],
        false,
      ],
      [
        'two tokens on the same target',
        '',
        [
          [TEAM_A, 'x'],
          [TEAM_B, 'x'],
        ],
        true,
      ],
      [
        'two tokens on two targets',
        '',
        [
          [TEAM_A, 'x'],
          [TEAM_B, 'y'],
        ],
        false,
      ],
      ['a token the file trusts for it', 'rotation-trusted', [[TEAM_B, 'x']], true],
    ])("%s: the book's cooldown is agreed %s", async (_case, bOptions, reports, agreedOn) => {
      h = await startHarness({
        tokens: twoTeams(bOptions),
        app: { quotas: QUOTAS },
        proxies: [proxy('ns/a', { maxLeases: 10 })],
      });
      for (const [token, target] of reports) {
        const id = leaseID(await lease(token));
        expect(
          (await call(token, 'POST', `/v1/leases/${id}/report`, { result: 'banned', target })).status,
        ).toBe(200);
      }
      const { cooldowns } = await h.store.standing('ns/a');
      expect(cooldowns.some((c) => c.agreed === true)).toBe(agreedOn);
    });
  });

  describe('private targets', () => {
    it("shows a token its own targets' cooldowns, and of another's only that one runs", async () => {
      await start({ proxies: [proxy('ns/a', { maxLeases: 10 })] });
      const id = leaseID(await lease(TEAM_A, { target: 'shop.example' }));
      await call(TEAM_A, 'POST', `/v1/leases/${id}/report`, { result: 'banned' });
      const reasonOf = (r: CallResult) =>
        (r.body as { reasons: { code: string; cooldowns?: unknown[] }[] }).reasons.find(
          (x) => x.code === 'cooling_down',
        );
      const own = await call(TEAM_A, 'GET', '/v1/proxies/ns/a');
      expect(reasonOf(own)?.cooldowns).toEqual([{ target: 'shop.example', until: expect.any(String) }]);
      const other = await call(TEAM_B, 'GET', '/v1/proxies/ns/a');
      expect(reasonOf(other)?.cooldowns).toEqual([{ target: null, hidden: true, until: expect.any(String) }]);
      expect(other.text).not.toContain('shop.example');
      // Asked about a target by name, a token learns only what a lease for it would.
      const asked = await call(TEAM_B, 'GET', '/v1/proxies/ns/a?target=shop.example');
      expect(asked.body).toMatchObject({ leasable: false, target: 'shop.example' });
    });

    it.each([
      [false, false],
      [true, true],
    ])('/metrics names targets only with the flag (metricsTargetNames %s)', async (flag, named) => {
      await start({
        proxies: [proxy('ns/a', { maxLeases: 10 })],
        app: { quotas: QUOTAS, metricsTargetNames: flag },
        logLevel: 'debug',
      });
      const id = leaseID(await lease(TEAM_A, { target: 'shop.example' }));
      await call(TEAM_A, 'POST', `/v1/leases/${id}/report`, { result: 'banned' });
      const text = await h.registry.metrics();
      expect(text.includes('shop.example')).toBe(named);
      expect(text).toMatch(
        named
          ? /target="shop.example"/
          : /proxy_operator_target_cooldowns_total\{target="t-[0-9a-f]{12}",door="api"\} 1/,
      );
      // The log line gives the SRE the way from the label to the site.
      const label = /proxy_operator_target_cooldowns_total\{target="([^"]+)"/.exec(text)![1];
      expect(h.logLines()).toContainEqual(
        expect.objectContaining({ msg: 'proxy cooling down', target: 'shop.example', metricsLabel: label }),
      );
    });
  });

  describe('requests without a valid token', () => {
    it('are limited per source address before hashing; a valid token seen before still passes', async () => {
      await start({
        proxies: [proxy('ns/a', { maxLeases: 10 })],
        app: { quotas: QUOTAS, failedAuthLimit: { ratePerSecond: 0.01, burst: 3 } },
      });
      expect((await call(TEAM_A, 'GET', '/v1/proxies')).status).toBe(200);
      const wrong = [];
      for (let i = 0; i < 5; i++)
        wrong.push((await call(`wrong-token-number-${i}-xxxx`, 'GET', '/v1/proxies')).status);
      expect(wrong).toEqual([401, 401, 401, 429, 429]);
      const noHeader = await h.call('GET', '/v1/proxies');
      expect(errorOf(noHeader)).toEqual([429, 'too_many_requests']);
      expect(noHeader.headers['retry-after']).toBeDefined();
      expect((await call(TEAM_A, 'GET', '/v1/proxies')).status).toBe(200);
    });
  });

  it('answers every /v1 request with Cache-Control: no-store (lease answers carry credentials)', async () => {
    await start({
      proxies: [proxy('ns/a', { maxLeases: 10, credentials: { username: 'u', password: 'p' } })],
    });
    const granted = await lease(TEAM_A);
    expect(granted.status).toBe(201);
    expect(granted.headers['cache-control']).toBe('no-store');
    const renewed = await call(TEAM_A, 'POST', `/v1/leases/${leaseID(granted)}/renew`, {});
    expect(renewed.headers['cache-control']).toBe('no-store');
  });
});
