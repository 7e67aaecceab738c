import {
  drainMessage,
  slotFor,
  slotWanted,
  type Autopilot,
  type HealthVerdict,
  type Observation,
  type ReplacementTrigger,
  type SlotAsk,
  type Step,
} from '../../handlers/proxy-state-machine.js';
import { decide, type CaseInputs } from './decide.js';
import { holdsSlot, ReplacementBudget, type SlotKind } from '../../handlers/replacement-budget.js';
import type { RepairHold } from '../../handlers/repair-hold.js';
import type { CacheReader, KubeObject } from '../../framework/index.js';
import {
  CONDITION_HEALTHY,
  CONDITION_PROVISIONED,
  SPEC_HASH_ANNOTATION,
  type Proxy,
  type ProxyPhase,
  type ProxyStatus,
} from '../../crds/proxy-types.js';
import type { InstanceState } from '../../providers/contract.js';
import { ago, NOW, stateMachineInstance, stateMachineProxy } from './state-machine-proxy.js';

// Issue 26 item 2: the replacement slot is decided once. The shell asks the budget for the slot
// slotWanted names; managedStep takes the answer as an input.

const pilot: Autopilot = { now: NOW, unhealthyAfterSeconds: 60, maxAgeSeconds: 3600, drainSeconds: 300 };

interface Opts {
  phase?: ProxyPhase;
  /** The recorded revision (the desired one is h1). */
  hash?: string;
  /** Seconds since the instance came up (Provisioned turned True). */
  upSeconds?: number;
  /** Seconds since the Healthy condition turned False; undefined: healthy for a minute. */
  unhealthySeconds?: number;
  replacement?: ProxyStatus['replacement'];
}

function proxy(o: Opts = {}): Proxy {
  const unhealthy = o.unhealthySeconds !== undefined;
  return stateMachineProxy({
    annotations: { [SPEC_HASH_ANNOTATION]: o.hash ?? 'h1' },
    status: {
      phase: o.phase ?? (unhealthy ? 'Unhealthy' : 'Ready'),
      providerID: 'i-1',
      ip: '10.0.0.7',
      observedGeneration: 1,
      conditions: [
        {
          type: CONDITION_PROVISIONED,
          status: 'True',
          reason: 'InstanceRunning',
          message: '',
          lastTransitionTime: ago(o.upSeconds ?? 600),
        },
        {
          type: CONDITION_HEALTHY,
          status: unhealthy ? 'False' : 'True',
          reason: unhealthy ? 'ConnectionRefused' : 'ProbeSucceeded',
          message: 'm',
          lastTransitionTime: ago(o.unhealthySeconds ?? 60),
        },
      ],
      ...(o.replacement ? { replacement: o.replacement } : {}),
    },
  });
}

const found = (state: InstanceState = 'Running'): Observation => ({
  kind: 'found',
  instance: stateMachineInstance(state),
});
const ok: HealthVerdict = {
  healthy: true,
  latencyMillis: 10,
  reason: 'ProbeSucceeded',
  message: 'm',
  checkedAt: NOW,
};
const refused: HealthVerdict = {
  healthy: false,
  latencyMillis: 0,
  reason: 'ConnectionRefused',
  message: 'm',
  checkedAt: NOW,
};

const HELD = (): RepairHold => ({ kind: 'hold', reason: 'ProbeTargetUnreachable', message: 'repair held' });
const GO = (): RepairHold => ({ kind: 'go' });

const inputs = (o: Opts, observation = found()): CaseInputs => ({
  proxy: proxy(o),
  desiredHash: 'h1',
  observation,
  verdict: o.unhealthySeconds === undefined ? ok : refused,
  autopilot: pilot,
});

// Each case: the proxy's situation, and the slot its replacement must hold.
const SPEC_CHANGED_READY: Opts = { hash: 'h0' };
const UNHEALTHY_PAST_GRACE: Opts = { unhealthySeconds: 61 };
const ROTATION_DUE: Opts = { upSeconds: 4000 };
const DRAINED: Opts = { upSeconds: 4000, replacement: { cause: 'Rotation', startedAt: ago(301) } };
const DRAINING: Opts = { upSeconds: 4000, replacement: { cause: 'Rotation', startedAt: ago(100) } };

