// A real Scrapy crawl (python/tests/crawl/churn_crawl.py, the add-on set up as the docs say)
// through real forward proxies leased from a running operator on the real control plane,
// under the churn of test/client/crawl-churn.int.test.ts: the site bans two proxies and
// throttles busy sources, one proxy dies mid-crawl. The same invariants hold: every page, no
// request through a banned proxy after its ban, no attempt into the dead proxy beyond those in
// flight when it was reported, and no lease or session left when the spider has closed.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { planFaults, startCrawlSite } from '../../bench/crawl-scenario.js';
import { startFleet, type Fleet } from '../../bench/crawl-world.js';
import type { CrawlSite } from '../../bench/crawl-site.js';
import type { LocalTarget } from '../../cmd/demo/local-target.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { DEFAULT_HANDLER_SETTINGS } from '../../handlers/settings.js';
import type { ProxyApi } from '../crd/proxy-api.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import { eventually, startOperator, suiteSetup, type RunningOperator } from '../handlers/operator-fixture.js';
import { DiscoveryClient } from '../../client/src/index.js';
import { cleanEnv, runToEnd, venvPython } from './python-env.js';

const PAGES = 1000;
const PROXIES = 20;
const MAX_LEASES = 5;

interface ScrapyResult {
  fetched: number;
  failed: string[];
  seconds: number;
  attempts: { proxy: string; startedAt: number; endedAt: number | null }[];
  unreachableSent: Record<string, number>;
  stats: Record<string, number | string>;
}

const kc = testKubeConfig();
const namespace = uniqueName('scrapy');
let api: ProxyApi;
let target: LocalTarget;
let op: RunningOperator;
let site: CrawlSite;
let fleet: Fleet;
let discoveryURL: string;
let dir: string;
const faults = planFaults(PROXIES, 2, 1, 7);
const name = (i: number) => `scrapy-${i}`;

beforeAll(async () => {
  venvPython();
  ({ api, target } = await suiteSetup(kc, namespace));
  const port = await freePort();
  discoveryURL = `http://127.0.0.1:${port}`;
  op = await startOperator(kc, {}, namespace, {
    discovery: { ...DEFAULT_HANDLER_SETTINGS.discovery, host: '127.0.0.1', port },
  });
  fleet = await startFleet(PROXIES, '127.0.7.1');
  site = await startCrawlSite({ pages: PAGES, rateLimitPerSecond: 40, retryAfterSeconds: 1 });
  dir = await mkdtemp(join(tmpdir(), 'scrapy-churn-'));
  for (let i = 0; i < PROXIES; i++) {
    await api.create(name(i), {
      spec: {
        mode: 'External',
        endpoint: { host: fleet.proxies[i].host, port: fleet.proxies[i].port },
        maxLeases: MAX_LEASES,
        attributes: { pool: 'scrapy' },
        // A slow schedule: only the unreachable report can take the dead proxy out in time.
        healthCheck: {
          probeURL: target.probeURL,
          intervalSeconds: 10,
          timeoutSeconds: 2,
          failureThreshold: 3,
        },
      },
    });
  }
}, 120_000);

afterAll(async () => {
  await op?.stop();
  await fleet?.close();
  await site?.close();
  await target?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

it('a Scrapy crawl through the add-on fetches every page, never through a banned proxy after its ban or a dead one after its report', async () => {
  const admin = new DiscoveryClient({ baseUrl: discoveryURL });
  await eventually(
    'every proxy healthy in the discovery API',
    async () =>
      (await admin.listProxies({ selector: { pool: 'scrapy' }, healthy: true })).length === PROXIES
        ? true
        : undefined,
    60_000,
  );
  const hosts = fleet.proxies.map((p) => p.host);
  for (const i of faults.banned) site.ban(hosts[i]);
  // The proxy dies once 30 % of the pages have come back.
  const dieAt = Math.ceil(PAGES * faults.dieAtFraction);
  let diedAt: number | undefined;
  const watcher = setInterval(() => {
    if (diedAt !== undefined) return;
    if (site.hits.filter((h) => h.status === 200).length >= dieAt) {
      diedAt = Date.now();
      for (const i of faults.dying) void fleet.proxies[i].close();
    }
  }, 20);
  const resultFile = join(dir, 'result.json');
  try {
    await runToEnd(
      venvPython(),
      ['python/tests/crawl/churn_crawl.py'],
      cleanEnv({
        DISCOVERY_URL: discoveryURL,
        START_URL: site.start,
        SELECTOR: JSON.stringify({ pool: 'scrapy' }),
        CRAWL_RESULT: resultFile,
        LOG_LEVEL: 'WARNING',
        // Enough requests at once that the crawl leases every proxy of the fleet (2 per lease
        // before the next is asked for), the banned ones too: the bans are met, not avoided by luck.
        CONCURRENT_REQUESTS: '48',
      }),
    );
  } finally {
    clearInterval(watcher);
  }
  const result = JSON.parse(await readFile(resultFile, 'utf8')) as ScrapyResult;
  console.log(
    `scrapy crawl under churn: ${JSON.stringify({ ...result, attempts: result.attempts.length, diedAt })}`,
  );

  // Every page, none failed.
  expect(result.failed).toEqual([]);
  expect(result.fetched).toBe(PAGES);
  // Bans: nothing through a banned proxy later than 2 s after its first 403.
  const bannedLate = site.hits.filter((h) => {
    const first = site.firstRefusal.get(h.from);
    return faults.banned.some((i) => hosts[i] === h.from) && first !== undefined && h.at > first + 2000;
  }).length;
  expect(bannedLate).toBe(0);
  expect(site.firstRefusal.size).toBeGreaterThan(0);
  // The dead proxy: reported, and no attempt through it began after the report beyond those in flight.
  expect(diedAt).toBeDefined();
  for (const i of faults.dying) {
    const reportedAt = result.unreachableSent[`${namespace}/${name(i)}`];
    expect(reportedAt).toBeDefined();
    const url = fleet.urls[i];
    const after = result.attempts.filter((a) => a.proxy === url && a.startedAt > reportedAt).length;
    const inFlight = result.attempts.filter(
      (a) => a.proxy === url && a.startedAt <= reportedAt && (a.endedAt ?? Infinity) >= reportedAt,
    ).length;
    expect(after).toBeLessThanOrEqual(inFlight);
  }
  // Every request went through a proxy (never direct).
  expect(result.attempts.every((a) => a.proxy.startsWith('http://127.0.7.'))).toBe(true);
  // The rate limit was met, reported with its Retry-After, and honoured.
  expect(Number(result.stats['proxy_operator/reported_banned'])).toBeGreaterThanOrEqual(faults.banned.length);
  // Nothing left behind when the spider closed.
  const gauge = async (metric: string) => (await op.registry.getSingleMetric(metric)!.get()).values[0].value;
  expect(await gauge('proxy_operator_leases_active')).toBe(0);
  expect(await gauge('proxy_operator_sessions_active')).toBe(0);
}, 300_000);
