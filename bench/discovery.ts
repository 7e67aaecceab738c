// Discovery API benchmark: lease+release, list and get throughput and latency at 1,000 and
// 10,000 proxies and with 5,000 live sessions, beside two baselines measured in the same run
// (a bare node:http hello world and an express hello world that parses a JSON POST body),
// reported as ratios against the targets of issue 13.
//
//   npm run bench:discovery
//   BENCH_ROUNDS=10 BENCH_SLICE_SECONDS=1 BENCH_CONCURRENCY=32 BENCH_SESSIONS=5000 npm run bench:discovery
//   BENCH_REDIS_ONLY=1 node build/bench/discovery.js   # only the store phases: lease+release
//     (no selector) with the memory store and the Redis store, at both fleets, and their ratios
//
// The servers run in a child process (bench/discovery-server.ts), the load generator here:
// each has its own event loop, so a latency is the server's answer time plus the loopback.
// Every phase runs in several short slices, round-robin with the others, so that a change in
// the machine's load during the run (other processes) touches every phase alike and the
// ratios stay meaningful on a shared machine.
import { fork, type ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import { envPositiveNumber, loadAverages } from './bench-env.js';
import { Pool } from 'undici';
import { GEOS, type ServeCommand, type ServerReply } from './discovery-fleet.js';
import { startRedis } from './redis-process.js';

const ROUNDS = envPositiveNumber('BENCH_ROUNDS', 10);
const SLICE_SECONDS = envPositiveNumber('BENCH_SLICE_SECONDS', 1);
const WARMUP_SECONDS = envPositiveNumber('BENCH_WARMUP_SECONDS', 1);
const CONCURRENCY = envPositiveNumber('BENCH_CONCURRENCY', 32);
const SESSIONS = envPositiveNumber('BENCH_SESSIONS', 5000);
const SMALL = envPositiveNumber('BENCH_SMALL_FLEET', 1000);
const LARGE = envPositiveNumber('BENCH_LARGE_FLEET', 10_000);
const TOKEN = 'bench-token';
const REDIS_ONLY = process.env.BENCH_REDIS_ONLY === '1';

/** One request; resolves to whether it got the expected answer. Its latency is recorded. */
type Step = () => Promise<boolean>;
/** One operation: one or more timed requests. */
type Operation = (timed: (step: Step) => Promise<boolean>) => Promise<boolean>;

interface Phase {
  name: string;
  url: string;
  requestsPerOp: number;
  op: (pool: Pool) => Operation;
}

interface Tally {
  ops: number;
  errors: number;
  seconds: number;
  cpuMicros: number;
  clientCpuMicros: number;
  latencies: number[];
}

interface PhaseResult {
  name: string;
  requestsPerSecond: number;
  errors: number;
  /** Per-request latency percentiles, ms. */
  p50: number;
  p99: number;
  /** Server process CPU (user + system) per request, µs. */
  cpuPerRequest: number;
  /** The load generator's CPU per request, µs (it shares the machine). */
  clientCpuPerRequest: number;
}

class ServerProcess {
  private readonly child: ChildProcess;
  private readonly replies: ((reply: ServerReply) => void)[] = [];
  private readonly started: Promise<void>;

  constructor() {
    this.child = fork(new URL('./discovery-server.js', import.meta.url), { stdio: 'inherit' });
    this.started = new Promise((resolve) => {
      this.child.on('message', (message: ServerReply | { started: true }) => {
        if ('started' in message) resolve();
        else this.replies.shift()?.(message);
      });
    });
  }

  async serve(command: ServeCommand): Promise<{ url: string; sessionsBound?: number }> {
    const reply = await this.ask(command);
    if ('error' in reply) throw new Error(`bench server: ${reply.error}`);
    if (!('ready' in reply)) throw new Error('bench server: unexpected reply');
    return { url: `http://127.0.0.1:${reply.port}`, sessionsBound: reply.sessionsBound };
  }

  async cpuMicros(): Promise<number> {
    const reply = await this.ask({ cpu: true });
    if (!('cpuMicros' in reply)) throw new Error('bench server: unexpected reply');
    return reply.cpuMicros;
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      this.child.once('exit', () => resolve());
      this.child.send({ stop: true });
    });
  }

  private async ask(message: ServeCommand | { cpu: true }): Promise<ServerReply> {
    await this.started;
    return new Promise<ServerReply>((resolve) => {
      this.replies.push(resolve);
      this.child.send(message);
    });
  }
}

