import { Registry, register as globalRegistry } from 'prom-client';
import { pino } from 'pino';
import { HealthEngine } from '../../health/health-engine.js';
import { DURATION_METRIC, FAILURES_METRIC } from '../../health/health-metrics.js';
import type { ProbeTarget } from '../../health/probe-target.js';
import type { Verdict } from '../../health/verdict.js';
import { ControlledProber, failure, success } from './controlled-prober.js';
import { FakeClock } from './fake-clock.js';

// Scheduling and bookkeeping with a fake clock and a prober the test controls: no sockets,
// no real waiting, fully deterministic.

/** Deterministic uniform [0, 1) source. */
function seeded(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return s / 2147483648;
  };
}

function target(key: string, overrides: Partial<ProbeTarget> = {}): ProbeTarget {
  return {
    key,
    host: '10.0.0.1',
    port: 3128,
    probeURL: 'https://probe.example/generate_204',
    intervalSeconds: 10,
    timeoutSeconds: 5,
    failureThreshold: 3,
    successThreshold: 1,
    expectedStatusCodes: [204],
    ...overrides,
  };
}

function setup(options: { concurrency?: number; jitter?: number; random?: () => number } = {}) {
  const clock = new FakeClock();
  const prober = new ControlledProber(() => clock.now());
  const registry = new Registry();
  const engine = new HealthEngine({
    logger: pino({ level: 'silent' }),
    registry,
    clock,
    prober,
    concurrency: options.concurrency ?? 64,
    jitter: options.jitter ?? 0.1,
    random: options.random ?? seeded(42),
  });
  const transitions: Array<[string, Verdict]> = [];
  engine.onTransition((key, verdict) => transitions.push([key, verdict]));
  return { clock, prober, registry, engine, transitions };
}

describe('HealthEngine scheduling', () => {
  it('spreads first probes over one interval instead of probing everything at once', async () => {
    const { clock, prober, engine } = setup();
    prober.answer = () => success();
    for (let i = 0; i < 200; i++) engine.upsert(target(`ns/p${i}`));
    engine.start();
    await clock.advance(10_000);
    const firsts = new Map<string, number>();
    for (const s of prober.started) if (!firsts.has(s.key)) firsts.set(s.key, s.at);
    expect(firsts.size).toBe(200);
    const perSecond = new Array<number>(10).fill(0);
    for (const at of firsts.values()) perSecond[Math.min(9, Math.floor(at / 1000))]++;
    // Uniform spread: every second of the interval gets some, none gets a burst.
    for (const count of perSecond) expect(count).toBeGreaterThan(5);
    for (const count of perSecond) expect(count).toBeLessThan(45);
  });

  it('jitters every interval within ±jitter and never repeats the same gap pattern exactly', async () => {
    const { clock, prober, engine } = setup({ jitter: 0.1 });
    prober.answer = () => success();
    engine.upsert(target('ns/a'));
    engine.start();
    await clock.advance(200_000);
    const times = prober.started.map((s) => s.at);
    const gaps = times.slice(1).map((t, i) => t - times[i]);
    expect(gaps.length).toBeGreaterThan(15);
    for (const gap of gaps) {
      expect(gap).toBeGreaterThanOrEqual(9_000);
      expect(gap).toBeLessThanOrEqual(11_000);
    }
    expect(new Set(gaps).size).toBeGreaterThan(gaps.length / 2);
  });

  it('keeps a single timer however many targets are scheduled', async () => {
    const { clock, prober, engine } = setup();
    prober.answer = () => success();
    for (let i = 0; i < 1000; i++) engine.upsert(target(`ns/p${i}`));
    engine.start();
    expect(clock.pendingTimers).toBe(1);
    await clock.advance(25_000);
    expect(clock.pendingTimers).toBe(1);
    expect(engine.stats().probesCompleted).toBeGreaterThan(1500);
  });

  it('bounds concurrent probes with the semaphore and records the wait as lateness', async () => {
    const { clock, prober, engine } = setup({ concurrency: 4, random: () => 0 });
    for (let i = 0; i < 20; i++) engine.upsert(target(`ns/p${i}`));
    engine.start();
    await clock.advance(1);
    expect(prober.inFlight).toBe(4);
    await clock.advance(500);
    prober.finishAll(success());
    await clock.advance(1);
    expect(prober.inFlight).toBe(4);
    for (let i = 0; i < 10; i++) {
      prober.finishAll(success());
      await clock.advance(1);
    }
    expect(prober.maxConcurrent).toBe(4);
    expect(engine.stats().probesCompleted).toBe(20);
    expect(Math.max(...engine.stats().latenessMillis)).toBeGreaterThanOrEqual(500);
  });

  it('never runs two probes of the same target at once, even when a probe overruns its interval', async () => {
    const { clock, prober, engine } = setup({ random: () => 0.5, jitter: 0 });
    engine.upsert(target('ns/slow', { intervalSeconds: 1, timeoutSeconds: 30 }));
    engine.start();
    await clock.advance(5_000);
    expect(prober.started).toHaveLength(1);
    prober.finishAll(success());
    // Overran: the next probe starts right away rather than waiting another interval.
    await clock.advance(1);
    expect(prober.started).toHaveLength(2);
    expect(prober.maxConcurrent).toBe(1);
  });
});

