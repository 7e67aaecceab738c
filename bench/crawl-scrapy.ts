// Benchmark: the Scrapy side of bench:crawl. The same real Scrapy crawl
// (python/tests/crawl/churn_crawl.py) through the proxy-operator add-on and through
// scrapy-rotating-proxies (the package Scrapy users pick, set up as its README says:
// ROTATING_PROXY_LIST and its two middlewares at 610/620) over the same forward proxies,
// against the same site and the same seeded faults: the site bans some proxies (403) and
// rate-limits every source (429 with Retry-After), and some proxies die once 30 % of the pages
// are fetched. Each side gets a fresh world; the sides alternate which goes first.
//
//   npm run bench:crawl-scrapy                      # 2,000 pages, 20 proxies, 25 req/s per source
//   npm run bench:crawl-scrapy -- --pages=1000 --proxies=10 --rate-limit=10 --repeat=2
//   flags: --pages=P --proxies=N --bans=B --deaths=D --rate-limit=R --seed=S --repeat=K
//          --limiter=bucket|sliding (the site's limit: a token bucket, or a sliding window of a second)
//          --no-retry-after (its 429s say no Retry-After, as most sites')
//
// The add-on leases from the real discovery API (the operator's own app and lease book, in
// this process, over the fleet as healthy Proxies: bench/in-process-discovery.ts); no health
// engine runs, so a proxy reported unreachable stays out until the suspicion times out.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { loadAverages } from './bench-env.js';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { planFaults, startCrawlSite, type FaultPlan } from './crawl-scenario.js';
import type { Limiter } from './crawl-site.js';
import { startFleet } from './crawl-world.js';
import { readyFleet, startInProcessDiscovery } from './in-process-discovery.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/build\/?$/, '/');
const PYTHON = join(ROOT, '.ci/python/bin/python');
const CRAWL = join(ROOT, 'python/tests/crawl/churn_crawl.py');

type Side = 'addon' | 'rotating';

interface SideFigures {
  side: Side;
  pages: number;
  fetched: number;
  seconds: number;
  pagesPerSecond: number;
  /** The Scrapy process's CPU seconds for the crawl (user + system). */
  cpuSeconds: number;
  attempts: number;
  refused: number;
  rateLimited: number;
  /** Requests reaching the site through a banned proxy more than 2 s after its first 403. */
  bannedLate: number;
  /** Attempts into the dead proxies after they died. */
  intoTheDead: number;
}

interface ScrapyResult {
  fetched: number;
  seconds: number;
  cpuSeconds: number;
  attempts: { proxy: string; startedAt: number }[];
}

function flag(name: string, fallback: number): number {
  const raw = process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const value = raw === undefined ? fallback : Number(raw);
  if (!Number.isFinite(value) || value < 0)
    throw new Error(`--${name} must be a non-negative number, got ${raw}`);
  return value;
}

function pythonEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/_proxy$/i.test(k)));
  return { ...env, LOG_LEVEL: 'ERROR', ...extra };
}

interface CrawlConfig {
  pages: number;
  proxies: number;
  rateLimit: number;
  limiter: Limiter;
  retryAfter: boolean;
  faults: FaultPlan;
}

function limiterFlag(): Limiter {
  const raw = process.argv.find((a) => a.startsWith('--limiter='))?.slice('--limiter='.length) ?? 'bucket';
  if (raw !== 'bucket' && raw !== 'sliding')
    throw new Error(`--limiter must be bucket or sliding, got ${raw}`);
  return raw;
}

