// The Scrapy add-on against the real discovery API (in process, with a token: the auth path
// is exercised), five real forward proxies and a local site that bans one of them and
// rate-limits every source: a real Scrapy crawl (python/tests/crawl/churn_crawl.py) fetches
// every page, never through the banned proxy after its ban, honours the 429s' Retry-After,
// reports what it saw, and leaves no lease behind. Beside another team's leases (a second
// token) it still spreads over every proxy (issue 48); a site limiting by a sliding window
// without Retry-After is crawled with few 429s. The same crawl on the real operator,
// with a proxy dying mid-crawl, is scrapy-churn.int.test.ts.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCrawlSite } from '../../bench/crawl-scenario.js';
import { startFleet, type Fleet } from '../../bench/crawl-world.js';
import type { CrawlSite } from '../../bench/crawl-site.js';
import { ApiTokens } from '../../book/api-tokens.js';
import { DiscoveryClient } from '../../client/src/index.js';
import type { Lease } from '../../client/src/types.js';
import { proxy } from '../book/fixtures.js';
import { startDiscoveryServer, type TestDiscoveryServer } from '../client/discovery-server.js';
import { cleanEnv, runToEnd, venvPython } from './python-env.js';

const TOKEN = 'scrapy-token';
const PAGES = 150;
const SLIDING_PAGES = 300;
const MAX_SLIDING_429S = 30;

interface ScrapyResult {
  fetched: number;
  failed: string[];
  attempts: { proxy: string; startedAt: number; endedAt: number | null }[];
  stats: Record<string, number | string>;
}

let server: TestDiscoveryServer;
let fleet: Fleet;
let site: CrawlSite;
let dir: string;

/** A real Scrapy crawl (churn_crawl.py) of `start` through the add-on; its result file's content. */
async function crawl(
  discoveryUrl: string,
  token: string,
  start: string,
  file: string,
): Promise<ScrapyResult> {
  const resultFile = join(dir, file);
  await runToEnd(
    venvPython(),
    ['python/tests/crawl/churn_crawl.py'],
    cleanEnv({
      DISCOVERY_URL: discoveryUrl,
      DISCOVERY_TOKEN: token,
      START_URL: start,
      CRAWL_RESULT: resultFile,
      LOG_LEVEL: 'WARNING',
    }),
  );
  return JSON.parse(await readFile(resultFile, 'utf8')) as ScrapyResult;
}

beforeAll(async () => {
  fleet = await startFleet(5, '127.0.8.1');
  site = await startCrawlSite({ pages: PAGES, rateLimitPerSecond: 5, retryAfterSeconds: 1 });
  server = await startDiscoveryServer({
    token: TOKEN,
    proxies: fleet.proxies.map((p, i) => proxy(`demo/p${i}`, { ip: p.host, port: p.port })),
  });
  dir = await mkdtemp(join(tmpdir(), 'scrapy-addon-'));
});

