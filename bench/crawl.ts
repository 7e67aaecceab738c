// Benchmark: a crawl under churn through the operator, beside the baseline a Crawlee user
// would pick instead (Crawlee's own `new ProxyConfiguration({ proxyUrls })` over the same
// proxies), same site, same seeded faults, in the same run.
//
//   npm run bench:crawl                                   # 10,000 pages, 100 proxies; then 20 proxies rate-limited
//   npm run bench:crawl -- --pages=2000 --proxies=40 --rate-pages=1000
//   flags: --pages=P --proxies=N --bans=0.1 --deaths=0.05 --seed=S
//          --repeat=K (K rounds per scenario, alternating which side goes first; pages/s by median)
//          --ok-report-interval-ms=MS (the integration's batched ok reports: one per lease per MS)
//          --side-by-side (both sides of a round crawl at once, each in its own process, pinned to
//                          one core; pages/s compared over the window both crawled, see shared-window.ts)
//          --world-apart (side by side: each side's fleet and site in a process of their own, on
//                         the other core, as real proxies and sites are other machines; crawl-world.ts)
//          --calibrate (side by side: an A/A run, both sides Crawlee's list, one side's fleet still
//                       probed by the operator; how far it falls from 1.0x is the harness's error)
//          --api-calls-every-ms=MS (with --calibrate: the first side also calls the discovery API
//                       every MS ms while it crawls, a GET of one proxy: what calls alone cost a crawler)
//          --profile (CPU-profile each crawl: the integration's share of the crawling process's CPU)
//          --profile-dir=DIR (with --profile: also write each crawl's .cpuprofile into DIR)
//          --trace (per second of each crawl: 200s/429s/sources that got a 200; its first second in ms;
//                   where a rate-limited site's budget went, see site-budget.ts)
//          --churn-rate-limit=R (scenario 1: requests/s per source before 429s) (--pages=0 skips it)
//          --rate-pages=P --rate-proxies=N --rate-limit=R (scenario 2, which outruns R) (0 pages skips it)
//          --matrix [--quick] (issue 45's matrix, with the gateway's side: see crawl-matrix.ts;
//                   --pages/--proxies per cell, default 1000/20, --quick 200; --cell=TEXT: only the
//                   cells whose name has TEXT, e.g. --cell=refused; --sides=operator,gateway: only
//                   those beside the list; --repeat=K: K rounds a cell, odd ones in reverse order;
//                   --concurrency=N: N fixed tasks, not the autoscaled pool: a CPU diagnostic)
//   env:   BENCH_HEAP_SNAPSHOT_DIR=DIR (a heap snapshot of each crawling process once its crawl is done)
//
// Real parts only: a real etcd + kube-apiserver, the real operator (build/cmd/operator.js) as a
// child process (its CPU seconds and peak RSS come from /proc), real forward proxies on their
// own loopback addresses, a real Crawlee HttpCrawler at Crawlee's defaults (1,000 sessions,
// maxRequestRetries 3). External Proxies probe a loopback target every 30 s (the CRD default).
import { loadAverages } from './bench-env.js';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { DiscoveryClient } from '../client/src/index.js';
import { applyCRDs } from '../cmd/demo/environment.js';
import { startLocalTarget, type LocalTarget } from '../cmd/demo/local-target.js';
import { GROUP, PLURAL, VERSION } from '../crds/proxy-types.js';
import { ControlPlane, freePort } from '../framework/control-plane/index.js';
import { crawl, planFaults, type CrawlFigures, type FaultPlan } from './crawl-scenario.js';
import { warmUp } from './crawl-warm-up.js';
import { canPin, SideProcess } from './crawl-side-process.js';
import { startLocalWorld } from './crawl-world.js';
import { BenchOperator } from './operator-process.js';
import { createProxies } from './crawl-registry.js';
import { runMatrix, type Side } from './crawl-matrix.js';
import { table, type Row, type Rounds } from './crawl-report.js';
import { settle } from './settle.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
// The API is closed by default: the operator gets a token and every client here sends it.
const TOKEN = 'bench-crawl-token-0123456789';

