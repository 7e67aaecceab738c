// Serves a request listener on host:port so that slow, oversized or wrong-protocol clients
// cannot hold it: headers must arrive within headersTimeoutMs and the whole request within
// requestTimeoutMs (else 408), the request line and headers together fit in maxHeaderSize
// (else 431), and CONNECT or protocol-upgrade requests get 405. Every such answer is the
// API's JSON error and closes the connection. Stops gracefully.
import { createServer, STATUS_CODES, type RequestListener, type Server } from 'node:http';
import { createServer as createTLSServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { errorBody, type ApiErrorCode } from './api-error.js';

export interface DiscoveryServerOptions {
  host: string;
  /** 0 picks a free port (tests); read the bound one from `port` after start(). */
  port: number;
  /** Deadline for the whole request, headers and body, counted from the connection's first byte. */
  requestTimeoutMs?: number;
  /** Deadline for the request line and headers (slowloris). */
  headersTimeoutMs?: number;
  /** How long an idle keep-alive connection stays open. */
  keepAliveTimeoutMs?: number;
  /** Largest request line + headers, in bytes. */
  maxHeaderSize?: number;
  /** How long stop() waits for in-flight requests before cutting connections. */
  shutdownGraceMs?: number;
  /**
   * PEM certificate (chain) and key: serve HTTPS (bearer tokens and lease credentials then
   * never cross the network in clear). Absent: plain HTTP.
   */
  tls?: { cert: string | Buffer; key: string | Buffer };
}

export const SERVER_DEFAULTS = {
  requestTimeoutMs: 15_000,
  headersTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
  maxHeaderSize: 16 * 1024,
  shutdownGraceMs: 10_000,
} as const;

/** Methods some route of the API answers; what a 405 for CONNECT or an upgrade lists. */
const API_METHODS = 'GET, HEAD, POST, DELETE';

export interface RawReply {
  status: number;
  code: ApiErrorCode;
  message: string;
}

/** The JSON answer to an error Node's HTTP parser or its timers raise; undefined = just close. */
export function clientErrorReply(
  err: { code?: string; message?: string },
  limits: { headersTimeoutMs: number; requestTimeoutMs: number; maxHeaderSize: number },
): RawReply | undefined {
  switch (err.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return {
        status: 408,
        code: 'request_timeout',
        message: `request not received in time: headers are due within ${limits.headersTimeoutMs / 1000} s, the whole request within ${limits.requestTimeoutMs / 1000} s`,
      };
    case 'HPE_HEADER_OVERFLOW':
      return {
        status: 431,
        code: 'headers_too_large',
        message: `request line and headers exceed ${limits.maxHeaderSize} bytes`,
      };
    case 'ECONNRESET':
    case 'EPIPE':
      return undefined;
    default:
      return err.code?.startsWith('HPE_')
        ? {
            status: 400,
            code: 'invalid_request',
            message: `malformed HTTP request: ${err.message ?? err.code}`,
          }
        : undefined;
  }
}

/** A complete HTTP/1.1 response carrying the API's JSON error, closing the connection. */
export function rawErrorResponse(reply: RawReply, headers: Record<string, string> = {}): string {
  const body = JSON.stringify(errorBody(reply.code, reply.message));
  const lines = [
    `HTTP/1.1 ${reply.status} ${STATUS_CODES[reply.status]}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ];
  return `${lines.join('\r\n')}\r\n\r\n${body}`;
}

export class DiscoveryServer {
  private readonly server: Server;
  private readonly options: Required<Omit<DiscoveryServerOptions, 'tls'>> &
    Pick<DiscoveryServerOptions, 'tls'>;

  constructor(
    listener: RequestListener,
    options: DiscoveryServerOptions,
    private readonly logger: Logger,
  ) {
    this.options = { ...SERVER_DEFAULTS, ...options };
    const { requestTimeoutMs, headersTimeoutMs, keepAliveTimeoutMs, maxHeaderSize } = this.options;
    if (headersTimeoutMs > requestTimeoutMs) {
      throw new Error(
        `headersTimeoutMs (${headersTimeoutMs}) must not exceed requestTimeoutMs (${requestTimeoutMs})`,
      );
    }
    const serverOptions = {
      requestTimeout: requestTimeoutMs,
      headersTimeout: headersTimeoutMs,
      keepAliveTimeout: keepAliveTimeoutMs,
      maxHeaderSize,
      // Node enforces the two timeouts above only on this tick (default 30 s, i.e. too late).
      connectionsCheckingInterval: Math.max(100, Math.min(1000, headersTimeoutMs / 2)),
    };
    const { tls } = options;
    this.server =
      tls === undefined
        ? createServer(serverOptions, listener)
        : createTLSServer(
            { ...serverOptions, cert: tls.cert, key: tls.key, minVersion: 'TLSv1.2' },
            listener,
          );
    // A TLS handshake that fails is the client's problem; it must not surface as an error here.
    this.server.on('tlsClientError', (_err: Error, socket: Duplex) => socket.destroy());
    // A backstop for a socket that stalls outside a request (e.g. a response nobody reads);
    // longer than the request timeout so that a slow request gets its 408 first.
    this.server.setTimeout(requestTimeoutMs + 5_000);
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
      const reply = clientErrorReply(err, this.options);
      const response = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
      if (reply === undefined || !socket.writable || response?.headersSent) {
        socket.destroy();
        return;
      }
      socket.end(rawErrorResponse(reply));
    });
    // Node would drop a CONNECT silently and hand an upgrade to the app as a plain request.
    const refuse = (what: string) => (_req: unknown, socket: Duplex) => {
      socket.on('error', () => socket.destroy());
      socket.end(
        rawErrorResponse(
          {
            status: 405,
            code: 'method_not_allowed',
            message: `${what} is not allowed; allowed: ${API_METHODS}`,
          },
          { Allow: API_METHODS },
        ),
      );
    };
    this.server.on('connect', refuse('CONNECT (the discovery API is not a proxy; lease one)'));
    this.server.on('upgrade', refuse('a protocol upgrade'));
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
    const scheme = this.options.tls === undefined ? 'http' : 'https';
    return `${scheme}://${family === 'IPv6' ? `[${address}]` : address}:${this.port}`;
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
