// One crawl under churn, shared by `npm run bench:crawl` and its smaller test: a real Crawlee
// HttpCrawler at Crawlee's defaults crawls a local site of linked pages through real forward
// proxies on loopback, while the site bans some proxies (403 by source address), throttles
// sources above a rate (429), and some proxies die mid-crawl (listener closed, sockets
// destroyed). The proxies come either from the operator (ProxyOperatorConfiguration) or from
// Crawlee's own static list (the baseline); the faults are the same, seeded.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics, getHeapStatistics, setFlagsFromString, writeHeapSnapshot } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Configuration, HttpCrawler, log as crawleeLog, LogLevel, ProxyConfiguration } from '@crawlee/http';
import { DiscoveryClient, type ReportResponse, type ReportResult } from '../client/src/index.js';
import { isProxyFailure, ProxyOperatorConfiguration } from '../client/src/crawlee/index.js';
import { startCrawlSite } from './crawl-site.js';
import type { CrawlWorld } from './crawl-world.js';
import type { SiteBudget } from './site-budget.js';
import { budgetAtLastPage, describeBudget, leasePhase, perSecond } from './crawl-trace-text.js';
import { cpuShare, startCpuProfile, type CpuShare } from './cpu-share.js';
import { countSockets, socketsPerPage, type SocketsPerPage } from './socket-count.js';

export interface FaultPlan {
  /** Proxies (by index) the site answers 403. */
  banned: number[];
  /** Proxies (by index) that die once `dieAtFraction` of the pages are fetched. */
  dying: number[];
  dieAtFraction: number;
  /** The site bans `banned` once this share of the pages is fetched (default: from the start). */
  banAtFraction?: number;
}

/** A seeded choice of `bans` banned and `deaths` dying proxies among `count`, disjoint. */
export function planFaults(count: number, bans: number, deaths: number, seed: number): FaultPlan {
  let s = seed >>> 0 || 1;
  const random = () => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648;
  const order = Array.from({ length: count }, (_, i) => i);
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return { banned: order.slice(0, bans), dying: order.slice(bans, bans + deaths), dieAtFraction: 0.3 };
}

/** A DiscoveryClient that notes when each unreachable report was sent, per proxy. */
class ReportingClient extends DiscoveryClient {
  readonly firstUnreachable = new Map<string, number>();
  /** Each lease granted: when it was asked for and when it came (ms since the epoch). */
  readonly leaseTimes: { askedAt: number; grantedAt: number }[] = [];
  override async lease(...args: Parameters<DiscoveryClient['lease']>): ReturnType<DiscoveryClient['lease']> {
    const askedAt = Date.now();
    const lease = await super.lease(...args);
    this.leaseTimes.push({ askedAt, grantedAt: Date.now() });
    return lease;
  }
  override async report(
    leaseID: string,
    result: ReportResult,
    report?: { target?: string; retryAfterSeconds?: number },
  ): Promise<ReportResponse> {
    const sentAt = Date.now();
    const response = await super.report(leaseID, result, report);
    if (result === 'unreachable' && !this.firstUnreachable.has(response.proxyID)) {
      this.firstUnreachable.set(response.proxyID, sentAt);
    }
    return response;
  }
}

export interface OperatorSide {
  discoveryURL: string;
  token?: string;
  /** The discovery proxy id (namespace/name) of fleet proxy i. */
  proxyID(i: number): string;
  selector?: Record<string, string>;
}

export interface Attempt {
  proxy: string;
  startedAt: number;
  endedAt?: number;
}

