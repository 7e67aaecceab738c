import type { Observation, SlotAsk, Step } from '../../handlers/proxy-state-machine.js';
import { decide, type CaseInputs } from './decide.js';
import { waitingReason, type WaitingReason } from '../../handlers/proxy-state-machine.js';
import { holdsSlot, ReplacementBudget, type SlotKind } from '../../handlers/replacement-budget.js';
import type { RepairHold } from '../../handlers/repair-hold.js';
import type { CacheReader, KubeObject } from '../../framework/index.js';
import {
  CONDITION_HEALTHY,
  CONDITION_PROVISIONED,
  SPEC_HASH_ANNOTATION,
  type Proxy,
  type ProxyPhase,
  type ReplacementStatus,
} from '../../crds/proxy-types.js';
import type { InstanceState } from '../../providers/contract.js';
import { ago, NOW, stateMachineInstance, stateMachineProxy } from './state-machine-proxy.js';

// A spec rollout while the fleet's repairs are held (the probe target down: every proxy
// Unhealthy, none dead). Found by a tester: 8 proxies, --max-unavailable 2, a cloud-init edit
// deleted all 8 instances within 20 s, as if Unhealthy meant dead. A held proxy may be serving,
// so its rollout takes a slot, and waits behind replacements not yet seen Ready; a proxy whose
// repair would go ahead looks dead and is replaced at once, as before.

const HELD = (): RepairHold => ({
  kind: 'hold',
  reason: 'ProbeTargetUnreachable',
  message: 'repair held: the probe target is down',
});
const GO = (): RepairHold => ({ kind: 'go' });

/** An Unhealthy proxy (for `unhealthySeconds`, grace 60 s) on instance i-1, its spec changed (h0 → h1). */
function sick(unhealthySeconds: number, replacement?: ReplacementStatus): Proxy {
  return stateMachineProxy({
    annotations: { [SPEC_HASH_ANNOTATION]: 'h0' },
    status: {
      phase: 'Unhealthy',
      providerID: 'i-1',
      ip: '10.0.0.7',
      observedGeneration: 1,
      conditions: [
        {
          type: CONDITION_PROVISIONED,
          status: 'True',
          reason: 'RepairHeld',
          message: 'repair held: the probe target is down; instance i-1 is kept',
          lastTransitionTime: ago(600),
        },
        {
          type: CONDITION_HEALTHY,
          status: 'False',
          reason: 'ConnectionRefused',
          message: 'm',
          lastTransitionTime: ago(unhealthySeconds),
        },
      ],
      ...(replacement ? { replacement } : {}),
    },
  });
}

const found = (state: InstanceState = 'Running'): Observation => ({
  kind: 'found',
  instance: stateMachineInstance(state),
});

const inputs = (hold: () => RepairHold, unhealthySeconds = 120, state?: InstanceState): CaseInputs => ({
  proxy: sick(unhealthySeconds),
  desiredHash: 'h1',
  observation: found(state),
  verdict: { healthy: false, latencyMillis: 0, reason: 'ConnectionRefused', message: 'm', checkedAt: NOW },
  autopilot: { now: NOW, unhealthyAfterSeconds: 60 },
  repairHold: hold,
});

const REFUSED: SlotAsk = () => ({ granted: false, cap: 2, failed: [] });
const GRANTED: SlotAsk = () => ({ granted: true, cap: 2, failed: [] });

/** The step, and the slot kind the budget was asked for (none: not asked). */
function run(inp: CaseInputs, answer: SlotAsk) {
  let asked: SlotKind | undefined;
  const step: Step = decide({
    ...inp,
    slot: (kind) => {
      asked = kind;
      return answer(kind);
    },
  });
  return {
    asked,
    action: step.action.type,
    phase: step.status?.phase,
    reason: step.status?.provisioned?.reason,
    needsSlot: step.needsSlot,
    // What proxy_operator_repairs_held counts it as (undefined: not counted).
    repairHeld: step.repairHeld,
  };
}

