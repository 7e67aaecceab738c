// Benchmark: two teams on one fleet (issue 48 item 6). Tenant A crawls a site through the
// Crawlee integration (bench:crawl's crawl at Crawlee's defaults: one proxy of 10 banned by the
// site, one dying at 30 %, 50 requests/s per source) alone, and while tenant B, with a valid
// token and in a process of its own, attacks as fast as its limits allow (leases to its quota,
// junk bans, sessions past its quota and past the book's cap, proxy reads, bad-token spam).
// Rounds alternate which run goes first; A's pages/s beside B over alone is judged by the
// median of the rounds' ratios. On both stores.
//
//   npm run bench:tenants                                  # 6,000 pages, 3 rounds, memory then redis
//   npm run bench:tenants -- --pages=P --rounds=R --stores=memory
//   npm run bench:tenants -- --apart    # A (crawler, its fleet and site) on core 0; operator, B, Redis on core 1
//   npm run bench:tenants -- --concurrency=10   # A's crawler at 10 fixed tasks: Crawlee's autoscaled
//                                        # pool reads the whole machine's CPU, which B and the operator share here
//   npm run bench:tenants -- --stats    # each run's integration counters too (where A's time went)
//
// Real parts only: a real etcd + kube-apiserver, the built operator as a child process with
// the Deployment's runtime environment (its RSS from /proc, against the chart's memory limit),
// real forward proxies on their own loopback addresses, a real Crawlee HttpCrawler, a real
// redis-server. The round is bench/tenants-round.ts, which test/discovery/two-tenants.int.test.ts
// runs with assertions.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { loadAverages } from './bench-env.js';
import { fileURLToPath } from 'node:url';
import { applyCRDs } from '../cmd/demo/environment.js';
import { OPERATOR_MEMORY, OPERATOR_RUNTIME_ENV } from '../charts/operator-chart.js';
import { ControlPlane, freePort } from '../framework/control-plane/index.js';
import { canPin, TASKSET } from './crawl-side-process.js';
import { warmUp } from './crawl-warm-up.js';
import { BenchOperator } from './operator-process.js';
import { startRedis } from './redis-process.js';
import { tenantRound, type RoundFigures } from './tenants-round.js';
import { startTenantsWorld } from './tenants-world.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const pages = Number(arg('pages') ?? 6000);
const rounds = Number(arg('rounds') ?? 3);
const stores = (arg('stores') ?? 'memory,redis').split(',');
// --apart: as in production, A's crawler does not share its CPU with the operator or with B.
const apart = process.argv.includes('--apart');
const concurrency = arg('concurrency') === undefined ? undefined : Number(arg('concurrency'));
if (concurrency !== undefined && !(Number.isInteger(concurrency) && concurrency >= 1))
  throw new Error(`--concurrency must be an integer >= 1, got ${arg('concurrency')}`);
if (apart && !canPin) throw new Error(`--apart needs ${TASKSET}`);
/** Pins a process (every thread) to one core. */
const pin = (pid: number | undefined, core: number) =>
  pid !== undefined && execFileSync(TASKSET, ['-a', '-cp', String(core), String(pid)], { stdio: 'ignore' });
/** This process's redis-server children (started after this process was pinned: they inherited core 0). */
const redisChildren = () =>
  execFileSync('pgrep', ['-P', String(process.pid), 'redis-server'], { encoding: 'utf8' })
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map(Number);
if (!Number.isInteger(pages) || pages < 100)
  throw new Error(`--pages must be an integer >= 100, got ${arg('pages')}`);
if (!Number.isInteger(rounds) || rounds < 1)
  throw new Error(`--rounds must be an integer >= 1, got ${arg('rounds')}`);
for (const s of stores)
  if (s !== 'memory' && s !== 'redis') throw new Error(`--stores: memory or redis, got ${s}`);
/** The book's cap at its lowest and each token's session quota: B's churn overflows the book. */
const SESSION_FLAGS = ['--max-sessions=10000', '--discovery-session-quota=1000'];
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Pages/s from the tenth page of a hundred to the last: the crawl without its start. */
function afterStart(fetchedAt: number[]): number {
  const from = Math.floor(fetchedAt.length / 10);
  const span = (fetchedAt[fetchedAt.length - 1]! - fetchedAt[from]!) / 1000;
  return span > 0 ? (fetchedAt.length - 1 - from) / span : NaN;
}

function row(r: RoundFigures): string {
  const c = r.a.crawl;
  return [
    r.label.padEnd(10),
    `${c.fetched}/${c.pages}`.padStart(11),
    String(c.failedRequests).padStart(6),
    String(c.refused).padStart(5),
    String(c.bannedLate).padStart(12),
    JSON.stringify(c.attemptsAfterReport).padStart(10),
    String(r.a.stickyRebound).padStart(8),
    c.seconds.toFixed(1).padStart(7),
    c.pagesPerSecond.toFixed(1).padStart(8),
    String(c.concurrency.medianRunning).padStart(6),
    ((c.fetchedAt[0] ?? NaN) / 1000).toFixed(2).padStart(6),
    afterStart(c.fetchedAt).toFixed(1).padStart(9),
  ].join(' ');
}

