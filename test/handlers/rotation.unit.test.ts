import {
  managedStep,
  replacementPendingStep,
  ROTATION_JITTER,
  rotationClock,
  rotationJitter,
  type Autopilot,
  type HealthVerdict,
  type Observation,
  type Step,
} from '../../handlers/proxy-state-machine.js';
import { isDraining, outOfService } from '../../handlers/replacement-budget.js';
import { toRecord } from '../../handlers/proxy-catalog.js';
import {
  CONDITION_HEALTHY,
  CONDITION_PROVISIONED,
  SPEC_HASH_ANNOTATION,
  type Proxy,
  type ProxyPhase,
  type ProxyStatus,
} from '../../crds/proxy-types.js';
import { stateMachineProxy } from './state-machine-proxy.js';

// Issue 24 item 2: rotation on a schedule, drained.

const NOW = new Date('2026-03-01T12:00:00Z');
const ago = (seconds: number) => new Date(NOW.getTime() - seconds * 1000).toISOString();
const pilot = (maxAgeSeconds: number, drainSeconds = 300): Autopilot => ({
  now: NOW,
  unhealthyAfterSeconds: 0,
  maxAgeSeconds,
  drainSeconds,
});
const ID = 'i-1';
/** When instance i-1 comes due under a max age (its jitter brings it up to 10 % early). */
const dueAfter = (maxAge: number) => Math.ceil(maxAge * (1 - ROTATION_JITTER * rotationJitter(ID)));

function proxy(
  o: { upSeconds?: number; phase?: ProxyPhase; replacement?: ProxyStatus['replacement'] } = {},
): Proxy {
  return stateMachineProxy({
    annotations: { [SPEC_HASH_ANNOTATION]: 'h1' },
    status: {
      phase: o.phase ?? 'Ready',
      providerID: ID,
      ip: '10.0.0.7',
      observedGeneration: 1,
      conditions: [
        ...(o.upSeconds === undefined
          ? []
          : [
              {
                type: CONDITION_PROVISIONED,
                status: 'True' as const,
                reason: 'InstanceRunning',
                message: '',
                lastTransitionTime: ago(o.upSeconds),
              },
            ]),
        {
          type: CONDITION_HEALTHY,
          status: 'True',
          reason: 'ProbeSucceeded',
          message: 'm',
          lastTransitionTime: ago(60),
        },
      ],
      ...(o.replacement ? { replacement: o.replacement } : {}),
    },
  });
}

const found: Observation = {
  kind: 'found',
  instance: {
    id: ID,
    ip: '10.0.0.7',
    state: 'Running',
    uid: 'u-1',
    owner: 'o',
    namespace: 'ns',
    revision: 'h1',
    createdAt: new Date(0),
  },
};
const ok: HealthVerdict = {
  healthy: true,
  latencyMillis: 10,
  reason: 'ProbeSucceeded',
  message: 'm',
  checkedAt: NOW,
};
const step = (p: Proxy, autopilot: Autopilot): Step =>
  managedStep({ proxy: p, desiredHash: 'h1', observation: found, verdict: ok, autopilot });
const next = (s: Step) => (s.next.kind === 'requeue' ? `requeue ${s.next.seconds}` : s.next.kind);
const rotating = (startedSecondsAgo: number): ProxyStatus['replacement'] => ({
  cause: 'Rotation',
  startedAt: ago(startedSecondsAgo),
});

describe('the rotation clock', () => {
  const maxAge = 3600;
  it.each<[string, Parameters<typeof proxy>[0], Autopilot | undefined, string]>([
    ['no autopilot', { upSeconds: 99_999 }, undefined, 'off'],
    ['maxAgeSeconds 0 is off', { upSeconds: 99_999 }, pilot(0), 'off'],
    [
      'young: waits until its jittered due time',
      { upSeconds: 600 },
      pilot(maxAge),
      `waiting ${dueAfter(maxAge) - 600}`,
    ],
    [
      'no Provisioned transition yet: a whole (jittered) max age',
      {},
      pilot(maxAge),
      `waiting ${dueAfter(maxAge)}`,
    ],
    ['old enough: due', { upSeconds: dueAfter(maxAge) }, pilot(maxAge), 'due'],
    ['older than max age: due', { upSeconds: maxAge + 1 }, pilot(maxAge), 'due'],
    [
      'draining, 100 s of a 300 s drain in',
      { upSeconds: 99_999, replacement: rotating(100) },
      pilot(maxAge),
      'draining 200',
    ],
    ['drain over: drained', { upSeconds: 99_999, replacement: rotating(300) }, pilot(maxAge), 'drained'],
    [
      'drain timeout 0: drained at once',
      { upSeconds: 99_999, replacement: rotating(0) },
      pilot(maxAge, 0),
      'drained',
    ],
    [
      'rotation turned off mid-drain: cancelled',
      { upSeconds: 99_999, replacement: rotating(100) },
      pilot(0),
      'off',
    ],
    [
      'another replacement in progress: not a rotation',
      { upSeconds: 99_999, replacement: { cause: 'Unhealthy', startedAt: ago(10) } },
      pilot(maxAge),
      'off',
    ],
  ])('%s → %s', (_case, o, autopilot, want) => {
    const c = rotationClock(proxy(o), ID, autopilot);
    expect(c.kind === 'waiting' || c.kind === 'draining' ? `${c.kind} ${c.seconds}` : c.kind).toBe(want);
  });

  it('spreads a fleet created at once over up to 10 % of the max age, the same on every run', () => {
    const jitters = Array.from({ length: 200 }, (_, i) => rotationJitter(`i-${i}`));
    for (const j of jitters) expect(j >= 0 && j < 1).toBe(true);
    expect(new Set(jitters.map((j) => Math.floor(j * 10))).size).toBeGreaterThanOrEqual(8);
    expect(rotationJitter('i-7')).toBe(rotationJitter('i-7'));
  });
});

