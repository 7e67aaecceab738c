// Does listing starve the probes? The discovery API over 10,000 proxies shares its event loop
// with a probe schedule (the health engine's timers: here 200 probes/s, each a timer due at a
// planned instant, whose lateness is how late it fired). Measured with the API idle, then
// while 32 clients list every page of the fleet as fast as they can (following `continue`;
// a 429 waits its Retry-After, as a client must). One server per configuration: the pages
// and the concurrent-list cap of before and the defaults of now, side by side in one run.
// The issue's target: lateness p99 while listing within 2x of the idle API's.
//
//   npm run bench:discovery          (after bench/discovery.js and bench/lease-store.js)
//   BENCH_PROBE_SECONDS=10 node build/bench/discovery-probes.js
//
// The server and the schedule run in a child process, the clients here. The child runs with
// the Deployment's Node settings (its heap and young-generation sizes decide how long a
// collection holds the timers up); BENCH_NODE_OPTIONS replaces them to compare others.
//
// Since the SCHED_IDLE method (docs/benchmarks.md) the server serves one list and settles before the
// idle phase, and the clients run at SCHED_IDLE, reading only a page's tail: crawlers on other
// machines take none of the operator's CPU. BENCH_PROBE_METHOD=fourth measures the earlier
// way, =both each configuration both ways. Diagnosis: BENCH_PROBE_TRACE=1 (where the worst
// 1 % of timers' lateness went), BENCH_PROBE_BEFORE=another/build (its server, same run),
// BENCH_PROBE_ONLY=defaults (one configuration), BENCH_SERVER_ARGS=--trace-gc.
import { execFileSync, fork } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { Pool } from 'undici';
import { createDiscoveryApp } from '../discovery/app.js';
import { IndexedCatalog } from '../book/indexed-catalog.js';
import { DEFAULT_MAX_CONCURRENT_LISTS } from '../discovery/list-slots.js';
import { DEFAULT_LIST_LIMIT } from '../discovery/request-parsing.js';
import { DEFAULT_HANDLER_SETTINGS } from '../handlers/settings.js';
import { MemoryLeaseStore } from '../book/memory-lease-store.js';
import { DiscoveryServer } from '../discovery/server.js';
import { fleet } from './discovery-fleet.js';
import { OPERATOR_RUNTIME_ENV } from '../charts/operator-chart.js';
import { ServerResponse, type RequestListener } from 'node:http';
import { LatenessTrace, type TraceSummary } from './lateness-trace.js';

const SECONDS = Number(process.env.BENCH_PROBE_SECONDS ?? 10);
const PROXIES = Number(process.env.BENCH_LARGE_FLEET ?? 10_000);
const CLIENTS = Number(process.env.BENCH_CONCURRENCY ?? 32);
const PROBES_PER_SECOND = 200;
const TOKEN = 'bench-probes-token-0123456789';
const SERVER_ENV: Record<string, string> =
  process.env.BENCH_NODE_OPTIONS === undefined
    ? { ...OPERATOR_RUNTIME_ENV }
    : { ...OPERATOR_RUNTIME_ENV, NODE_OPTIONS: process.env.BENCH_NODE_OPTIONS };

type Message = { measure: number } | { stop: true };
type Reply = { port: number } | { lateness: number[]; trace?: TraceSummary };
/** BENCH_PROBE_TRACE=1: the server child also records where each late timer's time went. */
const TRACE = process.env.BENCH_PROBE_TRACE === '1';

interface Configuration {
  name: string;
  /** The `limit` the clients ask for. */
  page: number;
  /** The server's concurrent-list cap per token. */
  maxLists: number;
}

// 1000 lists in flight is no cap for 32 clients: the build before the cap.
const CONFIGURATIONS: Configuration[] = [
  { name: 'page 500, no list cap (before)', page: 500, maxLists: 1000 },
  { name: `page ${DEFAULT_LIST_LIMIT}, no list cap`, page: DEFAULT_LIST_LIMIT, maxLists: 1000 },
  {
    name: `page ${DEFAULT_LIST_LIMIT}, ${DEFAULT_MAX_CONCURRENT_LISTS} lists per token (defaults)`,
    page: DEFAULT_LIST_LIMIT,
    maxLists: DEFAULT_MAX_CONCURRENT_LISTS,
  },
];

