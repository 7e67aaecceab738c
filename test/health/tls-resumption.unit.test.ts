import { randomBytes } from 'node:crypto';
import type http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { TLSSocket } from 'node:tls';
import { SocketProber } from '../../health/socket-prober.js';
import { ProbeReason } from '../../health/probe-reason.js';
import type { ProbeTarget } from '../../health/probe-target.js';
import { TlsSessionBook } from '../../health/tls-session-book.js';
import { TestForwardProxy } from './forward-proxy.js';
import { makeSelfSignedCert } from './targets.js';

/** An HTTPS target that records, per request, whether the TLS session was resumed. */
class ResumptionTarget {
  readonly resumed: boolean[] = [];
  private constructor(readonly server: https.Server) {
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      this.resumed.push((req.socket as TLSSocket).isSessionReused());
      res.writeHead(204).end();
    });
  }

  static async start(cert: { key: string; cert: string }): Promise<ResumptionTarget> {
    const target = new ResumptionTarget(https.createServer({ key: cert.key, cert: cert.cert }));
    await new Promise<void>((resolve) => target.server.listen(0, '127.0.0.1', resolve));
    return target;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  /** New ticket keys: every session handed out so far is refused from now on. */
  rotateTicketKeys(): void {
    this.server.setTicketKeys(randomBytes(48));
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * A TCP front for a TLS server that resets every connection whose ClientHello offers a
 * session (TLS 1.3 pre_shared_key, or a non-empty TLS 1.2 session ticket) and passes the
 * others through: a middlebox that breaks resumption instead of ignoring it.
 */
class ResumptionBreaker {
  refused = 0;
  private readonly sockets = new Set<net.Socket>();
  private constructor(
    private readonly server: net.Server,
    private readonly upstreamPort: number,
  ) {
    server.on('connection', (socket) => this.accept(socket));
  }

  static async start(upstreamPort: number): Promise<ResumptionBreaker> {
    const breaker = new ResumptionBreaker(net.createServer(), upstreamPort);
    await new Promise<void>((resolve) => breaker.server.listen(0, '127.0.0.1', resolve));
    return breaker;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private accept(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => undefined);
    let hello = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      hello = Buffer.concat([hello, chunk]);
      if (hello.length < 5 || hello.length < 5 + hello.readUInt16BE(3)) return;
      socket.off('data', onData);
      if (offersSession(hello)) {
        this.refused++;
        socket.destroy();
        return;
      }
      const upstream = net.connect(this.upstreamPort, '127.0.0.1', () => {
        upstream.write(hello);
        socket.pipe(upstream);
        upstream.pipe(socket);
      });
      this.sockets.add(upstream);
      upstream.on('close', () => this.sockets.delete(upstream));
      upstream.on('error', () => socket.destroy());
      socket.on('close', () => upstream.destroy());
    };
    socket.on('data', onData);
  }
}

/** Walks a ClientHello's extensions (RFC 8446 4.1.2) for a session offer. */
function offersSession(record: Buffer): boolean {
  let at = 5 + 4 + 2 + 32; // record header, handshake header, legacy_version, random
  at += 1 + record[at]!; // legacy_session_id
  at += 2 + record.readUInt16BE(at); // cipher_suites
  at += 1 + record[at]!; // legacy_compression_methods
  const end = at + 2 + record.readUInt16BE(at);
  at += 2;
  while (at + 4 <= end) {
    const type = record.readUInt16BE(at);
    const length = record.readUInt16BE(at + 2);
    if (type === 41 || (type === 35 && length > 0)) return true; // pre_shared_key, session_ticket
    at += 4 + length;
  }
  return false;
}

describe('SocketProber resumes TLS sessions across probes, each on a fresh tunnel', () => {
  const cert = makeSelfSignedCert();
  let target: ResumptionTarget;
  const closers: Array<() => Promise<void>> = [];

  beforeAll(async () => {
    target = await ResumptionTarget.start(cert);
    closers.push(() => target.close());
  });
  afterAll(async () => {
    await Promise.all(closers.map((close) => close()));
  });

  async function proxy(): Promise<TestForwardProxy> {
    const p = await TestForwardProxy.start('healthy');
    closers.push(() => p.close());
    return p;
  }

  function prober(sessions = new TlsSessionBook()): SocketProber {
    const p = new SocketProber({ tls: { ca: cert.cert }, sessions });
    closers.push(() => p.close());
    return p;
  }

  function probeTarget(port: number, targetPort = target.port): ProbeTarget {
    return {
      key: `test/proxy-${port}`,
      host: '127.0.0.1',
      port,
      // "localhost": the certificate's name, so the SNI (and so the session) is a hostname's.
      probeURL: `https://localhost:${targetPort}/generate_204`,
      intervalSeconds: 10,
      timeoutSeconds: 2,
      failureThreshold: 3,
      successThreshold: 1,
      expectedStatusCodes: [204],
    };
  }

  const never = new AbortController().signal;

  /**
   * A book that says when a probe's session was kept. A TLS 1.3 ticket comes after the
   * handshake, and on a loaded machine it can come after the probe's answer: a test that
   * probes again at once would then be measuring that race, not resumption (a real probe
   * comes an interval later).
   */
  class WatchedBook extends TlsSessionBook {
    private readonly kept = new Map<string, number>();
    override remember(key: string, endpoint: string, session: Buffer): void {
      super.remember(key, endpoint, session);
      this.kept.set(key, (this.kept.get(key) ?? 0) + 1);
    }
    /** Probes `target`, then waits (up to 2 s) until its session is kept. */
    async probeAndKeep(subject: SocketProber, target: ProbeTarget): Promise<void> {
      const before = this.kept.get(target.key) ?? 0;
      expect(await subject.probe(target, never)).toMatchObject({ success: true });
      for (let waited = 0; (this.kept.get(target.key) ?? 0) === before && waited < 2_000; waited += 10) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    }
  }

  /** What the target saw for the requests made while `run` ran. */
  async function seenBy(run: () => Promise<void>): Promise<boolean[]> {
    const before = target.resumed.length;
    await run();
    return target.resumed.slice(before);
  }

  it('the second probe through a proxy resumes the first probe’s session, on a new CONNECT', async () => {
    const p = await proxy();
    const book = new WatchedBook();
    const subject = prober(book);
    const seen = await seenBy(async () => {
      for (let i = 0; i < 3; i++) await book.probeAndKeep(subject, probeTarget(p.port));
    });
    expect(seen).toEqual([false, true, true]);
    expect(p.connectCount).toBe(3);
    expect(subject.tlsStats()).toEqual({ handshakes: 3, resumed: 2, fallbacks: 0 });
  });

  it('sessions are per proxy: the first probe through another proxy pays a full handshake', async () => {
    const [a, b] = [await proxy(), await proxy()];
    const book = new WatchedBook();
    const subject = prober(book);
    const seen = await seenBy(async () => {
      await book.probeAndKeep(subject, probeTarget(a.port));
      await book.probeAndKeep(subject, probeTarget(b.port));
      await book.probeAndKeep(subject, probeTarget(b.port));
    });
    expect(seen).toEqual([false, false, true]);
  });

  it('a session the target refuses (new ticket keys) falls back to a full handshake, then resumes again', async () => {
    const p = await proxy();
    const subject = prober();
    await subject.probe(probeTarget(p.port), never);
    target.rotateTicketKeys();
    const seen = await seenBy(async () => {
      expect(await subject.probe(probeTarget(p.port), never)).toMatchObject({ success: true });
      expect(await subject.probe(probeTarget(p.port), never)).toMatchObject({ success: true });
    });
    expect(seen).toEqual([false, true]);
  });

  it('a garbled stored session is ignored: the probe succeeds with a full handshake', async () => {
    const p = await proxy();
    const sessions = new TlsSessionBook();
    const subject = prober(sessions);
    await subject.probe(probeTarget(p.port), never);
    const key = probeTarget(p.port).key;
    sessions.remember(key, `http://127.0.0.1:${p.port} https://localhost:${target.port}`, randomBytes(200));
    const seen = await seenBy(async () => {
      expect(await subject.probe(probeTarget(p.port), never)).toMatchObject({ success: true });
    });
    expect(seen).toEqual([false]);
  });

  it('a target that fails resumed handshakes: the same probe retries with a full handshake and succeeds', async () => {
    const breaker = await ResumptionBreaker.start(target.port);
    closers.push(() => breaker.close());
    const p = await proxy();
    const subject = prober();
    const t = probeTarget(p.port, breaker.port);
    const seen = await seenBy(async () => {
      expect(await subject.probe(t, never)).toMatchObject({ success: true });
      expect(await subject.probe(t, never)).toMatchObject({ success: true });
    });
    expect(breaker.refused).toBe(1);
    expect(seen).toEqual([false, false]);
    // Two probes, three tunnels: the failed resumption and its full-handshake retry.
    expect(p.connectCount).toBe(3);
    expect(subject.tlsStats()).toMatchObject({ fallbacks: 1, resumed: 0 });
  });

  it('a session does not make a dead proxy look alive: the tunnel is still required', async () => {
    const p = await proxy();
    const subject = prober();
    await subject.probe(probeTarget(p.port), never);
    p.mode = 'cannot-egress';
    expect(await subject.probe(probeTarget(p.port), never)).toMatchObject({
      success: false,
      reason: ProbeReason.TunnelFailed,
    });
    // A refused CONNECT is the proxy's answer, not the session's fault: no second tunnel.
    expect(p.connectCount).toBe(2);
    expect(subject.tlsStats().fallbacks).toBe(0);
  });

  it('release() forgets the proxy’s session, and a changed endpoint never resumes the old one', async () => {
    const p = await proxy();
    const sessions = new TlsSessionBook();
    const subject = prober(sessions);
    await subject.probe(probeTarget(p.port), never);
    expect(sessions.size).toBe(1);
    await subject.release(probeTarget(p.port).key);
    expect(sessions.size).toBe(0);
    const other = await ResumptionTarget.start(cert);
    closers.push(() => other.close());
    // The same ticket keys: `other` would accept the first target's sessions if offered them.
    other.server.setTicketKeys(target.server.getTicketKeys());
    const seen = await seenBy(() => subject.probe(probeTarget(p.port), never).then(() => undefined));
    expect(seen).toEqual([false]);
    // Same key, another probe origin: the stored session is for the first one only.
    const moved = { ...probeTarget(p.port, other.port) };
    await subject.probe(moved, never);
    expect(other.resumed).toEqual([false]);
  });
});
