// The few bytes a probe exchanges with a proxy and a target, on plain node:net and node:tls
// sockets: a CONNECT and its answer, a TLS handshake through the tunnel, a request and the
// status line of its answer. A probe needs nothing more from HTTP, and a general-purpose
// client per probe (agents, pools, request queues, an Error with a stack trace for every
// closed connection) cost more CPU than the probe itself (docs/benchmarks.md, issue 25).
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { connect as netConnect, isIP, type LookupFunction, type Socket } from 'node:net';
import { connect as tlsConnect, type SecureContext, type TLSSocket } from 'node:tls';

/** The proxy answered CONNECT with a status other than 200. */
export class TunnelRefusedError extends Error {
  readonly code = 'ERR_PROXY_TUNNEL_REFUSED';
  constructor(readonly status: number) {
    super(`the proxy answered CONNECT with ${status}`);
    this.name = 'TunnelRefusedError';
  }
}

/** The peer closed the connection before its answer's head was complete. */
export class ClosedEarlyError extends Error {
  readonly code = 'ERR_PROBE_PEER_CLOSED';
  constructor(readonly peer: 'proxy' | 'target') {
    super(`the ${peer} closed the connection before answering`);
    this.name = 'ClosedEarlyError';
  }
}

/** The peer sent something that is not an HTTP answer, or an endless head. */
export class NotHttpError extends Error {
  readonly code = 'ERR_PROBE_NOT_HTTP';
  constructor(
    readonly peer: 'proxy' | 'target',
    detail: string,
  ) {
    super(`the ${peer} ${detail}`);
    this.name = 'NotHttpError';
  }
}

/** A head longer than this is not an answer a probe waits for. */
const HEAD_LIMIT = 16 * 1024;
const STATUS_LINE = /^HTTP\/\d(?:\.\d)? (\d{3})(?: |\r|$)/;

function ignoreError(): void {}

/**
 * Why the prober may not connect to `address` (a resolved or literal IP), or undefined: the
 * caller's rule for where a proxy may be (External endpoints, issue 44 item 5).
 */
export type AddressGuard = (address: string) => string | undefined;

/** The proxy's address (literal, or one its name resolved to) is one the guard refuses. */
export class AddressRefusedError extends Error {
  readonly code = 'ERR_PROBE_ADDRESS_REFUSED';
  constructor(host: string, address: string, why: string) {
    super(
      host === address
        ? `endpoint refused: ${why}`
        : `endpoint refused: ${host} resolves to ${address}: ${why}`,
    );
    this.name = 'AddressRefusedError';
  }
}

/** How a name resolves: dns.lookup's shape with `all: true` (a test injects its own answers). */
export type Resolve = (
  hostname: string,
  options: LookupOptions & { all: true },
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/**
 * dns.lookup, then the guard on every address the name resolved to before net connects to
 * one: the address checked is the address connected to, so a name that answers a public
 * address to one lookup and an inside one to the next (DNS rebinding) never gets a connection
 * inside. Any refused address refuses the name: the connection may try each of them. The
 * gateway connects through it too (handlers/gateway-guard.ts): one rule for both.
 */
export function guardedLookup(guard: AddressGuard, resolve: Resolve = dnsLookup): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, { ...(options as LookupOptions), all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '');
      for (const { address } of addresses) {
        const why = guard(address);
        if (why !== undefined) return callback(new AddressRefusedError(hostname, address, why), '');
      }
      if ((options as LookupOptions).all) return callback(null, addresses);
      const first = addresses[0];
      return first
        ? callback(null, first.address, first.family)
        : callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '');
    });
  };
}

/**
 * A TCP connection to the proxy. Its errors surface through the reads that wait on it. With a
 * guard, a literal address is checked before connecting and a name's addresses after its lookup.
 */
export function connectToProxy(host: string, port: number, guard?: AddressGuard): Socket {
  const literalRefusal = guard && isIP(host) ? guard(host) : undefined;
  if (literalRefusal !== undefined) throw new AddressRefusedError(host, host, literalRefusal);
  const socket = netConnect({ host, port, ...(guard ? { lookup: guardedLookup(guard) } : {}) });
  socket.setNoDelay(true);
  // A socket whose reader has finished may still emit an error (a late RST): never unhandled.
  socket.on('error', ignoreError);
  return socket;
}