export interface CrawlFigures {
  mode: 'operator' | 'list' | 'gateway';
  pages: number;
  fetched: number;
  failedRequests: number;
  /** When the crawl started, in ms since the epoch. */
  startedAt: number;
  seconds: number;
  pagesPerSecond: number;
  /** When each page was fetched, in ms since the crawl started (ascending). */
  fetchedAt: number[];
  /** Requests reaching the site through a banned proxy more than 2 s after its first 403. */
  bannedLate: number;
  /** Per dying proxy: attempts started after its death. */
  attemptsAfterDeath: number[];
  /** Per dying proxy: attempts started after its first unreachable report (operator only). */
  attemptsAfterReport: number[];
  /** Per dying proxy: attempts in flight on it when the first report was sent (operator only). */
  inFlightAtReport: number[];
  /** Requests Crawlee sent (every attempt of every page, retries included). */
  attempts: number;
  /** Attempts that failed because their proxy could not carry them (refused, reset, never connected). */
  proxyErrors: number;
  /**
   * CPU milliseconds this process spent per page fetched (Crawlee, the integration, and the
   * site and proxies it serves): what a CPU-bound crawl's pages/s comes down to.
   */
  cpuMsPerPage: number;
  /**
   * Sockets this process opened per page fetched, by destination (see socket-count.ts), and
   * those it accepted (the site's and the proxies', when they run here).
   */
  socketsPerPage: SocketsPerPage;
  /** Of that CPU time, the kernel's share (sockets, timers): what a JS profile does not show. */
  systemCpuShare: number;
  /**
   * CPU ms this process had spent by its 100th and 1,000th page (undefined: not reached): a
   * crawl's start (the first calls, the first sessions, code that has not run yet) apart from
   * the rest.
   */
  cpuMsByPage: { 100?: number; 1000?: number };
  /**
   * What the crawling process cost the kernel and V8 per page fetched: minor page faults,
   * context switches (voluntary: it waited; involuntary: it was preempted), and the
   * collector's pauses. The kernel's share above, broken down.
   */
  perPage: ProcessCostPerPage;
  /** CPU ms per page fetched of the world's own process (the proxies and the site), when apart. */
  worldCpuMsPerPage?: number;
  /**
   * With `profile`: the crawling process's busy CPU, and of it the integration's (its code and
   * the undici calls it makes; the list side has none, so its figure checks the attribution).
   */
  integrationCpu?: CpuShare;
  /** 403s the site answered: the first through each banned proxy is what finds the ban. */
  refused: number;
  /** 429s the site sent. */
  rateLimited: number;
  /** A rate-limited site's budget up to the last page, by where it went (see site-budget.ts). */
  budget?: SiteBudget;
  /** What the integration counted (operator only). */
  integration?: Record<string, number>;
  /** Crawlee's autoscaled pool, sampled each second: median tasks running, desired at the end. */
  concurrency: { medianRunning: number; desiredAtEnd: number };
  /**
   * Per second of the crawl: `second:200s/429s/sources that got a 200`, then its first second in
   * ms (first request, sources' first 200s, the 20th/60th/100th 200, the first leases) (with `trace`).
   */
  perSecond?: string;
}

export interface ProcessCostPerPage {
  minorFaults: number;
  voluntarySwitches: number;
  involuntarySwitches: number;
  /** Collections' pause ms (wall time: a preempted pause counts its wait) and counts, per page. */
  gcMs: number;
  gcs: number;
  /** Of them, the full (mark-compact) collections'. */
  majorGcMs: number;
  majorGcs: number;
  /** V8's heap in use when the crawl ended, MiB (not per page). */
  heapUsedMiB: number;
  /** What of it a full collection keeps, MiB (not per page). */
  retainedMiB: number;
  /**
   * V8's new space when the crawl started, MiB (not per page): V8 shrinks it in an idle spell
   * (the operator's side waits for its proxies' first probes), and a smaller one is collected
   * more often until it grows back.
   */
  newSpaceAtStartMiB: number;
}

/** V8's new space now, MiB. */
function newSpaceMiB(): number {
  const space = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
  return (space?.space_size ?? 0) / 2 ** 20;
}

/** A full collection, now. */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

/** The heap a full collection leaves, MiB. */
function retainedHeapMiB(): number {
  collectGarbage();
  return getHeapStatistics().used_heap_size / 2 ** 20;
}

/** CPU ms (user and system) this process spent since `from`. */
function cpuMsSince(from: NodeJS.CpuUsage): number {
  const { user, system } = process.cpuUsage(from);
  return (user + system) / 1000;
}

