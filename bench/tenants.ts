// Benchmark: two teams on one fleet (issue 48 item 6). Tenant A's crawl-like loop (lease with a
// session for shop.example, fetch through a real forward proxy, report, release; the site
// answers 403 through one proxy) alone, then while tenant B, with a valid token, attacks as
// fast as its limits allow (leases to its quota, thousands of junk bans, sessions past its
// quota, proxy reads, bad-token spam). A's figures are printed side by side, on both stores.
//
//   npm run bench:tenants                       # 300 pages, 10 proxies, memory then redis
//   npm run bench:tenants -- --pages=P --stores=memory
//
// Real parts only: a real etcd + kube-apiserver, the built operator as a child process (its
// RSS from /proc), real forward proxies on their own loopback addresses, a real redis-server.
// The world (fleet, site, tokens file, both tenants) is bench/tenants-world.ts, which
// test/discovery/two-tenants.int.test.ts runs with assertions.
import { loadAverages } from './bench-env.js';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { applyCRDs } from '../cmd/demo/environment.js';
import { OPERATOR_MEMORY, OPERATOR_RUNTIME_ENV } from '../charts/operator-chart.js';
import { ControlPlane, freePort } from '../framework/control-plane/index.js';
import { BenchOperator } from './operator-process.js';
import { startRedis } from './redis-process.js';
import {
  attackAsTenantB,
  crawlAsTenantA,
  rotations,
  sessionsMovedSince,
  startTenantsWorld,
  untilFleetHealthy,
  type TenantAFigures,
} from './tenants-world.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const pages = Number(arg('pages') ?? 300);
const stores = (arg('stores') ?? 'memory,redis').split(',');
if (!Number.isInteger(pages) || pages < 1)
  throw new Error(`--pages must be an integer >= 1, got ${arg('pages')}`);
for (const s of stores)
  if (s !== 'memory' && s !== 'redis') throw new Error(`--stores: memory or redis, got ${s}`);

function row(label: string, a: TenantAFigures, extra: { movedAfterB?: number; rssMiB?: number }) {
  return [
    label.padEnd(12),
    String(a.pages).padStart(6),
    String(a.bans).padStart(5),
    String(a.requestsThroughBannedAfterBan).padStart(14),
    String(a.leasedBannedAfterBan).padStart(14),
    String(a.sessionsMovedByOthers + (extra.movedAfterB ?? 0)).padStart(14),
    a.pagesPerSecond.toFixed(1).padStart(8),
    (extra.rssMiB?.toFixed(0) ?? '-').padStart(8),
  ].join(' ');
}

async function main() {
  console.log(
    `bench:tenants: ${pages} pages, 10 proxies, stores ${stores.join(', ')}; load average ${loadAverages()}`,
  );
  const cp = await ControlPlane.start({ progress: (m) => console.log(`  ${m}`) });
  const lines: string[] = [];
  try {
    const kc = cp.kubeConfig();
    await applyCRDs(kc, join(root, 'dist', 'crds.yaml'));
    for (const [i, store] of stores.entries()) {
      const world = await startTenantsWorld(kc, `tenants-${store}`, {
        proxies: 10,
        maxLeases: 150,
        firstAddress: `127.0.${41 + i}.1`,
      });
      const redis = store === 'redis' ? await startRedis() : undefined;
      const op = new BenchOperator({
        kubeconfig: cp.kubeconfigPath,
        metricsPort: await freePort(),
        discoveryPort: await freePort(),
        flags: [
          ...world.tokenFlags,
          `--watch-namespace=tenants-${store}`,
          '--log-level=warn',
          ...(redis ? ['--lease-store=redis', `--redis-url=${redis.url}`] : []),
        ],
        // The container's Node and libc settings: its RSS is comparable with the Deployment's limit.
        env: { ...OPERATOR_RUNTIME_ENV },
      });
      try {
        await op.ready();
        const discoveryURL = `http://127.0.0.1:${op.discoveryPort}`;
        await untilFleetHealthy(discoveryURL, world);
        const a = { discoveryURL, token: world.tokens.a, selector: world.selector, workers: 4 };
        const solo = await crawlAsTenantA({ ...a, site: await world.newSite(pages), sessionPrefix: 'solo' });
        const soloRss = op.memory()?.rssMiB;
        let started!: () => void;
        const attacking = new Promise<void>((r) => (started = r));
        let stop = false;
        const bRun = attackAsTenantB({
          discoveryURL,
          token: world.tokens.b,
          selector: world.selector,
          namespace: world.namespace,
          proxyNames: world.proxyNames,
          stop: () => stop,
          sessions: 10_200,
          junkReports: 3_000,
          spamFrom: `127.0.${49}.${9 + i}`,
          onAttacking: started,
        });
        await attacking;
        const shared = await crawlAsTenantA({
          ...a,
          site: await world.newSite(pages),
          sessionPrefix: 'shared',
        });
        const giveUp = setTimeout(() => (stop = true), 90_000);
        const b = await bRun.finally(() => clearTimeout(giveUp));
        const movedAfterB = await sessionsMovedSince(
          discoveryURL,
          world.tokens.a,
          world.selector,
          shared.boundTo,
        );
        const mem = op.memory();
        const metrics = await op.metrics();
        const rotated = await rotations(kc, world.namespace);
        lines.push(
          `${store} store (load average now ${loadAverages()}):`,
          '  run          pages  bans  banned-after  leased-banned  sessions-moved  pages/s  RSS MiB',
          `  ${row('A solo', solo, { rssMiB: soloRss })}`,
          `  ${row('A beside B', shared, { movedAfterB, rssMiB: mem?.rssMiB })}`,
          `  operator peak RSS ${mem?.hwmMiB.toFixed(0)} MiB (Deployment limit ${OPERATOR_MEMORY.limitMiB} MiB); A pages/s beside B / solo = ${(shared.pagesPerSecond / solo.pagesPerSecond).toFixed(2)}`,
          `  B: held ${b.held} leases (lease_quota ${b.leaseQuotaRefusals}x), ${b.reportItemsSent} junk ban items ` +
            `(${b.junkBansAccepted} accepted, cooldown_quota ${b.cooldownQuotaRefusals}, report_quota ${b.reportQuotaRefusals}), ` +
            `${b.sessionsStarted} sessions, ${b.proxyReads} proxy reads (${b.targetsSeen.length} foreign targets seen, ` +
            `${b.hiddenCooldownsSeen} hidden), too_many_requests ${b.tooManyRequests}, bad-token spam ${JSON.stringify(b.spam)}, ` +
            `other answers ${JSON.stringify(b.unexpected)}`,
          `  proxies rotated/replaced: ${rotated.length}; junk targets in /metrics: ${metrics.includes('junk-') ? 'yes' : 'no'}`,
        );
        console.log(lines.slice(-7).join('\n'));
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

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
