import {
  replacementPendingStep,
  ROTATION_JITTER,
  rotationClock,
  rotationJitter,
  type Autopilot,
  type HealthVerdict,
  type Observation,
  type Step,
} from '../../handlers/proxy-state-machine.js';
import { decide } from './decide.js';
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
import { ago, NOW, stateMachineInstance, stateMachineProxy } from './state-machine-proxy.js';
import type { HandlerContext } from '../../framework/index.js';
import { setCondition } from '../../framework/core/status-writer.js';
import { applyMergePatch } from '../../framework/utils/merge-patch.js';
import { writeStatus } from '../../handlers/proxy-status.js';

// Issue 24 item 2: rotation on a schedule, drained.

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
  o: {
    upSeconds?: number;
    phase?: ProxyPhase;
    replacement?: ProxyStatus['replacement'];
    /** The Provisioned reason (with upSeconds); default InstanceRunning. */
    reason?: string;
  } = {},
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
                reason: o.reason ?? 'InstanceRunning',
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
  instance: stateMachineInstance('Running', { id: ID }),
};
const ok: HealthVerdict = {
  healthy: true,
  latencyMillis: 10,
  reason: 'ProbeSucceeded',
  message: 'm',
  checkedAt: NOW,
};
const step = (p: Proxy, autopilot: Autopilot): Step =>
  decide({ proxy: p, desiredHash: 'h1', observation: found, verdict: ok, autopilot });
