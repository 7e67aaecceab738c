import { Registry } from 'prom-client';
import { pino } from 'pino';
import { HealthEngine } from '../../health/health-engine.js';
import { ProbeReason } from '../../health/probe-reason.js';
import type { ProbeTarget } from '../../health/probe-target.js';
import { DEFAULT_LATENCY_POLICY, type Verdict } from '../../health/verdict.js';
import { TestForwardProxy, type ProxyMode } from './forward-proxy.js';
import { makeSelfSignedCert, startHttpTarget, startHttpsTarget, type TestTarget } from './targets.js';
import { waitFor } from './wait-for.js';

// The whole engine, real timers, real undici, real forward proxies and targets on loopback.
describe('HealthEngine against real proxies on loopback', () => {
  const cert = makeSelfSignedCert();
  let httpsTarget: TestTarget;
  let httpTarget: TestTarget;
  let engine: HealthEngine;
  let transitions: Array<[string, Verdict]>;
  let proxies: TestForwardProxy[];

  beforeAll(async () => {
    httpsTarget = await startHttpsTarget(cert);
    httpTarget = await startHttpTarget();
  });

  afterAll(async () => {
    await Promise.all([httpsTarget.close(), httpTarget.close()]);
  });

  beforeEach(() => {
    proxies = [];
    transitions = [];
    engine = new HealthEngine({
      logger: pino({ level: 'silent' }),
      registry: new Registry(),
      tls: { ca: cert.cert },
      random: () => 0, // first probe at once: the tests are about verdicts, not spreading
    });
    engine.onTransition((key, verdict) => transitions.push([key, verdict]));
    engine.start();
  });

  afterEach(async () => {
    await engine.stop();
    await Promise.all(proxies.map((p) => p.close()));
  });

  async function proxy(mode: ProxyMode): Promise<TestForwardProxy> {
    const p = await TestForwardProxy.start(mode);
    proxies.push(p);
    return p;
  }

  function target(p: TestForwardProxy, overrides: Partial<ProbeTarget> = {}): ProbeTarget {
    return {
      key: `ns/proxy-${p.port}`,
      host: '127.0.0.1',
      port: p.port,
      probeURL: httpsTarget.url,
      intervalSeconds: 0.2,
      timeoutSeconds: 2,
      failureThreshold: 2,
      successThreshold: 2,
      expectedStatusCodes: [204],
      ...overrides,
    };
  }

  const transitionsOf = (key: string): Verdict[] => transitions.filter(([k]) => k === key).map(([, v]) => v);

  it('a healthy proxy has no verdict before successThreshold probes, then becomes healthy once', async () => {
    const p = await proxy('healthy');
    const t = target(p, { successThreshold: 3 });
    engine.upsert(t);
    expect(engine.verdict(t.key)).toBeUndefined();
    await waitFor(() => transitionsOf(t.key).length > 0, 'a verdict');
    expect(transitionsOf(t.key)).toEqual([
      expect.objectContaining({ healthy: true, reason: ProbeReason.ProbeSucceeded, consecutiveSuccesses: 3 }),
    ]);
    expect(p.connectCount).toBeGreaterThanOrEqual(3);
  });

  it.each<[ProxyMode, 'http' | 'https', string]>([
    ['cannot-egress', 'https', ProbeReason.TunnelFailed],
    ['cannot-egress', 'http', ProbeReason.UnexpectedStatus],
    ['closes', 'https', ProbeReason.TunnelFailed],
  ])('a %s proxy probed over %s becomes unhealthy with %s', async (mode, scheme, reason) => {
    const p = await proxy(mode);
    const t = target(p, { probeURL: scheme === 'https' ? httpsTarget.url : httpTarget.url });
    engine.upsert(t);
    await waitFor(() => transitionsOf(t.key).length > 0, 'a verdict');
    expect(transitionsOf(t.key)).toEqual([
      expect.objectContaining({ healthy: false, reason, consecutiveFailures: 2 }),
    ]);
  });

  it('a black-hole proxy becomes unhealthy within timeout x failureThreshold (plus slack)', async () => {
    const p = await proxy('black-hole');
    const t = target(p, { timeoutSeconds: 0.5, failureThreshold: 2 });
    const started = Date.now();
    engine.upsert(t);
    await waitFor(() => transitionsOf(t.key).length > 0, 'a verdict');
    const elapsed = Date.now() - started;
    expect(transitionsOf(t.key)).toEqual([
      expect.objectContaining({ healthy: false, reason: ProbeReason.ProxyTimeout }),
    ]);
    // Lower bound proves the timeout was honoured; the upper bound is generous for a loaded machine.
    expect(elapsed).toBeGreaterThanOrEqual(2 * 500 - 50);
    expect(elapsed).toBeLessThan(2 * 500 + 4000);
  });

  it('a proxy whose port refuses connections becomes unhealthy with ConnectionRefused', async () => {
    const p = await proxy('healthy');
    const t = target(p);
    await p.close();
    engine.upsert(t);
    await waitFor(() => transitionsOf(t.key).length > 0, 'a verdict');
    expect(transitionsOf(t.key)).toEqual([
      expect.objectContaining({ healthy: false, reason: ProbeReason.ConnectionRefused }),
    ]);
  });

  it('a wrong status code from the target makes the proxy unhealthy with UnexpectedStatus', async () => {
    const p = await proxy('healthy');
    const t = target(p, { expectedStatusCodes: [200] });
    engine.upsert(t);
    await waitFor(() => transitionsOf(t.key).length > 0, 'a verdict');
    expect(transitionsOf(t.key)[0]).toMatchObject({ healthy: false, reason: ProbeReason.UnexpectedStatus });
    expect(transitionsOf(t.key)[0].message).toContain('204');
  });

  it('an https probe goes through one CONNECT per probe at the proxy', async () => {
    const p = await proxy('healthy');
    const t = target(p);
    engine.upsert(t);
    await waitFor(() => engine.stats().probesCompleted >= 4, '4 probes');
    engine.remove(t.key);
    expect(p.connectCount).toBeGreaterThanOrEqual(4);
    expect(p.connectCount).toBeLessThanOrEqual(engine.stats().probesStarted);
    expect(p.requestCount).toBe(0);
  });

  it('follows a proxy that loses egress and gets it back: healthy -> unhealthy -> healthy', async () => {
    const p = await proxy('healthy');
    const t = target(p);
    engine.upsert(t);
    await waitFor(() => transitionsOf(t.key).length === 1, 'healthy');
    p.mode = 'cannot-egress';
    await waitFor(() => transitionsOf(t.key).length === 2, 'unhealthy');
    p.mode = 'healthy';
    await waitFor(() => transitionsOf(t.key).length === 3, 'healthy again');
    expect(transitionsOf(t.key).map((v) => [v.healthy, v.reason])).toEqual([
      [true, ProbeReason.ProbeSucceeded],
      [false, ProbeReason.TunnelFailed],
      [true, ProbeReason.ProbeSucceeded],
    ]);
  });

  it('publishes nothing more while a steady proxy keeps passing', async () => {
    // Loopback latency on a loaded 2-core machine swings by 100+ ms; a wide latency floor keeps
    // this test about steadiness (the latency rule itself is covered by the decision tables).
    await engine.stop();
    engine = new HealthEngine({
      logger: pino({ level: 'silent' }),
      registry: new Registry(),
      tls: { ca: cert.cert },
      random: () => 0,
      latencyPolicy: { ...DEFAULT_LATENCY_POLICY, floorMillis: 10_000 },
    });
    engine.onTransition((key, verdict) => transitions.push([key, verdict]));
    engine.start();
    const p = await proxy('healthy');
    const t = target(p, { intervalSeconds: 0.05 });
    engine.upsert(t);
    await waitFor(() => engine.stats().probesCompleted >= 25, '25 probes');
    expect(transitionsOf(t.key)).toHaveLength(1);
  });

  it('removing a target cancels its in-flight probe: the proxy sees the connection close', async () => {
    const p = await proxy('black-hole');
    const t = target(p, { timeoutSeconds: 60 });
    engine.upsert(t);
    await waitFor(() => p.connectCount === 1 && p.openSockets > 0, 'the probe to reach the proxy');
    engine.remove(t.key);
    // Far sooner than the 60 s timeout: the abort closed the socket.
    await waitFor(() => p.openSockets === 0, 'the probe connection to close', 10_000);
    expect(engine.stats().probesCompleted).toBe(0);
    expect(transitions).toEqual([]);
    expect(engine.verdict(t.key)).toBeUndefined();
  });
});