describe('the slot a run needs, asked before the decision', () => {
  it.each<[string, CaseInputs, SlotKind | undefined]>([
    ['a Ready proxy whose spec changed: a rollout slot', inputs(SPEC_CHANGED_READY), 'rollout'],
    [
      'an Unhealthy proxy whose spec changed: none (nothing more goes out of service)',
      inputs({ hash: 'h0', unhealthySeconds: 10 }),
      undefined,
    ],
    ['a Ready proxy whose instance died: none', inputs(SPEC_CHANGED_READY, found('Terminated')), undefined],
    ['an Unhealthy proxy past its grace: a repair slot', inputs(UNHEALTHY_PAST_GRACE), 'repair'],
    [
      'a replacement Unhealthy too: none (one repair per Ready)',
      inputs({ unhealthySeconds: 61, replacement: { cause: 'Unhealthy', startedAt: ago(999) } }),
      undefined,
    ],
    ['a Ready proxy due for rotation: a rollout slot', inputs(ROTATION_DUE), 'rollout'],
    [
      'an Unhealthy proxy due for rotation: none (a rotation drains only a Ready one)',
      inputs({ upSeconds: 4000, unhealthySeconds: 10 }),
      undefined,
    ],
    ['a draining proxy: none (it holds its slot)', inputs(DRAINING), undefined],
    ['a drained proxy: none (it holds its slot since the drain began)', inputs(DRAINED), undefined],
    ['a steady proxy: none', inputs({}), undefined],
    [
      'a proxy past its grace whose revision cannot be resolved: none (the clocks stop)',
      { ...inputs(UNHEALTHY_PAST_GRACE), desiredHash: undefined, cloudInitError: 'no Secret' },
      undefined,
    ],
    ['no instance recorded: none', inputs({}, { kind: 'unprovisioned' }), undefined],
    ['the instance gone: none', { ...inputs({ hash: 'h0' }), observation: { kind: 'not-found' } }, undefined],
    // Its repair held, an Unhealthy proxy may be serving (the cause looks shared): paced.
    [
      'an Unhealthy proxy whose spec changed, its repair held: a held rollout slot',
      { ...inputs({ hash: 'h0', unhealthySeconds: 61 }), repairHold: HELD },
      'held-rollout',
    ],
    [
      'the same in its grace (held already: it may be serving just as well)',
      { ...inputs({ hash: 'h0', unhealthySeconds: 10 }), repairHold: HELD },
      'held-rollout',
    ],
    [
      'an Unhealthy proxy whose spec changed, its repair not held: none (it looks dead)',
      { ...inputs({ hash: 'h0', unhealthySeconds: 61 }), repairHold: GO },
      undefined,
    ],
    [
      'a held proxy whose instance died: none',
      { ...inputs({ hash: 'h0', unhealthySeconds: 61 }, found('Terminated')), repairHold: HELD },
      undefined,
    ],
  ])('%s', (_n, inp, want) => {
    expect(slotWanted(inp)).toBe(want);
  });

  it.each<[ReplacementTrigger, ProxyPhase | undefined, SlotKind | undefined]>([
    [{ kind: 'SpecChanged' }, 'Ready', 'rollout'],
    [{ kind: 'SpecChanged' }, 'Unhealthy', undefined],
    // A credentials rotation always takes a slot (issue 44 item 3): the old instance serves on.
    [{ kind: 'SpecChanged', credentials: true }, 'Ready', 'rollout'],
    // Out of service already: a repair's slot, which the Unhealthy do not fill (no deadlock).
    [{ kind: 'SpecChanged', credentials: true }, 'Unhealthy', 'repair'],
    [{ kind: 'SpecChanged', credentials: true }, 'Provisioning', 'repair'],
    [{ kind: 'SpecChanged', credentials: true }, undefined, 'repair'],
    [{ kind: 'SpecChanged' }, 'Provisioning', undefined],
    [{ kind: 'InstanceDead' }, 'Ready', undefined],
    [{ kind: 'Unhealthy', reason: 'ConnectionRefused', since: ago(61) }, 'Unhealthy', 'repair'],
    [{ kind: 'RotationDue' }, 'Ready', 'rollout'],
    [{ kind: 'Drained', since: ago(301) }, 'Ready', undefined],
  ])('slotFor(%j, %s) → %s', (trigger, phase, want) => {
    expect(slotFor(trigger, phase)).toBe(want);
  });

  // The third input: the proxy's repair is held (repair-hold.ts), so it may be serving.
  it.each<[ReplacementTrigger, ProxyPhase | undefined, boolean, SlotKind | undefined]>([
    [{ kind: 'SpecChanged' }, 'Unhealthy', true, 'held-rollout'],
    [{ kind: 'SpecChanged', credentials: true }, 'Unhealthy', true, 'held-rollout'],
    [{ kind: 'SpecChanged' }, 'Unhealthy', false, undefined],
    [{ kind: 'SpecChanged' }, 'Ready', true, 'rollout'],
    [{ kind: 'InstanceDead' }, 'Unhealthy', true, undefined],
  ])('slotFor(%j, %s, repair held %s) → %s', (trigger, phase, held, want) => {
    expect(slotFor(trigger, phase, held)).toBe(want);
  });
});