async function server(maxLists: number): Promise<void> {
  const logger = pino({ level: 'silent' });
  const catalog = new IndexedCatalog();
  catalog.replaceAll(fleet(PROXIES));
  const leases = new MemoryLeaseStore({ catalog, logger });
  // The Deployment's rate limit too: what a client meets in production.
  const app = createDiscoveryApp({
    catalog,
    leases,
    token: TOKEN,
    logger,
    registry: new Registry(),
    rateLimit: DEFAULT_HANDLER_SETTINGS.discovery.rateLimit,
    maxConcurrentLists: maxLists,
  });
  const trace = TRACE ? new LatenessTrace() : undefined;
  let listener: RequestListener = app;
  if (trace !== undefined) {
    // A page runs from its catalog read to its res.end, all in one turn (turn-queue.ts).
    const list = catalog.list.bind(catalog);
    catalog.list = (filter) => {
      trace.pageStart();
      return list(filter);
    };
    const end = ServerResponse.prototype.end;
    ServerResponse.prototype.end = function (this: ServerResponse, ...args: unknown[]) {
      const result = (end as (...a: unknown[]) => ServerResponse).apply(this, args);
      trace.pageEnd();
      return result;
    } as typeof end;
    listener = (req, res) => {
      const start = performance.now();
      void app(req, res);
      trace.request(start);
    };
  }
  const http = new DiscoveryServer(listener, { host: '127.0.0.1', port: 0 }, logger);
  await http.start();
  process.send!({ port: http.port } satisfies Reply);
  process.on('message', (message: Message) => {
    if ('stop' in message) {
      void http.stop().then(() => process.exit(0));
      return;
    }
    // A probe schedule: each timer due at its planned instant; lateness = fired - planned.
    const lateness: number[] = [];
    trace?.begin();
    const start = performance.now();
    const count = Math.round(message.measure * PROBES_PER_SECOND);
    for (let i = 0; i < count; i++) {
      const due = start + (i * 1000) / PROBES_PER_SECOND;
      setTimeout(
        () => {
          lateness.push(performance.now() - due);
          trace?.timer(due);
          if (lateness.length === count) {
            if (trace === undefined) process.send!({ lateness } satisfies Reply);
            else
              void trace
                .summary()
                .then((summary) => process.send!({ lateness, trace: summary } satisfies Reply));
          }
        },
        Math.max(0, due - performance.now()),
      );
    }
  });
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

interface Figures {
  config: Configuration;
  load: number;
  idle: number[];
  busy: number[];
  pages: number;
  lists: number;
  refused: number;
  pageMillis: number[];
  pinned: string;
  /** The clients' scheduling policy while they listed. */
  clientsPolicy: string;
  loadAfter: number;
  idleTrace?: TraceSummary;
  busyTrace?: TraceSummary;
}

/**
 * How the bench measures. The fourth try's method: the idle phase right after the server
 * starts, clients at the server's CPU priority, each reading its whole page as text. The
 * fifth try's: the server first serves one list of the fleet and settles (its start-up
 * collections and cold caches out of both phases), and the clients, which stand for
 * crawlers on other machines, run at SCHED_IDLE and read only the tail of a page, so that
 * the load generator takes only CPU the server leaves (docs/benchmarks.md, probe lateness: method).
 */
interface Method {
  name: string;
  warm: boolean;
  idleClients: boolean;
  tailOnly: boolean;
}

const FOURTH: Method = { name: "fourth try's", warm: false, idleClients: false, tailOnly: false };
/** BENCH_PROBE_CLIENTS=normal: the fifth try's method with the clients at the normal policy. */
const FIFTH: Method = {
  name:
    process.env.BENCH_PROBE_CLIENTS === 'normal' ? "fifth try's (clients at normal policy)" : "fifth try's",
  warm: true,
  idleClients: process.env.BENCH_PROBE_CLIENTS !== 'normal',
  tailOnly: true,
};
/** BENCH_PROBE_METHOD=fifth (default), fourth, or both (each configuration both ways). */
const METHODS: Method[] =
  process.env.BENCH_PROBE_METHOD === 'both'
    ? [FOURTH, FIFTH]
    : process.env.BENCH_PROBE_METHOD === 'fourth'
      ? [FOURTH]
      : [FIFTH];
const SETTLE_MILLIS = 2000;

/**
 * BENCH_PROBE_BEFORE=path/to/another/build: each configuration is also measured with that
 * build's server (its build/bench/discovery-probes.js), one right after the other, so a
 * change is compared with what it replaced in the same run.
 */
const BEFORE = process.env.BENCH_PROBE_BEFORE;

async function measureConfiguration(config: Configuration, method: Method, build?: string): Promise<Figures> {
  const script =
    build === undefined ? new URL(import.meta.url).pathname : `${build}/bench/discovery-probes.js`;
  const child = fork(script, ['--server', String(config.maxLists)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, ...SERVER_ENV },
    // BENCH_SERVER_ARGS: node flags NODE_OPTIONS does not allow, e.g. --trace-gc (diagnosis).
    execArgv: (process.env.BENCH_SERVER_ARGS ?? '').split(' ').filter((a) => a !== ''),
  });
  const next = () => new Promise<Reply>((resolve) => child.once('message', (m: Reply) => resolve(m)));
  const { port } = (await next()) as { port: number };
  const pinned = pinApart(child.pid!);
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: CLIENTS });
  const measure = async () => {
    child.send({ measure: SECONDS } satisfies Message);
    return (await next()) as { lateness: number[]; trace?: TraceSummary };
  };
  if (method.warm) {
    // One list of the whole fleet, as any API that has served clients has, then a pause:
    // the start-up's collections and the first pass's cold caches belong to neither phase.
    let cont: string | undefined;
    do {
      const res = await pool.request({
        path: `/v1/proxies?limit=${config.page}${cont === undefined ? '' : `&continue=${cont}`}`,
        method: 'GET',
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      const text = await res.body.text();
      if (res.statusCode !== 200)
        throw new Error(`warm-up list answered ${res.statusCode}: ${text.slice(0, 200)}`);
      cont = /"continue":"([^"]+)"\}$/.exec(text.slice(-200))?.[1];
    } while (cont !== undefined);
    await new Promise((r) => setTimeout(r, SETTLE_MILLIS));
  }
  const load = loadavg()[0];
  const { lateness: idle, trace: idleTrace } = await measure();
  let stop = false;
  let pages = 0;
  let lists = 0;
  let refused = 0;
  const pageMillis: number[] = [];
  const client = async () => {
    let cont: string | undefined;
    while (!stop) {
      const t = performance.now();
      const res = await pool.request({
        path: `/v1/proxies?limit=${config.page}${cont === undefined ? '' : `&continue=${cont}`}`,
        method: 'GET',
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      // Only the tail is needed for `continue`: parsing the items would make the client, not
      // the API, what competes with the server for the CPU. The fifth try's clients do not
      // even decode the rest (the fourth's read the whole page as text).
      const text = method.tailOnly ? await tail(res.body) : await res.body.text();
      if (res.statusCode === 429) {
        // As a client must: wait what Retry-After says, then ask for the same page again.
        refused++;
        await new Promise((r) => setTimeout(r, Number(res.headers['retry-after'] ?? 1) * 1000));
        continue;
      }
      if (res.statusCode !== 200) throw new Error(`list answered ${res.statusCode}: ${text.slice(0, 200)}`);
      pageMillis.push(performance.now() - t);
      pages++;
      cont = /"continue":"([^"]+)"\}$/.exec(text.slice(-200))?.[1];
      if (cont === undefined) lists++;
    }
  };
  const clientsPolicy = method.idleClients ? schedule('idle') : 'normal';
  const clients = Array.from({ length: CLIENTS }, client);
  const { lateness: busy, trace: busyTrace } = await measure();
  const loadAfter = loadavg()[0];
  stop = true;
  await Promise.all(clients);
  if (method.idleClients) schedule('other');
  await pool.close();
  child.send({ stop: true } satisfies Message);
  await new Promise((r) => child.once('exit', r));
  return {
    config: {
      ...config,
      name: `${config.name}${build === undefined ? '' : ` [before: ${build}]`}${METHODS.length > 1 ? `, ${method.name} method` : ''}`,
    },
    clientsPolicy,
    load,
    loadAfter,
    idle,
    busy,
    pages,
    lists,
    refused,
    pageMillis,
    pinned,
    idleTrace,
    busyTrace,
  };
}

