import { SocketProber } from '../../health/socket-prober.js';
import { ProbeReason } from '../../health/probe-reason.js';
import type { ProbeTarget } from '../../health/probe-target.js';
import { TestForwardProxy, type ProxyMode } from './forward-proxy.js';
import { makeSelfSignedCert, startHttpTarget, startHttpsTarget, type TestTarget } from './targets.js';
import net from 'node:net';
import { waitFor } from './wait-for.js';

// Real sockets on loopback only: a target, a forward proxy per mode, and the real socket prober.
describe('SocketProber sends the probe through the proxy', () => {
  const cert = makeSelfSignedCert();
  let httpTarget: TestTarget;
  let httpsTarget: TestTarget;
  let prober: SocketProber;
  const proxies: TestForwardProxy[] = [];

  beforeAll(async () => {
    httpTarget = await startHttpTarget();
    httpsTarget = await startHttpsTarget(cert);
    prober = new SocketProber({ tls: { ca: cert.cert } });
  });

  afterAll(async () => {
    await prober.close();
    await Promise.all([...proxies.map((p) => p.close()), httpTarget.close(), httpsTarget.close()]);
  });

  afterEach(() => {
    httpTarget.status = 204;
    httpsTarget.status = 204;
  });

  async function proxy(mode: ProxyMode): Promise<TestForwardProxy> {
    const p = await TestForwardProxy.start(mode);
    proxies.push(p);
    return p;
  }

  function target(port: number, scheme: 'http' | 'https', overrides: Partial<ProbeTarget> = {}): ProbeTarget {
    return {
      key: `test/${scheme}-${port}`,
      host: '127.0.0.1',
      port,
      probeURL: scheme === 'http' ? httpTarget.url : httpsTarget.url,
      intervalSeconds: 10,
      timeoutSeconds: 1,
      failureThreshold: 3,
      successThreshold: 1,
      expectedStatusCodes: [204, 200],
      ...overrides,
    };
  }

  it.each<[ProxyMode, 'http' | 'https', boolean, string]>([
    ['healthy', 'http', true, ProbeReason.ProbeSucceeded],
    ['healthy', 'https', true, ProbeReason.ProbeSucceeded],
    ['cannot-egress', 'https', false, ProbeReason.TunnelFailed],
    ['cannot-egress', 'http', false, ProbeReason.UnexpectedStatus],
    ['closes', 'https', false, ProbeReason.TunnelFailed],
    ['closes', 'http', false, ProbeReason.TunnelFailed],
    ['black-hole', 'https', false, ProbeReason.ProxyTimeout],
    ['black-hole', 'http', false, ProbeReason.ProxyTimeout],
  ])('a %s proxy probed over %s gives success=%s with reason %s', async (mode, scheme, success, reason) => {
    const p = await proxy(mode);
    const outcome = await prober.probe(target(p.port, scheme), new AbortController().signal);
    expect(outcome).toMatchObject({ success, reason });
    expect(outcome.durationMillis).toBeGreaterThan(0);
  });

  describe('through a proxy that requires credentials', () => {
    const credentials = { username: 'crawler', password: 's3cret:with-colon' };
    const basic = `Basic ${Buffer.from('crawler:s3cret:with-colon').toString('base64')}`;

    it.each(['http', 'https'] as const)(
      'over %s, succeeds with them as Proxy-Authorization',
      async (scheme) => {
        const p = await proxy('healthy');
        p.requiredAuthorization = basic;
        const outcome = await prober.probe(
          target(p.port, scheme, { credentials }),
          new AbortController().signal,
        );
        expect(outcome).toMatchObject({ success: true, reason: ProbeReason.ProbeSucceeded });
      },
    );

    it.each<['http' | 'https', Partial<ProbeTarget>]>([
      ['http', {}],
      ['https', {}],
      ['http', { credentials: { ...credentials, password: 'not-it-9f2' } }],
      ['https', { credentials: { ...credentials, password: 'not-it-9f2' } }],
    ])(
      'over %s, says a 407 is ProxyAuthenticationRequired (%j), never quoting a password',
      async (scheme, over) => {
        const p = await proxy('healthy');
        p.requiredAuthorization = basic;
        const outcome = await prober.probe(target(p.port, scheme, over), new AbortController().signal);
        expect(outcome).toMatchObject({ success: false, reason: ProbeReason.ProxyAuthenticationRequired });
        expect(outcome.message).toMatch(/407/);
        expect(outcome.message).not.toMatch(/s3cret|not-it-9f2/);
      },
    );
  });

  it.each(['http', 'https'] as const)(
    'a wrong status code from the %s target fails with UnexpectedStatus',
    async (scheme) => {
      const p = await proxy('healthy');
      (scheme === 'http' ? httpTarget : httpsTarget).status = 503;
      const outcome = await prober.probe(target(p.port, scheme), new AbortController().signal);
      expect(outcome).toMatchObject({ success: false, reason: ProbeReason.UnexpectedStatus });
      expect(outcome.message).toContain('503');
    },
  );

  it('a refused connection to the proxy fails with ConnectionRefused', async () => {
    const port = await freePort();
    const outcome = await prober.probe(target(port, 'https'), new AbortController().signal);
    expect(outcome).toMatchObject({ success: false, reason: ProbeReason.ConnectionRefused });
  });

  it('an https probe opens a CONNECT tunnel at the proxy, a fresh one per probe', async () => {
    const p = await proxy('healthy');
    const hitsBefore = httpsTarget.hits;
    for (let i = 0; i < 3; i++) {
      expect(await prober.probe(target(p.port, 'https'), new AbortController().signal)).toMatchObject({
        success: true,
      });
    }
    expect(p.connectCount).toBe(3);
    expect(p.requestCount).toBe(0);
    expect(httpsTarget.hits - hitsBefore).toBe(3);
  });

  it('holds sockets only while a probe is in flight, so memory follows probes in flight, not the fleet', async () => {
    const modes: ProxyMode[] = ['healthy', 'cannot-egress', 'closes', 'healthy'];
    const fleet = await Promise.all(modes.map((mode) => proxy(mode)));
    const outcomes = await Promise.all(
      fleet.map((p) => prober.probe(target(p.port, 'https'), new AbortController().signal)),
    );
    expect(outcomes.map((o) => o.success)).toEqual([true, false, false, true]);
    expect(prober.probesInFlight).toBe(0);
    const hole = await proxy('black-hole');
    const pending = prober.probe(target(hole.port, 'https'), new AbortController().signal);
    await waitFor(() => hole.openSockets === 1, 'the probe to reach the proxy');
    expect(prober.probesInFlight).toBe(1);
    await pending;
    expect(prober.probesInFlight).toBe(0);
    await waitFor(() => hole.openSockets === 0, 'the timed-out connection to close');
  });

  it.each(['http', 'https'] as const)(
    'completed %s probes (any status) leave no connection open behind them',
    async (scheme) => {
      const p = await proxy('healthy');
      for (const status of [204, 503]) {
        (scheme === 'http' ? httpTarget : httpsTarget).status = status;
        for (let i = 0; i < 3; i++) await prober.probe(target(p.port, scheme), new AbortController().signal);
      }
      expect(p.requestCount + p.connectCount).toBe(6);
      await waitFor(() => p.openSockets === 0, 'the probes’ connections to close');
    },
  );

  it('an http probe is forwarded as an absolute-URI request, not tunnelled', async () => {
    const p = await proxy('healthy');
    expect(await prober.probe(target(p.port, 'http'), new AbortController().signal)).toMatchObject({
      success: true,
    });
    expect(p.requestCount).toBe(1);
    expect(p.connectCount).toBe(0);
  });

  it.each(['http', 'https'] as const)(
    'timed-out %s probes of a black-hole proxy leave no connection open behind them',
    async (scheme) => {
      const p = await proxy('black-hole');
      for (let i = 0; i < 3; i++) {
        const outcome = await prober.probe(
          target(p.port, scheme, { timeoutSeconds: 0.2 }),
          new AbortController().signal,
        );
        expect(outcome.reason).toBe(ProbeReason.ProxyTimeout);
      }
      expect(p.requestCount + p.connectCount).toBe(3);
      await waitFor(() => p.openSockets === 0, 'the timed-out connections to close');
    },
  );

  it('an https probe fails with ProbeError when the target certificate is not trusted', async () => {
    const p = await proxy('healthy');
    const untrusting = new SocketProber();
    try {
      const outcome = await untrusting.probe(target(p.port, 'https'), new AbortController().signal);
      expect(outcome).toMatchObject({ success: false, reason: ProbeReason.ProbeError });
    } finally {
      await untrusting.close();
    }
  });

  describe('a peer that does not speak HTTP costs one bounded read, never a hang or a crash', () => {
    /** A raw TCP "proxy" that answers whatever it is sent with `reply(socket)`. */
    async function rawProxy(reply: (socket: net.Socket) => void): Promise<number> {
      const server = net.createServer((socket) => {
        socket.on('error', () => undefined);
        socket.once('data', () => reply(socket));
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      closers.push(
        () =>
          new Promise<void>((resolve) => {
            server.close(() => resolve());
          }),
      );
      return (server.address() as net.AddressInfo).port;
    }
    const closers: Array<() => Promise<void>> = [];
    afterAll(async () => void (await Promise.all(closers.map((c) => c()))));

    it.each<[string, (socket: net.Socket) => void, 'http' | 'https', string]>([
      [
        'answers with no status line',
        (s) => s.end('SSH-2.0-OpenSSH_9.6\r\n'),
        'https',
        'did not answer with an HTTP status line',
      ],
      [
        'answers with no status line',
        (s) => s.end('hello\r\n'),
        'http',
        'did not answer with an HTTP status line',
      ],
      [
        'sends an endless head',
        (s) => s.write(`HTTP/1.1 200 OK\r\n${'X-Pad: y\r\n'.repeat(4000)}`),
        'https',
        'without ending its head',
      ],
    ])('a proxy that %s (%s) fails with ProbeError', async (_what, reply, scheme, message) => {
      const port = await rawProxy(reply);
      const outcome = await prober.probe(target(port, scheme), new AbortController().signal);
      expect(outcome).toMatchObject({ success: false, reason: ProbeReason.ProbeError });
      expect(outcome.message).toContain(message);
      expect(prober.probesInFlight).toBe(0);
    });

    it('a proxy that closes after its CONNECT head and before TLS fails with TunnelFailed', async () => {
      const port = await rawProxy((s) => s.end('HTTP/1.1 200 Connection established\r\n\r\n'));
      const outcome = await prober.probe(target(port, 'https'), new AbortController().signal);
      expect(outcome).toMatchObject({ success: false, reason: ProbeReason.TunnelFailed });
    });
  });

  it('release() during a probe closes its connections at once', async () => {
    const hole = await proxy('black-hole');
    const t = target(hole.port, 'https', { timeoutSeconds: 30 });
    const pending = prober.probe(t, new AbortController().signal);
    await waitFor(() => hole.openSockets === 1, 'the probe to reach the proxy');
    await prober.release(t.key);
    expect(await pending).toMatchObject({ success: false });
    expect(prober.probesInFlight).toBe(0);
    await waitFor(() => hole.openSockets === 0, 'the released connection to close');
  });
});

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
