// The gateway: an HTTP/1.1 forward proxy (absolute-URI requests and CONNECT) in front of the
// lease book. Every request authenticates (never an open proxy); its own routes, on the same
// port, are the report by session (session-report.ts) and /healthz.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { authenticate, checkToken } from './authenticate.js';
import { forwardConnect } from './forward-connect.js';
import { forwardHttp } from './forward-http.js';
import { DEFAULT_GATEWAY_OPTIONS, type GatewayContext, type GatewayOptions } from './gateway-context.js';
import { GatewayMetrics } from './gateway-metrics.js';
import { LeasePool } from './lease-pool.js';
import type { GatewayBook, TokenVerifier, UpstreamGuard } from './ports.js';
import { clientErrorReply, replyError, replyErrorOnSocket } from './replies.js';
import { SitePaces } from './site-paces.js';
import { reportBySession, sessionOfReportPath } from './session-report.js';
import { UpstreamAgents } from './upstream-agents.js';
import { TCP_KEEPALIVE_DELAY_MS, TUNNEL_HIGH_WATER_MARK } from './upstream-tunnel.js';

export interface GatewayDeps {
  book: GatewayBook;
  tokens: TokenVerifier;
  /** Where guarded (External) upstreams may be (handlers/gateway-guard.ts); without it none may. */
  guard?: UpstreamGuard;
  registry: Registry;
  logger: Logger;
  options?: Partial<GatewayOptions>;
}

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;
/** How often open tunnels are checked against the live tokens (the tokens file is re-read every 2 s). */
const REVOCATION_CHECK_MS = 1000;

export class Gateway {
  readonly server: Server;
  private readonly ctx: GatewayContext;
  private readonly tunnels = new Set<Duplex>();
  /** Each authenticated tunnel's token name: one whose token is revoked is cut (cutRevoked). */
  private readonly tunnelOwners = new Map<Duplex, string>();
  private revocations?: NodeJS.Timeout;
  /**
   * Each client connection's answers not yet sent whole. Node hands a pipelined CONNECT's
   * socket over (and reports a parse error) as soon as it reads it, while the answers to the
   * requests before it may still be on their way: what is written on the socket then must wait
   * for them, or its bytes land before or inside theirs (RFC 9112 §9.3.2: answers go in order).
   */
  private readonly answering = new WeakMap<Duplex, Set<ServerResponse>>();