async function crawlOnce(side: Side, config: CrawlConfig): Promise<SideFigures> {
  const fleet = await startFleet(config.proxies, '127.0.9.1');
  const site = await startCrawlSite({
    pages: config.pages,
    rateLimitPerSecond: config.rateLimit,
    retryAfterSeconds: 1,
    retryAfterHeader: config.retryAfter,
    limiter: config.limiter,
  });
  const discovery = await startInProcessDiscovery(readyFleet(fleet.urls, 'bench'));
  const dir = await mkdtemp(join(tmpdir(), 'bench-scrapy-'));
  const hosts = fleet.proxies.map((p) => p.host);
  for (const i of config.faults.banned) site.ban(hosts[i]);
  const dieAt = Math.ceil(config.pages * config.faults.dieAtFraction);
  let diedAt: number | undefined;
  const watcher = setInterval(() => {
    if (diedAt === undefined && site.hits.filter((h) => h.status === 200).length >= dieAt) {
      diedAt = Date.now();
      for (const i of config.faults.dying) void fleet.proxies[i].close();
    }
  }, 20);
  try {
    const resultFile = join(dir, 'result.json');
    await new Promise<void>((resolve, reject) =>
      execFile(
        PYTHON,
        [CRAWL],
        {
          env: pythonEnv({
            SIDE: side,
            DISCOVERY_URL: discovery.url,
            PROXY_URLS: fleet.urls.join(','),
            START_URL: site.start,
            CRAWL_RESULT: resultFile,
          }),
          maxBuffer: 64 * 2 ** 20,
        },
        (err, _stdout, stderr) =>
          err ? reject(new Error(`${side} crawl failed: ${err.message}\n${stderr}`)) : resolve(),
      ),
    );
    const result = JSON.parse(await readFile(resultFile, 'utf8')) as ScrapyResult;
    const banned = new Set(config.faults.banned.map((i) => hosts[i]));
    const dead = new Set(config.faults.dying.map((i) => fleet.urls[i]));
    return {
      side,
      pages: config.pages,
      fetched: result.fetched,
      seconds: result.seconds,
      pagesPerSecond: result.fetched / result.seconds,
      cpuSeconds: result.cpuSeconds,
      attempts: result.attempts.length,
      refused: site.hits.filter((h) => h.status === 403).length,
      rateLimited: site.hits.filter((h) => h.status === 429).length,
      bannedLate: site.hits.filter((h) => {
        const first = site.firstRefusal.get(h.from);
        return banned.has(h.from) && first !== undefined && h.at > first + 2000;
      }).length,
      intoTheDead:
        diedAt === undefined
          ? 0
          : result.attempts.filter((a) => dead.has(a.proxy.replace(/\/$/, '')) && a.startedAt > diedAt!)
              .length,
    };
  } finally {
    clearInterval(watcher);
    await discovery.stop();
    await fleet.close();
    await site.close();
    await rm(dir, { recursive: true, force: true });
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

async function main(): Promise<void> {
  if (!existsSync(PYTHON))
    throw new Error(`${PYTHON} is missing: run .ci/run (it makes the venv with Scrapy)`);
  const pages = flag('pages', 2000);
  const proxies = flag('proxies', 20);
  const rateLimit = flag('rate-limit', 25);
  const repeat = Math.max(1, flag('repeat', 1));
  const faults = planFaults(proxies, flag('bans', 2), flag('deaths', 1), flag('seed', 7));
  const limiter = limiterFlag();
  const retryAfter = !process.argv.includes('--no-retry-after');
  const config: CrawlConfig = { pages, proxies, rateLimit, limiter, retryAfter, faults };
  console.log(
    `bench:crawl-scrapy: ${pages} pages, ${proxies} proxies (${faults.banned.length} banned, ${faults.dying.length} dying at 30 %), ` +
      `${rateLimit} req/s per source (${limiter === 'bucket' ? 'token bucket' : 'sliding window'}, ` +
      `${retryAfter ? 'Retry-After: 1' : 'no Retry-After'}); load ${loadAverages()}`,
  );
  const rounds: Record<Side, SideFigures[]> = { addon: [], rotating: [] };
  for (let round = 0; round < repeat; round++) {
    const order: Side[] = round % 2 === 0 ? ['addon', 'rotating'] : ['rotating', 'addon'];
    for (const side of order) {
      const figures = await crawlOnce(side, config);
      rounds[side].push(figures);
      console.log(`  round ${round + 1} ${side}: ${JSON.stringify(figures)}; load ${loadAverages()}`);
    }
  }
  const range = (values: number[]) => `${Math.min(...values).toFixed(1)}–${Math.max(...values).toFixed(1)}`;
  const summary = (side: Side) => {
    const all = rounds[side];
    return {
      fetched: `${median(all.map((f) => f.fetched))}/${pages}`,
      pagesPerSecond: median(all.map((f) => f.pagesPerSecond)),
      spread: range(all.map((f) => f.pagesPerSecond)),
      cpuSeconds: median(all.map((f) => f.cpuSeconds)),
      bannedLate: Math.max(...all.map((f) => f.bannedLate)),
      rateLimited: median(all.map((f) => f.rateLimited)),
      intoTheDead: median(all.map((f) => f.intoTheDead)),
    };
  };
  const addon = summary('addon');
  const rotating = summary('rotating');
  console.log(
    `| side | pages | pages/s (median, range) | Scrapy CPU s | banned late | 429s | attempts into the dead |`,
  );
  console.log(`|---|---|---|---|---|---|---|`);
  for (const [name, s] of [
    ['proxy-operator add-on', addon],
    ['scrapy-rotating-proxies', rotating],
  ] as const) {
    console.log(
      `| ${name} | ${s.fetched} | ${s.pagesPerSecond.toFixed(1)} (${s.spread}) | ${s.cpuSeconds.toFixed(2)} | ${s.bannedLate} | ${s.rateLimited} | ${s.intoTheDead} |`,
    );
  }
  // Each round's two sides ran back to back: their ratio is the least disturbed by the load.
  const ratios = rounds.addon.map((a, i) => a.pagesPerSecond / rounds.rotating[i].pagesPerSecond);
  console.log(
    `pages/s ratio add-on / rotating: median ${median(ratios).toFixed(2)}x (rounds ${ratios.map((r) => r.toFixed(2)).join(', ')}); load ${loadAverages()}`,
  );
}

await main();