describe('the spec rollout of a proxy whose repair is held is paced', () => {
  it.each<[string, CaseInputs, SlotAsk, ReturnType<typeof run>]>([
    [
      'held, no slot free: it keeps its instance, stays Unhealthy and waits',
      inputs(HELD),
      REFUSED,
      {
        asked: 'held-rollout',
        action: 'none',
        phase: 'Unhealthy',
        reason: 'RepairHeld',
        needsSlot: undefined,
        repairHeld: 'ProbeTargetUnreachable',
      },
    ],
    [
      'held, in its grace (it may be serving just as well): it waits too',
      inputs(HELD, 10),
      REFUSED,
      {
        asked: 'held-rollout',
        action: 'none',
        phase: 'Unhealthy',
        reason: 'RepairHeld',
        needsSlot: undefined,
        repairHeld: 'ProbeTargetUnreachable',
      },
    ],
    [
      'held, the slots held by replacements that failed permanently: still shown held, counted',
      inputs(HELD),
      () => ({ granted: false, cap: 2, failed: ['ns/x', 'ns/y'] }),
      {
        asked: 'held-rollout',
        action: 'none',
        phase: 'Unhealthy',
        reason: 'RepairHeld',
        needsSlot: undefined,
        repairHeld: 'ProbeTargetUnreachable',
      },
    ],
    [
      'held, a slot granted: replaced, holding the slot',
      inputs(HELD),
      GRANTED,
      {
        asked: 'held-rollout',
        action: 'delete',
        phase: 'Provisioning',
        reason: 'Replacing',
        needsSlot: 'held-rollout',
        repairHeld: undefined,
      },
    ],
    [
      'not held (it looks dead): replaced at once, the budget not asked',
      inputs(GO),
      REFUSED,
      {
        asked: undefined,
        action: 'delete',
        phase: 'Provisioning',
        reason: 'Replacing',
        needsSlot: undefined,
        repairHeld: undefined,
      },
    ],
    [
      'held, but its instance stopped: replaced at once, the budget not asked',
      inputs(HELD, 120, 'Stopped'),
      REFUSED,
      {
        asked: undefined,
        action: 'delete',
        phase: 'Provisioning',
        reason: 'Replacing',
        needsSlot: undefined,
        repairHeld: undefined,
      },
    ],
  ])('%s', (_n, inp, answer, want) => {
    expect(run(inp, answer)).toEqual(want);
  });

  it('the wait says why the repair is held, then what its spec change waits on (one Warning Event)', () => {
    const step = decide({ ...inputs(HELD), slot: REFUSED });
    const message =
      "repair held: the probe target is down; spec changed while its repair is held (the cause looks shared: it may be serving): instance i-1 will be replaced once fewer than 2 of provider mock's replacements are in flight or not yet Ready (--max-unavailable)";
    expect(step.status?.provisioned?.message).toBe(message);
    expect(step.events).toEqual([{ type: 'Warning', reason: 'RepairHeld', message }]);
  });

  it('blocked behind failed replacements, the wait names them after the hold', () => {
    const step = decide({ ...inputs(HELD), slot: () => ({ granted: false, cap: 2, failed: ['ns/x'] }) });
    expect(step.status?.provisioned?.message).toMatch(
      /^repair held: the probe target is down; spec changed while its repair is held .*: rollout blocked at provider mock: the replacements of ns\/x failed permanently/,
    );
  });
});

describe('how a replacement waiting for a slot shows: a held proxy always as held', () => {
  it.each<[string, { held: boolean; blocked: boolean }, WaitingReason, 'Normal' | 'Warning']>([
    ['a slot will come free', { held: false, blocked: false }, 'ReplacementPending', 'Normal'],
    ['failed replacements hold the slots', { held: false, blocked: true }, 'ReplacementBlocked', 'Warning'],
    [
      'its repair is held: held first (the SRE sees the outage)',
      { held: true, blocked: false },
      'RepairHeld',
      'Warning',
    ],
    ['held, and failed replacements hold the slots', { held: true, blocked: true }, 'RepairHeld', 'Warning'],
  ])('%s', (_n, wait, reason, eventType) => {
    expect(waitingReason(wait)).toEqual({ reason, eventType });
  });
});

