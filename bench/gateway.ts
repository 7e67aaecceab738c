// npm run bench:gateway: the gateway against the same upstream forward proxy taken straight,
// and against proxy-chain (Apify's Node.js proxy server, prepareRequestFunction choosing the
// upstream: what a Node user builds instead), in one run on loopback. The upstream proxy and
// the sites run in another process (gateway-upstream.ts). Results: docs/benchmarks.md, last
// section. Flags: --quick (fewer samples), --tunnels=N (idle tunnels for the memory figure).
import 'reflect-metadata';
import http from 'node:http';
import net from 'node:net';
import { loadavg } from 'node:os';
import tls from 'node:tls';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { Server as ProxyChainServer } from 'proxy-chain';
import { ApiTokens } from '../book/api-tokens.js';
import { IndexedCatalog } from '../book/indexed-catalog.js';
import { MemoryLeaseStore } from '../book/memory-lease-store.js';
import { Gateway } from '../gateway/gateway-server.js';
import { gatewayBook, gatewayTokens } from '../handlers/gateway-book.js';
import { startUpstream, type UpstreamReady } from './gateway-upstream.js';

const TOKEN = 'bench-gateway-token-0123456789';
const quick = process.argv.includes('--quick');
const tunnelsArg = process.argv.find((a) => a.startsWith('--tunnels='));
const IDLE_TUNNELS = tunnelsArg === undefined ? [1000] : tunnelsArg.slice(10).split(',').map(Number);

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
    socket.once('error', reject);
  });
}

/** (a) Milliseconds from nothing to the first byte of an HTTPS page through `hop`. */
async function httpsFirstByte(hop: Hop, up: UpstreamReady): Promise<number> {
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

/** (b) Keep-alive plain-HTTP requests per second through `hop`, and this process's CPU per request. */
async function requestsPerSecond(hop: Hop, up: UpstreamReady, seconds: number, concurrency: number) {
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
  const cpu = process.cpuUsage();
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
  const used = process.cpuUsage(cpu);
  agent.destroy();
  return { rps: done / elapsed, cpuMicrosPerRequest: (used.user + used.system) / done };
}

/** (c) MB/s of one tunnel carrying the 100 MB body. */
async function bulk(hop: Hop, up: UpstreamReady): Promise<number> {
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

function memory(): number {
  (globalThis as { gc?: () => void }).gc?.();
  const m = process.memoryUsage();
  return m.rss;
}

/** (d) Bytes of this process per idle tunnel held open through `hop` (clients included). */
async function idleTunnels(hop: Hop, up: UpstreamReady, count: number): Promise<number> {
  const url = new URL(up.httpURL);
  const before = memory();
  const sockets: net.Socket[] = [];
  for (let i = 0; i < count; i += 100)
    sockets.push(
      ...(await Promise.all(Array.from({ length: Math.min(100, count - i) }, () => tunnel(hop, url.host)))),
    );
  await new Promise((r) => setTimeout(r, 500));
  const after = memory();
  for (const s of sockets) s.destroy();
  await new Promise((r) => setTimeout(r, 500));
  return (after - before) / count;
}

async function main(): Promise<void> {
  const { child, upstream: up } = await startUpstream();
  const logger = pino({ level: 'silent' });
  const catalog = new IndexedCatalog();
  catalog.replaceAll([
    {
      id: 'bench/upstream',
      ip: up.proxy.host,
      port: up.proxy.port,
      attributes: {},
      phase: 'Ready',
      healthy: true,
      latencyMillis: 1,
      maxLeases: 100_000,
      credentials: { username: up.proxy.username, password: up.proxy.password },
    },
  ]);
  const store = new MemoryLeaseStore({ catalog, logger });
  const gateway = new Gateway({
    book: gatewayBook(store, catalog),
    tokens: gatewayTokens(ApiTokens.single(TOKEN, 'bench')),
    registry: new Registry(),
    logger,
  });
  const gw = await gateway.listen('127.0.0.1', 0);
  const upstreamURL = `http://${up.proxy.username}:${up.proxy.password}@${up.proxy.host}:${up.proxy.port}`;
  const chain = new ProxyChainServer({
    port: 0,
    host: '127.0.0.1',
    prepareRequestFunction: () => ({ upstreamProxyUrl: upstreamURL }),
  });
  await chain.listen();
  const hops: Hop[] = [
    {
      name: 'straight',
      host: up.proxy.host,
      port: up.proxy.port,
      auth: basic(up.proxy.username, up.proxy.password),
    },
    { name: 'gateway', host: '127.0.0.1', port: gw.port, auth: basic('', TOKEN) },
    { name: 'proxy-chain', host: '127.0.0.1', port: chain.port },
  ];
  const out: string[] = [];
  const say = (line: string) => {
    out.push(line);
    console.log(line);
  };
  say(
    `bench:gateway ${new Date().toISOString()} node ${process.version}, load average ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );

  // (a) interleaved, so load changes hit every hop alike.
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

  // (b) and (e)
  const seconds = quick ? 3 : 6;
  const rps: Record<string, { rps: number; cpuMicrosPerRequest: number }> = {};
  for (const hop of hops) rps[hop.name] = await requestsPerSecond(hop, up, seconds, 16);
  say(
    `(b) keep-alive HTTP, 16 connections, ${seconds} s each: straight ${rps.straight.rps.toFixed(0)} req/s; gateway ${rps.gateway.rps.toFixed(0)}; proxy-chain ${rps['proxy-chain'].rps.toFixed(0)}; gateway/proxy-chain ${(rps.gateway.rps / rps['proxy-chain'].rps).toFixed(2)}x (target >= 1.0x)`,
  );
  say(
    `(e) CPU of this process per request (client included): straight ${rps.straight.cpuMicrosPerRequest.toFixed(0)} us; gateway ${rps.gateway.cpuMicrosPerRequest.toFixed(0)} us; proxy-chain ${rps['proxy-chain'].cpuMicrosPerRequest.toFixed(0)} us; the gateway's own ~${(rps.gateway.cpuMicrosPerRequest - rps.straight.cpuMicrosPerRequest).toFixed(0)} us`,
  );

  // (c)
  const straightBulk = await bulk(hops[0], up);
  const gatewayBulk = await bulk(hops[1], up);
  say(
    `(c) one tunnel, 100 MB: straight ${straightBulk.toFixed(0)} MB/s; gateway ${gatewayBulk.toFixed(0)} MB/s (${(gatewayBulk / straightBulk).toFixed(2)}x, target >= 0.9x)`,
  );

  // (d)
  for (const count of IDLE_TUNNELS) {
    const straight = await idleTunnels(hops[0], up, count);
    const through = await idleTunnels(hops[1], up, count);
    say(
      `(d) ${count} idle tunnels, RSS of this process per tunnel: straight (client sockets) ${(straight / 1024).toFixed(1)} KiB; gateway ${(through / 1024).toFixed(1)} KiB; the gateway's own ~${((through - straight) / 1024).toFixed(1)} KiB (target <= 10 KiB)`,
    );
  }
  say(
    `load average at the end ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );

  await chain.close(true);
  await gateway.close();
  store.close();
  child.disconnect();
}

await main();
