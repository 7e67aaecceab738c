// npm run bench:gateway: the gateway against the same upstream forward proxy taken straight,
// and against proxy-chain (Apify's Node.js proxy server, prepareRequestFunction choosing the
// upstream: what a Node user builds instead), in one run on loopback. Four processes, as in
// production: this one is the client (the load generator); the gateway and proxy-chain run in
// one of their own (gateway-process.ts), the upstream proxy in another and the sites in a
// fourth (gateway-upstream.ts); the straight run skips only the gateway's process. Results:
// docs/benchmarks.md. Flags: --quick (fewer samples), --tunnels=N,... (idle tunnels for the
// memory figure; default 1000,10000), --bulk-rounds=N (alternating 100 MB rounds; default 3).
import http from 'node:http';
import net from 'node:net';
import { loadavg } from 'node:os';
import tls from 'node:tls';
import type { ChildProcess } from 'node:child_process';
import { ask, fileLimits, type Usage } from './gateway-ipc.js';
import { BENCH_TOKEN, startProxies } from './gateway-process.js';
import { startProxy, startSite, type SiteReady } from './gateway-upstream.js';

const quick = process.argv.includes('--quick');
const flag = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const IDLE_TUNNELS = (flag('tunnels') ?? '1000,10000').split(',').map(Number);
const BULK_ROUNDS = Number(flag('bulk-rounds') ?? (quick ? 1 : 3));
/** Which parts to run (--only=a,c,d; default all): (e) comes with (b). */
const ONLY = new Set((flag('only') ?? 'a,b,c,d').split(','));
/**
 * The most idle tunnels one proxy process can hold: two sockets each, under the hard
 * descriptor limit with room for its listeners, stdio and IPC.
 */
const FITTING = Math.floor((fileLimits().hard - 100) / 2);

interface Hop {
  name: string;
  host: string;
  port: number;
  auth?: string;
}

const basic = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** Opens a CONNECT tunnel through `hop` to host:port; resolves with the socket. */
function tunnel(hop: Hop, authority: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: hop.host, port: hop.port, noDelay: true });
    let head = '';
    socket.once('connect', () =>
      socket.write(
        `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${hop.auth ? `Proxy-Authorization: ${hop.auth}\r\n` : ''}\r\n`,
      ),
    );
    const onData = (c: Buffer) => {
      head += c.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      if (!/^HTTP\/1\.[01] 2/.test(head)) return reject(new Error(`${hop.name}: ${head.split('\r\n')[0]}`));
      resolve(socket);
    };
    socket.on('data', onData);
    socket.on('error', reject);
  });
}

/** (a) Milliseconds from nothing to the first byte of an HTTPS page through `hop`. */
async function httpsFirstByte(hop: Hop, up: SiteReady): Promise<number> {
  const url = new URL(up.httpsURL);
  const started = performance.now();
  const raw = await tunnel(hop, url.host);
  const secure = tls.connect({ socket: raw, ca: up.ca, host: url.hostname });
  await new Promise<void>((r, j) => secure.once('secureConnect', r).once('error', j));
  secure.write(`GET / HTTP/1.1\r\nHost: ${url.host}\r\nConnection: close\r\n\r\n`);
  await new Promise<void>((r) => secure.once('data', () => r()));
  const ms = performance.now() - started;
  secure.destroy();
  return ms;
}

type Cpu = Usage['cpu'];
const cpuMicros = (a: Cpu, b: Cpu) => b.user + b.system - a.user - a.system;
/** CPU microseconds used so far by each of `processes` (undefined: this one). */
const cpuOf = (processes: (ChildProcess | undefined)[]) =>
  Promise.all(processes.map((p) => (p === undefined ? process.cpuUsage() : ask<Cpu>(p, 'cpu'))));
const cpuSince = async (processes: (ChildProcess | undefined)[], before: Cpu[]) =>
  (await cpuOf(processes)).map((after, i) => cpuMicros(before[i], after));

/**
 * (b) Keep-alive plain-HTTP requests per second through `hop`, and (e) the CPU per request of
 * the hop's own process (`meter`: the gateway's, or the upstream proxy's for the straight run).
 */
async function requestsPerSecond(
  hop: Hop,
  up: SiteReady,
  seconds: number,
  concurrency: number,
  meter: ChildProcess,
) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const headers = hop.auth ? { 'proxy-authorization': hop.auth } : {};
  const one = () =>
    new Promise<void>((resolve, reject) => {
      const req = http.request(
        { host: hop.host, port: hop.port, path: up.httpURL, agent, headers },
        (res) => {
          res.resume();
          res.once('end', () =>
            res.statusCode === 200 ? resolve() : reject(new Error(`${hop.name}: ${res.statusCode}`)),
          );
        },
      );
      req.once('error', reject);
      req.end();
    });
  // Warm the connections and the lease.
  await Promise.all(Array.from({ length: concurrency }, one));
  let done = 0;
  const cpu = await ask<Cpu>(meter, 'cpu');
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) {
        await one();
        done++;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const used = cpuMicros(cpu, await ask<Cpu>(meter, 'cpu'));
  agent.destroy();
  return { done, elapsed, cpuMicros: used };
}

