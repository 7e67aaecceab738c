import { request as httpRequest, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { createSecureContext, type SecureContext, type TLSSocket } from 'node:tls';
import type { ProbeTarget } from './probe-target.js';
import { ProbeReason, type ProbeOutcome } from './probe-reason.js';
import { classifyProbeError, tunnelStatusOf } from './classify-probe-error.js';
import type { Prober } from './prober.js';
import { TlsSessionBook, type TlsSessionStore } from './tls-session-book.js';
import { EXIT_IP_BODY_LIMIT, ExitIPFailure, parseExitIP, type ExitIPReading } from './exit-ip.js';
import {
  type AddressGuard,
  authorityOf,
  connectToProxy,
  exchange,
  proxyAuthorization,
  requestHead,
  startTls,
  tlsHostOf,
  TunnelRefusedError,
} from './proxy-wire.js';

export interface SocketProberOptions {
  /** Extra trust for the TARGET's certificate (tests); production uses the system CAs. */
  tls?: { ca?: string | Buffer | Array<string | Buffer> };
  userAgent?: string;
  /** Where TLS sessions are kept between probes (default: a TlsSessionBook of its own). */
  sessions?: TlsSessionStore;
  /** Checked before connecting to a `guarded` target's proxy (see ProbeTarget.guarded). */
  addressGuard?: AddressGuard;
}

/** Counters for tests and benchmarks: resumption must really happen, and fall back when it fails. */
export interface TlsStats {
  /** TLS connections to a target that came up. */
  handshakes: number;
  /** ... of which resumed a session from an earlier probe. */
  resumed: number;
  /** Probes retried with a full handshake because the attempt that offered a session failed before TLS came up. */
  fallbacks: number;
}

/** One attempt's way to the target: the connection to the proxy and, for https, the TLS one. */
interface Way {
  /** What the request goes over: the proxy's socket (http) or the TLS socket through the tunnel. */
  socket: Socket;
  /** The request line's target: the absolute URL for a proxy (http), the path for a tunnel. */
  path: string;
  /** Proxy-Authorization, for requests the proxy reads (http only). */
  auth: string | undefined;
}

/**
 * Whether an attempt that offered a session and failed before TLS came up may have failed
 * because of the session: not when the proxy refused the CONNECT, refused the connection or
 * never answered (a dead proxy is not retried, it would only fail again).
 */
function sessionMayBeAtFault(err: unknown): boolean {
  if (tunnelStatusOf(err) !== undefined) return false;
  const { reason } = classifyProbeError(err, false);
  return reason === ProbeReason.ProbeError || reason === ProbeReason.TunnelFailed;
}

/**
 * Fetches the probe URL THROUGH the proxy on sockets of its own (proxy-wire.ts): an https
 * probe URL over a CONNECT tunnel and TLS, an http one as an absolute-URI request to the
 * proxy; the probe reads the answer's status line and closes everything.
 *
 * Every probe uses fresh connections: a kept-alive tunnel would let a proxy that can no
 * longer open NEW connections look healthy, and at a 10 s interval the target would mostly
 * have closed an idle one anyway. Nothing is held between probes but the TLS session the
 * target handed out (~1-2 KB per proxy): the next probe through the same proxy offers it on
 * its fresh tunnel and skips the certificate exchange and signature. If an attempt that
 * offered a session fails before TLS comes up, the session is dropped and the probe is tried
 * once more with a full handshake, so a stale session never makes a proxy look unhealthy.
 */
export class SocketProber implements Prober {
  /** The sockets of each probe in flight, by proxy key; an entry lives exactly as long as its probe. */
  private readonly inFlight = new Map<string, Set<Socket>>();
  /** Built once: passing `ca` per connection would re-parse it on every TLS handshake. */
  private readonly secureContext: SecureContext | undefined;
  private readonly sessions: TlsSessionStore;
  private readonly userAgent: string;
  private readonly counts: TlsStats = { handshakes: 0, resumed: 0, fallbacks: 0 };
  private readonly addressGuard: AddressGuard | undefined;

  constructor(options: SocketProberOptions = {}) {
    this.addressGuard = options.addressGuard;
    this.secureContext = options.tls?.ca ? createSecureContext({ ca: options.tls.ca }) : undefined;
    this.sessions = options.sessions ?? new TlsSessionBook();
    this.userAgent = options.userAgent ?? 'proxy-operator-health';
  }

  async probe(target: ProbeTarget, cancel: AbortSignal): Promise<ProbeOutcome> {
    const started = performance.now();
    const elapsed = (): number => performance.now() - started;
    return this.bounded(target, cancel, async (sockets, timedOut) => {
      try {
        const url = new URL(target.probeURL);
        const endpoint = `${target.host}:${target.port} ${url.origin}`;
        const session = url.protocol === 'https:' ? this.sessions.take(target.key, endpoint) : undefined;
        let status: number;
        try {
          status = await this.statusThrough(target, url, endpoint, session, sockets);
        } catch (err) {
          if (!session || cancel.aborted || timedOut() || !sessionMayBeAtFault(err)) throw err;
          // The offered session may be what failed (a target or middlebox that rejects
          // resumption by closing): forget it and pay the full handshake, once, same deadline.
          this.sessions.forget(target.key);
          this.counts.fallbacks++;
          status = await this.statusThrough(target, url, endpoint, undefined, sockets);
        }
        return outcomeOf(status, target.expectedStatusCodes, elapsed());
      } catch (err) {
        const { reason, message } = classifyProbeError(err, timedOut() && !cancel.aborted);
        return { success: false, reason, message, durationMillis: elapsed() };
      }
    });
  }

  /**
   * One GET of the exit IP URL through the proxy (no TLS session kept: it runs once a
   * refresh, not every probe), within the probe's timeout; node:http reads the answer, whose
   * body parseExitIP parses. The engine runs it only between probes, never beside one.
   */
  async readExitIP(target: ProbeTarget, cancel: AbortSignal): Promise<ExitIPReading> {
    return this.bounded(target, cancel, async (sockets, timedOut) => {
      try {
        const url = new URL(target.exitIPURL ?? '');
        const way = await this.wayTo(target, url, undefined, sockets);
        const response = await get(way, url, this.userAgent, 'text/plain, application/json');
        if (response.statusCode !== 200) {
          return {
            ok: false,
            reason: ExitIPFailure.UnexpectedStatus,
            message: `the exit IP URL answered status ${response.statusCode ?? 'none'}, expected 200`,
          };
        }
        return parseExitIP(await readLimited(response, EXIT_IP_BODY_LIMIT));
      } catch (err) {
        const { message } = classifyProbeError(err, timedOut() && !cancel.aborted);
        return { ok: false, reason: ExitIPFailure.RequestFailed, message };
      }
    });
  }

  /** Closes the connections of the proxy's probe in flight, if any, and forgets its TLS session. */
  async release(key: string): Promise<void> {
    this.sessions.forget(key);
    for (const socket of this.inFlight.get(key) ?? []) socket.destroy();
  }

  async close(): Promise<void> {
    for (const sockets of this.inFlight.values()) for (const socket of sockets) socket.destroy();
  }

  /** Probes in flight (tests and benchmarks: what the prober holds follows them, not the fleet). */
  get probesInFlight(): number {
    return this.inFlight.size;
  }

  /** A copy of the TLS counters since start. */
  tlsStats(): TlsStats {
    return { ...this.counts };
  }

  /**
   * Runs `work` with a set of sockets that the deadline (the target's timeout) or `cancel`
   * destroys, and that are destroyed when it ends: whatever `work` waits on then fails at
   * once. `timedOut()` says whether the deadline fired.
   */
  private async bounded<T>(
    target: ProbeTarget,
    cancel: AbortSignal,
    work: (sockets: Set<Socket>, timedOut: () => boolean) => Promise<T>,
  ): Promise<T> {
    const sockets = new Set<Socket>();
    this.inFlight.set(target.key, sockets);
    let expired = false;
    const destroyAll = (): void => {
      for (const socket of sockets) socket.destroy();
    };
    const deadline = setTimeout(() => {
      expired = true;
      destroyAll();
    }, target.timeoutSeconds * 1000);
    cancel.addEventListener('abort', destroyAll, { once: true });
    if (cancel.aborted) destroyAll();
    try {
      return await work(sockets, () => expired);
    } finally {
      clearTimeout(deadline);
      cancel.removeEventListener('abort', destroyAll);
      destroyAll();
      if (this.inFlight.get(target.key) === sockets) this.inFlight.delete(target.key);
    }
  }

  /** A guarded target without a guard configured is refused outright: never probed unchecked. */
  private guardFor(): AddressGuard {
    return this.addressGuard ?? (() => 'no address rule is configured for guarded targets');
  }

  /** One attempt: a fresh way to the target, the probe's GET, its status code. */
  private async statusThrough(
    target: ProbeTarget,
    url: URL,
    endpoint: string,
    session: Buffer | undefined,
    sockets: Set<Socket>,
  ): Promise<number> {
    const way = await this.wayTo(target, url, { endpoint, session }, sockets);
    const request = requestHead(`GET ${way.path} HTTP/1.1`, {
      Host: url.host,
      'User-Agent': this.userAgent,
      'Proxy-Authorization': way.auth,
      Connection: 'close',
    });
    return exchange(way.socket, request, url.protocol === 'https:' ? 'target' : 'proxy', false);
  }

  /**
   * Connects to the proxy and, for an https URL, tunnels and secures a connection to the
   * target through it. `resume` (probes only) offers a kept session and keeps the new one.
   */
  private async wayTo(
    target: ProbeTarget,
    url: URL,
    resume: { endpoint: string; session: Buffer | undefined } | undefined,
    sockets: Set<Socket>,
  ): Promise<Way> {
    if (sockets.size > 0) for (const socket of sockets) socket.destroy();
    sockets.clear();
    const proxy = connectToProxy(target.host, target.port, target.guarded ? this.guardFor() : undefined);
    sockets.add(proxy);
    const auth = proxyAuthorization(target.credentials);
    if (url.protocol !== 'https:') return { socket: proxy, path: url.href, auth };
    const authority = authorityOf(url);
    const connect = requestHead(`CONNECT ${authority} HTTP/1.1`, {
      Host: authority,
      'Proxy-Authorization': auth,
    });
    const tunnelStatus = await exchange(proxy, connect, 'proxy', true);
    if (tunnelStatus !== 200) throw new TunnelRefusedError(tunnelStatus);
    const secured = await startTls(proxy, {
      host: tlsHostOf(url),
      secureContext: this.secureContext,
      session: resume?.session,
    });
    sockets.add(secured);
    if (resume) this.keepSessions(target.key, resume.endpoint, secured);
    return { socket: secured, path: `${url.pathname}${url.search}`, auth: undefined };
  }

  private keepSessions(key: string, endpoint: string, secured: TLSSocket): void {
    this.counts.handshakes++;
    if (secured.isSessionReused()) this.counts.resumed++;
    // TLS 1.3 sends tickets after the handshake; 1.2 has its session by now.
    secured.on('session', (fresh: Buffer) => this.sessions.remember(key, endpoint, fresh));
    if (secured.getProtocol() !== 'TLSv1.3') {
      const now = secured.getSession();
      if (now) this.sessions.remember(key, endpoint, now);
    }
  }
}

function outcomeOf(status: number, expected: readonly number[], durationMillis: number): ProbeOutcome {
  if (status === 407 && !expected.includes(407)) {
    return {
      success: false,
      reason: ProbeReason.ProxyAuthenticationRequired,
      message: 'proxy answered 407 Proxy Authentication Required: its credentials are missing or wrong',
      durationMillis,
    };
  }
  if (expected.includes(status)) {
    return { success: true, reason: ProbeReason.ProbeSucceeded, message: `status ${status}`, durationMillis };
  }
  return {
    success: false,
    reason: ProbeReason.UnexpectedStatus,
    message: `status ${status}, expected one of ${expected.join(', ')}`,
    durationMillis,
  };
}

/** A GET over an established way, read by node:http (a body to parse, unlike a probe's). */
function get(way: Way, url: URL, userAgent: string, accept: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      createConnection: () => way.socket,
      path: way.path,
      method: 'GET',
      headers: {
        host: url.host,
        'user-agent': userAgent,
        accept,
        connection: 'close',
        ...(way.auth === undefined ? {} : { 'proxy-authorization': way.auth }),
      },
    });
    req.on('response', resolve);
    req.on('error', reject);
    req.end();
  });
}

/** The body as text, at most `limit` bytes (an address is short; the rest is not read). */
async function readLimited(body: AsyncIterable<Buffer>, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    size += chunk.length;
    if (size >= limit) break;
  }
  return Buffer.concat(chunks).subarray(0, limit).toString('utf8');
}
