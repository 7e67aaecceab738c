// bench:crawl's matrix (`--matrix`, issue 45 item 3; the gateway's side, issue 46 item 6): no
// single scenario to tune to. Each cell is one site behaviour or one kind of fault, crawled by
// each side in turn on a fresh fleet and site with the same seeded faults: the integration
// (ProxyOperatorConfiguration, both hooks; and in the death cells the post-navigation hook
// alone), Crawlee's own list at Crawlee's defaults, and Crawlee's plain ProxyConfiguration
// whose one URL names the operator's gateway (a gateway session per Crawlee session).
import { readFileSync } from 'node:fs';
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { DiscoveryClient } from '../client/src/index.js';
import type { LocalTarget } from '../cmd/demo/local-target.js';
import { GROUP, PLURAL, VERSION } from '../crds/proxy-types.js';
import { crawl, planFaults, type CrawlFigures, type FaultPlan } from './crawl-scenario.js';
import { createProxies } from './crawl-registry.js';
import type { Limiter } from './crawl-site.js';
import { startLocalWorld, type WorldConfig } from './crawl-world.js';
import type { BenchOperator } from './operator-process.js';

export type Side = 'operator' | 'operator, post-navigation hook only' | 'list' | 'gateway';

export interface Cell {
  name: string;
  /** The site: its limit per source (none: no limit), how it counts, whether 429s say Retry-After. */
  site: Pick<WorldConfig, 'rateLimitPerSecond' | 'limiter' | 'retryAfterHeader'>;
  faults: FaultPlan;
  deathBy?: 'refuse' | 'black-hole';
  sides: Side[];
}

/** Requests per second per source the list rarely exceeds (loose) and far exceeds (tight). */
const LOOSE = 30;
const TIGHT = 3;
const EVERY_SIDE: Side[] = ['operator', 'list', 'gateway'];

/** The matrix over `proxies` proxies: rate limits × shapes × Retry-After, bans, deaths. */
export function cells(proxies: number, seed: number): Cell[] {
  const none: FaultPlan = { banned: [], dying: [], dieAtFraction: 1 };
  const tenth = Math.max(1, Math.round(proxies / 10));
  const rate: Cell[] = (['bucket', 'sliding'] as Limiter[]).flatMap((limiter) =>
    [LOOSE, TIGHT].flatMap((limit) =>
      [true, false].map((retryAfterHeader): Cell => ({
        name: `${limiter === 'bucket' ? 'token bucket' : 'sliding window'} ${limit}/s, ${retryAfterHeader ? 'Retry-After' : 'no Retry-After'}`,
        site: { rateLimitPerSecond: limit, limiter, retryAfterHeader },
        faults: none,
        sides: EVERY_SIDE,
      })),
    ),
  );
  const banned = planFaults(proxies, tenth, 0, seed);
  const dying = planFaults(proxies, 0, tenth, seed);
  return [
    ...rate,
    { name: `${tenth} banned from the start`, site: {}, faults: banned, sides: EVERY_SIDE },
    {
      name: `${tenth} banned at 30 %`,
      site: {},
      faults: { ...banned, banAtFraction: 0.3 },
      sides: EVERY_SIDE,
    },
    ...(['refuse', 'black-hole'] as const).map((deathBy): Cell => ({
      name: `${tenth} die at 30 % (${deathBy === 'refuse' ? 'refused' : 'black hole'})`,
      site: {},
      faults: dying,
      deathBy,
      sides: ['operator', 'operator, post-navigation hook only', 'list', 'gateway'],
    })),
  ];
}

export interface MatrixWorld {
  kc: KubeConfig;
  op: BenchOperator;
  target: LocalTarget;
  token: string;
  gatewayPort: number;
  progress(message: string): void;
}

interface Result {
  side: Side;
  figures: CrawlFigures;
  leftover?: string;
  /** Beside the crawl: the operator's CPU ms per page, and the machine's busy cores less this process's. */
  beside?: { operatorMsPerPage: number; otherCores: number };
}

