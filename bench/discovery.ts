// Discovery API benchmark: lease+release, list and get throughput and latency at 1,000 and
// 10,000 proxies and with 5,000 live sessions, beside two baselines measured in the same run
// (a bare node:http hello world and an express hello world that parses a JSON POST body),
// reported as ratios against the targets of issue 13.
//
//   npm run bench:discovery
//   BENCH_PHASE_SECONDS=10 BENCH_CONCURRENCY=32 BENCH_SESSIONS=5000 npm run bench:discovery
//
// The servers run in a child process (bench/discovery-server.ts), the load generator here:
// each has its own event loop, so a latency is the server's answer time plus the loopback.
import { fork, type ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import { Pool } from 'undici';
import { GEOS, type ServeCommand, type ServerReply } from './discovery-fleet.js';

const PHASE_SECONDS = positiveNumber('BENCH_PHASE_SECONDS', 10);
const CONCURRENCY = positiveNumber('BENCH_CONCURRENCY', 32);
const SESSIONS = positiveNumber('BENCH_SESSIONS', 5000);
const SMALL = positiveNumber('BENCH_SMALL_FLEET', 1000);
const LARGE = positiveNumber('BENCH_LARGE_FLEET', 10_000);
const WARMUP_SECONDS = Math.min(2, PHASE_SECONDS / 5);
const TOKEN = 'bench-token';

function positiveNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0)
    throw new Error(`${name} must be a positive number, got '${raw}'`);
  return value;
}

interface PhaseResult {
  name: string;
  /** Operations completed; an operation may be several requests. */
  ops: number;
  requestsPerOp: number;
  errors: number;
  seconds: number;
  /** Per-request latency percentiles, ms. */
  p50: number;
  p99: number;
  /** Server process CPU time per request (user + system), µs: what a quiet machine's rate rests on. */
  cpuPerRequest: number;
}

/** One request: resolves to its own success; latency is measured per request. */
type Step = () => Promise<boolean>;

/** Runs `op` (a sequence of requests) from CONCURRENCY workers for the phase duration. */
let server: ServerProcess;