/** (c) MB/s of one tunnel carrying the 100 MB body. */
async function bulk(hop: Hop, up: SiteReady): Promise<number> {
  const url = new URL(up.bulkURL);
  const socket = await tunnel(hop, url.host);
  const started = performance.now();
  socket.write(`GET /bulk HTTP/1.1\r\nHost: ${url.host}\r\nConnection: close\r\n\r\n`);
  let received = 0;
  await new Promise<void>((resolve) => {
    socket.on('data', (c: Buffer) => {
      received += c.length;
      if (received >= up.bulkBytes) resolve();
    });
    socket.once('close', () => resolve());
  });
  const seconds = (performance.now() - started) / 1000;
  socket.destroy();
  return up.bulkBytes / seconds / 1e6;
}

/** (d) Bytes of the gateway's process per idle tunnel held open through it. */
async function idleTunnels(
  hop: Hop,
  up: SiteReady,
  count: number,
  gateway: ChildProcess,
): Promise<{ rss: number; heap: number; external: number }> {
  const before = await ask<Usage>(gateway, 'usage');
  const sockets: net.Socket[] = [];
  for (let i = 0; i < count; i += 100)
    sockets.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(100, count - i) }, () => tunnel(hop, up.holdAuthority)),
      )),
    );
  await new Promise((r) => setTimeout(r, 1000));
  const after = await ask<Usage>(gateway, 'usage');
  for (const s of sockets) s.destroy();
  await new Promise((r) => setTimeout(r, 2000));
  return {
    rss: (after.rss - before.rss) / count,
    heap: (after.heapUsed - before.heapUsed) / count,
    external: (after.external - before.external) / count,
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

async function main(): Promise<void> {
  const { child: siteProcess, site: up } = await startSite();
  const { child: upstreamProcess, proxy } = await startProxy(true);
  const { child: gatewayProcess, ports } = await startProxies(proxy, true);
  const hops: Hop[] = [
    { name: 'straight', host: proxy.host, port: proxy.port, auth: basic(proxy.username, proxy.password) },
    { name: 'gateway', host: '127.0.0.1', port: ports.gatewayPort, auth: basic('', BENCH_TOKEN) },
    { name: 'proxy-chain', host: '127.0.0.1', port: ports.chainPort },
  ];
  const [straightHop, gatewayHop] = hops;
  const say = (line: string) => console.log(line);
  say(`bench:gateway ${new Date().toISOString()} node ${process.version}, load average ${load()}`);
  say('    processes: client (this one), gateway + proxy-chain, upstream proxy, sites');

  if (ONLY.has('a')) await latency(hops, up, say);
  if (ONLY.has('b')) await throughput(hops, up, upstreamProcess, gatewayProcess, say);
  if (ONLY.has('c'))
    await bulkRounds(
      straightHop,
      gatewayHop,
      up,
      { site: siteProcess, upstream: upstreamProcess, gateway: gatewayProcess },
      say,
    );
  if (ONLY.has('d'))
    for (const wanted of IDLE_TUNNELS) {
      const count = Math.min(wanted, FITTING);
      if (count < wanted)
        say(
          `    ${wanted} tunnels need ${wanted * 2} descriptors in each proxy; the hard limit fits ${count}`,
        );
      const through = await idleTunnels(gatewayHop, up, count, gatewayProcess);
      say(
        `(d) ${count} idle tunnels through the gateway: its process's RSS per tunnel ${(through.rss / 1024).toFixed(1)} KiB (target <= 10 KiB), of which JS heap ${(through.heap / 1024).toFixed(1)} KiB, Buffers ${(through.external / 1024).toFixed(1)} KiB`,
      );
    }
  say(`load average at the end ${load()}`);
  for (const child of [gatewayProcess, upstreamProcess, siteProcess]) child.disconnect();
}

type Say = (line: string) => void;

/** (a) interleaved, so load changes hit every hop alike. */
async function latency(hops: Hop[], up: SiteReady, say: Say): Promise<void> {
  const samples = quick ? 100 : 300;
  const ttfb: Record<string, number[]> = { straight: [], gateway: [], 'proxy-chain': [] };
  for (let i = 0; i < samples; i++)
    for (const hop of hops) ttfb[hop.name].push(await httpsFirstByte(hop, up));
  for (const hop of hops) ttfb[hop.name].sort((a, b) => a - b);
  const row = (name: string) =>
    `p50 ${percentile(ttfb[name], 50).toFixed(2)} ms, p99 ${percentile(ttfb[name], 99).toFixed(2)} ms`;
  say(
    `(a) HTTPS first byte (${samples} each): straight ${row('straight')}; gateway ${row('gateway')}; proxy-chain ${row('proxy-chain')}`,
  );
  say(
    `    gateway adds p50 ${(percentile(ttfb.gateway, 50) - percentile(ttfb.straight, 50)).toFixed(2)} ms, p99 ${(percentile(ttfb.gateway, 99) - percentile(ttfb.straight, 99)).toFixed(2)} ms (targets 1 ms, 5 ms)`,
  );
}

async function throughput(
  hops: Hop[],
  up: SiteReady,
  upstreamProcess: ChildProcess,
  gatewayProcess: ChildProcess,
  say: Say,
): Promise<void> {
  // Slices of 2 s, the hops taking turns, so a change of load hits each alike.
  const slices = quick ? 1 : 3;
  const seconds = 2 * slices;
  const sums: Record<string, { done: number; elapsed: number; cpuMicros: number }> = {};
  for (let slice = 0; slice < slices; slice++)
    for (const hop of hops) {
      const r = await requestsPerSecond(hop, up, 2, 16, hop === hops[0] ? upstreamProcess : gatewayProcess);
      const sum = (sums[hop.name] ??= { done: 0, elapsed: 0, cpuMicros: 0 });
      sum.done += r.done;
      sum.elapsed += r.elapsed;
      sum.cpuMicros += r.cpuMicros;
    }
  const rps = Object.fromEntries(
    Object.entries(sums).map(([name, x]) => [
      name,
      { rps: x.done / x.elapsed, cpuMicrosPerRequest: x.cpuMicros / x.done },
    ]),
  );
  say(
    `(b) keep-alive HTTP, 16 connections, ${seconds} s each in ${slices} interleaved slices: straight ${rps.straight.rps.toFixed(0)} req/s; gateway ${rps.gateway.rps.toFixed(0)}; proxy-chain ${rps['proxy-chain'].rps.toFixed(0)}; gateway/proxy-chain ${(rps.gateway.rps / rps['proxy-chain'].rps).toFixed(2)}x (target >= 1.0x)`,
  );
  say(
    `(e) CPU per request of the hop's own process: gateway ${rps.gateway.cpuMicrosPerRequest.toFixed(0)} us; proxy-chain ${rps['proxy-chain'].cpuMicrosPerRequest.toFixed(0)} us; (the upstream proxy, straight: ${rps.straight.cpuMicrosPerRequest.toFixed(0)} us)`,
  );
}

/** (c) alternating rounds; the gateway process's CPU per MB beside. */
async function bulkRounds(
  straightHop: Hop,
  gatewayHop: Hop,
  up: SiteReady,
  processes: { site: ChildProcess; upstream: ChildProcess; gateway: ChildProcess },
  say: Say,
): Promise<void> {
  // CPU of every process taking part: the client (this one), the sites, the upstream, the gateway.
  const all = [undefined, processes.site, processes.upstream, processes.gateway];
  const straightBulk: number[] = [];
  const gatewayBulk: number[] = [];
  const straightCpu = [0, 0, 0, 0];
  const gatewayCpu = [0, 0, 0, 0];
  const add = (sum: number[], xs: number[]) => xs.forEach((x, i) => (sum[i] += x));
  for (let round = 0; round < BULK_ROUNDS; round++) {
    let before = await cpuOf(all);
    straightBulk.push(await bulk(straightHop, up));
    add(straightCpu, await cpuSince(all, before));
    before = await cpuOf(all);
    gatewayBulk.push(await bulk(gatewayHop, up));
    add(gatewayCpu, await cpuSince(all, before));
  }
  const ratios = gatewayBulk.map((g, i) => g / straightBulk[i]);
  const mb = (BULK_ROUNDS * up.bulkBytes) / 1e6;
  const perMB = (cpu: number[]) => cpu.map((us) => (us / 1000 / mb).toFixed(2)).join(' + ');
  const total = (cpu: number[]) => cpu.reduce((a, b) => a + b, 0) / 1000 / mb;
  say(
    `(c) one tunnel, 100 MB, ${BULK_ROUNDS} alternating rounds: straight ${straightBulk.map((x) => x.toFixed(0)).join(', ')} MB/s; gateway ${gatewayBulk.map((x) => x.toFixed(0)).join(', ')} MB/s; median ratio ${median(ratios).toFixed(2)}x (target >= 0.9x)`,
  );
  say(
    `    CPU ms per MB (client + sites + upstream + gateway): straight ${perMB(straightCpu)} = ${total(straightCpu).toFixed(2)}; gateway ${perMB(gatewayCpu)} = ${total(gatewayCpu).toFixed(2)}; CPU-bound estimate of the ratio ${(total(straightCpu) / total(gatewayCpu)).toFixed(2)}x`,
  );
}

await main();