const refusedSlot: SlotAsk = () => ({ granted: false, cap: 2, failed: [] });
const blockedSlot: SlotAsk = () => ({ granted: false, cap: 2, failed: ['ns/a', 'ns/b'] });
const grantedSlot: SlotAsk = () => ({ granted: true, cap: 2, failed: [] });
const summary = (s: Step) => ({
  action: s.action.type,
  reason: s.status?.provisioned?.reason,
  phase: s.status?.phase,
  cause: s.status?.replacement?.cause,
  needsSlot: s.needsSlot,
  starts: s.startsReplacement,
});

describe('one decision, with the budget answer as an input', () => {
  it.each<[string, Opts, SlotAsk, ReturnType<typeof summary>]>([
    [
      'spec changed, slot granted: the instance is deleted',
      SPEC_CHANGED_READY,
      grantedSlot,
      {
        action: 'delete',
        reason: 'Replacing',
        phase: 'Provisioning',
        cause: 'SpecChanged',
        needsSlot: 'rollout',
        starts: 'SpecChanged',
      },
    ],
    [
      'spec changed, slot refused: it keeps serving and waits',
      SPEC_CHANGED_READY,
      refusedSlot,
      {
        action: 'none',
        reason: 'ReplacementPending',
        phase: 'Ready',
        cause: undefined,
        needsSlot: undefined,
        starts: undefined,
      },
    ],
    [
      'spec changed, slots held by failed replacements: blocked',
      SPEC_CHANGED_READY,
      blockedSlot,
      {
        action: 'none',
        reason: 'ReplacementBlocked',
        phase: 'Ready',
        cause: undefined,
        needsSlot: undefined,
        starts: undefined,
      },
    ],
    [
      'unhealthy past grace, slot granted: the instance is deleted',
      UNHEALTHY_PAST_GRACE,
      grantedSlot,
      {
        action: 'delete',
        reason: 'Replacing',
        phase: 'Provisioning',
        cause: 'Unhealthy',
        needsSlot: 'repair',
        starts: 'Unhealthy',
      },
    ],
    [
      'unhealthy past grace, slot refused: it stays Unhealthy on its instance',
      UNHEALTHY_PAST_GRACE,
      refusedSlot,
      {
        action: 'none',
        reason: 'ReplacementPending',
        phase: 'Unhealthy',
        cause: undefined,
        needsSlot: undefined,
        starts: undefined,
      },
    ],
    [
      'rotation due, slot granted: the drain starts',
      ROTATION_DUE,
      grantedSlot,
      {
        action: 'none',
        reason: 'Draining',
        phase: 'Ready',
        cause: 'Rotation',
        needsSlot: 'rollout',
        starts: 'Rotation',
      },
    ],
    [
      'rotation due, slot refused: no drain, it waits',
      ROTATION_DUE,
      refusedSlot,
      {
        action: 'none',
        reason: 'ReplacementPending',
        phase: 'Ready',
        cause: undefined,
        needsSlot: undefined,
        starts: undefined,
      },
    ],
    [
      'drained, holding its slot: deleted whatever the budget would say',
      DRAINED,
      refusedSlot,
      {
        action: 'delete',
        reason: 'Replacing',
        phase: 'Provisioning',
        cause: undefined,
        needsSlot: undefined,
        starts: undefined,
      },
    ],
    [
      'draining, holding its slot: it goes on draining',
      DRAINING,
      refusedSlot,
      {
        action: 'none',
        reason: 'Draining',
        phase: 'Ready',
        cause: undefined,
        needsSlot: undefined,
        starts: undefined,
      },
    ],
  ])('%s', (_n, o, slot, want) => {
    expect(summary(decide({ ...inputs(o), slot }))).toEqual(want);
  });

  it('a dead instance is replaced even with the budget full (it takes nothing out of service)', () => {
    const s = decide({ ...inputs({}, found('Stopped')), slot: refusedSlot });
    expect(summary(s)).toMatchObject({ action: 'delete', cause: 'InstanceDead', needsSlot: undefined });
  });

  it('the refused wait names its trigger', () => {
    const message = (o: Opts) => decide({ ...inputs(o), slot: refusedSlot }).status?.provisioned?.message;
    expect(message(SPEC_CHANGED_READY)).toMatch(
      /^spec changed: instance i-1 will be replaced once fewer than 2/,
    );
    expect(message(UNHEALTHY_PAST_GRACE)).toMatch(/^unhealthy too long: .*replacements are in flight/);
    expect(message(ROTATION_DUE)).toMatch(/^rotation due \(spec.rotation.maxAgeSeconds\): .*out of service/);
  });
});