describe('HealthEngine target lifecycle', () => {
  it('removing a target cancels its in-flight probe, releases its agent and publishes nothing', async () => {
    const { clock, prober, engine, transitions } = setup({ random: () => 0 });
    engine.upsert(target('ns/a'));
    engine.start();
    await clock.advance(1);
    const [pending] = prober.pending;
    engine.remove('ns/a');
    expect(pending.signal.aborted).toBe(true);
    expect(prober.released).toEqual(['ns/a']);
    await clock.advance(60_000);
    expect(transitions).toEqual([]);
    expect(engine.verdict('ns/a')).toBeUndefined();
    expect(prober.started).toHaveLength(1);
  });

  it.each([
    ['host', { host: '10.0.0.2' }],
    ['port', { port: 8080 }],
    ['probeURL', { probeURL: 'http://other.example/' }],
  ])('a changed %s cancels the in-flight probe and starts over with no verdict', async (_field, change) => {
    const { clock, prober, engine } = setup({ random: () => 0 });
    prober.answer = () => success();
    engine.upsert(target('ns/a'));
    engine.start();
    await clock.advance(1);
    expect(engine.verdict('ns/a')?.healthy).toBe(true);
    prober.answer = undefined;
    await clock.advance(10_000);
    const [inFlight] = prober.pending;
    engine.upsert(target('ns/a', change));
    expect(inFlight.signal.aborted).toBe(true);
    expect(engine.verdict('ns/a')).toBeUndefined();
    expect(prober.released).toContain('ns/a');
  });

  it.each([
    ['failureThreshold', { failureThreshold: 5 }],
    ['timeoutSeconds', { timeoutSeconds: 2 }],
    ['expectedStatusCodes', { expectedStatusCodes: [200] }],
  ])('a changed %s keeps the verdict and the in-flight probe', async (_field, change) => {
    const { clock, prober, engine } = setup({ random: () => 0 });
    prober.answer = () => success();
    engine.upsert(target('ns/a'));
    engine.start();
    await clock.advance(1);
    prober.answer = undefined;
    await clock.advance(10_000);
    const [inFlight] = prober.pending;
    engine.upsert(target('ns/a', change));
    expect(inFlight.signal.aborted).toBe(false);
    expect(engine.verdict('ns/a')?.healthy).toBe(true);
  });

  it('a shorter interval takes effect without waiting out the old one', async () => {
    const { clock, prober, engine } = setup({ random: () => 0.5, jitter: 0 });
    prober.answer = () => success();
    engine.upsert(target('ns/a', { intervalSeconds: 3600 }));
    engine.start();
    await clock.advance(1_800_000);
    expect(prober.started).toHaveLength(1);
    engine.upsert(target('ns/a', { intervalSeconds: 10 }));
    await clock.advance(10_000);
    expect(prober.started).toHaveLength(2);
  });

  it('stop() aborts every probe, closes the prober and leaves no timer behind', async () => {
    const { clock, prober, engine } = setup({ random: () => 0 });
    for (let i = 0; i < 3; i++) engine.upsert(target(`ns/p${i}`));
    engine.start();
    await clock.advance(1);
    const signals = prober.pending.map((p) => p.signal);
    await engine.stop();
    expect(signals.every((s) => s.aborted)).toBe(true);
    expect(prober.closed).toBe(true);
    expect(clock.pendingTimers).toBe(0);
  });

  it.each<[string, Partial<ProbeTarget>, RegExp]>([
    ['an empty key', { key: '' }, /key/],
    ['an empty host', { host: '' }, /host/],
    ['a port out of range', { port: 70000 }, /port/],
    ['a probeURL that is not a URL', { probeURL: 'not a url' }, /probeURL/],
    ['a probeURL with another scheme', { probeURL: 'ftp://x/' }, /probeURL must be http or https/],
    ['a zero interval', { intervalSeconds: 0 }, /intervalSeconds/],
    ['a negative timeout', { timeoutSeconds: -1 }, /timeoutSeconds/],
    ['a fractional failureThreshold', { failureThreshold: 1.5 }, /failureThreshold/],
    ['a zero successThreshold', { successThreshold: 0 }, /successThreshold/],
    ['no expected status codes', { expectedStatusCodes: [] }, /expectedStatusCodes/],
    ['a status code that is not HTTP', { expectedStatusCodes: [2040] }, /expectedStatusCodes/],
  ])('rejects %s with an error naming the field', (_what, change, message) => {
    const { engine } = setup();
    expect(() => engine.upsert(target('ns/bad', change))).toThrow(message);
    expect(engine.verdict('ns/bad')).toBeUndefined();
  });
});

