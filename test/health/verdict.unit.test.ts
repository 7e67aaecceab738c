import {
  DEFAULT_LATENCY_POLICY,
  INITIAL_HEALTH_STATE,
  decide,
  latencyChangedEnough,
  type HealthState,
  type TransitionCause,
} from '../../health/verdict.js';
import { ProbeReason, type ProbeOutcome } from '../../health/probe-reason.js';

const ok = (durationMillis = 20): ProbeOutcome => ({
  success: true,
  reason: ProbeReason.ProbeSucceeded,
  message: 'status 204',
  durationMillis,
});
const fail = (reason: ProbeReason = ProbeReason.ProxyTimeout): ProbeOutcome => ({
  success: false,
  reason,
  message: 'boom',
  durationMillis: 5,
});

/** Runs a probe script: 'S' = success, 'F' = failure; returns the transition (or '-') per probe. */
function run(
  script: string,
  thresholds: { successThreshold: number; failureThreshold: number },
  state: HealthState = INITIAL_HEALTH_STATE,
): { causes: Array<TransitionCause | '-'>; state: HealthState } {
  const causes: Array<TransitionCause | '-'> = [];
  for (const step of script) {
    const d = decide(state, step === 'S' ? ok() : fail(), new Date(0), thresholds);
    causes.push(d.transition ?? '-');
    state = d.state;
  }
  return { causes, state };
}

const healthyAfter = (t: { successThreshold: number; failureThreshold: number }) =>
  run('S'.repeat(t.successThreshold), t).state;
const unhealthyAfter = (t: { successThreshold: number; failureThreshold: number }) =>
  run('F'.repeat(t.failureThreshold), t).state;

describe('the first verdict', () => {
  it.each([
    ['SS', 2, 3, ['-', 'first-verdict'], true],
    ['S', 1, 3, ['first-verdict'], true],
    ['FFF', 2, 3, ['-', '-', 'first-verdict'], false],
    ['SFSFFF', 2, 3, ['-', '-', '-', '-', '-', 'first-verdict'], false],
    ['FFSS', 2, 3, ['-', '-', '-', 'first-verdict'], true],
  ])(
    'script %s with successThreshold %i / failureThreshold %i emits %j and ends healthy=%s',
    (script, s, f, causes, healthy) => {
      const result = run(script, { successThreshold: s, failureThreshold: f });
      expect(result.causes).toEqual(causes);
      expect(result.state.verdict?.healthy).toBe(healthy);
    },
  );

  it('is absent ("no verdict yet") until a threshold is reached', () => {
    const { state } = run('SFSF', { successThreshold: 2, failureThreshold: 2 });
    expect(state.verdict).toBeUndefined();
  });
});

describe('threshold transitions in both directions', () => {
  const t = { successThreshold: 2, failureThreshold: 3 };
  it.each([
    ['healthy', 'FFF', ['-', '-', 'became-unhealthy'], false],
    ['healthy', 'FFSFFF', ['-', '-', '-', '-', '-', 'became-unhealthy'], false],
    ['unhealthy', 'SS', ['-', 'became-healthy'], true],
    ['unhealthy', 'SFSS', ['-', '-', '-', 'became-healthy'], true],
    ['healthy', 'FFSFFSFF', ['-', '-', '-', '-', '-', '-', '-', '-'], true],
    ['unhealthy', 'SFSFSFS', ['-', '-', '-', '-', '-', '-', '-'], false],
    ['healthy', 'SSSSSS', ['-', '-', '-', '-', '-', '-'], true],
    ['unhealthy', 'FFFFFF', ['-', '-', '-', '-', '-', '-'], false],
  ])('a %s proxy probed %s emits %j and ends healthy=%s', (start, script, causes, healthy) => {
    const from = start === 'healthy' ? healthyAfter(t) : unhealthyAfter(t);
    const result = run(script, t, from);
    expect(result.causes).toEqual(causes);
    expect(result.state.verdict?.healthy).toBe(healthy);
  });

  it('counts consecutive results, resetting the opposite counter', () => {
    const { state } = run('SSFF', t);
    expect(state.verdict).toMatchObject({ healthy: true, consecutiveSuccesses: 0, consecutiveFailures: 2 });
  });
});

