// What one list page costs the server's process, without the noise of timing: the discovery
// API over 10,000 proxies in a child process with the Deployment's Node settings, 4 clients
// paging through the fleet (200 a page) until N pages are served, after one warm-up pass.
// Reported: the server's CPU per page (process.cpuUsage, every thread), and its collections
// from --trace-gc-nvp (scavenges, mark-compacts, their pauses, bytes promoted). CPU time on a
// shared machine still moves with its load; the collections hardly do.
//
//   node build/bench/discovery-page-cost.js [--pages=20000] [--build=path/to/other/build ...]
//
// Each --build (another checkout's build/, e.g. the previous commit's) is measured too, one
// after the other, in the order given, then this build: before and after in one run.
import { fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { Pool } from 'undici';
import { OPERATOR_RUNTIME_ENV } from '../charts/operator-chart.js';

const TOKEN = 'bench-page-cost-token-0123456789';
const PROXIES = Number(process.env.BENCH_LARGE_FLEET ?? 10_000);
const PAGE = 200;
const CLIENTS = 4;

type Command = 'cpu' | 'mark' | 'exit';
type Reply = { port: number } | { cpuMillis: number } | { marked: true };

async function serve(build: string): Promise<void> {
  const { pino } = await import('pino');
  const { Registry } = await import('prom-client');
  // The lease book moved from discovery/ to book/: an older --build still has it in discovery/.
  const book = existsSync(`${build}/book/indexed-catalog.js`) ? 'book' : 'discovery';
  const { createDiscoveryApp } = (await import(
    `${build}/discovery/app.js`
  )) as typeof import('../discovery/app.js');
  const { IndexedCatalog } = (await import(
    `${build}/${book}/indexed-catalog.js`
  )) as typeof import('../book/indexed-catalog.js');
  const { MemoryLeaseStore } = (await import(
    `${build}/${book}/memory-lease-store.js`
  )) as typeof import('../book/memory-lease-store.js');
  const { DiscoveryServer } = (await import(
    `${build}/discovery/server.js`
  )) as typeof import('../discovery/server.js');
  const { fleet } = (await import(
    `${build}/bench/discovery-fleet.js`
  )) as typeof import('./discovery-fleet.js');
  const logger = pino({ level: 'silent' });
  const catalog = new IndexedCatalog();
  catalog.replaceAll(fleet(PROXIES));
  const leases = new MemoryLeaseStore({ catalog, logger });
  const app = createDiscoveryApp({ catalog, leases, token: TOKEN, logger, registry: new Registry() });
  const http = new DiscoveryServer(app, { host: '127.0.0.1', port: 0 }, logger);
  await http.start();
  process.send!({ port: http.port } satisfies Reply);
  process.on('message', (command: Command) => {
    if (command === 'mark') {
      // The GC lines after this one belong to the measured pages.
      process.stdout.write('\nMEASURED-PAGES-START\n', () => process.send!({ marked: true } satisfies Reply));
    } else if (command === 'cpu') {
      const { user, system } = process.cpuUsage();
      process.send!({ cpuMillis: (user + system) / 1000 } satisfies Reply);
    } else {
      void http.stop().then(() => process.exit(0));
    }
  });
}

interface Cost {
  build: string;
  load: number;
  pages: number;
  seconds: number;
  cpuMicrosPerPage: number;
  scavenges: number;
  scavengeMillis: number;
  scavengeMaxMillis: number;
  markCompacts: number;
  markCompactMillis: number;
  markCompactMaxMillis: number;
  promotedMB: number;
}

async function measure(build: string, pages: number): Promise<Cost> {
  const child = fork(new URL(import.meta.url).pathname, ['--serve', build], {
    env: { ...process.env, ...OPERATOR_RUNTIME_ENV },
    execArgv: ['--trace-gc-nvp'],
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const next = () => new Promise<Reply>((resolve) => child.once('message', (m: Reply) => resolve(m)));
  const send = (command: Command) => child.send(command);
  const { port } = (await next()) as { port: number };
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: CLIENTS });
  let remaining = 0;
  const client = async () => {
    let cont: string | undefined;
    while (remaining-- > 0) {
      const res = await pool.request({
        path: `/v1/proxies?limit=${PAGE}${cont === undefined ? '' : `&continue=${cont}`}`,
        method: 'GET',
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      const text = await res.body.text();
      if (res.statusCode !== 200) throw new Error(`list answered ${res.statusCode}: ${text.slice(0, 200)}`);
      cont = /"continue":"([^"]+)"\}$/.exec(text.slice(-200))?.[1];
    }
  };
  // One pass through the fleet first: cold caches and the JIT are not what is measured.
  remaining = Math.ceil(PROXIES / PAGE);
  await Promise.all(Array.from({ length: CLIENTS }, client));
  await new Promise((r) => setTimeout(r, 1000));
  send('mark');
  await next();
  send('cpu');
  const before = ((await next()) as { cpuMillis: number }).cpuMillis;
  const load = loadavg()[0];
  const started = performance.now();
  remaining = pages;
  await Promise.all(Array.from({ length: CLIENTS }, client));
  const seconds = (performance.now() - started) / 1000;
  send('cpu');
  const after = ((await next()) as { cpuMillis: number }).cpuMillis;
  await pool.close();
  send('exit');
  await new Promise((r) => child.once('exit', r));
  const cost: Cost = {
    build,
    load,
    pages,
    seconds,
    cpuMicrosPerPage: ((after - before) * 1000) / pages,
    scavenges: 0,
    scavengeMillis: 0,
    scavengeMaxMillis: 0,
    markCompacts: 0,
    markCompactMillis: 0,
    markCompactMaxMillis: 0,
    promotedMB: 0,
  };
  for (const line of out.split('MEASURED-PAGES-START')[1]?.split('\n') ?? []) {
    const gc = /pause=([\d.]+) .*gc=(\w+)/.exec(line);
    if (gc === null) continue;
    const pause = Number(gc[1]);
    if (gc[2] === 's') {
      cost.scavenges++;
      cost.scavengeMillis += pause;
      cost.scavengeMaxMillis = Math.max(cost.scavengeMaxMillis, pause);
      cost.promotedMB += Number(/promoted=(\d+)/.exec(line)?.[1] ?? 0) / 1e6;
    } else {
      cost.markCompacts++;
      cost.markCompactMillis += pause;
      cost.markCompactMaxMillis = Math.max(cost.markCompactMaxMillis, pause);
    }
  }
  return cost;
}

async function main(): Promise<void> {
  const flag = (name: string) =>
    process.argv.filter((a) => a.startsWith(`--${name}=`)).map((a) => a.slice(name.length + 3));
  const pages = Number(flag('pages')[0] ?? 20_000);
  const own = new URL('..', import.meta.url).pathname.replace(/\/$/, '');
  const rows: Cost[] = [];
  for (const build of [...flag('build'), own]) rows.push(await measure(build, pages));
  const f = (v: number, d = 1) => v.toFixed(d);
  process.stdout.write(
    [
      '',
      `## list page cost (${PROXIES} proxies, ${PAGE} a page, ${CLIENTS} clients, ${pages} pages after a warm-up pass; server NODE_OPTIONS=${OPERATOR_RUNTIME_ENV.NODE_OPTIONS})`,
      '',
      '| build | load average (1 min) | seconds | server CPU us/page | scavenges | scavenge ms (max) | us of scavenge per page | mark-compacts | mark-compact ms (max) | promoted MB |',
      '|---|---|---|---|---|---|---|---|---|---|',
      ...rows.map(
        (r) =>
          `| ${r.build} | ${f(r.load, 2)} | ${f(r.seconds)} | ${f(r.cpuMicrosPerPage, 0)} | ${r.scavenges} | ${f(r.scavengeMillis, 0)} (${f(r.scavengeMaxMillis)}) | ${f((r.scavengeMillis * 1000) / r.pages)} | ${r.markCompacts} | ${f(r.markCompactMillis, 0)} (${f(r.markCompactMaxMillis)}) | ${f(r.promotedMB, 2)} |`,
      ),
      '',
    ].join('\n'),
  );
}

if (process.argv[2] === '--serve') await serve(process.argv[3]);
else await main();
