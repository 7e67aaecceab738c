import { performance } from 'node:perf_hooks';
import { createSecureContext, TLSSocket, type SecureContext } from 'node:tls';
import { Client, ProxyAgent, type buildConnector, type Dispatcher } from 'undici';
import type { ProbeTarget } from './probe-target.js';
import { ProbeReason, type ProbeOutcome } from './probe-reason.js';
import { classifyProbeError, tunnelStatusOf } from './classify-probe-error.js';
import type { Prober } from './prober.js';
import { TlsSessionBook, type TlsSessionStore } from './tls-session-book.js';
import { EXIT_IP_BODY_LIMIT, ExitIPFailure, parseExitIP, type ExitIPReading } from './exit-ip.js';

export interface UndiciProberOptions {
  /** Extra trust for the TARGET's certificate (tests); production uses the system CAs. */
  tls?: { ca?: string | Buffer | Array<string | Buffer> };
  userAgent?: string;
  /** Where TLS sessions are kept between probes (default: a TlsSessionBook of its own). */
  sessions?: TlsSessionStore;
}

/** What one attempt learnt about its TLS connection, filled in by the wrapped connector. */
interface AttemptTls {
  /** The TLS connection to the target came up (through the tunnel). */
  secured: boolean;
  /** The target accepted the offered session: an abbreviated handshake. */
  resumed: boolean;
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

/**
 * Whether an attempt that offered a session and failed before TLS came up may have failed
 * because of the session: not when the proxy refused the connection or the CONNECT, or
 * never answered (a dead proxy is not retried, it would only fail again).
 */
function sessionMayBeAtFault(err: unknown): boolean {
  if (tunnelStatusOf(err) !== undefined) return false;
  const { reason } = classifyProbeError(err, false);
  return reason === ProbeReason.ProbeError || reason === ProbeReason.TunnelFailed;
}

function proxyURI(target: ProbeTarget): string {
  const host = target.host.includes(':') && !target.host.startsWith('[') ? `[${target.host}]` : target.host;
  return `http://${host}:${target.port}`;
}

/**
 * Fetches the probe URL THROUGH the proxy with an undici ProxyAgent built for that one
 * probe and destroyed after it. An https probe URL goes through a CONNECT tunnel; an http
 * one is sent as an absolute-URI request to the proxy.
 *
 * Every probe uses a fresh connection (`reset: true`): a kept-alive tunnel would let a
 * proxy that can no longer open NEW connections look healthy, and at a 10 s interval the
 * target would mostly have closed the idle connection anyway. So an agent kept between
 * probes would hold nothing worth keeping, yet cost ~40 KB of heap per proxy (its pools'
 * 2,048-slot request queues, connectors, session caches): agents live only while probing,
 * so their number follows probes in flight, not the fleet.
 *
 * What IS kept is the TLS session the target handed out (~1-2 KB per proxy): the next probe
 * through the same proxy offers it on its fresh tunnel and skips the certificate exchange
 * and signature, which were most of a probe's CPU. If an attempt that offered a session
 * fails before TLS comes up, the session is dropped and the probe is tried once more with a
 * full handshake, so a stale session never makes a proxy look unhealthy.
 */
export class UndiciProber implements Prober {
  /** The agents of probes in flight, by proxy key; an entry lives exactly as long as its probe. */
  private readonly agents = new Map<string, ProxyAgent>();
  /** Built once: passing `ca` per connection would re-parse it on every TLS handshake. */
  private readonly secureContext: SecureContext | undefined;
  private readonly sessions: TlsSessionStore;
  private readonly counts: TlsStats = { handshakes: 0, resumed: 0, fallbacks: 0 };

  constructor(private readonly options: UndiciProberOptions = {}) {
    this.secureContext = options.tls?.ca ? createSecureContext({ ca: options.tls.ca }) : undefined;
    this.sessions = options.sessions ?? new TlsSessionBook();
  }

