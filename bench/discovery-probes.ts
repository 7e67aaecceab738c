// Does listing starve the probes? The discovery API over 10,000 proxies shares its event loop
// with a probe schedule (the health engine's timers: here 200 probes/s, each a timer due at a
// planned instant, whose lateness is how late it fired). Measured with the API idle, then
// while 32 clients list every page of the fleet as fast as they can (following `continue`).
// The issue's target: lateness p99 while listing within 2x of the idle API's.
//
//   npm run bench:discovery          (after bench/discovery.js and bench/lease-store.js)
//   BENCH_PROBE_SECONDS=10 node build/bench/discovery-probes.js
//
// The server and the schedule run in a child process, the clients here.
import { fork } from 'node:child_process';
import { loadavg } from 'node:os';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { Pool } from 'undici';
import { createDiscoveryApp } from '../discovery/app.js';
import { IndexedCatalog } from '../discovery/indexed-catalog.js';
import { MemoryLeaseStore } from '../discovery/memory-lease-store.js';
import { DiscoveryServer } from '../discovery/server.js';
import { fleet } from './discovery-fleet.js';

const SECONDS = Number(process.env.BENCH_PROBE_SECONDS ?? 10);
const PROXIES = Number(process.env.BENCH_LARGE_FLEET ?? 10_000);
const CLIENTS = Number(process.env.BENCH_CONCURRENCY ?? 32);
const PROBES_PER_SECOND = 200;
const TOKEN = 'bench-probes-token-0123456789';

type Message = { measure: number } | { stop: true };
type Reply = { port: number } | { lateness: number[] };

async function server(): Promise<void> {
  const logger = pino({ level: 'silent' });
  const catalog = new IndexedCatalog();
  catalog.replaceAll(fleet(PROXIES));
  const leases = new MemoryLeaseStore({ catalog, logger });
  const app = createDiscoveryApp({ catalog, leases, token: TOKEN, logger, registry: new Registry() });
  const http = new DiscoveryServer(app, { host: '127.0.0.1', port: 0 }, logger);
  await http.start();
  process.send!({ port: http.port } satisfies Reply);
  process.on('message', (message: Message) => {
    if ('stop' in message) {
      void http.stop().then(() => process.exit(0));
      return;
    }
    // A probe schedule: each timer due at its planned instant; lateness = fired - planned.
    const lateness: number[] = [];
    const start = performance.now();
    const count = Math.round(message.measure * PROBES_PER_SECOND);
    for (let i = 0; i < count; i++) {
      const due = start + (i * 1000) / PROBES_PER_SECOND;
      setTimeout(
        () => {
          lateness.push(performance.now() - due);
          if (lateness.length === count) process.send!({ lateness } satisfies Reply);
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

async function main(): Promise<void> {
  const child = fork(new URL(import.meta.url).pathname, ['--server'], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const next = () => new Promise<Reply>((resolve) => child.once('message', (m: Reply) => resolve(m)));
  const { port } = (await next()) as { port: number };
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: CLIENTS });
  const measure = async () => {
    child.send({ measure: SECONDS } satisfies Message);
    return ((await next()) as { lateness: number[] }).lateness;
  };
  const load = loadavg()[0];
  const idle = await measure();
  let stop = false;
  let pages = 0;
  let lists = 0;
  const pageMillis: number[] = [];
  const client = async () => {
    while (!stop) {
      let cont: string | undefined;
      do {
        const t = performance.now();
        const res = await pool.request({
          path: `/v1/proxies${cont === undefined ? '' : `?continue=${cont}`}`,
          method: 'GET',
          headers: { authorization: `Bearer ${TOKEN}` },
        });
        // Only the tail is read for `continue`: parsing 500 items would make the client, not
        // the API, what competes with the server for the CPU.
        const text = await res.body.text();
        const body = { continue: /"continue":"([^"]+)"\}$/.exec(text.slice(-200))?.[1] };
        pageMillis.push(performance.now() - t);
        if (res.statusCode !== 200) throw new Error(`list answered ${res.statusCode}`);
        pages++;
        cont = body.continue;
      } while (cont !== undefined && !stop);
      lists++;
    }
  };
  const clients = Array.from({ length: CLIENTS }, client);
  const busy = await measure();
  stop = true;
  await Promise.all(clients);
  await pool.close();
  child.send({ stop: true } satisfies Message);
  const row = (name: string, l: number[]) =>
    `| ${name} | ${percentile(l, 50).toFixed(2)} | ${percentile(l, 99).toFixed(2)} | ${Math.max(...l).toFixed(2)} |`;
  const ratio = percentile(busy, 99) / Math.max(percentile(idle, 99), 1);
  process.stdout.write(
    [
      '',
      `## probe lateness while clients list (${PROXIES} proxies, ${PROBES_PER_SECOND} probes/s, ${CLIENTS} clients, ${SECONDS} s each; load average ${load.toFixed(2)})`,
      '',
      '| API | lateness p50 ms | p99 ms | max ms |',
      '|---|---|---|---|',
      row('idle', idle),
      row('listing as fast as it can', busy),
      '',
      `listing: ${(pages / SECONDS).toFixed(0)} pages/s (${(lists / SECONDS).toFixed(1)} full lists/s), page p99 ${percentile(pageMillis, 99).toFixed(1)} ms`,
      `lateness p99 listing / idle (idle floored at 1 ms): ${ratio.toFixed(2)} (target <= 2: ${ratio <= 2 ? 'met' : 'NOT met'})`,
      '',
    ].join('\n'),
  );
}

if (process.argv.includes('--server')) await server();
else await main();
