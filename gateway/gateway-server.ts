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
import { TUNNEL_HIGH_WATER_MARK } from './upstream-tunnel.js';

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

export class Gateway {
  readonly server: Server;
  private readonly ctx: GatewayContext;
  private readonly tunnels = new Set<Duplex>();

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
      },
      (req, res) => {
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
      socket.once('close', () => this.tunnels.delete(socket));
      void this.onConnect(req, socket, head).catch((err: unknown) => {
        logger.error({ err }, 'gateway: CONNECT failed');
        socket.destroy();
      });
    });
    // A client that sends garbage, too large a head or none in time gets the documented
    // answer (JSON and X-Gateway-Error) and a closed socket, never a crash.
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
      // A reset socket has no one to answer.
      if (err.code === 'ECONNRESET') socket.destroy();
      else replyErrorOnSocket(socket, clientErrorReply(err.code, options.headersTimeoutMs));
    });
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
    const address = this.server.address() as { address: string; port: number };
    return { host: address.address, port: address.port };
  }

  /**
   * Stops taking connections, lets open tunnels and requests finish for up to `graceMs`, then
   * cuts what is left and releases every lease it holds.
   */
  async close(graceMs = 0): Promise<void> {
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
    await forwardConnect(this.ctx, req, socket, head, auth.owner, auth.options, startedAt);
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