  async probe(target: ProbeTarget, cancel: AbortSignal): Promise<ProbeOutcome> {
    const timeoutMillis = target.timeoutSeconds * 1000;
    // One controller for both deadline and cancellation (cheaper than AbortSignal.any per probe).
    const abort = new AbortController();
    const signal = abort.signal;
    let timedOut = false;
    const deadline = setTimeout(() => {
      timedOut = true;
      abort.abort(new Error(`probe deadline of ${target.timeoutSeconds}s passed`));
    }, timeoutMillis);
    const onCancel = (): void => abort.abort(cancel.reason);
    if (cancel.aborted) onCancel();
    else cancel.addEventListener('abort', onCancel, { once: true });
    const started = performance.now();
    const elapsed = (): number => performance.now() - started;
    try {
      const url = new URL(target.probeURL);
      const endpoint = `${proxyURI(target)} ${url.origin}`;
      const session = url.protocol === 'https:' ? this.sessions.take(target.key, endpoint) : undefined;
      let statusCode: number;
      const tls: AttemptTls = { secured: false, resumed: false };
      try {
        statusCode = await this.attempt(target, url, endpoint, session, tls, signal, timeoutMillis);
      } catch (err) {
        if (!session || tls.secured || signal.aborted || !sessionMayBeAtFault(err)) throw err;
        // The offered session may be what failed (a target or middlebox that rejects
        // resumption by closing): forget it and pay the full handshake, once, same deadline.
        this.sessions.forget(target.key);
        this.counts.fallbacks++;
        statusCode = await this.attempt(target, url, endpoint, undefined, tls, signal, timeoutMillis);
      }
      const durationMillis = elapsed();
      if (statusCode === 407 && !target.expectedStatusCodes.includes(407)) {
        return {
          success: false,
          reason: ProbeReason.ProxyAuthenticationRequired,
          message: 'proxy answered 407 Proxy Authentication Required: its credentials are missing or wrong',
          durationMillis,
        };
      }
      if (target.expectedStatusCodes.includes(statusCode)) {
        return {
          success: true,
          reason: ProbeReason.ProbeSucceeded,
          message: `status ${statusCode}`,
          durationMillis,
        };
      }
      return {
        success: false,
        reason: ProbeReason.UnexpectedStatus,
        message: `status ${statusCode}, expected one of ${target.expectedStatusCodes.join(', ')}`,
        durationMillis,
      };
    } catch (err) {
      const { reason, message } = classifyProbeError(err, timedOut && !cancel.aborted);
      return { success: false, reason, message, durationMillis: elapsed() };
    } finally {
      clearTimeout(deadline);
      cancel.removeEventListener('abort', onCancel);
    }
  }

  /** One request through a fresh agent (and so a fresh tunnel); resolves with the status code. */
  private async attempt(
    target: ProbeTarget,
    url: URL,
    endpoint: string,
    session: Buffer | undefined,
    tls: AttemptTls,
    signal: AbortSignal,
    timeoutMillis: number,
  ): Promise<number> {
    const agent = this.agentFor(target, session, (socket) => {
      tls.secured = true;
      tls.resumed = socket.isSessionReused();
      this.counts.handshakes++;
      if (tls.resumed) this.counts.resumed++;
      // TLS 1.3 sends tickets after the handshake; 1.2 has its session by now.
      const keep = (fresh: Buffer): void => {
        if (this.agents.get(target.key) !== agent) return;
        // undici's Agent JSON-clones its options (requestTls included) on every construction;
        // a session Buffer would serialize as a ~1,000-number array per probe. Hidden from
        // JSON, it is still passed by reference to tls.connect.
        Object.defineProperty(fresh, 'toJSON', { value: omitFromJSON });
        this.sessions.remember(target.key, endpoint, fresh);
      };
      socket.on('session', keep);
      if (socket.getProtocol() !== 'TLSv1.3') {
        const now = socket.getSession();
        if (now) keep(now);
      }
    });
    this.agents.set(target.key, agent);
    let completed = false;
    try {
      const response = await agent.request({
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: 'GET',
        headers: { 'user-agent': this.options.userAgent ?? 'proxy-operator-health' },
        signal,
        reset: true,
        headersTimeout: timeoutMillis,
        bodyTimeout: timeoutMillis,
      });
      // Always drain: an unread body pins the socket and leaks memory.
      await response.body.dump({ signal, limit: 64 * 1024 });
      completed = true;
      return response.statusCode;
    } finally {
      this.discard(target.key, agent, completed);
    }
  }

