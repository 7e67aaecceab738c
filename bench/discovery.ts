// Discovery API benchmark: list and lease+release throughput and latency with 1,000 proxies,
// beside a bare node:http hello-world measured in the same run, reported as ratios.
//
//   node build/bench/discovery.js
//   BENCH_PHASE_SECONDS=10 BENCH_CONCURRENCY=32 BENCH_PROXIES=1000 node build/bench/discovery.js
//
// Client and servers share this process (and the machine's cores) in every phase alike, so
// the ratios to the hello-world baseline are the meaningful figures, not the absolutes.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { Pool } from 'undici';
import { createDiscoveryApp } from '../discovery/app.js';
import type { ProxyRecord } from '../discovery/catalog.js';
import { IndexedCatalog } from '../discovery/indexed-catalog.js';
import { MemoryLeaseStore } from '../discovery/memory-lease-store.js';
import { DiscoveryServer } from '../discovery/server.js';

const PHASE_SECONDS = positiveNumber('BENCH_PHASE_SECONDS', 10);
const CONCURRENCY = positiveNumber('BENCH_CONCURRENCY', 32);
const PROXIES = positiveNumber('BENCH_PROXIES', 1000);
const WARMUP_SECONDS = Math.min(1, PHASE_SECONDS / 5);
const TOKEN = 'bench-token';
const GEOS = ['eu', 'us', 'ap', 'sa', 'af'];

function positiveNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0)
    throw new Error(`${name} must be a positive number, got '${raw}'`);
  return value;
}

function fleet(count: number): ProxyRecord[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `bench/proxy-${String(i).padStart(4, '0')}`,
    ip: `10.${(i >> 8) & 255}.${i & 255}.1`,
    port: 3128,
    attributes: { geo: GEOS[i % GEOS.length], purpose: i % 2 === 0 ? 'crawl' : 'api' },
    phase: i % 10 === 9 ? 'Unhealthy' : 'Ready',
    healthy: i % 10 !== 9,
    latencyMillis: 20 + ((i * 37) % 400),
    maxLeases: 5,
  }));
}

interface PhaseResult {
  name: string;
  ops: number;
  errors: number;
  seconds: number;
  p50: number;
  p99: number;
}

/** Runs `op` from CONCURRENCY workers for the phase duration; latencies in milliseconds. */
async function phase(name: string, op: () => Promise<boolean>): Promise<PhaseResult> {
  process.stdout.write(
    `${name}: warming up ${WARMUP_SECONDS}s, then measuring ${PHASE_SECONDS}s with ${CONCURRENCY} concurrent clients `,
  );
  await runFor(WARMUP_SECONDS, op, []);
  const latencies: number[] = [];
  const progress = setInterval(() => process.stdout.write('.'), 1000);
  const started = performance.now();
  const errors = await runFor(PHASE_SECONDS, op, latencies);
  const seconds = (performance.now() - started) / 1000;
  clearInterval(progress);
  latencies.sort((a, b) => a - b);
  const at = (q: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? Number.NaN;
  const result = { name, ops: latencies.length, errors, seconds, p50: at(0.5), p99: at(0.99) };
  process.stdout.write(` ${Math.round(result.ops / seconds)} ops/s\n`);
  return result;
}

async function runFor(seconds: number, op: () => Promise<boolean>, latencies: number[]): Promise<number> {
  const deadline = performance.now() + seconds * 1000;
  let errors = 0;
  const worker = async () => {
    while (performance.now() < deadline) {
      const start = performance.now();
      const ok = await op().catch(() => false);
      if (ok) latencies.push(performance.now() - start);
      else errors++;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return errors;
}

async function get(pool: Pool, path: string, headers: Record<string, string> = {}): Promise<boolean> {
  const response = await pool.request({ path, method: 'GET', headers });
  await response.body.text();
  return response.statusCode === 200;
}

async function main(): Promise<void> {
  console.log(
    `discovery benchmark: ${PROXIES} proxies, node ${process.version}, ${PHASE_SECONDS}s per phase, concurrency ${CONCURRENCY}`,
  );
  const logger = pino({ level: 'silent' });

  const hello: Server = createServer((_req, res) => res.end('hello'));
  await new Promise<void>((resolve) => hello.listen(0, '127.0.0.1', resolve));
  const helloURL = `http://127.0.0.1:${(hello.address() as AddressInfo).port}`;

  const proxies = fleet(PROXIES);
  const catalog = new IndexedCatalog();
  catalog.replaceAll(proxies);
  const leases = new MemoryLeaseStore({ catalog, logger });
  await leases.start();
  const app = createDiscoveryApp({ catalog, leases, token: TOKEN, logger, registry: new Registry() });
  const discovery = new DiscoveryServer(app, { host: '127.0.0.1', port: 0 }, logger);
  await discovery.start();

  const helloPool = new Pool(helloURL, { connections: CONCURRENCY });
  const pool = new Pool(discovery.url, { connections: CONCURRENCY });
  const auth = { authorization: `Bearer ${TOKEN}` };
  const leaseHeaders = { ...auth, 'content-type': 'application/json' };
  let geo = 0;

  const results: PhaseResult[] = [];
  results.push(await phase('baseline: node:http hello world', () => get(helloPool, '/')));
  results.push(await phase(`list all ${PROXIES} proxies`, () => get(pool, '/v1/proxies', auth)));
  results.push(
    await phase('list filtered (attr.geo, attr.purpose, healthy)', () =>
      get(pool, '/v1/proxies?attr.geo=eu&attr.purpose=crawl&healthy=true', auth),
    ),
  );
  results.push(
    await phase('lease + release (one op = both requests)', async () => {
      const body = JSON.stringify({ selector: { geo: GEOS[geo++ % GEOS.length] }, ttlSeconds: 60 });
      const leased = await pool.request({ path: '/v1/leases', method: 'POST', headers: leaseHeaders, body });
      const text = await leased.body.text();
      if (leased.statusCode !== 201) return false;
      const { leaseID } = JSON.parse(text) as { leaseID: string };
      const released = await pool.request({ path: `/v1/leases/${leaseID}`, method: 'DELETE', headers: auth });
      await released.body.text();
      return released.statusCode === 204;
    }),
  );

  await helloPool.close();
  await pool.close();
  await discovery.stop();
  await leases.stop();
  await new Promise<void>((resolve) => hello.close(() => resolve()));

  const base = results[0];
  const baseRate = base.ops / base.seconds;
  console.log(
    '\nphase                                          ops/s   p50 ms   p99 ms  errors  ops/s vs hello  p50 vs hello',
  );
  for (const r of results) {
    const rate = r.ops / r.seconds;
    console.log(
      `${r.name.padEnd(45)} ${rate.toFixed(0).padStart(7)} ${r.p50.toFixed(2).padStart(8)} ${r.p99.toFixed(2).padStart(8)} ${String(r.errors).padStart(7)} ${(rate / baseRate).toFixed(3).padStart(15)} ${(r.p50 / base.p50).toFixed(1).padStart(12)}x`,
    );
  }
  if (results.some((r) => r.errors > 0)) process.exitCode = 1;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
