// Two teams' tokens through one gateway over one fleet (docs/security.md, "teams sharing one
// fleet"): what one token may do to the other's crawl through the gateway, as through the API.
// Real parts: the gateway, real forward proxies, the memory book, the per-token quota ledger.
import { ApiTokens } from '../../book/api-tokens.js';
import { MemoryLeaseStore } from '../../book/memory-lease-store.js';
import { DEFAULT_TENANT_QUOTAS, TenantLedger, type TenantQuotaLimits } from '../../book/tenant-quotas.js';
import { parseTokenOptions } from '../../book/token-scope.js';
import { gatewayBook } from '../../handlers/gateway-book.js';
import { proxy, silentLogger, TestCatalog } from '../book/fixtures.js';
import { startHarness } from '../discovery/api-harness.js';
import {
  basic,
  startWorld,
  tunnelThrough,
  until,
  viaGateway,
  viaTunnel,
  type World,
} from './gateway-world.js';

const TOKEN_A = 'team-a-token-0123456789abcdef';
const TOKEN_B = 'team-b-token-0123456789abcdef';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

function twoTeams(
  options: Record<'team-a' | 'team-b', string[]> = { 'team-a': [], 'team-b': [] },
): ApiTokens {
  return new ApiTokens(
    new Map([
      ['team-a', TOKEN_A],
      ['team-b', TOKEN_B],
    ]),
    new Map([
      ['team-a', parseTokenOptions(options['team-a'])],
      ['team-b', parseTokenOptions(options['team-b'])],
    ]),
  );
}

const ledgerOf = (quotas: Partial<TenantQuotaLimits>) =>
  new TenantLedger({ ...DEFAULT_TENANT_QUOTAS, ...quotas }, 60_000);

async function teamWorld(maxLeases: number, quotas: Partial<TenantQuotaLimits>, tokens = twoTeams()) {
  return startWorld({ idleMs: 200 }, maxLeases, undefined, undefined, undefined, {
    tokens,
    ledger: ledgerOf(quotas),
  });
}

const tunnel = (w: World, username: string, token: string, keepOpen = true) =>
  viaTunnel(w.port, w.site.httpsPort, w.site.ca, basic(username, token), keepOpen);

