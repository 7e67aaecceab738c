// The Scrapy add-on against the real discovery API (in process, with a token: the auth path
// is exercised), five real forward proxies and a local site that bans one of them and
// rate-limits every source: a real Scrapy crawl (python/tests/crawl/churn_crawl.py) fetches
// every page, never through the banned proxy after its ban, honours the 429s' Retry-After,
// reports what it saw, and leaves no lease behind. The same crawl on the real operator, with a
// proxy dying mid-crawl, is scrapy-churn.int.test.ts.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCrawlSite } from '../../bench/crawl-scenario.js';
import { startFleet, type Fleet } from '../../bench/crawl-world.js';
import type { CrawlSite } from '../../bench/crawl-site.js';
import { proxy } from '../book/fixtures.js';
import { startDiscoveryServer, type TestDiscoveryServer } from '../client/discovery-server.js';
import { cleanEnv, runToEnd, venvPython } from './python-env.js';

const TOKEN = 'scrapy-token';
const PAGES = 150;

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
  const resultFile = join(dir, 'result.json');
  await runToEnd(
    venvPython(),
    ['python/tests/crawl/churn_crawl.py'],
    cleanEnv({
      DISCOVERY_URL: server.baseUrl,
      DISCOVERY_TOKEN: TOKEN,
      START_URL: site.start,
      CRAWL_RESULT: resultFile,
      LOG_LEVEL: 'WARNING',
    }),
  );
  const result = JSON.parse(await readFile(resultFile, 'utf8')) as ScrapyResult;
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