  /**
   * One GET of the exit IP URL through a fresh agent of its own (no TLS session kept: it runs
   * once a refresh, not every probe), within the probe's timeout; the answer is parsed by
   * parseExitIP. The engine runs it only between probes, so it never shares the agent slot.
   */
  async readExitIP(target: ProbeTarget, cancel: AbortSignal): Promise<ExitIPReading> {
    const timeoutMillis = target.timeoutSeconds * 1000;
    const signal = AbortSignal.any([cancel, AbortSignal.timeout(timeoutMillis)]);
    const agent = this.agentFor(target, undefined, () => undefined);
    this.agents.set(target.key, agent);
    try {
      const url = new URL(target.exitIPURL ?? '');
      const response = await agent.request({
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: 'GET',
        headers: {
          'user-agent': this.options.userAgent ?? 'proxy-operator-health',
          accept: 'text/plain, application/json',
        },
        signal,
        reset: true,
        headersTimeout: timeoutMillis,
        bodyTimeout: timeoutMillis,
      });
      if (response.statusCode !== 200) {
        await response.body.dump({ signal, limit: 64 * 1024 });
        return {
          ok: false,
          reason: ExitIPFailure.UnexpectedStatus,
          message: `the exit IP URL answered status ${response.statusCode}, expected 200`,
        };
      }
      return parseExitIP(await readLimited(response.body, EXIT_IP_BODY_LIMIT));
    } catch (err) {
      const { message } = classifyProbeError(err, signal.aborted && !cancel.aborted);
      return { ok: false, reason: ExitIPFailure.RequestFailed, message };
    } finally {
      // Always destroyed: a body read only in part may still hold the socket (rare: once a refresh).
      this.discard(target.key, agent, false);
    }
  }

  /** Closes the connections of the proxy's probe in flight, if any, and forgets its TLS session. */
  async release(key: string): Promise<void> {
    this.sessions.forget(key);
    const agent = this.agents.get(key);
    if (!agent) return;
    this.agents.delete(key);
    await closeQuietly(agent);
  }

  /**
   * Drops `agent` — but never a newer probe's agent for the key (endpoint changed meanwhile).
   * After any failure it is destroyed, not closed: an aborted CONNECT leaves its socket to the
   * proxy open (undici does not close it), and a black-holed proxy would never close it. After
   * a completed exchange nothing is open (`reset: true` closed the connection with the
   * response), so it is left to the garbage collector: destroying costs each of its
   * dispatchers an Error with a stack trace, more than the probe's own bookkeeping.
   */
  private discard(key: string, agent: ProxyAgent, completed = false): void {
    if (this.agents.get(key) === agent) this.agents.delete(key);
    if (!completed) void closeQuietly(agent);
  }

  async close(): Promise<void> {
    const all = [...this.agents.values()];
    this.agents.clear();
    await Promise.all(all.map(closeQuietly));
  }

  /** Agents in flight (tests and benchmarks: it must follow probes in flight, not the fleet). */
  get liveAgents(): number {
    return this.agents.size;
  }

  /** A copy of the TLS counters since start. */
  tlsStats(): TlsStats {
    return { ...this.counts };
  }

  private agentFor(
    target: ProbeTarget,
    session: Buffer | undefined,
    onSecured: (socket: TLSSocket) => void,
  ): ProxyAgent {
    return new ProxyAgent({
      uri: proxyURI(target),
      // The token, not userinfo in the URI: an undici error may quote the URI, never this header.
      ...(target.credentials ? { token: basicToken(target.credentials) } : {}),
      // One probe per agent, so one connection is all it ever needs.
      connections: 1,
      connectTimeout: target.timeoutSeconds * 1000,
      // undici's own session cache dies with the agent; the prober's book replaces it.
      requestTls: {
        ...(this.secureContext ? { secureContext: this.secureContext } : {}),
        ...(session ? { session } : {}),
        maxCachedSessions: 0,
      },
      // The connection to the target: the tunnel's connector, watched for its TLS socket.
      factory: (origin: string | URL, opts: object): Dispatcher => {
        const clientOptions = opts as Client.Options;
        const tunnel = clientOptions.connect as buildConnector.connector;
        const connect: buildConnector.connector = (connectOptions, callback) =>
          tunnel(connectOptions, (...args) => {
            const socket = args[1];
            if (socket instanceof TLSSocket) onSecured(socket);
            callback(...args);
          });
        return new Client(origin, { ...clientOptions, connect });
      },
    });
  }
}

function basicToken(c: { username: string; password: string }): string {
  return `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`;
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

function omitFromJSON(): undefined {
  return undefined;
}

async function closeQuietly(agent: ProxyAgent): Promise<void> {
  // destroy, not close: close would wait for an in-flight (possibly black-holed) request.
  await agent.destroy().catch(() => undefined);
}