/** Busy and total jiffies of the whole machine (/proc/stat's first line). */
function machineJiffies(): { busy: number; total: number } {
  const [, ...fields] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/);
  const n = fields.map(Number);
  const idle = n[3]! + n[4]!;
  const total = n.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

/** Runs `crawl`, and measures what ran beside it: the operator's CPU, the machine's other busy cores. */
async function measuredBeside(
  op: BenchOperator,
  run: () => Promise<CrawlFigures>,
): Promise<{ figures: CrawlFigures; beside: NonNullable<Result['beside']> }> {
  const opBefore = op.cpuSeconds();
  const machineBefore = machineJiffies();
  const ownBefore = process.cpuUsage();
  const wallBefore = Date.now();
  const figures = await run();
  const wallSeconds = (Date.now() - wallBefore) / 1000;
  const own = process.cpuUsage(ownBefore);
  const machine = machineJiffies();
  const busySeconds = (machine.busy - machineBefore.busy) / 100;
  const pages = Math.max(1, figures.fetched);
  return {
    figures,
    beside: {
      operatorMsPerPage: ((op.cpuSeconds() - opBefore) * 1000) / pages,
      otherCores: (busySeconds - (own.user + own.system) / 1e6) / wallSeconds,
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Which cells and sides, and how many rounds of each cell. */
export interface MatrixOptions {
  /** Only the cells whose name contains it. */
  only?: string;
  /** Only these sides (the list always: the ratios are to it). */
  sides?: Side[];
  /** Rounds per cell; odd rounds run the sides in reverse order (what runs first pays for it). */
  repeat?: number;
  /** Write each crawl's CPU profile (.cpuprofile) into this directory. */
  profileDir?: string;
  /**
   * Fixed tasks instead of Crawlee's autoscaled pool (`--concurrency=N`): the pool scales by
   * the whole machine's load, so on a shared machine the sides run at different concurrency,
   * and CPU per page differs with it. A diagnostic: the matrix is judged at Crawlee's defaults.
   */
  concurrency?: number;
}

/** Runs every cell, each side in turn; returns the printed tables. */
export async function runMatrix(
  world: MatrixWorld,
  pages: number,
  proxies: number,
  seed: number,
  { only, sides, repeat = 1, profileDir, concurrency }: MatrixOptions = {},
): Promise<string> {
  const out: string[] = [];
  let run = 0;
  for (const cell of cells(proxies, seed).filter((c) => only === undefined || c.name.includes(only))) {
    const chosen = cell.sides.filter((s) => sides === undefined || s === 'list' || sides.includes(s));
    const rounds: Result[][] = [];
    for (let round = 0; round < repeat; round++) {
      const results: Result[] = [];
      for (const side of round % 2 === 0 ? chosen : [...chosen].reverse()) {
        world.progress(`[${cell.name}]${repeat > 1 ? ` round ${round + 1}` : ''} ${side}`);
        results.push(await runSide(world, cell, side, pages, proxies, run++, { profileDir, concurrency }));
      }
      rounds.push(chosen.map((side) => results.find((r) => r.side === side)!));
    }
    const table = [
      cellTable(cell, rounds[rounds.length - 1]!),
      ...(repeat > 1 ? [roundRatios(rounds)] : []),
    ].join('\n');
    world.progress(`\n${table}`);
    out.push(table);
  }
  return out.join('\n\n');
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Each side's pages/s over the list's, round by round, and their median. */
function roundRatios(rounds: Result[][]): string {
  const sides = rounds[0]!.map((r) => r.side).filter((s) => s !== 'list');
  const ratios = (side: Side, rate: (f: CrawlFigures) => number) =>
    rounds.map((results) => {
      const list = results.find((r) => r.side === 'list')!.figures;
      return rate(results.find((r) => r.side === side)!.figures) / rate(list);
    });
  const each = (side: Side, of: (f: CrawlFigures) => string) =>
    rounds.map((results) => of(results.find((r) => r.side === side)!.figures)).join(', ');
  const cpu = rounds[0]!
    .map(
      ({ side }) =>
        `${side} ${each(side, (f) => f.cpuMsPerPage.toFixed(2))} (tasks ${each(side, (f) => String(f.concurrency.medianRunning))})`,
    )
    .join('; ');
  return [`  CPU ms per page, each round: ${cpu}`]
    .concat(
      sides.flatMap((side) =>
        (
          [
            ['pages/s', (f: CrawlFigures) => f.pagesPerSecond],
            ['after the first 10 %', (f: CrawlFigures) => afterStart(f.fetchedAt)],
          ] as const
        ).map(([what, rate]) => {
          const xs = ratios(side, rate);
          return `  ${side}: ${what} / the list's, each round ${xs.map((x) => x.toFixed(2)).join(', ')} (median ${median(xs).toFixed(2)})`;
        }),
      ),
    )
    .join('\n');
}

/** Pages/s from the tenth page of a hundred to the last: the crawl without its start. */
export function afterStart(fetchedAt: number[]): number {
  const from = Math.floor(fetchedAt.length / 10);
  const span = (fetchedAt[fetchedAt.length - 1]! - fetchedAt[from]!) / 1000;
  return span > 0 ? (fetchedAt.length - 1 - from) / span : NaN;
}

async function runSide(
  { kc, op, target, token, gatewayPort }: MatrixWorld,
  cell: Cell,
  side: Side,
  pages: number,
  proxies: number,
  run: number,
  { profileDir, concurrency }: Pick<MatrixOptions, 'profileDir' | 'concurrency'>,
): Promise<Result> {
  const profiling = {
    ...(profileDir === undefined ? {} : { profile: true, profileDir }),
    ...(concurrency === undefined ? {} : { concurrency }),
  };
  const fleet = await startLocalWorld({
    proxies,
    first: `127.${100 + (run >> 8)}.${run & 255}.1`,
    pages,
    retryAfterSeconds: 1,
    ...cell.site,
    ...(cell.deathBy ? { deathBy: cell.deathBy } : {}),
  });
  const namespace = `matrix${run}`;
  const discoveryURL = `http://127.0.0.1:${op.discoveryPort}`;
  try {
    // Every side's fleet is registered and waited for, the list's too (it crawls without the
    // operator): both sides then start their crawl from the same state. The wait for the
    // first probes is an idle spell in which V8 shrinks its new space (2 MiB against the
    // 128 MiB a crawl grows it to); a side that started small was collected twice as often
    // per page and spent 0.3-1 ms more CPU a page until it grew back (docs/benchmarks.md).
    await createProxies(
      kc,
      namespace,
      fleet.hosts.map((host, i) => ({ host, port: fleet.ports[i]! })),
      target.probeURL,
    );
    const admin = new DiscoveryClient({ baseUrl: discoveryURL, token });
    while ((await admin.listProxies({ selector: { run: namespace }, healthy: true })).length < proxies)
      await sleep(500);
    const unregister = async () => {
      await kc.makeApiClient(CustomObjectsApi).deleteCollectionNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: PLURAL,
      });
      while ((await admin.listProxies({ selector: { run: namespace } })).length > 0) await sleep(250);
    };
    if (side === 'list') {
      const measured = await measuredBeside(op, () =>
        crawl({ world: fleet, faults: cell.faults, ...profiling }),
      );
      await unregister();
      return { side, ...measured };
    }
    const { figures, beside } = await measuredBeside(op, () =>
      crawl({
        world: fleet,
        faults: cell.faults,
        ...profiling,
        ...(side === 'gateway'
          ? {
              gateway: {
                url: (session: string) =>
                  `http://session-${session}-run-${namespace}:${token}@127.0.0.1:${gatewayPort}`,
              },
            }
          : {
              operator: {
                discoveryURL,
                token,
                proxyID: (i: number) => `${namespace}/proxy-${i}`,
                selector: { run: namespace },
              },
              hooks: side === 'operator' ? 'both' : 'post-navigation',
            }),
      }),
    );
    // The gateway releases idle leases on its own clock: what is left is read after the crawl.
    const leftover = `${await op.metric('proxy_operator_leases_active')} / ${await op.metric('proxy_operator_sessions_active')}`;
    await unregister();
    return { side, figures, leftover, beside };
  } finally {
    await fleet.close();
  }
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/** One cell: a row per figure, a column per side, and each side's pages/s against the list's. */
export function cellTable(cell: Cell, results: Result[]): string {
  const list = results.find((r) => r.side === 'list')?.figures;
  const rows: [string, (r: Result) => string][] = [
    ['pages fetched', ({ figures: f }) => `${f.fetched}/${f.pages}`],
    ['failed requests', ({ figures: f }) => String(f.failedRequests)],
    ['requests sent (retries included)', ({ figures: f }) => String(f.attempts)],
    ['pages/s', ({ figures: f }) => f.pagesPerSecond.toFixed(1)],
    ['pages/s after the first 10 %', ({ figures: f }) => afterStart(f.fetchedAt).toFixed(1)],
    ['first page after, s', ({ figures: f }) => ((f.fetchedAt[0] ?? NaN) / 1000).toFixed(2)],
    ["the crawling process's CPU ms per page", ({ figures: f }) => f.cpuMsPerPage.toFixed(2)],
    [
      'sockets per page: to proxies / site / API / other; accepted',
      ({ figures: { socketsPerPage: s } }) =>
        `${[s.proxies, s.site, s.discovery, s.other].map((n) => n.toFixed(3)).join(' / ')}; ${s.accepted.toFixed(3)}`,
    ],
    [
      "beside the crawl: the operator's CPU ms per page; the machine's other busy cores",
      ({ beside: b }) =>
        b === undefined ? 'n/a' : `${b.operatorMsPerPage.toFixed(2)}; ${b.otherCores.toFixed(2)}`,
    ],
    ['calls to the discovery API per page', ({ figures: f }) => f.socketsPerPage.apiCalls.toFixed(3)],
    [
      "the integration's leases / renewals / releases / ok reports",
      ({ figures: { integration: i } }) =>
        i === undefined ? 'n/a' : `${i.leased} / ${i.renewed} / ${i.released} / ${i.okReports}`,
    ],
    [
      "the integration's requests that waited for the site's pace (ms waited in all)",
      ({ figures: { integration: i } }) =>
        i === undefined ? 'n/a' : `${i.paced ?? 0} (${Math.round(i.pacedMs ?? 0)})`,
    ],
    [
      'collector ms per page (collections per page); new space at start, MiB',
      ({ figures: { perPage: p } }) =>
        `${p.gcMs.toFixed(3)} (${p.gcs.toFixed(3)}); ${p.newSpaceAtStartMiB.toFixed(1)}`,
    ],
    ["Crawlee's running tasks, median", ({ figures: f }) => String(f.concurrency.medianRunning)],
    [
      "pages/s / the list's",
      ({ figures: f }) => (list === undefined ? '-' : (f.pagesPerSecond / list.pagesPerSecond).toFixed(2)),
    ],
    ['429s / 403s from the site', ({ figures: f }) => `${f.rateLimited} / ${f.refused}`],
    ['requests via a banned proxy > 2 s after its first 403', ({ figures: f }) => String(f.bannedLate)],
    [
      'attempts via a dead proxy after its death',
      ({ side, figures: f }) =>
        side === 'gateway' ? 'n/a (behind the gateway)' : String(sum(f.attemptsAfterDeath)),
    ],
    ['attempts that failed at their proxy', ({ figures: f }) => String(f.proxyErrors)],
    ['leases / sessions left', (r) => r.leftover ?? 'n/a'],
  ];
  const head = `  ${'figure'.padEnd(56)} | ${results.map((r) => r.side).join(' | ')}`;
  return [
    `cell: ${cell.name}`,
    head,
    ...rows.map(([name, of]) => `  ${name.padEnd(56)} | ${results.map(of).join(' | ')}`),
  ].join('\n');
}