async function phase(
  name: string,
  op: (timed: (step: Step) => Promise<boolean>) => Promise<boolean>,
  requestsPerOp: number,
): Promise<PhaseResult> {
  process.stdout.write(`${name}: warm-up ${WARMUP_SECONDS}s, measuring ${PHASE_SECONDS}s `);
  await runFor(WARMUP_SECONDS, op, []);
  const latencies: number[] = [];
  const progress = setInterval(() => process.stdout.write('.'), 1000);
  const cpuBefore = await server.cpuMicros();
  const started = performance.now();
  const { ops, errors } = await runFor(PHASE_SECONDS, op, latencies);
  const seconds = (performance.now() - started) / 1000;
  const cpuPerRequest = ((await server.cpuMicros()) - cpuBefore) / (ops * requestsPerOp);
  clearInterval(progress);
  latencies.sort((a, b) => a - b);
  const at = (q: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? Number.NaN;
  const result = { name, ops, requestsPerOp, errors, seconds, p50: at(0.5), p99: at(0.99), cpuPerRequest };
  process.stdout.write(` ${Math.round((ops * requestsPerOp) / seconds)} requests/s\n`);
  return result;
}

async function runFor(
  seconds: number,
  op: (timed: (step: Step) => Promise<boolean>) => Promise<boolean>,
  latencies: number[],
): Promise<{ ops: number; errors: number }> {
  const deadline = performance.now() + seconds * 1000;
  let ops = 0;
  let errors = 0;
  const timed = async (step: Step) => {
    const start = performance.now();
    const ok = await step();
    latencies.push(performance.now() - start);
    return ok;
  };
  const worker = async () => {
    while (performance.now() < deadline) {
      const ok = await op(timed).catch(() => false);
      if (ok) ops++;
      else errors++;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return { ops, errors };
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

  private async ask(message: ServeCommand | { cpu: true }): Promise<ServerReply> {
    await this.started;
    return new Promise<ServerReply>((resolve) => {
      this.replies.push(resolve);
      this.child.send(message);
    });
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      this.child.once('exit', () => resolve());
      this.child.send({ stop: true });
    });
  }
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
function leaseAndRelease(pool: Pool, body: () => Record<string, unknown>) {
  return async (timed: (step: Step) => Promise<boolean>) => {
    let leaseID = '';
    const leased = await timed(async () => {
      const r = await request(pool, 'POST', '/v1/leases', 201, jsonAuth, JSON.stringify(body()));
      if (r.ok) leaseID = (JSON.parse(r.text) as { leaseID: string }).leaseID;
      return r.ok;
    });
    if (!leased) return false;
    return timed(async () => (await request(pool, 'DELETE', `/v1/leases/${leaseID}`, 204, auth)).ok);
  };
}

function single(
  pool: Pool,
  method: 'GET' | 'POST',
  path: () => string,
  expect: number,
  headers: Record<string, string>,
  body?: string,
) {
  return (timed: (step: Step) => Promise<boolean>) =>
    timed(async () => (await request(pool, method, path(), expect, headers, body)).ok);
}

async function main(): Promise<void> {
  console.log(
    `discovery benchmark: node ${process.version}, ${PHASE_SECONDS}s per phase, concurrency ${CONCURRENCY}, ` +
      `fleets ${SMALL} and ${LARGE}, ${SESSIONS} sessions; load average before: ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
  );
  server = new ServerProcess();
  const results: PhaseResult[] = [];
  let geo = 0;
  let session = 0;
  const nextGeo = () => GEOS[geo++ % GEOS.length];
  const withPool = async <T>(url: string, run: (pool: Pool) => Promise<T>): Promise<T> => {
    const pool = new Pool(url, { connections: CONCURRENCY });
    try {
      return await run(pool);
    } finally {
      await pool.close();
    }
  };

  const hello = await server.serve({ serve: 'node-hello' });
  results.push(
    await withPool(hello.url, (pool) =>
      phase(
        'baseline: node:http hello world (GET)',
        single(pool, 'GET', () => '/', 200, {}),
        1,
      ),
    ),
  );

  const expressHello = await server.serve({ serve: 'express-hello' });
  const helloBody = JSON.stringify({ selector: { geo: 'eu' }, ttlSeconds: 60 });
  results.push(
    await withPool(expressHello.url, (pool) =>
      phase(
        'baseline: express hello world (POST JSON)',
        single(pool, 'POST', () => '/hello', 200, { 'content-type': 'application/json' }, helloBody),
        1,
      ),
    ),
  );

  for (const proxies of [SMALL, LARGE]) {
    const discovery = await server.serve({ serve: 'discovery', proxies, sessions: 0, token: TOKEN });
    await withPool(discovery.url, async (pool) => {
      results.push(
        await phase(
          `${proxies} proxies: lease + release`,
          leaseAndRelease(pool, () => ({ selector: { geo: nextGeo() }, ttlSeconds: 60 })),
          2,
        ),
      );
      results.push(
        await phase(
          `${proxies} proxies: lease + release, no selector`,
          leaseAndRelease(pool, () => ({ ttlSeconds: 60 })),
          2,
        ),
      );
      results.push(
        await phase(
          `${proxies} proxies: get one proxy`,
          single(
            pool,
            'GET',
            () => `/v1/proxies/bench/proxy-${String(geo++ % proxies).padStart(5, '0')}`,
            200,
            auth,
          ),
          1,
        ),
      );
      results.push(
        await phase(
          `${proxies} proxies: list filtered (geo, purpose, healthy)`,
          single(
            pool,
            'GET',
            () => `/v1/proxies?attr.geo=${nextGeo()}&attr.purpose=crawl&healthy=true`,
            200,
            auth,
          ),
          1,
        ),
      );
      results.push(
        await phase(
          `${proxies} proxies: list all`,
          single(pool, 'GET', () => '/v1/proxies', 200, auth),
          1,
        ),
      );
    });
  }

  const sessions = await server.serve({
    serve: 'discovery',
    proxies: LARGE,
    sessions: SESSIONS,
    token: TOKEN,
  });
  console.log(`${sessions.sessionsBound} sessions bound before the phase`);
  results.push(
    await withPool(sessions.url, (pool) =>
      phase(
        `${LARGE} proxies, ${SESSIONS} sessions: lease + release in a session`,
        leaseAndRelease(pool, () => ({ session: `session-${session++ % SESSIONS}`, ttlSeconds: 60 })),
        2,
      ),
    ),
  );
  await server.stop();

  report(results);
}

function report(results: PhaseResult[]): void {
  const rate = (r: PhaseResult) => (r.ops * r.requestsPerOp) / r.seconds;
  const byName = (prefix: string) => results.find((r) => r.name.startsWith(prefix))!;
  const nodeHello = results[0];
  const expressHello = results[1];
  console.log(
    `\n${'phase'.padEnd(62)} requests/s   p50 ms   p99 ms  errors  vs node:http  vs express  server CPU µs/request`,
  );
  for (const r of results) {
    console.log(
      `${r.name.padEnd(62)} ${rate(r).toFixed(0).padStart(10)} ${r.p50.toFixed(2).padStart(8)} ${r.p99.toFixed(2).padStart(8)} ${String(r.errors).padStart(7)} ${(rate(r) / rate(nodeHello)).toFixed(3).padStart(13)} ${(rate(r) / rate(expressHello)).toFixed(3).padStart(11)} ${r.cpuPerRequest.toFixed(0).padStart(22)}`,
    );
  }
  const small = byName(`${SMALL} proxies: lease + release`);
  const large = byName(`${LARGE} proxies: lease + release`);
  const inSessions = byName(`${LARGE} proxies, ${SESSIONS} sessions`);
  const checks: [string, number, string, boolean][] = [
    [
      `lease+release at ${SMALL}, requests/s vs express hello`,
      rate(small) / rate(expressHello),
      '>= 0.9',
      rate(small) / rate(expressHello) >= 0.9,
    ],
    [
      `lease+release at ${LARGE}, requests/s vs express hello`,
      rate(large) / rate(expressHello),
      '>= 0.9',
      rate(large) / rate(expressHello) >= 0.9,
    ],
    [
      `lease throughput at ${LARGE} vs at ${SMALL}`,
      rate(large) / rate(small),
      '>= 0.9',
      rate(large) / rate(small) >= 0.9,
    ],
    [`lease+release in sessions at ${LARGE} vs without`, rate(inSessions) / rate(large), '(info)', true],
    [
      `server CPU per request: express hello vs lease+release at ${LARGE}`,
      expressHello.cpuPerRequest / large.cpuPerRequest,
      '(info)',
      true,
    ],
    [`p99 ms, lease+release at ${SMALL} (${CONCURRENCY} concurrent)`, small.p99, '< 5', small.p99 < 5],
    [`p99 ms, lease+release at ${LARGE} (${CONCURRENCY} concurrent)`, large.p99, '< 5', large.p99 < 5],
    [`p99 ms, express hello (${CONCURRENCY} concurrent), for reference`, expressHello.p99, '(info)', true],
  ];
  console.log(`\n${'target'.padEnd(62)}   measured  target  met`);
  for (const [name, value, target, met] of checks) {
    console.log(
      `${name.padEnd(62)} ${value.toFixed(3).padStart(10)} ${target.padStart(7)}  ${met ? 'yes' : 'NO'}`,
    );
  }
  console.log(
    `load average after: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  if (results.some((r) => r.errors > 0)) process.exitCode = 1;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
