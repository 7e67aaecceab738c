// A gateway on real parts, on loopback: real forward proxies (the mock provider's, each on
// its own 127.0.0.x so a site sees a proxy's own exit IP) requiring credentials, the real
// memory lease book over a real catalog, and a site (HTTP and HTTPS) that echoes the caller's
// address and bans the addresses the test names.
import {
  createServer as createHttpServer,
  request as httpRequest,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { Registry } from 'prom-client';
import { ApiTokens } from '../../book/api-tokens.js';
import type { ProxyRecord } from '../../book/catalog.js';
import type { LeaseStore } from '../../book/lease-store.js';
import { MemoryLeaseStore } from '../../book/memory-lease-store.js';
import type { TenantLedger } from '../../book/tenant-quotas.js';
import { selfSignedCert } from '../../framework/testing/self-signed-cert.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { Gateway } from '../../gateway/gateway-server.js';
import type { GatewayOptions } from '../../gateway/gateway-context.js';
import type { UpstreamGuard } from '../../gateway/ports.js';
import { gatewayBook, gatewayTokens, type CooldownListener } from '../../handlers/gateway-book.js';
import { OPEN_POLICY, type TokenPolicy } from '../../book/token-scope.js';
import { startForwardProxy, type ForwardProxy } from '../../providers/mock/forward-proxy.js';
import { proxy, silentLogger, TestCatalog } from '../book/fixtures.js';

export const TOKEN = 'gateway-test-token-0123456789';
export const PROXY_IPS = ['127.0.0.2', '127.0.0.3', '127.0.0.4'];

export interface World {
  gateway: Gateway;
  port: number;
  store: LeaseStore;
  catalog: TestCatalog;
  proxies: Map<string, ForwardProxy>;
  registry: Registry;
  site: { httpPort: number; httpsPort: number; ca: string; banned: Set<string>; seen: string[] };
  /**
   * Rotates the password of the proxy on `ip`: it requires the new one at once, and the
   * catalog carries it (as after the proxy's Secret changed).
   */
  rotate(ip: string, password: string): void;
  close(): Promise<void>;
}

let cert: { key: string; cert: string } | undefined;

export async function startWorld(
  options: Partial<GatewayOptions> = {},
  maxLeases = 5,
  policy: TokenPolicy = OPEN_POLICY,
  /** External proxies: `names` gives the host name a proxy's record carries instead of its IP. */
  external?: { guard: UpstreamGuard; names: Readonly<Record<string, string>> },
  /** Told of each cooldown a gateway report starts (the operator counts them in a metric). */
  onCooldown?: CooldownListener,
  /**
   * Several teams' tokens (default: TOKEN alone, as team-a), the ledger of their quotas, and
   * the lease book (default: the memory book).
   */
  teams: {
    tokens?: ApiTokens;
    ledger?: TenantLedger;
    store?: (catalog: TestCatalog) => LeaseStore & { close(): void };
  } = {},
): Promise<World> {
  cert ??= selfSignedCert();
  const banned = new Set<string>();
  const seen: string[] = [];
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const ip = req.socket.remoteAddress ?? '';
    seen.push(ip);
    const send = (status: number, body: string, headers: Record<string, string> = {}) =>
      void res
        .writeHead(status, {
          'content-type': 'text/plain',
          'content-length': String(body.length),
          ...headers,
        })
        .end(body);
    if (banned.has(ip)) return send(403, `banned ${ip}\n`);
    if (req.url === '/slow-limit') return send(429, 'slow down\n', { 'retry-after': '30' });
    send(200, `${ip}\n`);
  };
  const http = createHttpServer(handler);
  const https = createHttpsServer(cert, handler);
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  await new Promise<void>((r) => https.listen(0, '127.0.0.1', r));
  const proxies = new Map<string, ForwardProxy>();
  const required = new Map<string, { username: string; password: string }>();
  const records: ProxyRecord[] = [];
  for (const [i, ip] of PROXY_IPS.entries()) {
    const credentials = { username: `u${i}`, password: `upstream-secret-${i}` };
    required.set(ip, credentials);
    const fp = await startForwardProxy({ host: ip, port: await freePort(), credentials });
    proxies.set(ip, fp);
    records.push(
      proxy(`fleet/p${i}`, {
        ip: external?.names[ip] ?? ip,
        ...(external?.names[ip] === undefined ? {} : { guarded: true }),
        port: fp.port,
        // A copy, as the catalog reads a Secret: rotating the proxy's own leaves the record as it was.
        credentials: { ...credentials },
        maxLeases,
        attributes: { geo: i === 0 ? 'us' : 'eu' },
      }),
    );
  }
  const catalog = new TestCatalog(records);
  const store =
    teams.store?.(catalog) ??
    new MemoryLeaseStore({
      catalog,
      logger: silentLogger,
      cooldownSeconds: 60,
      maxCooldownSeconds: 600,
    });
  const registry = new Registry();
  const gateway = new Gateway({
    book: gatewayBook(
      store,
      catalog,
      (owner) => teams.tokens?.policyOf(owner) ?? policy,
      onCooldown,
      undefined,
      teams.ledger,
    ),
    tokens: gatewayTokens(teams.tokens ?? ApiTokens.single(TOKEN, 'team-a')),
    ...(external === undefined ? {} : { guard: external.guard }),
    registry,
    logger: silentLogger,
    options: { connectTimeoutMs: 1000, idleMs: 300, ...options },
  });
  const { port } = await gateway.listen('127.0.0.1', 0);
  return {
    gateway,
    port,
    store,
    catalog,
    proxies,
    registry,
    site: {
      httpPort: (http.address() as AddressInfo).port,
      httpsPort: (https.address() as AddressInfo).port,
      ca: cert.cert,
      banned,
      seen,
    },
    rotate(ip, password) {
      const credentials = required.get(ip)!;
      credentials.password = password;
      const port = proxies.get(ip)!.port;
      catalog.proxies = catalog.proxies.map((r) =>
        r.port === port ? { ...r, credentials: { username: credentials.username, password } } : r,
      );
    },
    async close() {
      await gateway.close();
      for (const fp of proxies.values()) await fp.close();
      for (const s of [http, https]) {
        s.closeAllConnections();
        await new Promise((r) => s.close(r));
      }
      store.close();
    },
  };
}