function flag(name: string, fallback: number): number {
  const raw = process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new Error(`--${name} must be a number >= 0, got ${raw}`);
  return value;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How every round runs and what it records: the flags that are not the scenario's figures. */
interface HowToRun {
  /** --trace: each crawl's per-second 200s, 429s and sources too. */
  trace: boolean;
  /** --profile: each crawl CPU-profiled (--profile-dir: written there too). */
  profile: { on: boolean; dir?: string };
  /** --side-by-side: both sides of a round crawl at once, sharing one core. */
  sideBySide: boolean;
  /** --ok-report-interval-ms: the integration's okReportIntervalMs (default: its own). */
  okReportIntervalMs: number | undefined;
  /** --world-apart (side by side): each side's fleet and site in a process of their own, on core 1. */
  worldApart: boolean;
  /**
   * --calibrate (side by side): an A/A run. Both sides crawl through Crawlee's list; the first
   * side's fleet is still registered and probed by the operator, as the operator's side's is.
   * How far its rounds fall from 1.0 is how far the harness can be trusted.
   */
  calibrate: boolean;
  /** --api-calls-every-ms (with --calibrate): the first side also calls the discovery API this often. */
  apiCallsEveryMs: number | undefined;
}

/** One scenario: the operator's crawl, then the baseline's, each on a fresh fleet and site. */
async function scenario(
  label: string,
  kc: KubeConfig,
  op: BenchOperator,
  target: LocalTarget,
  pages: number,
  proxies: number,
  faults: FaultPlan,
  rateLimitPerSecond: number | undefined,
  repeat: number,
  { trace, profile, sideBySide, okReportIntervalMs, worldApart, calibrate, apiCallsEveryMs }: HowToRun,
): Promise<Rounds> {
  const progress = (m: string) => console.log(`  [${label}] ${m}`);
  // Both sides start on a quiet machine (see settle.ts); how long that took is shown.
  const settled = async () => {
    const s = await settle();
    progress(
      `machine ${s.quiet ? 'quiet' : 'still busy'} after ${s.waitedMs} ms (cores ${(s.busyShare * 100).toFixed(0)} % busy)`,
    );
  };
  /** Registers a fleet's proxies as this round's Proxies; resolves once all are healthy in discovery. */
  const register = async (namespace: string, endpoints: { host: string; port: number }[]) => {
    await createProxies(kc, namespace, endpoints, target.probeURL);
    const admin = new DiscoveryClient({ baseUrl: `http://127.0.0.1:${op.discoveryPort}`, token: TOKEN });
    progress(`waiting until ${proxies} proxies are healthy in the discovery API ...`);
    for (;;) {
      const healthy = await admin.listProxies({ selector: { run: namespace }, healthy: true });
      if (healthy.length === proxies) break;
      await sleep(1000);
    }
    return admin;
  };
  const refusals = async () =>
    (await op.metric('proxy_operator_lease_requests_total', 'outcome="all_busy"')) +
    (await op.metric('proxy_operator_lease_requests_total', 'outcome="no_match"')) +
    (await op.metric('proxy_operator_lease_requests_total', 'outcome="all_cooling_down"'));
  /** The operator's side of a round: its crawl, and what the operator counted meanwhile. */
  const throughOperator = async (
    namespace: string,
    admin: DiscoveryClient,
    crawlIt: () => Promise<CrawlFigures>,
  ): Promise<Row> => {
    const conflicts0 = await refusals();
    const cpu0 = op.cpuSeconds();
    const figures = await crawlIt();
    const row: Row = {
      figures,
      conflicts: (await refusals()) - conflicts0,
      leasesLeft: await op.metric('proxy_operator_leases_active'),
      sessionsLeft: await op.metric('proxy_operator_sessions_active'),
      cpuSeconds: op.cpuSeconds() - cpu0,
      peakRssMiB: op.memory()?.hwmMiB ?? NaN,
    };
    // This round's fleet dies with its processes: its Proxies go too, so no later round
    // (either side) shares the machine with an operator probing and writing a dead fleet.
    await kc.makeApiClient(CustomObjectsApi).deleteCollectionNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace,
      plural: PLURAL,
    });
    while ((await admin.listProxies({ selector: { run: namespace } })).length > 0) await sleep(500);
    return row;
  };
  const operatorSide = (namespace: string) => ({
    discoveryURL: `http://127.0.0.1:${op.discoveryPort}`,
    token: TOKEN,
    proxyID: (i: number) => `${namespace}/proxy-${i}`,
    selector: { run: namespace },
  });
  const run = async (withOperator: boolean, first: string, round: number): Promise<Row> => {
    const namespace = `crawl-${label}-${round}`;
    const world = await startLocalWorld({
      proxies,
      first,
      pages,
      ...(rateLimitPerSecond === undefined ? {} : { rateLimitPerSecond }),
      retryAfterSeconds: 1,
    });
    // What both sides crawl, and how it is watched.
    const same = {
      world,
      faults,
      progress,
      trace,
      profile: profile.on,
      profileDir: profile.dir,
      ...(okReportIntervalMs !== undefined ? { okReportIntervalMs } : {}),
    };
    try {
      if (!withOperator) {
        await settled();
        progress(`baseline: Crawlee's ProxyConfiguration({ proxyUrls }) over the same ${proxies} proxies`);
        return { figures: await crawl(same) };
      }
      const admin = await register(
        namespace,
        world.hosts.map((host, i) => ({ host, port: world.ports[i]! })),
      );
      await settled();
      return await throughOperator(namespace, admin, () => {
        progress('crawling through the operator (ProxyOperatorConfiguration at Crawlee defaults)');
        return crawl({ ...same, operator: operatorSide(namespace) });
      });
    } finally {
      await world.close();
    }
  };
  /**
   * --side-by-side: both sides crawl at once, each in its own process, both pinned to core 0
   * (the operator, the API server and this process keep core 1), so the machine's drift falls
   * on both alike; compared over the window both were crawling (see shared-window.ts).
   */
  const together = async (round: number): Promise<[Row, Row]> => {
    const namespace = `crawl-${label}-${round}`;
    const base = label === 'churn' ? 8 : 40;
    const config = {
      pages,
      proxies,
      faults,
      rateLimitPerSecond,
      trace,
      profile: profile.on,
      ...(profile.dir !== undefined ? { profileDir: profile.dir } : {}),
      ...(okReportIntervalMs !== undefined ? { okReportIntervalMs } : {}),
      // Core 1 is the operator's and the API server's: a real fleet and site are other machines.
      ...(worldApart ? { worldCore: 1 } : {}),
    };
    const sideProgress = (side: string) => (m: string) => progress(`${side}: ${m}`);
    const operator = new SideProcess(
      {
        ...config,
        first: `127.0.${base + 2 * round}.1`,
        ...(calibrate
          ? apiCallsEveryMs === undefined
            ? {}
            : {
                apiCalls: {
                  discoveryURL: `http://127.0.0.1:${op.discoveryPort}`,
                  token: TOKEN,
                  proxyID: `${namespace}/proxy-0`,
                  everyMs: apiCallsEveryMs,
                },
              }
          : { operator: { discoveryURL: `http://127.0.0.1:${op.discoveryPort}`, token: TOKEN, namespace } }),
      },
      { core: 0, progress: sideProgress('operator') },
    );
    const list = new SideProcess(
      { ...config, first: `127.0.${base + 2 * round + 1}.1` },
      { core: 0, progress: sideProgress('baseline') },
    );
    try {
      const [endpoints] = await Promise.all([operator.ready, list.ready]);
      const admin = await register(namespace, endpoints);
      await settled();
      progress(`both sides crawl at once${canPin ? ', pinned to core 0' : ' (taskset missing: not pinned)'}`);
      const listRow = list.figures.then((figures): Row => ({ figures }));
      listRow.catch(() => undefined); // awaited below, once the operator's side is done
      const operatorRow = await throughOperator(namespace, admin, () => {
        operator.go();
        list.go();
        return operator.figures;
      });
      return [operatorRow, await listRow];
    } finally {
      operator.kill();
      list.kill();
    }
  };
  // Rounds alternate which side goes first, so a machine that gets busier or quieter during
  // the run does not favour one side; pages/s is compared by the median of the rounds.
  const operators: Row[] = [];
  const lists: Row[] = [];
  for (let round = 0; round < repeat; round++) {
    if (sideBySide) {
      const [operatorRow, listRow] = await together(round);
      operators.push(operatorRow);
      lists.push(listRow);
      continue;
    }
    const base = label === 'churn' ? 8 : 40;
    const operatorRun = () => run(true, `127.0.${base + 2 * round}.1`, round);
    const listRun = () => run(false, `127.0.${base + 2 * round + 1}.1`, round);
    if (round % 2 === 0) {
      operators.push(await operatorRun());
      lists.push(await listRun());
    } else {
      lists.push(await listRun());
      operators.push(await operatorRun());
    }
  }
  return { operator: operators[0], list: lists[0], operators, lists, sideBySide };
}