/** The last 200 bytes of a body, as text, without decoding the rest. */
async function tail(body: AsyncIterable<Buffer>): Promise<string> {
  let last: Buffer = Buffer.alloc(0);
  for await (const chunk of body) {
    last = chunk.length >= 200 ? chunk : Buffer.concat([last, chunk]).subarray(-200);
  }
  return last.subarray(-200).toString('utf8');
}

/**
 * Puts every thread of this process (the clients) under SCHED_IDLE, or back under the
 * normal policy (`chrt`): crawlers on other machines do not take the operator's CPU, and on
 * the bench's two cores the clients would. The server was forked before, at the normal
 * policy. Returns the policy the clients list under; throws if the way back fails (every
 * later server would inherit the idle policy).
 */
function schedule(policy: 'idle' | 'other'): string {
  try {
    execFileSync('chrt', [`--${policy}`, '-a', '-p', '0', String(process.pid)], { stdio: 'ignore' });
    return policy === 'idle' ? 'SCHED_IDLE' : 'normal';
  } catch (err) {
    if (policy === 'other')
      throw new Error('could not put the clients back under SCHED_OTHER', { cause: err });
    return 'normal (chrt failed)';
  }
}

/**
 * BENCH_PIN=1: the server on core 0, the clients (this process) on the others (`taskset`), so
 * the load generator cannot take the server's CPU, as crawlers on other machines cannot. Off by
 * default: measured on two cores it made the lateness worse (p99 10-11 ms against 5-9 ms
 * unpinned), since the server then shares its one core with its own GC and I/O threads.
 */
