import { Registry } from 'prom-client';
import { pino } from 'pino';
import { HealthEngine, type RecheckResult } from '../../health/health-engine.js';
import { RECHECKS_METRIC } from '../../health/health-metrics.js';
import type { ProbeTarget } from '../../health/probe-target.js';
import { recheckStep, type Recheck, type RecheckStep } from '../../health/recheck.js';
import type { Verdict } from '../../health/verdict.js';
import { ControlledProber, failure, success } from './controlled-prober.js';
import { FakeClock } from './fake-clock.js';

describe('recheckStep: what follows each probe of a recheck', () => {
  const asked: Recheck = { requestedAt: 1000, failures: 0 };
  it.each<[string, Recheck, { startedAt: number; success: boolean }, RecheckStep]>([
    [
      'a probe that started before the request answers nothing: again at once',
      asked,
      { startedAt: 999, success: true },
      { kind: 'probe_now', recheck: asked },
    ],
    [
      'a passing probe after the request ends it: passed',
      asked,
      { startedAt: 1000, success: true },
      { kind: 'done', passed: true },
    ],
    [
      'a failing one below the threshold: again soon',
      asked,
      { startedAt: 1000, success: false },
      { kind: 'probe_soon', recheck: { requestedAt: 1000, failures: 1 } },
    ],
    [
      'the threshold-th failure ends it: failed',
      { requestedAt: 1000, failures: 2 },
      { startedAt: 3000, success: false },
      { kind: 'done', passed: false },
    ],
    [
      'a pass after failures still ends it: passed',
      { requestedAt: 1000, failures: 2 },
      { startedAt: 3000, success: true },
      { kind: 'done', passed: true },
    ],
  ])('%s', (_case, recheck, probe, step) => {
    expect(recheckStep(recheck, probe, 3)).toEqual(step);
  });
});

describe('HealthEngine.recheck', () => {
  function target(overrides: Partial<ProbeTarget> = {}): ProbeTarget {
    return {
      key: 'ns/a',
      host: '10.0.0.1',
      port: 3128,
      probeURL: 'http://probe.test/ok',
      intervalSeconds: 30,
      timeoutSeconds: 5,
      failureThreshold: 3,
      successThreshold: 1,
      expectedStatusCodes: [200],
      ...overrides,
    };
  }

  async function setup() {
    const clock = new FakeClock();
    const prober = new ControlledProber(() => clock.now());
    const registry = new Registry();
    const engine = new HealthEngine({
      logger: pino({ level: 'silent' }),
      registry,
      clock,
      prober,
      jitter: 0,
      random: () => 0.5,
      recheckIntervalMillis: 1000,
    });
    const rechecks: Array<[string, RecheckResult]> = [];
    const transitions: Array<[string, Verdict]> = [];
    engine.onRecheck((key, result) => rechecks.push([key, result]));
    engine.onTransition((key, verdict) => transitions.push([key, verdict]));
    engine.upsert(target());
    engine.start();
    // First probe at half an interval (random 0.5): healthy.
    prober.answer = () => success();
    await clock.advance(15_000);
    prober.answer = undefined;
    const count = async () => (await registry.getSingleMetric(RECHECKS_METRIC)!.get()).values[0]?.value ?? 0;
    return { clock, prober, engine, rechecks, transitions, count };
  }

  it('probes at once, out of schedule, and reports the pass', async () => {
    const s = await setup();
    const before = s.prober.started.length;
    expect(s.engine.recheck('ns/a')).toBe(true);
    await s.clock.advance(0);
    expect(s.prober.started.length).toBe(before + 1);
    s.prober.finishAll(success());
    await s.clock.advance(0);
    expect(s.rechecks).toEqual([['ns/a', { passed: true, startedAt: 15_000 }]]);
    // Back on the schedule: nothing until the next interval.
    await s.clock.advance(29_000);
    expect(s.prober.started.length).toBe(before + 1);
    expect(await s.count()).toBe(1);
  });

  it('a dead proxy turns Unhealthy after failureThreshold probes a recheck interval apart', async () => {
    const s = await setup();
    s.prober.answer = () => failure();
    s.engine.recheck('ns/a');
    await s.clock.advance(2_000);
    expect(s.prober.started.slice(-3).map((p) => p.at)).toEqual([15_000, 16_000, 17_000]);
    expect(s.transitions.at(-1)?.[1]).toEqual(expect.objectContaining({ healthy: false }));
    expect(s.rechecks).toEqual([['ns/a', { passed: false, startedAt: 17_000 }]]);
  });

  it('a second request while one runs starts nothing', async () => {
    const s = await setup();
    expect(s.engine.recheck('ns/a')).toBe(true);
    expect(s.engine.recheck('ns/a')).toBe(false);
    expect(s.engine.recheck('ns/unknown')).toBe(false);
    await s.clock.advance(0);
    expect(s.prober.pending.length).toBe(1);
    expect(await s.count()).toBe(1);
  });

  it("answers with the request's ticket; the same ticket again starts nothing, a new one starts over", async () => {
    const s = await setup();
    expect(s.engine.recheck('ns/a', 'suspicion-1')).toBe(true);
    expect(s.engine.recheck('ns/a', 'suspicion-1')).toBe(false);
    await s.clock.advance(500);
    // A newer request while the first probe hangs: that probe started before it, so it
    // answers nothing; the next one (started after) answers the new ticket only.
    expect(s.engine.recheck('ns/a', 'suspicion-2')).toBe(true);
    s.prober.finishAll(success());
    await s.clock.advance(0);
    expect(s.rechecks).toEqual([]);
    s.prober.finishAll(success());
    await s.clock.advance(0);
    expect(s.rechecks).toEqual([['ns/a', { passed: true, startedAt: 15_500, ticket: 'suspicion-2' }]]);
  });

  it('a probe already in flight started too early: another follows it at once', async () => {
    const s = await setup();
    await s.clock.advance(30_000); // the scheduled probe starts at 45 s and hangs
    expect(s.prober.pending.length).toBe(1);
    await s.clock.advance(500);
    s.engine.recheck('ns/a');
    s.prober.finishAll(success());
    await s.clock.advance(0);
    expect(s.rechecks).toEqual([]);
    expect(s.prober.started.at(-1)?.at).toBe(45_500);
    s.prober.finishAll(success());
    await s.clock.advance(0);
    expect(s.rechecks).toEqual([['ns/a', { passed: true, startedAt: 45_500 }]]);
  });
});