const next = (s: Step) => (s.next.kind === 'requeue' ? `requeue ${s.next.seconds}` : s.next.kind);
/** A rotation's record; `goneSecondsAgo`: its drained instance was found gone (a new one runs). */
const rotating = (startedSecondsAgo: number, goneSecondsAgo?: number): ProxyStatus['replacement'] => ({
  cause: 'Rotation',
  startedAt: ago(startedSecondsAgo),
  ...(goneSecondsAgo === undefined ? {} : { oldInstanceGoneAt: ago(goneSecondsAgo) }),
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
      'the new instance (the same name again) after the drained one went, Unhealthy at its first probe: not drained',
      { upSeconds: 10, phase: 'Unhealthy', replacement: rotating(400, 60) },
      pilot(maxAge),
      'off',
    ],
    [
      'the new instance, Ready: not drained (its Ready ends the rotation)',
      { upSeconds: 10, phase: 'Ready', replacement: rotating(400, 60) },
      pilot(maxAge),
      'off',
    ],
    [
      'the new instance, Unhealthy, a provider call just failed (reason ProviderError): not drained',
      { upSeconds: 10, phase: 'Unhealthy', reason: 'ProviderError', replacement: rotating(400, 60) },
      pilot(maxAge),
      'off',
    ],
    [
      'the drained instance while a provider call fails mid-drain: the drain goes on',
      { upSeconds: 99_999, reason: 'ProviderError', replacement: rotating(100) },
      pilot(maxAge),
      'draining 200',
    ],
    [
      'the drained instance whose delete failed (reason ProviderError): still drained, deleted again',
      { upSeconds: 99_999, reason: 'ProviderError', replacement: rotating(300) },
      pilot(maxAge),
      'drained',
    ],
    [
      'the drained instance Unhealthy at the drain end: drained all the same',
      { upSeconds: 99_999, phase: 'Unhealthy', reason: 'Draining', replacement: rotating(300) },
      pilot(maxAge),
      'drained',
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

describe('the new instance of a rotation that is not Ready at its first probe', () => {
  // The bug: the Rotation record stays until the new instance is Ready (it holds the slot), so
  // a new instance that came up Unhealthy was read as the drained one and deleted at once, on
  // every new instance that failed its first probe. The new instance has the old one's name
  // (providers name an instance by its Proxy's UID and revision): only its address is new.
  const GRACE = 120;
  const refused: HealthVerdict = {
    healthy: false,
    latencyMillis: 0,
    reason: 'ConnectionRefused',
    message: 'connection refused',
    checkedAt: NOW,
  };
  const at = (ip: string, state: 'Provisioning' | 'Running' = 'Running'): Observation => ({
    kind: 'found',
    instance: { ...found.instance, ip, state },
  });
  const OLD = at('10.0.0.7');
  const NEW = at('10.0.0.8');

  /** Runs the state machine `seconds` after NOW and writes its status as the controller does. */
  async function run(
    p: Proxy,
    seconds: number,
    observation: Observation,
    verdict?: HealthVerdict,
  ): Promise<{ proxy: Proxy; step: Step }> {
    const now = new Date(NOW.getTime() + seconds * 1000);
    const s = decide({
      proxy: p,
      desiredHash: 'h1',
      observation,
      ...(verdict ? { verdict: { ...verdict, checkedAt: now } } : {}),
      autopilot: { ...pilot(3600), unhealthyAfterSeconds: GRACE, now },
    });
    const object = structuredClone(p);
    const ctx = {
      object,
      status: {
        setCondition: (...a: Parameters<typeof setCondition>) => setCondition(a[0], a[1], a[2], () => now),
        // A merge patch, as the API server applies it.
        patch: async (patch: Record<string, unknown>) => {
          object.status = applyMergePatch(object.status, patch) as ProxyStatus;
          return true;
        },
      },
    } as unknown as HandlerContext<Proxy>;
    const created = s.action.type === 'create' ? { providerID: ID } : {};
    if (s.status) await writeStatus(ctx, s.status, created);
    return { proxy: object, step: s };
  }

  /** From a Ready old proxy to its new instance running, Unhealthy at its first probe (at 313 s). */
  async function rotatedIntoUnhealthy(): Promise<{ proxy: Proxy; step: Step }> {
    let r = await run(proxy({ upSeconds: 4000 }), 0, OLD, ok); // due: the drain begins
    expect(r.proxy.status?.replacement).toEqual({ cause: 'Rotation', startedAt: NOW.toISOString() });
    r = await run(r.proxy, 300, OLD, ok); // drained: the old instance goes
    expect(r.step.action).toEqual({ type: 'delete', providerIDs: [ID] });
    r = await run(r.proxy, 302, { kind: 'not-found' });
    expect(r.step.action).toEqual({ type: 'forget' });
    r = await run(r.proxy, 303, { kind: 'unprovisioned' });
    expect(r.step.action).toEqual({ type: 'create', staleInstances: [] });
    r = await run(r.proxy, 308, at('', 'Provisioning'));
    r = await run(r.proxy, 313, NEW, refused);
    expect(r.step.action).toEqual({ type: 'none' });
    expect(r.proxy.status).toMatchObject({ phase: 'Unhealthy', providerID: ID, ip: '10.0.0.8' });
    return r;
  }

  it('keeps it and waits, then replaces it as any Unhealthy Managed proxy after the grace', async () => {
    let r = await rotatedIntoUnhealthy();
    // Every run until the grace ends keeps it (before the fix the next run deleted it).
    for (const seconds of [318, 330, 400, 313 + GRACE - 1]) {
      r = await run(r.proxy, seconds, NEW, refused);
      expect([seconds, r.step.action]).toEqual([seconds, { type: 'none' }]);
      expect(r.proxy.status).toMatchObject({ phase: 'Unhealthy', ip: '10.0.0.8' });
      // The rotation holds its slot until the new instance is Ready (the budget is unchanged).
      expect(r.proxy.status?.replacement?.cause).toBe('Rotation');
      expect(r.step.needsSlot).toBeUndefined();
    }
    // The dead-proxy grace (issue 24 item 1) applies to it as to any Unhealthy Managed proxy.
    r = await run(r.proxy, 313 + GRACE, NEW, refused);
    expect(r.step.action).toEqual({ type: 'delete', providerIDs: [ID] });
    expect(r.step.needsSlot).toBe('repair');
    expect(r.step.events).toEqual([expect.objectContaining({ reason: 'ReplacingUnhealthy' })]);
    // The repair's record is written whole: the rotation's oldInstanceGoneAt does not stay in it.
    expect(r.proxy.status?.replacement).toEqual({ cause: 'Unhealthy', startedAt: ago(-313 - GRACE) });
    r = await run(r.proxy, 313 + GRACE + 2, { kind: 'not-found' });
    expect(r.proxy.status?.replacement).toEqual({
      cause: 'Unhealthy',
      startedAt: ago(-313 - GRACE),
      oldInstanceGoneAt: ago(-313 - GRACE - 2),
    });
  });

  it('the forget of the drained instance records it gone: the record says the drain is over', async () => {
    const r = await rotatedIntoUnhealthy();
    expect(r.proxy.status?.replacement).toEqual({
      cause: 'Rotation',
      startedAt: NOW.toISOString(),
      oldInstanceGoneAt: ago(-302),
    });
  });

  it('Ready at a later probe: kept, the rotation over and its record cleared', async () => {
    let r = await rotatedIntoUnhealthy();
    r = await run(r.proxy, 318, NEW, refused);
    expect(r.step.action).toEqual({ type: 'none' });
    r = await run(r.proxy, 323, NEW, ok);
    expect(r.step.action).toEqual({ type: 'none' });
    expect(r.proxy.status).toMatchObject({ phase: 'Ready', providerID: ID, ip: '10.0.0.8' });
    expect(r.proxy.status?.replacement).toBeUndefined();
  });

  it('a failed get or delete of the drained instance does not end its drain', async () => {
    let r = await run(proxy({ upSeconds: 4000 }), 0, OLD, ok);
    const stalled = structuredClone(r.proxy);
    // What providerErrorStep writes over Draining when the delete of the drained instance fails.
    stalled.status!.conditions = stalled.status!.conditions!.map((c) =>
      c.type === CONDITION_PROVISIONED ? { ...c, status: 'False', reason: 'ProviderError' } : c,
    );
    r = await run(stalled, 100, OLD, ok);
    expect(r.proxy.status).toMatchObject({ phase: 'Ready', replacement: { cause: 'Rotation' } });
    expect(r.step.status?.provisioned?.reason).toBe('Draining');
    r = await run(r.proxy, 300, OLD, ok);
    expect(r.step.action).toEqual({ type: 'delete', providerIDs: [ID] });
  });
});