describe('HealthEngine publishing', () => {
  it('publishes the first verdict and then nothing while a steady proxy keeps passing', async () => {
    const { clock, prober, engine, transitions } = setup();
    prober.answer = () => success(20);
    engine.upsert(target('ns/a', { successThreshold: 2 }));
    engine.start();
    await clock.advance(600_000);
    expect(engine.stats().probesCompleted).toBeGreaterThan(50);
    expect(transitions).toHaveLength(1);
    expect(transitions[0][1]).toMatchObject({ healthy: true, consecutiveSuccesses: 2 });
  });

  it('publishes healthy -> unhealthy -> healthy, each exactly once, at the thresholds', async () => {
    const { clock, prober, engine, transitions } = setup();
    let script = 'SSFFFFSSSS';
    prober.answer = () => {
      const step = script[0] ?? 'S';
      script = script.slice(1);
      return step === 'S' ? success() : failure();
    };
    engine.upsert(target('ns/a', { successThreshold: 2, failureThreshold: 3 }));
    engine.start();
    await clock.advance(120_000);
    expect(transitions.map(([, v]) => [v.healthy, v.consecutiveSuccesses, v.consecutiveFailures])).toEqual([
      [true, 2, 0],
      [false, 0, 3],
      [true, 2, 0],
    ]);
  });

  it('keeps working when a listener throws', async () => {
    const { clock, prober, engine, transitions } = setup({ random: () => 0 });
    engine.onTransition(() => {
      throw new Error('listener bug');
    });
    prober.answer = () => success();
    engine.upsert(target('ns/a'));
    engine.upsert(target('ns/b'));
    engine.start();
    await clock.advance(1);
    expect(transitions.map(([k]) => k).sort()).toEqual(['ns/a', 'ns/b']);
  });

  it('records probe durations and failures on the given registry, never the global one', async () => {
    const { clock, prober, engine, registry } = setup({ random: () => 0 });
    prober.answer = (t) => (t.key === 'ns/bad' ? failure() : success(30));
    engine.upsert(target('ns/good'));
    engine.upsert(target('ns/bad'));
    engine.start();
    await clock.advance(1);
    const text = await registry.metrics();
    expect(text).toContain(`${DURATION_METRIC}_count{proxy="ns/good"} 1`);
    expect(text).toContain(`${FAILURES_METRIC}{proxy="ns/bad",reason="TunnelFailed"} 1`);
    expect(globalRegistry.getSingleMetric(DURATION_METRIC)).toBeUndefined();
    engine.remove('ns/bad');
    expect(await registry.metrics()).not.toContain('proxy="ns/bad"');
  });
});
