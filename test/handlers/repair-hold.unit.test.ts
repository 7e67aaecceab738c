import {
  holdAfterLift,
  repairHold,
  unhealthyAllowed,
  type HoldMemory,
  type RepairHold,
  type RepairHoldInputs,
} from '../../handlers/repair-hold.js';
import { decide } from './decide.js';
import { SPEC_HASH_ANNOTATION } from '../../crds/proxy-types.js';
import type { Instance } from '../../providers/contract.js';
import { ago, NOW, stateMachineProxy } from './state-machine-proxy.js';

// Issue 44 item 2: a shared cause never replaces the fleet. The decision, as a table.

const base: RepairHoldInputs = {
  provider: 'mock',
  probeURL: 'https://target.example/generate_204',
  target: { kind: 'reachable' },
  unhealthy: 1,
  total: 20,
  maxUnhealthyPercent: 20,
};

describe('repairHold: may an Unhealthy proxy past its grace be replaced now?', () => {
  it.each<[string, Partial<RepairHoldInputs>, string]>([
    ['one dead proxy of 20, the target answering directly: repair', {}, 'go'],
    ['4 of 20 Unhealthy (20%, not more): repair', { unhealthy: 4 }, 'go'],
    [
      '5 of 20 Unhealthy (more than 20%): hold, the fleet looks hit by one cause',
      { unhealthy: 5 },
      'FleetUnhealthy',
    ],
    ['20 of 20 Unhealthy: hold', { unhealthy: 20 }, 'FleetUnhealthy'],
    [
      'the target fails directly, one proxy Unhealthy: hold, the proxy is not the cause',
      { target: { kind: 'unreachable', message: 'connect ECONNREFUSED' } },
      'ProbeTargetUnreachable',
    ],
    [
      'the target fails directly and the fleet is down: the direct check names the cause',
      { target: { kind: 'unreachable', message: 'timeout' }, unhealthy: 20 },
      'ProbeTargetUnreachable',
    ],
    [
      'the target not checked yet (a new term): hold until it is',
      { target: { kind: 'unknown' } },
      'ProbeTargetUnchecked',
    ],
    ['a fleet of 1, its one proxy dead: repair (at least one may be)', { unhealthy: 1, total: 1 }, 'go'],
    ['a fleet of 2, both dead: hold', { unhealthy: 2, total: 2 }, 'FleetUnhealthy'],
    ['the fleet rule off (100%): 20 of 20 repaired', { unhealthy: 20, maxUnhealthyPercent: 100 }, 'go'],
    ['0%: still one at a time', { unhealthy: 1, maxUnhealthyPercent: 0 }, 'go'],
    ['0%: two at once hold', { unhealthy: 2, maxUnhealthyPercent: 0 }, 'FleetUnhealthy'],
  ])('%s', (_what, change, want) => {
    const hold = repairHold({ ...base, ...change });
    expect(hold.kind === 'go' ? 'go' : hold.reason).toBe(want);
  });

  it('the messages name the cause and the flag, and carry no counts (one status write per hold)', () => {
    const fleet = repairHold({ ...base, unhealthy: 5 });
    expect(fleet).toMatchObject({ kind: 'hold' });
    expect(fleet.kind === 'hold' && fleet.message).toBe(
      "repair held: more than 20% of provider mock's proxies are Unhealthy at once (--repair-hold-unhealthy-percent): a shared cause is likelier than that many dead proxies",
    );
    const target = repairHold({ ...base, target: { kind: 'unreachable', message: 'answered 503' } });
    expect(target.kind === 'hold' && target.message).toContain(
      'the probe target https://target.example/generate_204 fails when the operator checks it directly, without a proxy (answered 503)',
    );
  });

  it.each([
    [20, 20, 4],
    [20, 10, 2],
    [20, 4, 1],
    [20, 0, 1],
    [50, 3, 1],
    [100, 7, 7],
  ])('%i%% of %i proxies: %i may be Unhealthy with repairs going on', (percent, total, want) => {
    expect(unhealthyAllowed(total, percent)).toBe(want);
  });
});