function pinApart(serverPid: number): string {
  // cpus(), not availableParallelism(): after the first pinning this process sees one core.
  const cores = cpus().length;
  if (process.env.BENCH_PIN !== '1' || cores < 2) return 'no';
  try {
    execFileSync('taskset', ['-a', '-p', '-c', '0', String(serverPid)], { stdio: 'ignore' });
    execFileSync('taskset', ['-a', '-p', '-c', `1-${cores - 1}`, String(process.pid)], { stdio: 'ignore' });
    return `server core 0, clients 1-${cores - 1}`;
  } catch {
    return 'no (taskset failed)';
  }
}

async function main(): Promise<void> {
  const rows: Figures[] = [];
  // BENCH_PROBE_ONLY=defaults (or any part of a configuration's name): only those.
  const only = process.env.BENCH_PROBE_ONLY;
  for (const config of CONFIGURATIONS)
    if (only === undefined || config.name.includes(only)) {
      for (const method of METHODS) {
        if (BEFORE !== undefined) rows.push(await measureConfiguration(config, method, BEFORE));
        rows.push(await measureConfiguration(config, method));
      }
    }
  const ms = (l: number[], p: number) => percentile(l, p).toFixed(2);
  const ratio = (f: Figures) => percentile(f.busy, 99) / Math.max(percentile(f.idle, 99), 1);
  process.stdout.write(
    [
      '',
      `## probe lateness while clients list (${PROXIES} proxies, ${PROBES_PER_SECOND} probes/s, ${CLIENTS} clients, ${SECONDS} s each; server NODE_OPTIONS=${SERVER_ENV.NODE_OPTIONS})`,
      '',
      '| configuration | pinned | clients | load average (1 min) before / after | idle p99 ms | listing p50 ms | listing p99 ms | max ms | ratio p99 | pages/s | 429s/s | page p99 ms |',
      '|---|---|---|---|---|---|---|---|---|---|---|---|',
      ...rows.map(
        (f) =>
          `| ${f.config.name} | ${f.pinned} | ${f.clientsPolicy} | ${f.load.toFixed(2)} / ${f.loadAfter.toFixed(2)} | ${ms(f.idle, 99)} | ${ms(f.busy, 50)} | ${ms(f.busy, 99)} | ${Math.max(...f.busy).toFixed(2)} | ${ratio(f).toFixed(2)} | ${(f.pages / SECONDS).toFixed(0)} | ${(f.refused / SECONDS).toFixed(0)} | ${f.pageMillis.length === 0 ? '-' : percentile(f.pageMillis, 99).toFixed(1)} |`,
      ),
      '',
      'ratio = lateness p99 listing / idle (idle floored at 1 ms); target <= 2: ' +
        rows.map((f) => `${f.config.name}: ${ratio(f) <= 2 ? 'met' : 'NOT met'}`).join('; '),
      '',
      ...(TRACE ? rows.flatMap(traceLines) : []),
    ].join('\n'),
  );
}

