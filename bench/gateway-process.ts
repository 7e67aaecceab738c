// bench:gateway's measured process: the gateway (memory book, one upstream) and proxy-chain
// (prepareRequestFunction naming the same upstream), and nothing else: the client, the
// upstream proxy and the sites are other processes, as they are in production, so this
// process's CPU and RSS are the gateway's (or proxy-chain's) alone.
import 'reflect-metadata';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { Server as ProxyChainServer } from 'proxy-chain';
import { ApiTokens } from '../book/api-tokens.js';
import { IndexedCatalog } from '../book/indexed-catalog.js';
import { MemoryLeaseStore } from '../book/memory-lease-store.js';
import { Gateway } from '../gateway/gateway-server.js';
import { gatewayBook, gatewayTokens } from '../handlers/gateway-book.js';
import { ask, forkBench, serve } from './gateway-ipc.js';
import type { ProxyReady } from './gateway-upstream.js';

export const BENCH_TOKEN = 'bench-gateway-token-0123456789';

export interface ProxiesReady {
  gatewayPort: number;
  chainPort: number;
}

async function start(up: ProxyReady): Promise<ProxiesReady> {
  const logger = pino({ level: 'silent' });
  const catalog = new IndexedCatalog();
  catalog.replaceAll([
    {
      id: 'bench/upstream',
      ip: up.host,
      port: up.port,
      attributes: {},
      phase: 'Ready',
      healthy: true,
      latencyMillis: 1,
      maxLeases: 100_000,
      credentials: { username: up.username, password: up.password },
    },
  ]);
  const store = new MemoryLeaseStore({ catalog, logger });
  const gateway = new Gateway({
    book: gatewayBook(store, catalog),
    tokens: gatewayTokens(ApiTokens.single(BENCH_TOKEN, 'bench')),
    registry: new Registry(),
    logger,
  });
  const gw = await gateway.listen('127.0.0.1', 0);
  const chain = new ProxyChainServer({
    port: 0,
    host: '127.0.0.1',
    prepareRequestFunction: () => ({
      upstreamProxyUrl: `http://${up.username}:${up.password}@${up.host}:${up.port}`,
    }),
  });
  await chain.listen();
  return { gatewayPort: gw.port, chainPort: chain.port };
}

const self = fileURLToPath(import.meta.url);

export async function startProxies(
  up: ProxyReady,
  raise = false,
): Promise<{ child: ChildProcess; ports: ProxiesReady }> {
  const child = forkBench(self, ['--proxies'], raise);
  return { child, ports: await ask<ProxiesReady>(child, 'start', up) };
}

if (process.argv[1] === self) serve({ start: (arg) => start(arg as ProxyReady) });