/** The provider's proxies as the budget reads them from the cache: a phase, and whether status.replacement is set. */
function cache(proxies: Record<string, [ProxyPhase, boolean]>): CacheReader {
  const objects = Object.entries(proxies).map(([name, [phase, replacing]]) => ({
    apiVersion: 'crawl.example.com/v1alpha1',
    kind: 'Proxy',
    metadata: { name, namespace: 'ns' },
    spec: { mode: 'Managed', provider: 'mock', healthCheck: { probeURL: 'https://target.example/' } },
    status: { phase, ...(replacing ? { replacement: { cause: 'SpecChanged', startedAt: ago(30) } } : {}) },
  }));
  return {
    get: () => undefined,
    onChange: () => () => {},
    list<T extends KubeObject>(): T[] {
      return structuredClone(objects) as unknown as T[];
    },
  };
}

describe('a held fleet rolls out at most the cap at a time, and stops behind unverified replacements', () => {
  const names = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
  const fleet = (replaced: Record<string, [ProxyPhase, boolean]>) =>
    cache({ ...Object.fromEntries(names.map((n) => [n, ['Unhealthy', false]])), ...replaced });
  // The controller: the decision asks the budget, and the grant goes once the status written no
  // longer holds the slot (StepRecorder).
  const wired = (budget: ReplacementBudget, c: CacheReader, key: string, inp: CaseInputs) => {
    const step = decide({ ...inp, slot: (kind) => budget.tryAcquire(key, 'mock', c, kind) });
    if (step.status && !holdsSlot(inp.proxy.status?.replacement, step.status)) budget.release(key);
    return step.status?.provisioned?.reason;
  };

  it('cap 2, all 8 Unhealthy and held: two go; the rest wait until a replacement is Ready', () => {
    // The budget's clock: each new cache below is past the tally's second.
    let t = 0;
    const budget = new ReplacementBudget({ default: { kind: 'count', value: 2 }, byProvider: {} }, () => t);
    const all = fleet({});
    expect(names.map((n) => wired(budget, all, `ns/${n}`, inputs(HELD)))).toEqual([
      'Replacing',
      'Replacing',
      ...Array<string>(6).fill('RepairHeld'),
    ]);
    // a and b's new instances are up but Unhealthy (the target is still down): their slots
    // leave the budget's grants, yet the rollout does not advance past them.
    const upUnverified: CaseInputs = {
      ...inputs(HELD),
      proxy: sick(5, { cause: 'SpecChanged', startedAt: ago(30) }),
      desiredHash: 'h0',
    };
    const unverified = fleet({ a: ['Unhealthy', true], b: ['Unhealthy', true] });
    t += 2000;
    wired(budget, unverified, 'ns/a', upUnverified);
    wired(budget, unverified, 'ns/b', upUnverified);
    expect(wired(budget, unverified, 'ns/c', inputs(HELD))).toBe('RepairHeld');
    // a's new instance is Ready (its record cleared): one slot free, one more goes.
    const oneReady = fleet({ a: ['Ready', false], b: ['Unhealthy', true] });
    t += 2000;
    expect(wired(budget, oneReady, 'ns/c', inputs(HELD))).toBe('Replacing');
    expect(wired(budget, oneReady, 'ns/d', inputs(HELD))).toBe('RepairHeld');
  });

  it('the same fleet with its repairs not held (dead, not a shared cause) is replaced at once, as before', () => {
    const budget = new ReplacementBudget({ default: { kind: 'count', value: 2 }, byProvider: {} });
    const all = fleet({});
    expect(names.map((n) => wired(budget, all, `ns/${n}`, inputs(GO)))).toEqual(
      Array<string>(8).fill('Replacing'),
    );
  });
});
