// Serves a request listener on host:port with timeouts, so slow or idle clients cannot hold
// connections forever, and closes gracefully.
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';

export interface DiscoveryServerOptions {
  host: string;
  /** 0 picks a free port (tests); read the bound one from `port` after start(). */
  port: number;
  /** Whole-request deadline, headers and body included. */
  requestTimeoutMs?: number;
  /** Deadline for the request headers (slowloris). */
  headersTimeoutMs?: number;
  /** How long an idle keep-alive connection stays open. */
  keepAliveTimeoutMs?: number;
  /** How long stop() waits for in-flight requests before cutting connections. */
  shutdownGraceMs?: number;
}

export const SERVER_DEFAULTS = {
  requestTimeoutMs: 30_000,
  headersTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
  shutdownGraceMs: 10_000,
} as const;

export class DiscoveryServer {
  private readonly server: Server;
  private readonly options: Required<DiscoveryServerOptions>;

  constructor(
    listener: RequestListener,
    options: DiscoveryServerOptions,
    private readonly logger: Logger,
  ) {
    this.options = { ...SERVER_DEFAULTS, ...options };
    const { requestTimeoutMs, headersTimeoutMs, keepAliveTimeoutMs } = this.options;
    if (headersTimeoutMs > requestTimeoutMs) {
      throw new Error(
        `headersTimeoutMs (${headersTimeoutMs}) must not exceed requestTimeoutMs (${requestTimeoutMs})`,
      );
    }
    this.server = createServer(
      {
        requestTimeout: requestTimeoutMs,
        headersTimeout: headersTimeoutMs,
        keepAliveTimeout: keepAliveTimeoutMs,
        // Node enforces the two timeouts above only on this tick (default 30 s, i.e. too late).
        connectionsCheckingInterval: Math.max(100, Math.min(1000, headersTimeoutMs / 2)),
      },
      listener,
    );
    // A socket that stops sending mid-body is cut even between the timers above.
    this.server.setTimeout(requestTimeoutMs);
  }

  start(): Promise<void> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      this.server.once('error', onError);
      this.server.listen(this.options.port, this.options.host, () => {
        this.server.off('error', onError);
        this.logger.info({ address: this.url }, 'discovery API listening');
        resolve();
      });
    });
  }

  /** The bound port; only meaningful after start(). */
  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    const { address, family } = this.server.address() as AddressInfo;
    return `http://${family === 'IPv6' ? `[${address}]` : address}:${this.port}`;
  }

  /** Stops accepting, lets in-flight requests finish within the grace period, then cuts the rest. */
  stop(): Promise<void> {
    if (!this.server.listening) return Promise.resolve();
    return new Promise((resolve, reject) => {
      // A keep-alive connection turns idle only after its in-flight response; without these
      // sweeps it would hold close() open until keepAliveTimeout.
      const sweep = setInterval(() => this.server.closeIdleConnections(), 50);
      const force = setTimeout(() => this.server.closeAllConnections(), this.options.shutdownGraceMs);
      this.server.close((err) => {
        clearInterval(sweep);
        clearTimeout(force);
        if (err) reject(err);
        else resolve();
      });
      this.server.closeIdleConnections();
    });
  }
}