afterAll(async () => {
  await server?.stop();
  await fleet?.close();
  await site?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

it('crawls every page through leased proxies: bans reported and avoided, 429s waited out, every lease released', async () => {
  const banned = fleet.proxies[0].host;
  site.ban(banned);
  const result = await crawl(server.baseUrl, TOKEN, site.start, 'result.json');
  const calls = server.requests.map((r) => r.call);
  console.log(
    `scrapy crawl on the test API: ${JSON.stringify({ ...result, attempts: result.attempts.length })}; ` +
      `${calls.filter((c) => c === 'POST /v1/leases').length} leases, ${site.hits.filter((h) => h.status === 429).length} 429s`,
  );
  expect(result.failed).toEqual([]);
  expect(result.fetched).toBe(PAGES);
  // Every attempt went through a proxy of the fleet.
  expect(result.attempts.every((a) => fleet.urls.includes(a.proxy))).toBe(true);
  // The ban: found once (a new lease carries one request until a page comes back), reported, never used again.
  const refused = site.hits.filter((h) => h.from === banned);
  expect(refused.length).toBeLessThanOrEqual(2);
  const bans = server.requests.filter(
    (r) => /\/report$/.test(r.call) && (r.response as { result?: string })?.result === 'banned',
  );
  expect(bans).toHaveLength(1);
  expect(bans[0].response).toMatchObject({ target: 'localhost', released: true });
  // Rate limits: reported with the site's Retry-After, and the crawl kept far under one 429 per page.
  const limits = site.hits.filter((h) => h.status === 429).length;
  expect(Number(result.stats['proxy_operator/reported_rate_limited'] ?? 0)).toBeGreaterThan(0);
  expect(limits).toBeLessThan(PAGES / 2);
  // ok reports went in batches (POST /v1/reports), not one call per page.
  expect(calls.filter((c) => c === 'POST /v1/reports').length).toBeGreaterThan(0);
  const singleOks = server.requests.filter(
    (r) => /\/report$/.test(r.call) && (r.response as { result?: string })?.result === 'ok',
  );
  expect(singleOks).toHaveLength(0);
  // Nothing left behind by the spider's close.
  expect(await server.activeLeases()).toBe(0);
}, 120_000);

describe('a site that limits by a sliding window and sends no Retry-After (most sites)', () => {
  let sliding: CrawlSite;
  beforeAll(async () => {
    sliding = await startCrawlSite({
      pages: SLIDING_PAGES,
      rateLimitPerSecond: 5,
      limiter: 'sliding',
      retryAfterHeader: false,
    });
  });
  afterAll(async () => {
    await sliding?.close();
  });

  it('is crawled at its limit with few 429s: the pace is evenly spaced, not a burst', async () => {
    const result = await crawl(server.baseUrl, TOKEN, sliding.start, 'sliding.json');
    const limits = sliding.hits.filter((h) => h.status === 429).length;
    console.log(
      `scrapy crawl of a sliding window without Retry-After: ${result.fetched} pages, ${limits} 429s`,
    );
    expect(result.failed).toEqual([]);
    expect(result.fetched).toBe(SLIDING_PAGES);
    // Measured (2026-12-07, 5 proxies at 5/s): 11-16 429s in seven runs (16 beside two busy
    // cores); the pace before it (a bucket a quarter of a window deep, a 429 without
    // Retry-After taken as Retry-After: 1) 58 and 62.
    expect(limits).toBeLessThanOrEqual(MAX_SLIDING_429S);
  }, 120_000);
});

describe("beside another team's leases (issue 48)", () => {
  const TEAM_A = 'scrapy-team-a-token';
  const TEAM_B = 'scrapy-team-b-token';
  let shared: TestDiscoveryServer;
  let theirSite: CrawlSite;
  beforeAll(async () => {
    shared = await startDiscoveryServer({
      tokens: new ApiTokens(
        new Map([
          ['team-a', TEAM_A],
          ['team-b', TEAM_B],
        ]),
      ),
      proxies: fleet.proxies.map((p, i) => proxy(`demo/p${i}`, { ip: p.host, port: p.port, maxLeases: 10 })),
    });
    theirSite = await startCrawlSite({ pages: 100, rateLimitPerSecond: 5, retryAfterSeconds: 1 });
  });
  afterAll(async () => {
    await shared?.stop();
    await theirSite?.close();
  });

  it('a Scrapy crawl leases every proxy though the least used one is always a proxy it holds', async () => {
    // Team B holds two leases on each of p1..p4: p0, the crawl's first proxy, stays the least
    // used. Before, the add-on asked without excluding, was handed p0 again and stopped there.
    const other = new DiscoveryClient({ baseUrl: shared.baseUrl, token: TEAM_B });
    const theirs: Lease[] = [];
    for (let i = 0; i < 8; i++)
      theirs.push(await other.lease({ target: 'theirs.example', exclude: ['demo/p0'] }));
    expect(new Set(theirs.map((l) => l.proxy.id)).size).toBe(4);
    const result = await crawl(shared.baseUrl, TEAM_A, theirSite.start, 'beside.json');
    const asks = shared.requests.filter((r) => r.call === 'POST /v1/leases').slice(theirs.length);
    const granted = asks.map((r) => (r.response as { proxy?: { id: string } }).proxy?.id).filter(Boolean);
    console.log(
      `scrapy crawl beside another team: ${result.fetched} pages, ${result.stats['proxy_operator/leased']} leased, ` +
        `granted ${JSON.stringify(granted)}, ${theirSite.hits.filter((h) => h.status === 429).length} 429s`,
    );
    expect(result.failed).toEqual([]);
    expect(result.fetched).toBe(100);
    // Every proxy of the fleet carried pages of the crawl; each grant was a proxy new to it.
    expect(new Set(result.attempts.map((a) => a.proxy))).toEqual(new Set(fleet.urls));
    expect(new Set(granted).size).toBe(fleet.proxies.length);
    expect(granted).toHaveLength(fleet.proxies.length);
    // The crawl's leases are all released; team B's are untouched.
    expect(await shared.activeLeases()).toBe(theirs.length);
    for (const lease of theirs) await other.release(lease.leaseID);
  }, 120_000);
});