describe("a token's quotas hold through the gateway as through the API", () => {
  it('team A at its lease quota rides its own leases; team B still gets a slot of the fleet', async () => {
    // 3 proxies x 2 = 6 slots; team A may hold 3 leases.
    world = await teamWorld(2, { leases: 3 });
    const a = await Promise.all(Array.from({ length: 6 }, () => tunnel(world!, '', TOKEN_A)));
    expect(a.map((t) => t.status)).toEqual([200, 200, 200, 200, 200, 200]);
    // Before: team A's six tunnels held all six slots, and team B got 503 all_busy.
    expect((await world.store.totals()).activeLeases).toBe(3);
    const b = await tunnel(world, '', TOKEN_B);
    expect(b.status).toBe(200);
    for (const t of [...a, b]) t.close!();
  });

  it("team A's new sessions beyond its quota end its own oldest, never team B's", async () => {
    // The book keeps at least 10,000 sessions; past that it forgets the least recently used,
    // whoever's it is. Team A's quota (100) keeps it far below.
    const catalog = new TestCatalog([proxy('fleet/p0', { maxLeases: 10 })]);
    const store = new MemoryLeaseStore({ catalog, logger: silentLogger });
    const book = gatewayBook(store, catalog, undefined, undefined, undefined, ledgerOf({ sessions: 100 }));
    const ask = (owner: string, session: string) =>
      book.lease({ owner, selector: {}, target: 'shop.example', session, ttlSeconds: 60 });
    const b = await ask('team-b', 'gw:b1@shop.example');
    if (!b.granted) throw new Error('no lease');
    await book.release(b.leaseID, 'team-b');
    for (let i = 0; i < 10_050; i++) {
      const a = await ask('team-a', `gw:a${i}@shop.example`);
      if (a.granted) await book.release(a.leaseID, 'team-a');
    }
    const totals = await store.totals();
    store.close();
    expect(totals.sessionsEvicted).toBe(0);
    expect(totals.activeSessions).toBeLessThanOrEqual(101);
  });

  it('team A at its cooldown quota: a report by session on a new pair is 429 cooldown_quota, nothing recorded', async () => {
    world = await teamWorld(2, { cooldowns: 1 });
    const report = async (session: string) => {
      const t = await tunnel(world!, `session-${session}`, TOKEN_A, false);
      expect(t.status).toBe(200);
      const res = await fetch(`http://127.0.0.1:${world!.port}/v1/sessions/${session}/report`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN_A}` },
        body: JSON.stringify({ target: '127.0.0.1', result: 'banned' }),
      });
      return { status: res.status, body: (await res.json()) as { error?: string } };
    };
    expect((await report('s1')).status).toBe(200);
    // s2 goes through another proxy (the first rests for the site): a second pair.
    const second = await report('s2');
    expect([second.status, second.body.error]).toEqual([429, 'cooldown_quota']);
    expect((await world.store.totals()).activeCooldowns).toBe(1);
  });
});

describe("team A cannot pick, report or ride team B's sessions and proxies", () => {
  it("a report naming team B's session is 404 session_not_held; B's lease and proxy are untouched", async () => {
    world = await teamWorld(2, {});
    const b = await tunnel(world, 'session-shared1', TOKEN_B, false);
    expect(b.status).toBe(200);
    const res = await fetch(`http://127.0.0.1:${world.port}/v1/sessions/shared1/report`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN_A}` },
      body: JSON.stringify({ target: '127.0.0.1', result: 'banned' }),
    });
    expect(res.status).toBe(404);
    expect((await world.store.totals()).activeCooldowns).toBe(0);
    expect(world.gateway.leasesHeld).toBe(1);
  });

  it.each<[string, boolean]>([
    ["team B's proxies idle", false],
    ["team B's proxies banned by the site (cooling down for it)", true],
  ])(
    "a selector naming team B's proxies (%s): 503 no_match, no Retry-After, none of B's names",
    async (_name, banB) => {
      const tokens = twoTeams({ 'team-a': ['selector=geo=us'], 'team-b': ['selector=geo=eu'] });
      world = await teamWorld(2, {}, tokens);
      const url = `http://127.0.0.1:${world.site.httpPort}/`;
      if (banB) {
        world.site.banned.add('127.0.0.3').add('127.0.0.4');
        for (let i = 0; i < 2; i++) await viaGateway(world.port, url, basic('', TOKEN_B));
        expect((await world.store.totals()).activeCooldowns).toBe(2);
      }
      // Before: all_busy (B's idle proxies counted as A's, busy), or all_cooling_down with
      // the Retry-After of B's bans: another team's cooldowns on a site, told to A.
      const a = await viaGateway(world.port, url, basic('geo-eu', TOKEN_A));
      expect([a.status, JSON.parse(a.body).error, a.headers['retry-after']]).toEqual([
        503,
        'no_match',
        undefined,
      ]);
      expect(a.body).not.toMatch(/fleet\/p[12]|127\.0\.0\.[34]|upstream-secret/);
      // Team A's own proxy serves it.
      expect((await viaGateway(world.port, url, basic('', TOKEN_A))).body.trim()).toBe('127.0.0.2');
    },
  );

  it("team A's username cannot select on, nor learn, an attribute key only team B's proxies carry", async () => {
    const tokens = twoTeams({ 'team-a': ['selector=geo=us'], 'team-b': ['selector=geo=eu'] });
    world = await teamWorld(2, {}, tokens);
    world.catalog.proxies = world.catalog.proxies.map((r) =>
      r.attributes.geo === 'eu' ? { ...r, attributes: { ...r.attributes, customer: 'acme' } } : r,
    );
    const url = `http://127.0.0.1:${world.site.httpPort}/`;
    // Before: accepted (then no_match), and a typo's error listed "customer" to team A.
    const a = await viaGateway(world.port, url, basic('customer-acme', TOKEN_A));
    expect([a.status, JSON.parse(a.body).error]).toEqual([407, 'invalid_username']);
    const typo = await viaGateway(world.port, url, basic('goe-us', TOKEN_A));
    expect(JSON.parse(typo.body).message).toBe(
      'proxy username: unknown option "goe" (known: session, ttl, geo)',
    );
    // Team B selects on it.
    expect((await viaGateway(world.port, url, basic('customer-acme', TOKEN_B))).status).toBe(200);
  });

  it("with the fleet full of team B's leases, team A gets 503 all_busy, never a ride on B's", async () => {
    world = await teamWorld(1, {});
    const b = await Promise.all(Array.from({ length: 3 }, () => tunnel(world!, '', TOKEN_B)));
    expect(b.map((t) => t.status)).toEqual([200, 200, 200]);
    const a = await tunnel(world, '', TOKEN_A);
    expect([a.status, JSON.parse(a.body).error]).toEqual([503, 'all_busy']);
    for (const t of b) t.close!();
    await until(async () => (await world!.store.totals()).activeLeases === 0);
  });
});