async function main() {
  console.log(
    `bench:tenants: ${pages} pages, 10 proxies, ${rounds} rounds, stores ${stores.join(', ')}${apart ? ', apart (A on core 0; operator, B, Redis on core 1)' : ''}${concurrency === undefined ? '' : `, A at ${concurrency} fixed tasks`}; load average ${loadAverages()}`,
  );
  const cp = await ControlPlane.start({ progress: (m) => console.log(`  ${m}`) });
  const lines: string[] = [];
  try {
    const kc = cp.kubeConfig();
    await applyCRDs(kc, join(root, 'dist', 'crds.yaml'));
    console.log('  warming up Crawlee and the integration (crawl-warm-up.ts)');
    await warmUp();
    if (apart) pin(process.pid, 0);
    for (const [i, store] of stores.entries()) {
      const namespace = `tenants-${store}`;
      const world = await startTenantsWorld(kc, namespace);
      const redis = store === 'redis' ? await startRedis() : undefined;
      const op = new BenchOperator({
        kubeconfig: cp.kubeconfigPath,
        metricsPort: await freePort(),
        discoveryPort: await freePort(),
        flags: [
          ...world.tokenFlags,
          ...SESSION_FLAGS,
          `--watch-namespace=${namespace}`,
          '--log-level=warn',
          ...(redis ? ['--lease-store=redis', `--redis-url=${redis.url}`] : []),
        ],
        // The container's Node and libc settings: its RSS is comparable with the Deployment's limit.
        env: { ...OPERATOR_RUNTIME_ENV },
      });
      const loads: string[] = [];
      try {
        if (apart) {
          pin(op.child.pid, 1);
          if (redis) for (const pid of redisChildren()) pin(pid, 1);
        }
        await op.ready();
        const discoveryURL = `http://127.0.0.1:${op.discoveryPort}`;
        const solos: RoundFigures[] = [];
        const shareds: RoundFigures[] = [];
        const same = {
          kc,
          world,
          discoveryURL,
          pages,
          first: `127.0.${41 + i}.1`,
          maxLeases: 150,
          rateLimitPerSecond: 50,
          ...(concurrency === undefined ? {} : { concurrency }),
        };
        for (let r = 0; r < rounds; r++) {
          const progress = (label: string) => (m: string) => console.log(`  [${store} ${label}] ${m}`);
          const solo = () =>
            tenantRound({ ...same, label: `r${r}-solo`, progress: progress(`r${r}-solo`) }).then((f) =>
              solos.push(f),
            );
          const shared = () =>
            tenantRound({
              ...same,
              label: `r${r}-b`,
              progress: progress(`r${r}-b`),
              b: { sessions: 10_500, junkReports: 3_000, spamFrom: `127.0.49.${9 + i}` },
              ...(apart ? { bCore: 1 } : {}),
            }).then((f) => shareds.push(f));
          loads.push(loadAverages());
          if (r % 2 === 0) {
            await solo();
            await shared();
          } else {
            await shared();
            await solo();
          }
        }
        const mem = op.memory();
        const metrics = await op.metrics();
        const ratios = shareds.map((s, r) => s.a.crawl.pagesPerSecond / solos[r]!.a.crawl.pagesPerSecond);
        const all = [...solos, ...shareds];
        const identical = all.every(
          (f) =>
            f.a.crawl.fetched === f.a.crawl.pages &&
            f.a.crawl.failedRequests === 0 &&
            f.a.crawl.bannedLate === 0 &&
            f.a.stickyRebound === 0,
        );
        const rotated = new Set(all.flatMap((f) => f.rotated));
        const b = shareds[shareds.length - 1]!.b!;
        lines.push(
          `${store} store (load average at each round's start: ${loads.join('; ')}; now ${loadAverages()}):`,
          '  run          fetched  failed  403s  banned-late  dead-after  rebound  seconds  pages/s  tasks  first  p/s>10%',
          ...all
            .sort((x, y) => x.label.localeCompare(y.label, 'en', { numeric: true }))
            .map((f) => `  ${row(f)}`),
          ...(process.argv.includes('--stats')
            ? all.map((f) => `  ${f.label} integration: ${JSON.stringify(f.a.crawl.integration ?? {})}`)
            : []),
          `  A pages/s beside B / alone, per round: ${ratios.map((x) => x.toFixed(3)).join(', ')} (median ${median(ratios).toFixed(3)}x; target >= 0.95x ${median(ratios) >= 0.95 ? 'met' : 'NOT met'})`,
          `  A's counts (every page, 0 failed, 0 banned-late, 0 sticky sessions rebound) in every run: ${identical ? 'met' : 'NOT met'}; proxies rotated/replaced: ${rotated.size}`,
          `  operator peak RSS ${mem?.hwmMiB.toFixed(0)} MiB (Deployment limit ${OPERATOR_MEMORY.limitMiB} MiB: ${(mem?.hwmMiB ?? Infinity) <= OPERATOR_MEMORY.limitMiB ? 'met' : 'NOT met'}); operator CPU ${op.cpuSeconds().toFixed(1)} s; junk targets in /metrics: ${metrics.includes('junk-') ? 'yes' : 'no'}`,
          `  B (last round): held ${b.held} leases (lease_quota ${b.leaseQuotaRefusals}x), ${b.reportItemsSent} junk ban items ` +
            `(${b.junkBansAccepted} accepted, cooldown_quota ${b.cooldownQuotaRefusals}, report_quota ${b.reportQuotaRefusals}), ` +
            `${b.sessionsStarted} sessions, ${b.proxyReads} proxy reads (${b.targetsSeen.length} foreign targets seen, ` +
            `${b.hiddenCooldownsSeen} hidden), too_many_requests ${b.tooManyRequests}, bad-token spam ${JSON.stringify(b.spam)}, ` +
            `other answers ${JSON.stringify(b.unexpected)}`,
        );
        console.log(lines.join('\n'));
      } finally {
        await op.stop();
        await world.close();
        await redis?.stop();
      }
    }
  } finally {
    await cp.stop();
  }
  console.log(`\n${lines.join('\n')}`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