/**
 * Writes `request` and reads the answer's head: up to the end of the status line
 * (`whole: false`) or of the headers (`whole: true`). Resolves with the status code; the
 * socket is paused after the head, the rest unread.
 */
export function exchange(
  socket: Socket,
  request: string,
  peer: 'proxy' | 'target',
  whole: boolean,
): Promise<number> {
  return new Promise((resolve, reject) => {
    let head: Buffer = Buffer.alloc(0);
    const done = (): void => {
      socket.off('data', onData);
      socket.off('error', onError);
      socket.off('close', onClose);
    };
    const finish = (): void => {
      done();
      socket.pause();
    };
    const onData = (chunk: Buffer): void => {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      const lineEnd = head.indexOf('\r\n');
      // The status line decides as soon as it is complete: a peer that is not HTTP is not
      // waited for until it ends a head it will never send.
      const status = lineEnd < 0 ? null : STATUS_LINE.exec(head.toString('latin1', 0, Math.min(lineEnd, 64)));
      const end = whole ? head.indexOf('\r\n\r\n') : lineEnd;
      if (lineEnd >= 0 && !status) {
        finish();
        return reject(new NotHttpError(peer, 'did not answer with an HTTP status line'));
      }
      if (end < 0 && head.length <= HEAD_LIMIT) return;
      finish();
      if (end < 0 || !status)
        return reject(new NotHttpError(peer, `sent ${HEAD_LIMIT} bytes without ending its head`));
      resolve(Number(status[1]));
    };
    const onError = (err: Error): void => {
      done();
      reject(err);
    };
    const onClose = (): void => {
      done();
      reject(new ClosedEarlyError(peer));
    };
    socket.on('data', onData);
    socket.on('error', onError);
    socket.on('close', onClose);
    socket.write(request);
  });
}

export interface TlsOptions {
  /** The target's host name or address (SNI and the certificate check use a name). */
  host: string;
  secureContext: SecureContext | undefined;
  /** A session from an earlier handshake with this target through this proxy, if any. */
  session: Buffer | undefined;
}

/** A TLS connection to the target over `tunnel`; resolves once the handshake is done. */
export function startTls(tunnel: Socket, options: TlsOptions): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const secured = tlsConnect({
      socket: tunnel,
      host: options.host,
      ...(isIP(options.host) === 0 ? { servername: options.host } : {}),
      ...(options.secureContext ? { secureContext: options.secureContext } : {}),
      ...(options.session ? { session: options.session } : {}),
      ALPNProtocols: ['http/1.1'],
    });
    secured.on('error', ignoreError);
    const done = (): void => {
      secured.off('secureConnect', onSecure);
      secured.off('error', onError);
      secured.off('close', onClose);
    };
    const onSecure = (): void => {
      done();
      resolve(secured);
    };
    const onError = (err: Error): void => {
      done();
      reject(err);
    };
    const onClose = (): void => {
      done();
      reject(new ClosedEarlyError('target'));
    };
    secured.on('secureConnect', onSecure);
    secured.on('error', onError);
    secured.on('close', onClose);
    tunnel.resume();
  });
}

/** The `Proxy-Authorization` value for basic credentials, or undefined without credentials. */
export function proxyAuthorization(
  credentials: { username: string; password: string } | undefined,
): string | undefined {
  if (!credentials) return undefined;
  return `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`;
}

/** A request head: the request line, then each header present, then the blank line. */
export function requestHead(line: string, headers: Record<string, string | undefined>): string {
  let head = `${line}\r\n`;
  for (const [name, value] of Object.entries(headers))
    if (value !== undefined) head += `${name}: ${value}\r\n`;
  return `${head}\r\n`;
}

/** `host:port` of a URL for CONNECT (brackets kept for IPv6), with the scheme's default port. */
export function authorityOf(url: URL): string {
  return `${url.hostname}:${url.port || (url.protocol === 'https:' ? '443' : '80')}`;
}

/** A URL's host for TLS (no IPv6 brackets). */
export function tlsHostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, '');
}