describe('a token revoked while its tunnels are open', () => {
  it("its tunnels are cut and their leases go back; the other team's tunnel carries on", async () => {
    const tokens = twoTeams();
    world = await teamWorld(2, {}, tokens);
    const w = world;
    const a = await tunnelThrough(w, w.site.httpPort, undefined, '', TOKEN_A);
    const b = await tunnelThrough(w, w.site.httpPort, undefined, '', TOKEN_B);
    expect(w.gateway.openTunnels).toBe(2);
    // team-a's line deleted from the tokens file (the reload swaps the set whole).
    tokens.replace(new Map([['team-b', TOKEN_B]]));
    // Before: a tunnel authenticated once carried on for as long as it carried bytes.
    const aClosed = new Promise((r) => a.once('close', () => r('closed')));
    a.resume();
    expect(await Promise.race([aClosed, new Promise((r) => setTimeout(() => r('still open'), 5000))])).toBe(
      'closed',
    );
    await until(() => w.gateway.openTunnels === 1);
    expect(b.destroyed).toBe(false);
    await until(async () => (await w.store.totals()).activeLeases === 1);
    b.destroy();
  });
});

describe("one ledger, two doors: the API and the gateway count a token's leases together", () => {
  it.each<[string, 'api' | 'gateway']>([
    ['two leases through the API, then the gateway', 'api'],
    ['two leases through the gateway, then the API', 'gateway'],
  ])('%s: the third is 429 lease_quota at the other door', async (_name, first) => {
    const ledger = ledgerOf({ leases: 2 });
    const h = await startHarness({
      tokens: twoTeams(),
      proxies: [proxy('ns/a', { maxLeases: 10 })],
      app: { ledger },
    });
    try {
      const book = gatewayBook(h.store, h.catalog, undefined, undefined, undefined, ledger, () =>
        h.clock.now(),
      );
      const viaApi = async () => {
        const r = await h.call('POST', '/v1/leases', {
          headers: { authorization: `Bearer ${TOKEN_A}` },
          body: { ttlSeconds: 60 },
        });
        return r.status === 201 ? 'granted' : (r.body as { error: string }).error;
      };
      const viaGatewayBook = async () => {
        const r = await book.lease({ owner: 'team-a', selector: {}, target: 'shop.example', ttlSeconds: 60 });
        return r.granted ? 'granted' : r.reason;
      };
      const [mine, other] = first === 'api' ? [viaApi, viaGatewayBook] : [viaGatewayBook, viaApi];
      expect([await mine(), await mine(), await other()]).toEqual(['granted', 'granted', 'lease_quota']);
    } finally {
      await h.stop();
    }
  });
});
