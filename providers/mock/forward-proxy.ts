import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import { connect, isIP, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';

export interface ForwardProxyStats {
  /** CONNECT tunnels opened. */
  connects: number;
  /** Plain (absolute-URI) HTTP requests forwarded. */
  requests: number;
  /** Requests and tunnels answered 407: no or wrong Proxy-Authorization. */
  refusedAuth: number;
}

/** Basic-auth credentials the proxy requires of every client, as Squid's basic_ncsa_auth would. */
export interface ForwardProxyCredentials {
  username: string;
  password: string;
}

export interface ForwardProxy {
  host: string;
  port: number;
  stats: ForwardProxyStats;
  /** Stops listening and cuts every open connection and tunnel. */
  close(): Promise<void>;
}

/** Headers that describe one hop, not the request: never forwarded (RFC 9110 §7.6.1). */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

function endToEnd(headers: IncomingMessage['headers']): IncomingMessage['headers'] {
  return Object.fromEntries(Object.entries(headers).filter(([k]) => !HOP_BY_HOP.has(k.toLowerCase())));
}

function parseAuthority(authority: string | undefined): { host: string; port: number } | undefined {
  const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(authority ?? '');
  if (!m) return undefined;
  const port = Number(m[2]);
  return port > 0 && port < 65536 ? { host: m[1], port } : undefined;
}

/**
 * Where an upstream connection to `target` starts from: the proxy's own listen address, so a
 * target sees each mock proxy as its own client address, as it would see a separate VM
 * (sites refuse or throttle per source address). Only towards loopback targets, the only
 * ones a loopback source can reach; a wildcard listen address keeps the kernel's choice.
 */
function sourceFor(listenHost: string, target: string): { localAddress: string; family: 4 | 6 } | undefined {
  const family = isIP(listenHost);
  if (family === 0 || listenHost === '0.0.0.0' || listenHost === '::') return undefined;
  const loopback =
    family === 4
      ? target === 'localhost' || (isIP(target) === 4 && target.startsWith('127.'))
      : target === 'localhost' || target === '::1';
  // The family pins name resolution to the source's ('localhost' may resolve to ::1 first).
  return loopback ? { localAddress: listenHost, family: family as 4 | 6 } : undefined;
}

/**
 * Whether a `Proxy-Authorization` header carries exactly these credentials (Basic). Compared
 * in constant time, so the answer's timing says nothing about how much of a guess was right.
 */
export function authorizes(header: string | undefined, credentials: ForwardProxyCredentials): boolean {
  const m = /^Basic +([A-Za-z0-9+/=]+) *$/i.exec(header ?? '');
  if (!m) return false;
  const given = Buffer.from(m[1], 'base64');
  const wanted = Buffer.from(`${credentials.username}:${credentials.password}`, 'utf8');
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

const CHALLENGE = 'Basic realm="proxy"';

/**
 * A small real forward proxy: absolute-URI HTTP requests and CONNECT tunnels, which is all
 * a crawler (and the health probe) uses. The mock provider serves one per Running instance,
 * requiring the credentials the operator generated for it (407 otherwise), as the
 * kubernetes provider's Squid does. Upstream connections to loopback leave from the proxy's
 * own address (see sourceFor).
 */
export async function startForwardProxy(opts: {
  host: string;
  port: number;
  credentials?: ForwardProxyCredentials;
}): Promise<ForwardProxy> {
  const stats: ForwardProxyStats = { connects: 0, requests: 0, refusedAuth: 0 };
  const allowed = (req: IncomingMessage) =>
    opts.credentials === undefined || authorizes(req.headers['proxy-authorization'], opts.credentials);
  const open = new Set<Duplex>();
  const track = (s: Duplex) => {
    open.add(s);
    s.once('close', () => open.delete(s));
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (!allowed(req)) {
      stats.refusedAuth++;
      res
        .writeHead(407, { 'content-type': 'text/plain', 'proxy-authenticate': CHALLENGE })
        .end('forward proxy: proxy authentication required\n');
      return;
    }
    let target: URL;
    try {
      target = new URL(req.url ?? '');
    } catch {
      res
        .writeHead(400, { 'content-type': 'text/plain' })
        .end('forward proxy: expected an absolute http:// URI\n');
      return;
    }
    if (target.protocol !== 'http:') {
      res
        .writeHead(400, { 'content-type': 'text/plain' })
        .end('forward proxy: only http:// URIs; use CONNECT for TLS\n');
      return;
    }
    stats.requests++;
    const upstreamHost = target.hostname.replace(/^\[|\]$/g, '');
    const upstream = httpRequest(
      {
        host: upstreamHost,
        port: target.port || 80,
        method: req.method,
        path: `${target.pathname}${target.search}`,
        headers: endToEnd(req.headers),
        agent: false,
        ...sourceFor(opts.host, upstreamHost),
      },
      (up) => {
        res.writeHead(up.statusCode ?? 502, endToEnd(up.headers));
        up.pipe(res);
      },
    );
    upstream.on('socket', track);
    upstream.on('error', (err) => {
      if (!res.headersSent)
        res.writeHead(502, { 'content-type': 'text/plain' }).end(`forward proxy: ${err.message}\n`);
      else res.destroy(err);
    });
    req.pipe(upstream);
  });

  server.on('connection', track);
  server.on('connect', (req: IncomingMessage, client: Duplex, head: Buffer) => {
    if (!allowed(req)) {
      stats.refusedAuth++;
      client.end(`HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: ${CHALLENGE}\r\n\r\n`);
      return;
    }
    const target = parseAuthority(req.url);
    if (!target) {
      client.end('HTTP/1.1 400 Bad Request\r\n\r\n');
      return;
    }
    stats.connects++;
    const upstream: Socket = connect(
      { port: target.port, host: target.host, ...sourceFor(opts.host, target.host) },
      () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (head.length > 0) upstream.write(head);
        upstream.pipe(client);
        client.pipe(upstream);
      },
    );
    track(upstream);
    upstream.on('error', () => {
      if (client.writable) client.end('HTTP/1.1 502 Bad Gateway\r\n\r\n');
    });
    client.on('error', () => upstream.destroy());
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : opts.port;

  return {
    host: opts.host,
    port,
    stats,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of open) s.destroy();
      }),
  };
}