describe('a rotation: slot, drain, replacement', () => {
  it('a due Ready proxy asks for a rollout slot and starts draining: condition, Event, metric cause, no delete', () => {
    const s = step(proxy({ upSeconds: 4000 }), pilot(3600));
    expect(s.action).toEqual({ type: 'none' });
    expect(s.needsSlot).toBe('rollout');
    expect(s.startsReplacement).toBe('Rotation');
    expect(s.status).toMatchObject({
      phase: 'Ready',
      provisioned: { status: 'True', reason: 'Draining' },
      replacement: { cause: 'Rotation', startedAt: NOW.toISOString() },
    });
    expect(s.events).toEqual([expect.objectContaining({ type: 'Normal', reason: 'Rotating' })]);
    expect(next(s)).toBe('requeue 300');
  });

  it('without a slot it keeps serving, not draining, and says why it waits', () => {
    const s = replacementPendingStep(
      {
        proxy: proxy({ upSeconds: 4000 }),
        desiredHash: 'h1',
        observation: found,
        verdict: ok,
        autopilot: pilot(3600),
      },
      { cap: 1, failed: [] },
      'rollout',
      'rotation due (spec.rotation.maxAgeSeconds)',
    );
    expect(s.action).toEqual({ type: 'none' });
    expect(s.status?.replacement).toBeUndefined();
    expect(s.status?.provisioned).toMatchObject({
      reason: 'ReplacementPending',
      message: expect.stringMatching(/^rotation due/),
    });
  });

  it('while draining it stays on its instance, writes nothing new and looks again at the drain end', () => {
    const draining = proxy({ upSeconds: 4000, replacement: rotating(100) });
    const s = step(draining, pilot(3600));
    expect(s.action).toEqual({ type: 'none' });
    expect(s.needsSlot).toBeUndefined();
    expect(s.startsReplacement).toBeUndefined();
    expect(s.status).toMatchObject({ phase: 'Ready', provisioned: { reason: 'Draining' } });
    expect(s.status?.replacement).toBeUndefined();
    expect(s.events).toEqual([]);
    expect(next(s)).toBe('requeue 200');
  });

  it('drained: the instance is deleted (no second slot: it holds one), an Event says why', () => {
    const s = step(proxy({ upSeconds: 4000, replacement: rotating(300) }), pilot(3600));
    expect(s.action).toEqual({ type: 'delete', providerIDs: [ID] });
    expect(s.needsSlot).toBeUndefined();
    expect(s.status).toMatchObject({ phase: 'Provisioning', provisioned: { reason: 'Replacing' } });
    expect(s.events).toEqual([
      expect.objectContaining({
        reason: 'Replacing',
        message: expect.stringMatching(/^rotation .*drained since/),
      }),
    ]);
  });

  it('a young proxy is untouched and looks again when it comes due', () => {
    const s = step(proxy({ upSeconds: 600 }), pilot(3600));
    expect(s.action).toEqual({ type: 'none' });
    expect(s.status?.provisioned?.reason).toBe('InstanceRunning');
    expect(next(s)).toBe(`requeue ${dueAfter(3600) - 600}`);
  });

  it('the new instance is never taken for the drained one: Ready ends the rotation and clears its record', () => {
    // Deleted and re-created: Provisioning, the Rotation record still set (it holds the slot).
    const s = step(proxy({ upSeconds: 10, phase: 'Provisioning', replacement: rotating(400) }), pilot(3600));
    expect(s.action).toEqual({ type: 'none' });
    expect(s.status).toMatchObject({ phase: 'Ready', replacement: null });
  });
});

describe('a draining proxy is out of service and out of leases', () => {
  it.each<[ProxyPhase, ProxyStatus['replacement'], boolean]>([
    ['Ready', rotating(10), true],
    ['Unhealthy', rotating(10), true],
    ['Provisioning', rotating(10), false],
    ['Ready', { cause: 'SpecChanged', startedAt: ago(10) }, false],
    ['Ready', undefined, false],
  ])('phase %s, replacement %j → draining %s', (phase, replacement, draining) => {
    const p = proxy({ upSeconds: 4000, phase, replacement });
    expect(isDraining(p)).toBe(draining);
    expect(toRecord(p).draining === true).toBe(draining);
  });

  it('the budget counts a draining proxy as holding a slot', () => {
    const oos = outOfService([
      { key: 'ns/a', phase: 'Ready', replacing: true, draining: true },
      { key: 'ns/b', phase: 'Ready', replacing: false },
    ]);
    expect([...oos.replacing]).toEqual(['ns/a']);
  });
});