/** Why requests failed (exceptions, not wrong statuses), for the summary. */
const failures = new Map<string, number>();

/** Runs `op` from CONCURRENCY workers for `seconds`; adds to `tally` when given. */
async function slice(server: ServerProcess, op: Operation, seconds: number, tally?: Tally): Promise<void> {
  const latencies = tally?.latencies ?? [];
  const timed = async (step: Step) => {
    const start = performance.now();
    const ok = await step();
    latencies.push(performance.now() - start);
    return ok;
  };
  let ops = 0;
  let errors = 0;
  const cpuBefore = await server.cpuMicros();
  const clientBefore = process.cpuUsage();
  const started = performance.now();
  const deadline = started + seconds * 1000;
  const worker = async () => {
    while (performance.now() < deadline) {
      const ok = await op(timed).catch((err: unknown) => {
        failures.set(String(err), (failures.get(String(err)) ?? 0) + 1);
        return false;
      });
      if (ok) ops++;
      else errors++;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const elapsed = (performance.now() - started) / 1000;
  const client = process.cpuUsage(clientBefore);
  const cpu = (await server.cpuMicros()) - cpuBefore;
  if (tally === undefined) return;
  tally.ops += ops;
  tally.errors += errors;
  tally.seconds += elapsed;
  tally.cpuMicros += cpu;
  tally.clientCpuMicros += client.user + client.system;
}

const auth = { authorization: `Bearer ${TOKEN}` };
const jsonAuth = { ...auth, 'content-type': 'application/json' };

async function request(
  pool: Pool,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  expect: number,
  headers: Record<string, string> = {},
  body?: string,
): Promise<{ ok: boolean; text: string }> {
  const response = await pool.request({ path, method, headers, body });
  const text = await response.body.text();
  return { ok: response.statusCode === expect, text };
}

/** Lease (optionally in a session) and release: two requests, each timed. */
const leaseAndRelease =
  (body: () => Record<string, unknown>) =>
  (pool: Pool): Operation =>
  async (timed) => {
    let leaseID = '';
    const leased = await timed(async () => {
      const r = await request(pool, 'POST', '/v1/leases', 201, jsonAuth, JSON.stringify(body()));
      if (r.ok) leaseID = (JSON.parse(r.text) as { leaseID: string }).leaseID;
      return r.ok;
    });
    if (!leased) return false;
    return timed(async () => (await request(pool, 'DELETE', `/v1/leases/${leaseID}`, 204, auth)).ok);
  };

const single =
  (method: 'GET' | 'POST', path: () => string, headers: Record<string, string>, body?: string) =>
  (pool: Pool): Operation =>
  (timed) =>
    timed(async () => (await request(pool, method, path(), 200, headers, body)).ok);

async function main(): Promise<void> {
  console.log(
    `discovery benchmark: node ${process.version}, ${ROUNDS} rounds × ${SLICE_SECONDS}s per phase, concurrency ` +
      `${CONCURRENCY}, fleets ${SMALL} and ${LARGE}, ${SESSIONS} sessions; load average before: ` +
      loadAverages(),
  );
  const server = new ServerProcess();
  const small = await server.serve({ serve: 'discovery', proxies: SMALL, sessions: 0, token: TOKEN });
  const large = await server.serve({ serve: 'discovery', proxies: LARGE, sessions: 0, token: TOKEN });
  const redisServer = await startRedis();
  const redisSmall = await server.serve({
    serve: 'discovery',
    proxies: SMALL,
    sessions: 0,
    token: TOKEN,
    redisUrl: redisServer.url,
  });
  const redisLarge = await server.serve({
    serve: 'discovery',
    proxies: LARGE,
    sessions: 0,
    token: TOKEN,
    redisUrl: redisServer.url,
  });

  let geo = 0;
  let session = 0;
  const nextGeo = () => GEOS[geo++ % GEOS.length];
  const phases: Phase[] = REDIS_ONLY
    ? storePhases([
        [SMALL, small.url, redisSmall.url],
        [LARGE, large.url, redisLarge.url],
      ])
    : await allPhases();
  async function allPhases(): Promise<Phase[]> {
    const nodeHello = await server.serve({ serve: 'node-hello' });
    const expressHello = await server.serve({ serve: 'express-hello' });
    process.stdout.write(`binding ${SESSIONS} sessions on a second ${LARGE}-proxy fleet... `);
    const withSessions = await server.serve({
      serve: 'discovery',
      proxies: LARGE,
      sessions: SESSIONS,
      token: TOKEN,
    });
    console.log(`${withSessions.sessionsBound} bound`);
    const phases: Phase[] = [
      {
        name: 'baseline: node:http hello world (GET)',
        url: nodeHello.url,
        requestsPerOp: 1,
        op: single('GET', () => '/', {}),
      },
      {
        name: 'baseline: express hello world (POST JSON)',
        url: expressHello.url,
        requestsPerOp: 1,
        // The client does what it does for a lease: build the JSON body, parse the JSON answer.
        op: (pool) => (timed) =>
          timed(async () => {
            const body = JSON.stringify({ selector: { geo: nextGeo() }, ttlSeconds: 60 });
            const r = await request(
              pool,
              'POST',
              '/hello',
              200,
              { 'content-type': 'application/json' },
              body,
            );
            return r.ok && (JSON.parse(r.text) as { hello?: string }).hello === 'world';
          }),
      },
    ];
    for (const [fleet, { url }] of [
      [SMALL, small],
      [LARGE, large],
    ] as const) {
      phases.push(
        {
          name: `${fleet} proxies: lease + release (selector geo)`,
          url,
          requestsPerOp: 2,
          op: leaseAndRelease(() => ({ selector: { geo: nextGeo() }, ttlSeconds: 60 })),
        },
        {
          name: `${fleet} proxies: lease + release (no selector)`,
          url,
          requestsPerOp: 2,
          op: leaseAndRelease(() => ({ ttlSeconds: 60 })),
        },
        {
          name: `${fleet} proxies: get one proxy`,
          url,
          requestsPerOp: 1,
          op: single('GET', () => `/v1/proxies/bench/proxy-${String(geo++ % fleet).padStart(5, '0')}`, auth),
        },
        {
          name: `${fleet} proxies: list filtered (geo, purpose, healthy)`,
          url,
          requestsPerOp: 1,
          op: single('GET', () => `/v1/proxies?attr.geo=${nextGeo()}&attr.purpose=crawl&healthy=true`, auth),
        },
        {
          name: `${fleet} proxies: list all`,
          url,
          requestsPerOp: 1,
          op: single('GET', () => '/v1/proxies', auth),
        },
      );
    }
    for (const [fleet, { url }] of [
      [SMALL, redisSmall],
      [LARGE, redisLarge],
    ] as const) {
      phases.push({
        name: `${fleet} proxies, Redis store: lease + release (no selector)`,
        url,
        requestsPerOp: 2,
        op: leaseAndRelease(() => ({ ttlSeconds: 60 })),
      });
    }
    phases.push({
      name: `${LARGE} proxies, ${SESSIONS} sessions: lease + release in a session`,
      url: withSessions.url,
      requestsPerOp: 2,
      op: leaseAndRelease(() => ({ session: `session-${session++ % SESSIONS}`, ttlSeconds: 60 })),
    });
    return phases;
  }

  const pools = phases.map((p) => new Pool(p.url, { connections: CONCURRENCY }));
  const tallies: Tally[] = phases.map(() => ({
    ops: 0,
    errors: 0,
    seconds: 0,
    cpuMicros: 0,
    clientCpuMicros: 0,
    latencies: [],
  }));
  process.stdout.write('warming up every phase ');
  for (const [i, phase] of phases.entries()) {
    await slice(server, phase.op(pools[i]), WARMUP_SECONDS);
    process.stdout.write('.');
  }
  console.log();
  for (let round = 1; round <= ROUNDS; round++) {
    process.stdout.write(`round ${round}/${ROUNDS} `);
    for (const [i, phase] of phases.entries()) {
      await slice(server, phase.op(pools[i]), SLICE_SECONDS, tallies[i]);
      process.stdout.write('.');
    }
    console.log(` load average ${loadavg()[0].toFixed(2)}`);
  }
  await Promise.all(pools.map((pool) => pool.close()));
  await server.stop();
  await redisServer.stop();

  (REDIS_ONLY ? reportStores : report)(
    phases.map((phase, i) => {
      const t = tallies[i];
      const requests = t.ops * phase.requestsPerOp;
      const sorted = t.latencies.sort((a, b) => a - b);
      const at = (q: number) =>
        sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
      return {
        name: phase.name,
        requestsPerSecond: requests / t.seconds,
        errors: t.errors,
        p50: at(0.5),
        p99: at(0.99),
        cpuPerRequest: t.cpuMicros / requests,
        clientCpuPerRequest: t.clientCpuMicros / requests,
      };
    }),
  );
}

/** The memory and Redis store phases alone, interleaved like the others (BENCH_REDIS_ONLY). */
function storePhases(fleets: [number, string, string][]): Phase[] {
  return fleets.flatMap(([fleet, memoryURL, redisURL]) => [
    {
      name: `${fleet} proxies: lease + release (no selector)`,
      url: memoryURL,
      requestsPerOp: 2,
      op: leaseAndRelease(() => ({ ttlSeconds: 60 })),
    },
    {
      name: `${fleet} proxies, Redis store: lease + release (no selector)`,
      url: redisURL,
      requestsPerOp: 2,
      op: leaseAndRelease(() => ({ ttlSeconds: 60 })),
    },
  ]);
}

function reportStores(results: PhaseResult[]): void {
  const byName = (prefix: string) => results.find((r) => r.name.startsWith(prefix))!;
  console.log(`\n${'phase'.padEnd(62)} requests/s   p50 ms   p99 ms  errors  CPU µs/request server client`);
  for (const r of results) {
    console.log(
      `${r.name.padEnd(62)} ${r.requestsPerSecond.toFixed(0).padStart(10)} ${r.p50.toFixed(2).padStart(8)} ` +
        `${r.p99.toFixed(2).padStart(8)} ${String(r.errors).padStart(7)} ` +
        `${r.cpuPerRequest.toFixed(0).padStart(22)} ${r.clientCpuPerRequest.toFixed(0).padStart(6)}`,
    );
  }
  console.log(`\n${'target'.padEnd(62)}   measured  target  met`);
  for (const fleet of [SMALL, LARGE]) {
    const ratio =
      byName(`${fleet} proxies, Redis store: lease + release`).requestsPerSecond /
      byName(`${fleet} proxies: lease + release (no selector`).requestsPerSecond;
    const name = `lease+release at ${fleet}, Redis store vs memory store`;
    console.log(
      `${name.padEnd(62)} ${ratio.toFixed(3).padStart(10)}  >= 0.5  ${ratio >= 0.5 ? 'yes' : 'NO'}`,
    );
  }
  console.log(`load average after: ${loadAverages()}`);
  for (const [reason, count] of failures) console.log(`failed requests: ${count} × ${reason}`);
  if (results.some((r) => r.errors > 0)) process.exitCode = 1;
}

function report(results: PhaseResult[]): void {
  const byName = (prefix: string) => results.find((r) => r.name.startsWith(prefix))!;
  const [nodeHello, expressHello] = results;
  console.log(
    `\n${'phase'.padEnd(62)} requests/s   p50 ms   p99 ms  errors  vs node:http  vs express  CPU µs/request server client`,
  );
  for (const r of results) {
    console.log(
      `${r.name.padEnd(62)} ${r.requestsPerSecond.toFixed(0).padStart(10)} ${r.p50.toFixed(2).padStart(8)} ` +
        `${r.p99.toFixed(2).padStart(8)} ${String(r.errors).padStart(7)} ` +
        `${(r.requestsPerSecond / nodeHello.requestsPerSecond).toFixed(3).padStart(13)} ` +
        `${(r.requestsPerSecond / expressHello.requestsPerSecond).toFixed(3).padStart(11)} ` +
        `${r.cpuPerRequest.toFixed(0).padStart(22)} ${r.clientCpuPerRequest.toFixed(0).padStart(6)}`,
    );
  }
  const small = byName(`${SMALL} proxies: lease + release (selector`);
  const large = byName(`${LARGE} proxies: lease + release (selector`);
  const smallAny = byName(`${SMALL} proxies: lease + release (no selector`);
  const largeAny = byName(`${LARGE} proxies: lease + release (no selector`);
  const inSessions = byName(`${LARGE} proxies, ${SESSIONS} sessions`);
  const rate = (a: PhaseResult, b: PhaseResult) => a.requestsPerSecond / b.requestsPerSecond;
  const checks: [string, number, string, boolean][] = [
    [
      `lease+release at ${SMALL}, requests/s vs express hello`,
      rate(small, expressHello),
      '>= 0.9',
      rate(small, expressHello) >= 0.9,
    ],
    [
      `lease+release at ${LARGE}, requests/s vs express hello`,
      rate(large, expressHello),
      '>= 0.9',
      rate(large, expressHello) >= 0.9,
    ],
    [
      `lease throughput at ${LARGE} vs ${SMALL} (selector geo)`,
      rate(large, small),
      '>= 0.9',
      rate(large, small) >= 0.9,
    ],
    [
      `lease throughput at ${LARGE} vs ${SMALL} (no selector)`,
      rate(largeAny, smallAny),
      '>= 0.9',
      rate(largeAny, smallAny) >= 0.9,
    ],
    [
      `lease+release with ${SESSIONS} sessions vs without, at ${LARGE}`,
      rate(inSessions, large),
      '(info)',
      true,
    ],
    ...[SMALL, LARGE].map((fleet): [string, number, string, boolean] => {
      const ratio = rate(
        byName(`${fleet} proxies, Redis store: lease + release`),
        byName(`${fleet} proxies: lease + release (no selector`),
      );
      return [`lease+release at ${fleet}, Redis store vs memory store`, ratio, '>= 0.5', ratio >= 0.5];
    }),
    [`p99 ms, lease+release at ${SMALL} (${CONCURRENCY} concurrent)`, small.p99, '< 5', small.p99 < 5],
    [`p99 ms, lease+release at ${LARGE} (${CONCURRENCY} concurrent)`, large.p99, '< 5', large.p99 < 5],
    [`p99 ms, express hello (${CONCURRENCY} concurrent), for reference`, expressHello.p99, '(info)', true],
    [
      `server CPU per request, lease+release at ${LARGE} vs express hello`,
      large.cpuPerRequest / expressHello.cpuPerRequest,
      '(info)',
      true,
    ],
  ];
  console.log(`\n${'target'.padEnd(62)}   measured  target  met`);
  for (const [name, value, target, met] of checks) {
    console.log(
      `${name.padEnd(62)} ${value.toFixed(3).padStart(10)} ${target.padStart(7)}  ${met ? 'yes' : 'NO'}`,
    );
  }
  console.log(`load average after: ${loadAverages()}`);
  for (const [reason, count] of failures) console.log(`failed requests: ${count} × ${reason}`);
  if (results.some((r) => r.errors > 0)) process.exitCode = 1;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
