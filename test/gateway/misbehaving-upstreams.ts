// Upstream proxies that fail in the ways real ones do, in front of a gateway on the memory
// book, on loopback: each on its own 127.0.0.x, tried before the good ones (lower latency).
import {
  createServer as createHttpServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
} from 'node:http';
import {
  connect,
  createServer as createNetServer,
  type AddressInfo,
  type Server as NetServer,
  type Socket,
} from 'node:net';
import { Registry } from 'prom-client';
import { ApiTokens } from '../../book/api-tokens.js';
import type { ProxyRecord } from '../../book/catalog.js';
import { MemoryLeaseStore } from '../../book/memory-lease-store.js';
import type { GatewayOptions } from '../../gateway/gateway-context.js';
import { Gateway } from '../../gateway/gateway-server.js';
import { gatewayBook, gatewayTokens } from '../../handlers/gateway-book.js';
import { startForwardProxy, type ForwardProxy } from '../../providers/mock/forward-proxy.js';
import { proxy, silentLogger, TestCatalog } from '../book/fixtures.js';
import { TOKEN } from './gateway-world.js';

export type Misbehaviour =
  /** A real forward proxy. */
  | 'good'
  /** A real forward proxy, except that a connection carrying a request for /reset-me is reset. */
  | 'flaky'
  /** Sends the head and 7 of 100 body bytes, then closes the connection. */
  | 'dies_midway'
  /** Accepts the connection, never answers. */
  | 'blackhole'
  /** Forwards the request to the site, then resets the connection before answering. */
  | 'forwards_then_resets'
  /** Nothing listens: the connection is refused. */
  | 'refuses';

export interface SiteRequest {
  method: string;
  url: string;
}

export interface MisbehavingWorld {
  gateway: Gateway;
  port: number;
  sitePort: number;
  store: MemoryLeaseStore;
  /** What reached the site, in order. */
  seen: SiteRequest[];
  close(): Promise<void>;
}

/**
 * The site: `/slow` sends "start\n" at once and "end\n" `slowMs` later; anything else answers
 * "ok\n" at once.
 */
function startSite(seen: SiteRequest[], slowMs: number): Promise<Server> {
  const site = createHttpServer((req: IncomingMessage, res) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '' });
    req.resume();
    if (req.url === '/slow') {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '10' });
      res.write('start\n');
      setTimeout(() => res.end('end\n'), slowMs);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '3' }).end('ok\n');
  });
  return new Promise((r) => site.listen(0, '127.0.0.1', () => r(site)));
}

async function startUpstream(
  kind: Exclude<Misbehaviour, 'good' | 'refuses'>,
  ip: string,
  closers: (() => Promise<void>)[],
): Promise<number> {
  let inner: ForwardProxy | undefined;
  if (kind === 'flaky') {
    inner = await startForwardProxy({ host: '127.0.0.1', port: 0 });
    closers.push(() => inner!.close());
  }
  const open = new Set<Socket>();
  const server: NetServer = createNetServer((sock) => {
    open.add(sock);
    sock.once('close', () => open.delete(sock));
    sock.on('error', () => undefined);
    if (kind === 'flaky') {
      const up = connect(inner!.port, '127.0.0.1');
      up.on('error', () => sock.destroy());
      sock.on('data', (d: Buffer) => {
        if (d.includes('/reset-me')) {
          up.destroy();
          sock.resetAndDestroy();
        } else up.write(d);
      });
      up.pipe(sock);
      sock.on('close', () => up.destroy());
    } else if (kind === 'dies_midway')
      sock.once('data', () => {
        sock.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial');
        setTimeout(() => sock.destroy(), 100);
      });
    else if (kind === 'forwards_then_resets')
      sock.once('data', (d: Buffer) => {
        const text = d.toString('latin1');
        const [method, url] = text.split('\r\n')[0].split(' ');
        const body = text.slice(text.indexOf('\r\n\r\n') + 4);
        const out = httpRequest(
          url,
          { method, headers: { 'content-length': Buffer.byteLength(body) } },
          (r) => {
            r.resume();
            sock.resetAndDestroy();
          },
        );
        out.on('error', () => sock.destroy());
        out.end(body);
      });
    // blackhole: nothing
  });
  await new Promise<void>((r) => server.listen(0, ip, r));
  closers.push(
    () =>
      new Promise<void>((r) => {
        server.close(() => r());
        // The gateway's connections to a blackhole stay open otherwise.
        for (const c of open) c.destroy();
      }),
  );
  return (server.address() as AddressInfo).port;
}

export async function startMisbehavingWorld(
  kinds: readonly Misbehaviour[],
  options: Partial<GatewayOptions> = {},
  slowMs = 1000,
): Promise<MisbehavingWorld> {
  const seen: SiteRequest[] = [];
  const site = await startSite(seen, slowMs);
  const closers: (() => Promise<void>)[] = [];
  const records: ProxyRecord[] = [];
  for (const [i, kind] of kinds.entries()) {
    const ip = `127.0.0.${10 + i}`;
    let port: number;
    if (kind === 'good') {
      const fp = await startForwardProxy({ host: ip, port: 0 });
      closers.push(() => fp.close());
      port = fp.port;
    } else if (kind === 'refuses') {
      // A port that was free a moment ago: nothing listens there.
      const probe = createNetServer();
      await new Promise<void>((r) => probe.listen(0, ip, r));
      port = (probe.address() as AddressInfo).port;
      await new Promise((r) => probe.close(r));
    } else port = await startUpstream(kind, ip, closers);
    // Lower latency first: the book leases the misbehaving ones before the good ones.
    records.push(proxy(`fleet/${kind}-${i}`, { ip, port, latencyMillis: kind === 'good' ? 100 + i : 1 + i }));
  }
  const catalog = new TestCatalog(records);
  const store = new MemoryLeaseStore({
    catalog,
    logger: silentLogger,
    cooldownSeconds: 60,
    maxCooldownSeconds: 600,
  });
  const gateway = new Gateway({
    book: gatewayBook(store, catalog),
    tokens: gatewayTokens(ApiTokens.single(TOKEN, 'team-a')),
    registry: new Registry(),
    logger: silentLogger,
    options: { connectTimeoutMs: 1000, idleMs: 300, ...options },
  });
  const { port } = await gateway.listen('127.0.0.1', 0);
  return {
    gateway,
    port,
    sitePort: (site.address() as AddressInfo).port,
    store,
    seen,
    async close() {
      await gateway.close();
      for (const close of closers) await close();
      site.closeAllConnections();
      await new Promise((r) => site.close(r));
      store.close();
    },
  };
}