/** What a table's title says about how its rounds ran, beyond the scenario. */
function described({ sideBySide, worldApart, calibrate }: HowToRun): string {
  const how = [
    sideBySide ? 'side by side' : '',
    worldApart ? 'fleet and site apart' : '',
    calibrate ? "A/A calibration: both sides Crawlee's list" : '',
  ].filter((s) => s !== '');
  return how.length === 0 ? '' : `, ${how.join(', ')}`;
}

async function main(): Promise<void> {
  const pages = flag('pages', 10_000);
  const proxies = flag('proxies', 100);
  const seed = flag('seed', 1);
  const faults = planFaults(
    proxies,
    Math.round(proxies * flag('bans', 0.1)),
    Math.round(proxies * flag('deaths', 0.05)),
    seed,
  );
  const ratePages = flag('rate-pages', 3000);
  const rateProxies = flag('rate-proxies', 20);
  const churnRateLimit = flag('churn-rate-limit', 50);
  const rateLimit = flag('rate-limit', 3);
  const repeat = Math.max(1, Math.round(flag('repeat', 1)));
  const trace = process.argv.includes('--trace');
  const profileDir = process.argv.find((a) => a.startsWith('--profile-dir='))?.slice('--profile-dir='.length);
  const profile = { on: process.argv.includes('--profile') || profileDir !== undefined, dir: profileDir };
  const sideBySide = process.argv.includes('--side-by-side');
  const okReportIntervalMs = process.argv.some((a) => a.startsWith('--ok-report-interval-ms='))
    ? flag('ok-report-interval-ms', 0)
    : undefined;
  const worldApart = process.argv.includes('--world-apart');
  const matrix = process.argv.includes('--matrix');
  const quick = process.argv.includes('--quick');
  if (matrix && (sideBySide || worldApart)) throw new Error('--matrix runs its sides one after the other');
  const calibrate = process.argv.includes('--calibrate');
  if ((worldApart || calibrate) && !sideBySide)
    throw new Error('--world-apart and --calibrate need --side-by-side');
  const apiCallsEveryMs = process.argv.some((a) => a.startsWith('--api-calls-every-ms='))
    ? flag('api-calls-every-ms', 0)
    : undefined;
  if (apiCallsEveryMs !== undefined && (!calibrate || !(apiCallsEveryMs > 0)))
    throw new Error('--api-calls-every-ms needs --calibrate and a number of ms above 0');
  const howToRun: HowToRun = {
    trace,
    profile,
    sideBySide,
    okReportIntervalMs,
    worldApart,
    calibrate,
    apiCallsEveryMs,
  };
  console.log(`crawl benchmark: node ${process.version}; load average before: ${loadAverages()}`);
  if (calibrate) {
    console.log(
      "  --calibrate: an A/A run; the 'operator' column is Crawlee's list too, over a fleet the operator probes",
    );
  }
  if (worldApart)
    console.log("  --world-apart: each side's fleet and site run in a process of their own, on core 1");
  const cleanups: Array<() => Promise<unknown>> = [];
  try {
    const cp = await ControlPlane.start({ progress: (m) => console.log(`  ${m}`) });
    cleanups.push(() => cp.stop());
    const kc = cp.kubeConfig();
    await applyCRDs(kc, join(root, 'dist', 'crds.yaml'));
    await sleep(2000);
    const target = await startLocalTarget();
    cleanups.push(() => target.close());
    const gatewayPort = await freePort();
    const op = new BenchOperator({
      kubeconfig: cp.kubeconfigPath,
      metricsPort: await freePort(),
      discoveryPort: await freePort(),
      // The gateway listens on loopback only (its default is every interface).
      flags: ['--log-level=warn', `--gateway-address=127.0.0.1:${gatewayPort}`],
      env: { DISCOVERY_TOKEN: TOKEN },
    });
    cleanups.push(() => op.stop());
    await op.ready();

    console.log(
      '  warming up Crawlee and the integration (a small crawl through each: see crawl-warm-up.ts)',
    );
    await warmUp();

    if (matrix) {
      const matrixPages = flag('pages', quick ? 200 : 1000);
      const matrixProxies = flag('proxies', 20);
      console.log(
        `matrix: ${matrixPages} pages, ${matrixProxies} proxies per cell and side${quick ? ' (--quick)' : ''}`,
      );
      const tables = await runMatrix(
        { kc, op, target, token: TOKEN, gatewayPort, progress: (m) => console.log(`  ${m}`) },
        matrixPages,
        matrixProxies,
        seed,
        {
          only: process.argv.find((a) => a.startsWith('--cell='))?.slice('--cell='.length),
          sides: process.argv
            .find((a) => a.startsWith('--sides='))
            ?.slice('--sides='.length)
            .split(',') as Side[] | undefined,
          repeat,
          ...(profile.dir === undefined ? {} : { profileDir: profile.dir }),
          ...(process.argv.some((a) => a.startsWith('--concurrency='))
            ? { concurrency: flag('concurrency', 10) }
            : {}),
        },
      );
      console.log(`\n${tables}\nload average after: ${loadAverages()}`);
      return;
    }
    const out: string[] = [];
    if (pages > 0) {
      console.log(
        `scenario 1: ${pages} pages, ${proxies} proxies, ${faults.banned.length} banned, ${faults.dying.length} die at 30 %, site rate limit ${churnRateLimit}/s per source`,
      );
      const churn = await scenario(
        'churn',
        kc,
        op,
        target,
        pages,
        proxies,
        faults,
        churnRateLimit,
        repeat,
        howToRun,
      );
      out.push(table(`scenario 1${described(howToRun)} (load average now ${loadAverages()})`, churn));
    }
    if (ratePages > 0) {
      console.log(
        `scenario 2: ${ratePages} pages, ${rateProxies} proxies, site rate limit ${rateLimit}/s per source, no other faults`,
      );
      const none: FaultPlan = { banned: [], dying: [], dieAtFraction: 1 };
      const rated = await scenario(
        'rate',
        kc,
        op,
        target,
        ratePages,
        rateProxies,
        none,
        rateLimit,
        repeat,
        howToRun,
      );
      out.push(table(`scenario 2${described(howToRun)} (load average now ${loadAverages()})`, rated));
    }
    console.log(`\n${out.join('\n\n')}\nload average after: ${loadAverages()}`);
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