/** Proxies of provider mock as the budget counts them from the cache. */
function cache(phases: Record<string, ProxyPhase>): CacheReader {
  const objects = Object.entries(phases).map(
    ([name, phase]) =>
      ({
        apiVersion: 'crawl.example.com/v1alpha1',
        kind: 'Proxy',
        metadata: { name, namespace: 'ns' },
        spec: { mode: 'Managed', provider: 'mock', healthCheck: { probeURL: 'https://target.example/' } },
        status: { phase },
      }) as unknown as Proxy,
  );
  return {
    get: () => undefined,
    onChange: () => () => {},
    list<T extends KubeObject>(): T[] {
      return structuredClone(objects) as unknown as T[];
    },
  };
}

describe('the budget granting, refusing and already holding a slot, wired as the controller does', () => {
  // The controller: the decision asks the budget for the slot it needs, and only then.
  const wired = (budget: ReplacementBudget, c: CacheReader, key: string, inp: CaseInputs) =>
    decide({ ...inp, slot: (kind) => budget.tryAcquire(key, 'mock', c, kind) });

  it('grants the first, refuses the second, and keeps granting the holder on its next run', () => {
    const budget = new ReplacementBudget({ default: { kind: 'count', value: 1 }, byProvider: {} });
    const c = cache({ p: 'Ready', q: 'Ready', r: 'Ready' });
    const rollout = inputs(SPEC_CHANGED_READY);
    expect(wired(budget, c, 'ns/p', rollout).action.type).toBe('delete');
    expect(wired(budget, c, 'ns/q', rollout).status?.provisioned?.reason).toBe('ReplacementPending');
    // p's delete failed and it runs again before leaving Ready: it holds the slot already.
    expect(wired(budget, c, 'ns/p', rollout).action.type).toBe('delete');
    budget.release('ns/p');
    expect(wired(budget, c, 'ns/q', rollout).action.type).toBe('delete');
  });

  // The controller's record(): the grant goes once the written status no longer holds the slot.
  const settle = (budget: ReplacementBudget, key: string, inp: CaseInputs, step: Step) => {
    if (step.status && !holdsSlot(inp.proxy.status?.replacement, step.status)) budget.release(key);
  };

  it('a drain holds its slot on every run until its new instance is Ready, whatever the cache tally shows', () => {
    // The chaos test with rotation saw a third proxy between instances at once with a cap of 2:
    // the drain's second run (its own status write's event) released the grant, and a tally
    // counted before that write reached the cache did not show the drain either.
    const budget = new ReplacementBudget({ default: { kind: 'count', value: 1 }, byProvider: {} });
    const stale = cache({ p: 'Ready', q: 'Ready', r: 'Ready' });
    const run = (key: string, inp: CaseInputs) => {
      const step = wired(budget, stale, key, inp);
      settle(budget, key, inp, step);
      return step;
    };
    expect(run('ns/p', inputs(ROTATION_DUE)).status?.provisioned?.reason).toBe('Draining');
    expect(run('ns/p', inputs(DRAINING)).status?.provisioned?.reason).toBe('Draining');
    expect(run('ns/q', inputs(ROTATION_DUE)).status?.provisioned?.reason).toBe('ReplacementPending');
    expect(run('ns/p', inputs(DRAINED)).action.type).toBe('delete');
    expect(run('ns/q', inputs(ROTATION_DUE)).status?.provisioned?.reason).toBe('ReplacementPending');
    // Its new instance Ready: the record is cleared and the slot is q's.
    const ready = run('ns/p', inputs({ phase: 'Provisioning', replacement: DRAINED.replacement }));
    expect(ready.status).toMatchObject({ phase: 'Ready', replacement: null });
    expect(run('ns/q', inputs(ROTATION_DUE)).status?.provisioned?.reason).toBe('Draining');
  });

  it('a step that needs no slot asks nothing, so takes none', () => {
    const budget = new ReplacementBudget({ default: { kind: 'count', value: 1 }, byProvider: {} });
    const c = cache({ p: 'Ready', q: 'Ready' });
    expect(wired(budget, c, 'ns/p', inputs({})).action.type).toBe('none');
    expect(wired(budget, c, 'ns/p', inputs(DRAINED)).action.type).toBe('delete');
    expect(wired(budget, c, 'ns/q', inputs(SPEC_CHANGED_READY)).action.type).toBe('delete');
  });
});