describe('holdAfterLift: held time never counts toward the grace', () => {
  const T = Date.parse('2026-12-06T12:00:00Z');
  const GRACE = 900;
  const go: RepairHold = { kind: 'go' };
  const held: RepairHold = { kind: 'hold', reason: 'FleetUnhealthy', message: 'repair held: …' };
  it.each<[string, RepairHold, HoldMemory, number, string, number | undefined]>([
    ['never held: the repair goes ahead', go, {}, T, 'go', undefined],
    [
      'still held: the live hold, nothing remembered',
      held,
      { reason: 'FleetUnhealthy', liftedAt: T - 5_000 },
      T,
      'FleetUnhealthy',
      undefined,
    ],
    [
      'the cause just ended: held on, its grace starts now',
      go,
      { reason: 'FleetUnhealthy' },
      T,
      'FleetUnhealthy',
      T,
    ],
    [
      'the cause ended earlier, grace not over: still held, same start',
      go,
      { reason: 'ProbeTargetUnreachable', liftedAt: T - 899_000 },
      T,
      'ProbeTargetUnreachable',
      T - 899_000,
    ],
    [
      'a full grace since the cause ended: the repair goes ahead',
      go,
      { reason: 'FleetUnhealthy', liftedAt: T - 900_000 },
      T,
      'go',
      undefined,
    ],
  ])('%s', (_what, decision, memory, now, want, liftedAt) => {
    const { hold, liftedAt: next } = holdAfterLift(decision, memory, now, GRACE);
    expect(hold.kind === 'go' ? 'go' : hold.reason).toBe(want);
    expect(next).toBe(liftedAt);
  });

  it('the message says when the cause ended and the grace, the same for the whole wait (one status write)', () => {
    const { hold } = holdAfterLift(go, { reason: 'FleetUnhealthy', liftedAt: T - 300_000 }, T, GRACE);
    expect(hold).toMatchObject({
      kind: 'hold',
      message: expect.stringContaining('ended at 2026-12-06T11:55:00.000Z') as unknown,
    });
    expect(hold.kind === 'hold' && hold.message).toContain('900 s from then');
    const later = holdAfterLift(go, { reason: 'FleetUnhealthy', liftedAt: T - 300_000 }, T + 200_000, GRACE);
    expect(later.hold).toEqual(hold);
  });
});

describe('the state machine: a held repair keeps the instance and says why', () => {
  const sick = stateMachineProxy({
    annotations: { [SPEC_HASH_ANNOTATION]: 'h1' },
    status: {
      phase: 'Unhealthy',
      providerID: 'i-1',
      ip: '10.0.0.7',
      conditions: [
        {
          type: 'Provisioned',
          status: 'True',
          reason: 'InstanceRunning',
          message: 'm',
          lastTransitionTime: ago(3600),
        },
        {
          type: 'Healthy',
          status: 'False',
          reason: 'ConnectionRefused',
          message: 'refused',
          lastTransitionTime: ago(120),
        },
      ],
    },
  });
  const inputs = {
    proxy: sick,
    desiredHash: 'h1',
    observation: {
      kind: 'found' as const,
      instance: {
        id: 'i-1',
        uid: 'u',
        owner: 'o',
        namespace: 'ns',
        revision: 'h1',
        state: 'Running',
        ip: '10.0.0.7',
        createdAt: NOW,
      } satisfies Instance,
    },
    autopilot: { now: NOW, unhealthyAfterSeconds: 60 },
  };

  it('held: no delete, Provisioned=True/RepairHeld, a Warning Event, the metric told, looked at again soon', () => {
    let asked = 0;
    const step = decide({
      ...inputs,
      repairHold: () => ({ kind: 'hold', reason: 'FleetUnhealthy', message: 'repair held: shared' }),
      slot: () => {
        asked++;
        return { granted: true, cap: 1, failed: [] };
      },
    });
    expect(step.action).toEqual({ type: 'none' });
    expect(step.status).toMatchObject({
      phase: 'Unhealthy',
      providerID: 'i-1',
      provisioned: {
        status: 'True',
        reason: 'RepairHeld',
        message: 'repair held: shared; instance i-1 is kept',
      },
    });
    expect(step.events).toEqual([
      { type: 'Warning', reason: 'RepairHeld', message: 'repair held: shared; instance i-1 is kept' },
    ]);
    expect(step.repairHeld).toBe('FleetUnhealthy');
    expect(step.next).toEqual({ kind: 'requeue', seconds: 5 });
    // A held repair takes no --max-unavailable slot.
    expect(asked).toBe(0);
  });

  it('not held: the repair goes ahead as before', () => {
    const step = decide({ ...inputs, repairHold: () => ({ kind: 'go' }) });
    expect(step.action).toEqual({ type: 'delete', providerIDs: ['i-1'] });
    expect(step.repairHeld).toBeUndefined();
    expect(step.events.map((e) => e.reason)).toEqual(['ReplacingUnhealthy']);
  });

  it('the hold is asked only when a repair is due: a proxy in its grace is not', () => {
    let asked = 0;
    decide({
      ...inputs,
      autopilot: { now: NOW, unhealthyAfterSeconds: 600 },
      repairHold: () => {
        asked++;
        return { kind: 'go' };
      },
    });
    expect(asked).toBe(0);
  });
});