export function basic(username: string, token = TOKEN): string {
  return `Basic ${Buffer.from(`${username}:${token}`).toString('base64')}`;
}

export interface Answer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

/** GET an http:// URL through the gateway (absolute URI). */
export function viaGateway(port: number, url: string, auth: string | undefined): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        path: url,
        agent: false,
        headers: auth === undefined ? {} : { 'proxy-authorization': auth },
      },
      (res) => collect(res, resolve),
    );
    req.on('error', reject);
    req.end();
  });
}

/**
 * GET https://127.0.0.1:<port>/ through a CONNECT tunnel the gateway opens, verifying the
 * site's certificate. A refused CONNECT resolves with the gateway's answer instead.
 */
export function viaTunnel(
  port: number,
  sitePort: number,
  ca: string,
  auth: string | undefined,
  keepOpen = false,
): Promise<Answer & { close?: () => void }> {
  return new Promise((resolve, reject) => {
    const connectReq = httpRequest({
      host: '127.0.0.1',
      port,
      method: 'CONNECT',
      path: `127.0.0.1:${sitePort}`,
      agent: false,
      headers: auth === undefined ? {} : { 'proxy-authorization': auth },
    });
    connectReq.on('error', reject);
    connectReq.on('connect', (res, socket, head) => {
      if (res.statusCode !== 200) {
        let body = head.toString('utf8');
        socket.on('data', (c: Buffer) => (body += c.toString('utf8')));
        socket.on('close', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
        return;
      }
      const tls = tlsConnect({ socket, ca, host: '127.0.0.1' });
      tls.on('error', reject);
      // A keep-alive request written by hand: the tunnel stays open until close().
      tls.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n');
      let raw = '';
      const onData = (c: Buffer) => {
        raw += c.toString('utf8');
        const end = raw.indexOf('\r\n\r\n');
        if (end < 0) return;
        const length = Number(/content-length: *(\d+)/i.exec(raw.slice(0, end))?.[1] ?? 0);
        if (raw.length < end + 4 + length) return;
        tls.off('data', onData);
        if (!keepOpen) tls.destroy();
        resolve({
          status: Number(raw.slice(9, 12)),
          body: raw.slice(end + 4, end + 4 + length),
          headers: {},
          close: () => tls.destroy(),
        });
      };
      tls.on('data', onData);
    });
    connectReq.end();
  });
}

function collect(res: IncomingMessage, done: (a: Answer) => void): void {
  let body = '';
  res.setEncoding('utf8');
  res.on('data', (c: string) => (body += c));
  res.on('end', () => done({ status: res.statusCode ?? 0, body, headers: res.headers }));
}

/**
 * A CONNECT to 127.0.0.1:`port` through the gateway on a raw socket, handed back paused once
 * the gateway answered 200; `early` rides in the same write as the CONNECT.
 */
export function tunnelThrough(
  w: Pick<World, 'port'>,
  port: number,
  early = Buffer.alloc(0),
  username = '',
  token = TOKEN,
): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port: w.port });
    const head = `CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nProxy-Authorization: ${basic(username, token)}\r\n\r\n`;
    s.once('connect', () => s.write(Buffer.concat([Buffer.from(head), early])));
    let got = Buffer.alloc(0);
    const onData = (c: Buffer) => {
      got = Buffer.concat([got, c]);
      const end = got.indexOf('\r\n\r\n');
      if (end < 0) return;
      s.off('data', onData);
      if (!got.subarray(0, 12).toString().startsWith('HTTP/1.1 200'))
        return reject(new Error(got.toString()));
      s.pause();
      const rest = got.subarray(end + 4);
      if (rest.length > 0) s.unshift(rest);
      resolve(s);
    };
    s.on('data', onData);
    s.once('error', reject);
  });
}

/** Polls until `condition` holds (no fixed sleeps). */
export async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * A plain GET written inside an open tunnel (tunnelThrough) to the HTTP site: the body, the exit
 * IP. Rejects, with what came, if the tunnel closes first.
 */
export function askInside(tunnel: Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    const onData = (c: Buffer) => {
      got += c.toString('latin1');
      const end = got.indexOf('\r\n\r\n');
      const length = Number(/content-length: *(\d+)/i.exec(got)?.[1] ?? -1);
      if (end < 0 || length < 0 || got.length < end + 4 + length) return;
      tunnel.off('data', onData);
      resolve(got.slice(end + 4).trim());
    };
    tunnel.on('data', onData);
    tunnel.once('close', () => reject(new Error(`tunnel closed; got ${JSON.stringify(got)}`)));
    tunnel.resume();
    tunnel.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  });
}