describe('verdict reason and latency', () => {
  const t = { successThreshold: 1, failureThreshold: 2 };

  it("keeps a healthy verdict's success reason through a failure below the threshold", () => {
    const d = decide(healthyAfter(t), fail(ProbeReason.ConnectionRefused), new Date(0), t);
    expect(d.state.verdict).toMatchObject({ healthy: true, reason: ProbeReason.ProbeSucceeded });
  });

  it("updates an unhealthy verdict's reason to the latest failure without emitting", () => {
    const d = decide(unhealthyAfter(t), fail(ProbeReason.ConnectionRefused), new Date(0), t);
    expect(d.transition).toBeUndefined();
    expect(d.state.verdict).toMatchObject({ healthy: false, reason: ProbeReason.ConnectionRefused });
  });

  it('reports the last successful probe duration as latency, unchanged by failures', () => {
    let s = decide(INITIAL_HEALTH_STATE, ok(42.4), new Date(0), t).state;
    s = decide(s, fail(), new Date(0), t).state;
    expect(s.verdict?.latencyMillis).toBe(42);
  });
});

describe('a latency counts as changed when |new - lastEmitted| > 50% of max(lastEmitted, 100 ms floor)', () => {
  it.each([
    [200, 301, true],
    [200, 300, false],
    [200, 99, true],
    [200, 100, false],
    [1000, 1400, false],
    [1000, 1600, true],
    [1, 2, false],
    [1, 50, false],
    [1, 52, true],
    [0, 51, true],
  ])('from %i ms to %i ms changed enough: %s', (previous, current, expected) => {
    expect(latencyChangedEnough(previous, current, DEFAULT_LATENCY_POLICY)).toBe(expected);
  });
});

describe('latency-changed is published only when 2 consecutive successes confirm the change', () => {
  const t = { successThreshold: 1, failureThreshold: 3 };
  it.each<[string, Array<number | 'F'>, string[]]>([
    ['a confirmed rise', [301, 301], ['-', 'latency-changed']],
    ['a confirmed drop', [50, 60], ['-', 'latency-changed']],
    ['a single spike and back', [900, 250], ['-', '-']],
    ['alternating outliers', [301, 200, 301, 200], ['-', '-', '-', '-']],
    [
      'slow drift, measured against the last EMITTED value',
      [260, 290, 301, 320],
      ['-', '-', '-', 'latency-changed'],
    ],
    ['a failure between two outliers', [301, 'F', 301], ['-', '-', '-']],
    [
      'a new reference after publishing',
      [320, 320, 340, 500, 500],
      ['-', 'latency-changed', '-', '-', 'latency-changed'],
    ],
  ])('%s (from 200 ms: %j) publishes %j', (_what, latencies, expected) => {
    let state = decide(INITIAL_HEALTH_STATE, ok(200), new Date(0), t).state;
    const causes = latencies.map((ms) => {
      const d = decide(state, ms === 'F' ? fail() : ok(ms), new Date(0), t);
      state = d.state;
      return d.transition ?? '-';
    });
    expect(causes).toEqual(expected);
  });

  it('publishes the latest latency with the change', () => {
    let state = decide(INITIAL_HEALTH_STATE, ok(200), new Date(0), t).state;
    state = decide(state, ok(400), new Date(0), t).state;
    const d = decide(state, ok(600), new Date(0), t);
    expect(d.transition).toBe('latency-changed');
    expect(d.state.verdict?.latencyMillis).toBe(600);
  });

  it('never emits for latency while unhealthy', () => {
    const t = { successThreshold: 3, failureThreshold: 1 };
    const d = decide(decide(INITIAL_HEALTH_STATE, fail(), new Date(0), t).state, ok(5000), new Date(0), t);
    expect(d.transition).toBeUndefined();
  });
});