describe('the drain message', () => {
  it('names the drain start, when the instance is replaced and the timeout, the same on every run', () => {
    expect(drainMessage('i-1', '2026-03-01T12:00:00.000Z', 300)).toBe(
      'rotation due (spec.rotation.maxAgeSeconds, with jitter): draining since 2026-03-01T12:00:00.000Z, no new leases; instance i-1 is replaced at 2026-03-01T12:05:00.000Z (--rotation-drain-timeout 300 s)',
    );
  });
});

describe('a credentials rotation is a replacement that always takes a slot (issue 44 item 3)', () => {
  const rotated = (o: Opts): CaseInputs => ({ ...inputs({ hash: 'h0', ...o }), credentialsRotated: true });
  it.each<[string, Opts]>([
    ['stored Ready', {}],
    ['stored Unhealthy (its probes switched before the record existed)', { unhealthySeconds: 30 }],
  ])('%s, the budget full: it waits, keeping its instance, and says why', (_what, o) => {
    const s = decide({ ...rotated(o), slot: refusedSlot });
    expect(s.action).toEqual({ type: 'none' });
    expect(s.status?.provisioned?.reason).toBe('ReplacementPending');
    expect(s.status?.provisioned?.message).toMatch(
      /^credentials rotated \(it serves with its old ones meanwhile\): instance i-1 will be replaced once fewer than 2/,
    );
  });

  it.each<[string, Opts, SlotKind]>([
    ['stored Ready: a rollout slot', {}, 'rollout'],
    ['stored Unhealthy: a repair slot', { unhealthySeconds: 30 }, 'repair'],
  ])('granted (%s): replaced, holding it, and the Event says it is a rotation', (_what, o, want) => {
    let asked: SlotKind | undefined;
    const s = decide({
      ...rotated(o),
      slot: (kind) => {
        asked = kind;
        return { granted: true, cap: 2, failed: [] };
      },
    });
    expect(asked).toBe(want);
    expect(s.action).toEqual({ type: 'delete', providerIDs: ['i-1'] });
    expect(s.needsSlot).toBe(want);
    expect(s.events[0]?.message).toMatch(/^credentials rotated: replacing instance i-1/);
  });

  it('any other spec change of an Unhealthy proxy still needs no slot (its fix must not wait behind it)', () => {
    const s = decide({ ...inputs({ hash: 'h0', unhealthySeconds: 30 }), slot: refusedSlot });
    expect(s.action).toEqual({ type: 'delete', providerIDs: ['i-1'] });
  });
});
