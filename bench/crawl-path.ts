// The Crawlee integration's per-request path beside Crawlee's own proxy list, in the same
// run: `npm run bench:crawl-path`. What a crawl's pages/s cannot resolve (it moves by 2-3 %
// from run to run, docs/benchmarks.md), this measures in microseconds.
//
//   node build/bench/crawl-path.js
//   BENCH_PATH_ROUNDS=9 BENCH_PATH_REQUESTS=5000 BENCH_PATH_SWEEP_MB=8 node build/bench/crawl-path.js
//
// One request's proxy work, once its session holds a lease: ProxyOperatorConfiguration's
// newProxyInfo and its postNavigationHook for a 200, against Crawlee's
// `new ProxyConfiguration({ proxyUrls })` newProxyInfo (the list has no hook), over the same
// 100 proxy URLs and Crawlee's default 1,000 sessions. The discovery API is the real one, in
// this process, with its book in memory; the timed requests make no call to it.
//
// Two ways: warm (requests back to back, everything in the CPU's caches) and cold (between
// two requests, untimed, a sweep through BENCH_PATH_SWEEP_MB of memory, as a crawl's own work
// between two requests evicts the caches: in a real crawl the path ran at the cold figure).
// Phases alternate in rounds; each figure is the median of its rounds.
import { loadavg } from 'node:os';
import { Configuration, ProxyConfiguration, Request, SessionPool } from '@crawlee/core';
import { DiscoveryClient } from '../client/src/index.js';
import { ProxyOperatorConfiguration } from '../client/src/crawlee/index.js';
import { readyFleet, startInProcessDiscovery } from './in-process-discovery.js';

const ROUNDS = positive('BENCH_PATH_ROUNDS', 7);
const REQUESTS = positive('BENCH_PATH_REQUESTS', 5000);
const SWEEP_MB = positive('BENCH_PATH_SWEEP_MB', 8);
const PROXIES = 100;
const SESSIONS = 1000; // Crawlee's default SessionPool size

function positive(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) {
    throw new Error(`${name} must be a positive integer, got ${JSON.stringify(raw)}`);
  }
  return value;
}

const proxyUrls = Array.from({ length: PROXIES }, (_, i) => `http://127.0.1.${i + 1}:3128`);

/** Sweeps `bytes` of memory, reading and writing a word per 64-byte line: the caches go cold. */
function sweeper(bytes: number): () => number {
  const lines = new Float64Array(bytes / 8);
  return () => {
    let sum = 0;
    for (let i = 0; i < lines.length; i += 8) sum += lines[i]++;
    return sum;
  };
}

async function main(): Promise<void> {
  const discovery = await startInProcessDiscovery(readyFleet(proxyUrls, 'bench'));

  const pool = await SessionPool.open(
    { persistenceOptions: { enable: false } },
    new Configuration({ persistStorage: false }),
  );
  const integration = new ProxyOperatorConfiguration({
    client: new DiscoveryClient({ baseUrl: discovery.url }),
    log: { debug: () => undefined, warning: (message) => console.error(message) },
  });
  const list = new ProxyConfiguration({ proxyUrls });
  const sessions = Array.from({ length: SESSIONS }, (_, i) => `session_${i.toString(36).padStart(9, '0')}`);
  const requests = Array.from(
    { length: 2000 },
    (_, i) => new Request({ url: `http://site.bench.local:8080/page/${i}` }),
  );
  // Every session's first request takes its lease (or joins one): the path measured is after.
  for (const session of sessions) {
    await integration.newProxyInfo(session, { request: requests[0]! });
    await new Promise((resolve) => setImmediate(resolve));
  }

  const sweep = sweeper(SWEEP_MB * 1024 * 1024);
  let sink = 0;
  type Side = (i: number) => Promise<void>;
  const ours: Side = async (i) => {
    const session = sessions[(i * 7919) % SESSIONS]!;
    const request = requests[i % requests.length]!;
    const info = await integration.newProxyInfo(session, { request });
    const reported = integration.postNavigationHook({
      request,
      session: { id: session },
      proxyInfo: info,
      response: { statusCode: 200 },
      crawler: { sessionPool: pool },
    });
    if (reported) await reported;
  };
  const theirs: Side = async (i) => {
    const session = sessions[(i * 7919) % SESSIONS]!;
    const info = await list.newProxyInfo(session, { request: requests[i % requests.length]! });
    sink += info === undefined ? 0 : 1;
  };
  /** Microseconds per request over REQUESTS requests, the sweep (if any) untimed between them. */
  const measure = async (side: Side, cold: boolean): Promise<number> => {
    let ns = 0n;
    for (let i = 0; i < REQUESTS; i++) {
      if (cold) sink += sweep();
      const started = process.hrtime.bigint();
      await side(i);
      ns += process.hrtime.bigint() - started;
    }
    return Number(ns) / 1000 / REQUESTS;
  };

  const figures = {
    warm: { ours: [] as number[], theirs: [] as number[] },
    cold: { ours: [] as number[], theirs: [] as number[] },
  };
  // A round before the measured ones: the code is compiled and the heap settled for both sides.
  for (const cold of [false, true]) {
    await measure(ours, cold);
    await measure(theirs, cold);
  }
  for (let round = 1; round <= ROUNDS; round++) {
    // Which side goes first alternates, so a drift within a round falls on both.
    for (const [name, cold] of [
      ['warm', false],
      ['cold', true],
    ] as const) {
      const order: Array<['ours' | 'theirs', Side]> =
        round % 2 === 1
          ? [
              ['ours', ours],
              ['theirs', theirs],
            ]
          : [
              ['theirs', theirs],
              ['ours', ours],
            ];
      for (const [who, side] of order) figures[name][who].push(await measure(side, cold));
    }
    console.error(`  [crawl-path] round ${round}/${ROUNDS} done`);
  }
  const stats = integration.stats;
  await integration.close();
  await discovery.stop();

  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log(
    `\nthe integration's per-request path beside Crawlee's list: ${PROXIES} proxies, ${SESSIONS} sessions, ` +
      `${ROUNDS} rounds of ${REQUESTS} requests, cold = a ${SWEEP_MB} MiB sweep between requests (load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')})`,
  );
  console.log(
    '  caches | integration: newProxyInfo + postNavigationHook, µs | Crawlee list: newProxyInfo, µs | ratio of the medians | median of the ratios per round | rounds (integration / list)',
  );
  for (const name of ['warm', 'cold'] as const) {
    const { ours: o, theirs: t } = figures[name];
    const rounds = o.map((x, i) => `${x.toFixed(1)}/${t[i]!.toFixed(1)}`).join(' ');
    const ratios = o.map((x, i) => x / t[i]!);
    console.log(
      `  ${name} | ${median(o).toFixed(2)} | ${median(t).toFixed(2)} | ${(median(o) / median(t)).toFixed(2)}x | ${median(ratios).toFixed(2)}x | ${rounds}`,
    );
  }
  // Every timed request went through a lease the warm-up took: no call, no new lease.
  console.log(
    `  integration: ${JSON.stringify({ leased: stats.leased, successes: stats.successes, busy: stats.busy })} (sink ${sink > 0 ? 'used' : 'empty'})`,
  );
  process.exit(0);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