/** Starts counting the process's faults, switches and collections; the result stops it. */
function countProcessCost(): (pages: number) => ProcessCostPerPage {
  const before = process.resourceUsage();
  const newSpaceAtStartMiB = newSpaceMiB();
  let gcMs = 0;
  let gcs = 0;
  let majorGcMs = 0;
  let majorGcs = 0;
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gcMs += entry.duration;
      gcs++;
      if ((entry as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) {
        majorGcMs += entry.duration;
        majorGcs++;
      }
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  return (pages) => {
    observer.disconnect();
    const after = process.resourceUsage();
    const per = (n: number) => (pages === 0 ? 0 : n / pages);
    return {
      minorFaults: per(after.minorPageFault - before.minorPageFault),
      voluntarySwitches: per(after.voluntaryContextSwitches - before.voluntaryContextSwitches),
      involuntarySwitches: per(after.involuntaryContextSwitches - before.involuntaryContextSwitches),
      gcMs: per(gcMs),
      gcs: per(gcs),
      majorGcMs: per(majorGcMs),
      majorGcs: per(majorGcs),
      heapUsedMiB: getHeapStatistics().used_heap_size / 2 ** 20,
      retainedMiB: retainedHeapMiB(),
      newSpaceAtStartMiB,
    };
  };
}

export interface CrawlOptions {
  /** The proxies and the site (see crawl-world.ts). */
  world: CrawlWorld;
  faults: FaultPlan;
  /** The operator's discovery API; absent = Crawlee's own static list (the baseline). */
  operator?: OperatorSide;
  /** Progress lines (pages fetched so far). */
  progress?: (message: string) => void;
  /** Also return the per-second figures. */
  trace?: boolean;
  /** Profile the crawl (1 ms samples) for the integration's share of its CPU. */
  profile?: boolean;
  /** With `profile`: also write the profile (.cpuprofile) into this directory. */
  profileDir?: string;
  /** The integration's okReportIntervalMs (default: its own). */
  okReportIntervalMs?: number;
  /** Calls to the discovery API while the crawl runs (a crawl through Crawlee's list only). */
  apiCalls?: ApiCalls;
  /**
   * Fixed tasks instead of Crawlee's autoscaled pool (default: autoscaled). The pool scales by
   * the whole machine's CPU (os.cpus()), so on one machine another process's load throttles it.
   */
  concurrency?: number;
  /**
   * With `operator`: which of the integration's hooks the crawler runs: both (default), or the
   * post-navigation hook alone (an errorHandler that does not call the integration's).
   */
  hooks?: 'both' | 'post-navigation';
  /**
   * Crawlee's plain ProxyConfiguration whose one URL names the operator's gateway, a gateway
   * session per Crawlee session (instead of `operator` or the list).
   */
  gateway?: { url(sessionId: string): string };
}

/**
 * A GET of one proxy every `everyMs` while a crawl runs: an A/A run's first side makes as many
 * calls as the integration does, to show what the calls alone cost the crawling process.
 */
export interface ApiCalls {
  discoveryURL: string;
  token: string;
  proxyID: string;
  everyMs: number;
}

/** One crawl of the whole site at Crawlee's defaults; the faults are injected as it goes. */
export async function crawl(options: CrawlOptions): Promise<CrawlFigures> {
  const { world, faults, operator, gateway } = options;
  const banAt = Math.ceil(world.pages * (faults.banAtFraction ?? 0));
  const ban = () => world.ban(faults.banned.map((i) => world.hosts[i]!));
  if (banAt === 0) await ban();
  const client = operator
    ? new ReportingClient({ baseUrl: operator.discoveryURL, token: operator.token })
    : undefined;
  const integration = client
    ? new ProxyOperatorConfiguration({
        client,
        ...(operator?.selector ? { selector: operator.selector } : {}),
        ...(options.okReportIntervalMs !== undefined
          ? { okReportIntervalMs: options.okReportIntervalMs }
          : {}),
      })
    : undefined;
  const proxyConfiguration =
    integration ??
    (gateway
      ? new ProxyConfiguration({ newUrlFunction: (sessionId) => gateway.url(String(sessionId)) })
      : new ProxyConfiguration({ proxyUrls: world.urls }));
  const errorHook = integration && options.hooks !== 'post-navigation' ? integration : undefined;
  let proxyErrors = 0;

  const attempts: Attempt[] = [];
  const open = new Map<string, Attempt>();
  let deaths: Promise<number> | undefined;
  const fetched = new Set<string>();
  const fetchedAt: number[] = [];
  const cpuMsByPage: CrawlFigures['cpuMsByPage'] = {};
  let failedRequests = 0;
  const end = (id: string) => {
    const attempt = open.get(id);
    if (attempt) attempt.endedAt = Date.now();
    open.delete(id);
  };
  const dieAt = Math.ceil(world.pages * faults.dieAtFraction);
  crawleeLog.setLevel(LogLevel.OFF);
  const crawler = new HttpCrawler(
    {
      proxyConfiguration,
      ...(options.concurrency === undefined
        ? {}
        : { minConcurrency: options.concurrency, maxConcurrency: options.concurrency }),
      preNavigationHooks: [
        ({ id, proxyInfo }) => {
          const attempt: Attempt = { proxy: proxyInfo?.url ?? '', startedAt: Date.now() };
          attempts.push(attempt);
          open.set(id, attempt);
        },
      ],
      postNavigationHooks: [
        async (ctx) => {
          end(ctx.id);
          if (integration) await integration.postNavigationHook(ctx);
        },
      ],
      errorHandler: async (ctx, error) => {
        end(ctx.id);
        if (isProxyFailure(error)) proxyErrors++;
        if (errorHook) await errorHook.errorHandler(ctx, error);
      },
      requestHandler: async ({ request, body, enqueueLinks }) => {
        fetched.add(request.url);
        fetchedAt.push(Date.now() - started);
        if (fetched.size === 100 || fetched.size === 1000) cpuMsByPage[fetched.size] = cpuMsSince(cpu);
        if (banAt > 0 && fetched.size === banAt) {
          void ban();
          options.progress?.(`${fetched.size} pages fetched: ${faults.banned.length} proxies banned now`);
        }
        if (fetched.size === dieAt) {
          deaths = world.kill(faults.dying);
          deaths.catch(() => undefined); // awaited once the crawl is done: a failure surfaces there
          options.progress?.(`${fetched.size} pages fetched: ${faults.dying.length} proxies die now`);
        } else if (fetched.size % 1000 === 0) options.progress?.(`${fetched.size} pages fetched`);
        const hrefs = [...String(body).matchAll(/href="([^"]+)"/g)].map(
          (m) => new URL(m[1], request.url).href,
        );
        await enqueueLinks({ urls: hrefs });
      },
      failedRequestHandler: (_ctx, error) => {
        failedRequests++;
        if (isProxyFailure(error)) proxyErrors++;
      },
    },
    new Configuration({ persistStorage: false, purgeOnStart: true }),
  );
  const worldCpu = await world.cpuMs?.();
  // What the side did before its crawl (the operator's side creates its Proxies through the
  // Kubernetes client and polls the discovery API until they are healthy; the list's does
  // nothing) is garbage by now: collected here, not charged to the crawl's pages.
  collectGarbage();
  const started = Date.now();
  const cpu = process.cpuUsage();
  const processCost = countProcessCost();
  const stopSockets = countSockets();
  const stopProfile = options.profile ? await startCpuProfile() : undefined;
  // Crawlee scales its pool by the machine's load: a busy machine keeps it at 1-10 tasks,
  // which is what makes any wait inside a request cost throughput. Shown beside the figures.
  const running: number[] = [];
  const sampler = setInterval(() => {
    if (crawler.autoscaledPool) running.push(crawler.autoscaledPool.currentConcurrency);
  }, 1000);
  const stopCalls = options.apiCalls ? callEvery(options.apiCalls) : undefined;
  await crawler.run([world.start]);
  clearInterval(sampler);
  if (stopCalls) options.progress?.(`${stopCalls()} calls to the discovery API beside the crawl`);
  const seconds = (Date.now() - started) / 1000;
  const { user, system } = process.cpuUsage(cpu);
  const perPage = processCost(fetched.size);
  const sockets = stopSockets();
  // BENCH_HEAP_SNAPSHOT_DIR: what each side's crawler holds once its crawl is done (the
  // integration's leases still live), to compare in Chrome DevTools.
  const snapshots = process.env.BENCH_HEAP_SNAPSHOT_DIR;
  if (snapshots)
    writeHeapSnapshot(join(snapshots, `crawl-${operator ? 'operator' : 'list'}-${started}.heapsnapshot`));
  const profile = await stopProfile?.();
  if (profile && options.profileDir !== undefined) {
    const file = join(options.profileDir, `crawl-${operator ? 'operator' : 'list'}-${started}.cpuprofile`);
    await writeFile(file, JSON.stringify(profile));
    options.progress?.(`CPU profile written to ${file} (open it in Chrome DevTools)`);
  }
  const concurrency = {
    medianRunning:
      running.length === 0 ? 0 : [...running].sort((a, b) => a - b)[Math.floor(running.length / 2)],
    desiredAtEnd: crawler.autoscaledPool?.desiredConcurrency ?? 0,
  };
  await integration?.close();

  const worldCpuMs = worldCpu === undefined ? undefined : (await world.cpuMs!()) - worldCpu;
  const diedAt = deaths === undefined ? undefined : await deaths;
  const record = await world.record();
  const urlOf = (i: number) => world.urls[i];
  const bannedHosts = new Set(faults.banned.map((i) => world.hosts[i]));
  const bannedLate = record.hits.filter((h) => {
    const first = record.firstRefusal.get(h.from);
    return bannedHosts.has(h.from) && first !== undefined && h.at > first + 2000;
  }).length;
  const attemptsAfter = (i: number, at: number | undefined) =>
    at === undefined ? 0 : attempts.filter((a) => a.proxy === urlOf(i) && a.startedAt > at).length;
  const reportAt = (i: number) => (operator ? client!.firstUnreachable.get(operator.proxyID(i)) : undefined);
  const budget = budgetAtLastPage(record.hits, world.rateLimitPerSecond);
  return {
    mode: operator ? 'operator' : gateway ? 'gateway' : 'list',
    pages: world.pages,
    fetched: fetched.size,
    failedRequests,
    startedAt: started,
    seconds,
    pagesPerSecond: fetched.size / seconds,
    fetchedAt,
    bannedLate,
    attempts: attempts.length,
    proxyErrors,
    cpuMsPerPage: fetched.size === 0 ? 0 : (user + system) / 1000 / fetched.size,
    systemCpuShare: user + system === 0 ? 0 : system / (user + system),
    cpuMsByPage,
    perPage,
    socketsPerPage: socketsPerPage(sockets, fetched.size, world, operator?.discoveryURL),
    ...(worldCpuMs !== undefined && fetched.size > 0 ? { worldCpuMsPerPage: worldCpuMs / fetched.size } : {}),
    attemptsAfterDeath: faults.dying.map((i) => attemptsAfter(i, diedAt)),
    attemptsAfterReport: faults.dying.map((i) => attemptsAfter(i, reportAt(i))),
    inFlightAtReport: faults.dying.map((i) => {
      const at = reportAt(i);
      if (at === undefined) return 0;
      return attempts.filter(
        (a) => a.proxy === urlOf(i) && a.startedAt <= at && (a.endedAt ?? Infinity) >= at,
      ).length;
    }),
    ...(profile ? { integrationCpu: cpuShare(profile, isIntegration) } : {}),
    rateLimited: record.hits.filter((h) => h.status === 429).length,
    refused: record.hits.filter((h) => h.status === 403).length,
    ...(budget ? { budget } : {}),
    concurrency,
    ...(options.trace
      ? {
          perSecond:
            perSecond(record.hits, started) +
            (client ? `, ${leasePhase(client.leaseTimes, started)}` : '') +
            (budget ? `; ${describeBudget(budget)}` : ''),
        }
      : {}),
    ...(integration ? { integration: { ...integration.stats } } : {}),
  };
}

/** Starts the calls; the function returned stops them and says how many went. */
function callEvery({ discoveryURL, token, proxyID, everyMs }: ApiCalls): () => number {
  const client = new DiscoveryClient({ baseUrl: discoveryURL, token });
  let calls = 0;
  const timer = setInterval(() => {
    calls++;
    client.getProxy(proxyID).catch(() => undefined); // what it answers does not matter, that it was asked does
  }, everyMs);
  return () => {
    clearInterval(timer);
    return calls;
  };
}

export { startCrawlSite };

/**
 * The integration's frames: the client's code, and undici, which only the client uses here.
 * The undici package's `request` runs on Node's global dispatcher, which is Node's own copy of
 * undici (`node:internal/deps/undici`), often from a timer with no client frame above it.
 */
export function isIntegration(url: string): boolean {
  return (
    url.includes('/client/src/') ||
    url.includes('/node_modules/undici/') ||
    url.startsWith('node:internal/deps/undici/')
  );
}