  constructor(deps: GatewayDeps) {
    const options = { ...DEFAULT_GATEWAY_OPTIONS, ...deps.options };
    const logger = deps.logger;
    const pool = new LeasePool(deps.book, {
      idleMs: options.idleMs,
      onError: (err, what) => logger.warn({ err }, `gateway: background ${what} failed`),
    });
    this.ctx = {
      failed: new Map(),
      book: deps.book,
      tokens: deps.tokens,
      pool,
      agents: new UpstreamAgents(),
      ...(deps.guard === undefined ? {} : { guard: deps.guard }),
      metrics: new GatewayMetrics(deps.registry, () => pool.size),
      paces: new SitePaces(),
      options,
      logger,
    };
    this.server = createServer(
      {
        keepAliveTimeout: 60_000,
        // No bound on a whole request (a long upload, download or tunnel is fine), but the
        // head has one: without it (Node's default follows requestTimeout: 0) a connection
        // that sends nothing, or a header byte now and then, stays open unauthenticated.
        requestTimeout: 0,
        headersTimeout: options.headersTimeoutMs,
        // Node checks the deadline on this interval: a head is cut within 1.5x its timeout.
        connectionsCheckingInterval: Math.max(10, Math.min(30_000, options.headersTimeoutMs / 2)),
        highWaterMark: TUNNEL_HIGH_WATER_MARK,
        // TCP keep-alive on every client connection, a tunnel's included (upstream-tunnel.ts).
        keepAlive: true,
        keepAliveInitialDelay: TCP_KEEPALIVE_DELAY_MS,
      },
      (req, res) => {
        this.answerBegun(req.socket, res);
        void this.onRequest(req, res).catch((err: unknown) => this.internal(err, res));
      },
    );
    this.server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      // Node hands a CONNECT's socket over without its own 'error' listener: a client that
      // resets it (curl after a 407) would otherwise crash the process. Closing follows.
      socket.on('error', (err: Error) => {
        logger.debug({ err }, 'gateway: CONNECT client socket failed');
        socket.destroy();
      });
      this.tunnels.add(socket);
      socket.once('close', () => {
        this.tunnels.delete(socket);
        this.tunnelOwners.delete(socket);
      });
      void this.answersSent(socket)
        .then(() => {
          // The client left, or a request before asked to close the connection (it did).
          if (socket.destroyed || !socket.writable) {
            this.ctx.metrics.ended('tunnel', 'client_gone');
            socket.destroy();
            return;
          }
          return this.onConnect(req, socket, head);
        })
        .catch((err: unknown) => {
          logger.error({ err }, 'gateway: CONNECT failed');
          socket.destroy();
        });
    });
    // A client that sends garbage, too large a head or none in time gets the documented
    // answer (JSON and X-Gateway-Error) and a closed socket, never a crash.
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
      // A reset socket has no one to answer.
      if (err.code === 'ECONNRESET') socket.destroy();
      else
        void this.answersSent(socket).then(() =>
          replyErrorOnSocket(socket, clientErrorReply(err.code, options.headersTimeoutMs)),
        );
    });
  }

  private answerBegun(socket: Duplex, res: ServerResponse): void {
    let open = this.answering.get(socket);
    if (open === undefined) this.answering.set(socket, (open = new Set()));
    open.add(res);
    // 'close' follows the answer's last byte, or the connection's end.
    res.once('close', () => open.delete(res));
  }

  /** Once every answer begun on `socket` is sent whole (or its connection is gone). */
  private async answersSent(socket: Duplex): Promise<void> {
    const open = [...(this.answering.get(socket) ?? [])];
    await Promise.all(open.map((res) => new Promise((r) => res.once('close', r))));
  }

  /** Leases held now (in use and idle). */
  get leasesHeld(): number {
    return this.ctx.pool.size;
  }

  get openTunnels(): number {
    return this.tunnels.size;
  }

  async listen(host: string, port: number): Promise<{ host: string; port: number }> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.ctx.pool.start();
    this.revocations = setInterval(() => this.cutRevoked(), REVOCATION_CHECK_MS);
    this.revocations.unref();
    const address = this.server.address() as { address: string; port: number };
    return { host: address.address, port: address.port };
  }

  /**
   * Stops taking connections, lets open tunnels and requests finish for up to `graceMs`, then
   * cuts what is left and releases every lease it holds.
   */
  async close(graceMs = 0): Promise<void> {
    clearInterval(this.revocations);
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    const deadline = Date.now() + graceMs;
    while (this.tunnels.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    for (const socket of this.tunnels) socket.destroy();
    this.server.closeAllConnections();
    await closed;
    this.ctx.agents.close();
    await this.ctx.pool.close();
  }

  /** Who the request's Proxy-Authorization names, and the lease options its token allows. */
  private authenticate(req: IncomingMessage) {
    return authenticate(
      req.headers['proxy-authorization'],
      this.ctx.tokens,
      this.ctx.book,
      this.ctx.options.maxTTLSeconds,
      req.socket.remoteAddress ?? '',
    );
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const startedAt = performance.now();
    const url = req.url ?? '';
    if (url.startsWith('/')) return this.ownRoute(req, res, url);
    const auth = this.authenticate(req);
    if (!auth.ok) {
      this.ctx.metrics.ended('http', 'refused');
      req.resume();
      return replyError(res, auth.error);
    }
    await forwardHttp(this.ctx, req, res, auth.owner, auth.options, startedAt);
  }

  private async onConnect(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const startedAt = performance.now();
    (socket as Socket).setNoDelay?.(true);
    const auth = this.authenticate(req);
    if (!auth.ok) {
      this.ctx.metrics.ended('tunnel', 'refused');
      return replyErrorOnSocket(socket, auth.error);
    }
    if (!socket.destroyed) this.tunnelOwners.set(socket, auth.owner);
    await forwardConnect(this.ctx, req, socket, head, auth.owner, auth.options, startedAt);
  }

  /**
   * Cuts the tunnels whose token is no longer valid (a line deleted from the tokens file):
   * a plain request authenticates each time, but a tunnel only once, so a revoked team's open
   * tunnels carried its traffic, and held its leases, for as long as they carried bytes.
   */
  private cutRevoked(): void {
    if (this.tunnelOwners.size === 0) return;
    const valid = this.ctx.tokens.names();
    for (const [socket, owner] of this.tunnelOwners)
      if (!valid.has(owner)) {
        this.ctx.logger.info({ owner }, 'gateway: tunnel cut, its token was revoked');
        socket.destroy();
      }
  }

  /** Requests to the gateway itself: /healthz, and the report by session (a bearer token or Basic credentials). */
  private async ownRoute(req: IncomingMessage, res: ServerResponse, url: string): Promise<void> {
    const path = url.split('?')[0];
    if (path === '/healthz') {
      req.resume();
      res.writeHead(200, { 'Content-Type': 'text/plain' }).end('ok\n');
      return;
    }
    const session = sessionOfReportPath(path);
    if (session === undefined) {
      req.resume();
      return replyError(res, {
        status: 404,
        code: 'not_found',
        message: `no route for ${req.method} ${path.slice(0, 100)}; this is a forward proxy: send absolute-URI requests or CONNECT`,
      });
    }
    const bearer = BEARER.exec(req.headers.authorization ?? '');
    let owner: string | undefined;
    if (bearer !== null) {
      const checked = checkToken(this.ctx.tokens, bearer[1], req.socket.remoteAddress ?? '');
      if (typeof checked === 'string') owner = checked;
      else if (checked.status === 429) return void (req.resume(), replyError(res, checked));
    } else {
      const auth = this.authenticate(req);
      if (auth.ok) owner = auth.owner;
      else if (auth.error.status === 429) return void (req.resume(), replyError(res, auth.error));
    }
    if (owner === undefined) {
      req.resume();
      res.setHeader('WWW-Authenticate', 'Bearer realm="proxy-operator gateway"');
      return replyError(res, {
        status: 401,
        code: 'invalid_token',
        message: 'a report needs "Authorization: Bearer <discovery API token>" (or the proxy credentials)',
      });
    }
    await reportBySession(this.ctx, req, res, owner, session);
  }

  private internal(err: unknown, res: ServerResponse): void {
    this.ctx.logger.error({ err }, 'gateway: request failed');
    if (!res.headersSent) res.writeHead(500).end();
    else res.destroy();
  }
}