/** Where the worst 1 % of timers' lateness went (BENCH_PROBE_TRACE=1). */
function traceLines(f: Figures): string[] {
  // NaN crosses the IPC channel as null.
  const fix = (v: number | null, digits: number) => (v === null ? '-' : v.toFixed(digits));
  const pct = (part: number, whole: number) => `${((100 * part) / Math.max(whole, 1e-9)).toFixed(0)} %`;
  const lines = [
    `### ${f.config.name}: the worst 1 % of timers (load average after: ${f.loadAfter.toFixed(2)})`,
    '',
    'Shares of their summed lateness (GC, page, other request work and the rest add up to it; waiting for a CPU is the time the thread was runnable but not running, which overlaps the others), and the cause that dominated each timer:',
    '',
    '| phase | timers | cut ms | sum ms | GC | page work | other request work | rest | waiting for a CPU | dominant causes | GCs (scavenges) | GC ms | longest GC ms | pages | page p50 / p99 / max ms | main thread CPU ms | its run-queue wait ms |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const [phase, t] of [
    ['idle', f.idleTrace],
    ['listing', f.busyTrace],
  ] as const) {
    if (t === undefined) continue;
    const w = t.totals.lateness;
    const causes = Object.entries(t.causes)
      .sort((a, b) => b[1] - a[1])
      .map(([c, n]) => `${c} ${n}`)
      .join(', ');
    lines.push(
      `| ${phase} | ${t.late.length} | ${fix(t.cut, 2)} | ${fix(w, 1)} | ${pct(t.totals.gc, w)} | ${pct(t.totals.page, w)} | ${pct(t.totals.request, w)} | ${pct(t.totals.rest, w)} | ${pct(t.totals.runQueue, w)} | ${causes} | ${t.gcCount} (${t.scavenges}) | ${fix(t.gcMillis, 1)} | ${fix(t.gcMaxMillis, 2)} | ${t.pages} | ${fix(t.pageMillisP50, 2)} / ${fix(t.pageMillisP99, 2)} / ${fix(t.pageMillisMax, 2)} | ${fix(t.cpuMillis, 0)} | ${fix(t.runQueueMillis, 0)} |`,
    );
  }
  const worst = f.busyTrace?.late.slice(0, 10) ?? [];
  if (worst.length > 0) {
    lines.push(
      '',
      'The ten worst timers while listing (ms):',
      '',
      '| lateness | cause | GC | GC kinds | page | other request | rest | waiting for a CPU |',
      '|---|---|---|---|---|---|---|---|',
    );
    for (const l of worst)
      lines.push(
        `| ${l.lateness.toFixed(2)} | ${l.cause} | ${l.gc.toFixed(2)} | ${l.gcKinds} | ${l.page.toFixed(2)} | ${l.request.toFixed(2)} | ${l.rest.toFixed(2)} | ${l.runQueue.toFixed(2)} |`,
      );
  }
  lines.push('');
  return lines;
}

if (process.argv.includes('--server'))
  await server(Number(process.argv[process.argv.indexOf('--server') + 1]));
else await main();
