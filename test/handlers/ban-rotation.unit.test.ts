import { banRotation, cooldownSource, upSince, wantsBanCheck } from '../../handlers/ban-rotation.js';
import {
  externalStep,
  rotationClock,
  type Autopilot,
  type HealthVerdict,
  type Observation,
  type Step,
} from '../../handlers/proxy-state-machine.js';
import { decide } from './decide.js';
import {
  CONDITION_HEALTHY,
  CONDITION_PROVISIONED,
  SPEC_HASH_ANNOTATION,
  type Proxy,
} from '../../crds/proxy-types.js';
import { stateMachineInstance, stateMachineProxy } from './state-machine-proxy.js';

// Issue 24 item 3: rotation on bans.

const NOW = Date.parse('2026-03-01T12:00:00Z');
const BASE = 900; // --cooldown
const UP = NOW - 3600_000; // the instance came up an hour ago
const cd = (target: string, endsInSeconds: number) => ({ target, until: NOW + endsInSeconds * 1000 });
const reading = (...targets: Array<{ target: string; until: number }>) => ({ now: NOW, targets });

describe('the ban rotation decision', () => {
  it.each<[string, number | undefined, ReturnType<typeof reading>, number, string]>([
    ['no policy: off, whatever the bans', undefined, reading(cd('a', 600), cd('b', 600)), UP, 'off'],
    ['below the threshold', 3, reading(cd('a', 600), cd('b', 600)), UP, 'below a,b'],
    ['at the threshold: due', 2, reading(cd('a', 600), cd('b', 600)), UP, 'due a,b'],
    ['two cooldowns of one target count once', 2, reading(cd('a', 600), cd('a', 60)), UP, 'below a'],
    ['an ended cooldown does not count', 2, reading(cd('a', 600), cd('b', 0)), UP, 'below a'],
    [
      'inherited from the instance before (ends less than --cooldown after this one came up): not counted',
      2,
      reading(cd('a', 380), cd('b', 200)),
      NOW - 600_000,
      'below ',
    ],
    [
      'a cooldown ending after --cooldown + 10 % past the instance coming up was earned by it',
      1,
      reading(cd('a', 391)),
      NOW - 600_000,
      'due a',
    ],
    [
      'a ban reported 20 % of --cooldown after the instance came up counts even at its shortest (−10 % jitter)',
      1,
      reading(cd('a', 0.9 * BASE)),
      NOW - 0.2 * BASE * 1000,
      'due a',
    ],
    [
      'a ban reported 10 % of --cooldown after it came up and shortened by jitter counts only once it repeats',
      1,
      reading(cd('a', 0.9 * BASE)),
      NOW - 0.1 * BASE * 1000,
      'below ',
    ],
    ['a threshold of 1: one banned target is enough', 1, reading(cd('z', 600)), UP, 'due z'],
    ['no status clock (not up): every running cooldown counts', 1, reading(cd('z', 10)), Number.NaN, 'due z'],
  ])('%s', (_n, threshold, r, up, expected) => {
    const d = banRotation(threshold, r, up, BASE);
    expect(d.kind === 'off' ? 'off' : `${d.kind} ${d.targets.join(',')}`).toBe(expected);
  });

  it('names the threshold and counts the targets in its why, naming none (targets are private)', () => {
    const many = reading(...'abcdefg'.split('').map((t) => cd(`${t}.example`, 600)));
    const d = banRotation(3, many, UP, BASE);
    expect(d.kind === 'due' && d.why).toBe(
      'rotation due (spec.rotation.whenCoolingDownOn 3): cooling down on 7 targets at once',
    );
  });

  it("reads the lease store's standing, leaving out the global pool's cooldown and those one untrusted token alone reported", async () => {
    const source = cooldownSource({
      standing: async () => ({
        usage: { leases: 0, sessions: 0 } as never,
        now: NOW,
        cooldowns: [
          { target: 'a', until: NOW + 1, agreed: true },
          { target: 'b', until: NOW + 1, agreed: false },
          { until: NOW + 1, agreed: true },
        ],
      }),
    });
    expect(await source.cooldowns('ns/p')).toEqual({ now: NOW, targets: [{ target: 'a', until: NOW + 1 }] });
  });
});

const ago = (seconds: number) => new Date(NOW - seconds * 1000).toISOString();
function proxy(
  mode: 'Managed' | 'External',
  whenCoolingDownOn?: number,
  provisioned = 'InstanceRunning',
): Proxy {
  return stateMachineProxy({
    annotations: { [SPEC_HASH_ANNOTATION]: 'h1' },
    spec: {
      mode,
      ...(mode === 'External' ? { endpoint: { host: '10.0.0.7', port: 3128 }, provider: undefined } : {}),
      rotation: whenCoolingDownOn === undefined ? {} : { whenCoolingDownOn },
    },
    status: {
      phase: 'Ready',
      ...(mode === 'Managed' ? { providerID: 'i-1' } : {}),
      ip: '10.0.0.7',
      observedGeneration: 1,
      conditions: [
        {
          type: CONDITION_PROVISIONED,
          status: 'True',
          reason: provisioned,
          message: 'm',
          lastTransitionTime: ago(3600),
        },
        {
          type: CONDITION_HEALTHY,
          status: 'True',
          reason: 'ProbeSucceeded',
          message: 'm',
          lastTransitionTime: ago(60),
        },
      ],
    },
  });
}
const pilot = (bansDue?: string): Autopilot => ({
  now: new Date(NOW),
  unhealthyAfterSeconds: 0,
  drainSeconds: 300,
  rotatesOnBans: true,
  bansDue,
});
const found: Observation = {
  kind: 'found',
  instance: stateMachineInstance('Running'),
};
const ok: HealthVerdict = {
  healthy: true,
  latencyMillis: 10,
  reason: 'ProbeSucceeded',
  message: 'm',
  checkedAt: new Date(NOW),
};
const managed = (p: Proxy, a: Autopilot): Step =>
  decide({ proxy: p, desiredHash: 'h1', observation: found, verdict: ok, autopilot: a });
const WHY = 'rotation due (spec.rotation.whenCoolingDownOn 2): cooling down on 2 targets at once';

describe('a Managed proxy banned widely is drained and replaced like a rotation on age', () => {
  it('due: asks for a rollout slot and starts draining, the Event and condition naming the bans', () => {
    const s = managed(proxy('Managed', 2), pilot(WHY));
    expect(s.action).toEqual({ type: 'none' });
    expect(s.needsSlot).toBe('rollout');
    expect(s.startsReplacement).toBe('Rotation');
    expect(s.status).toMatchObject({
      provisioned: { reason: 'Draining', message: expect.stringContaining(WHY) },
      replacement: { cause: 'Rotation' },
    });
    expect(s.events).toEqual([
      expect.objectContaining({ reason: 'Rotating', message: expect.stringContaining(WHY) }),
    ]);
  });

  it('the budget refusing: waits for its slot, the message naming the ban policy', () => {
    const s = decide({
      proxy: proxy('Managed', 2),
      desiredHash: 'h1',
      observation: found,
      verdict: ok,
      autopilot: pilot(WHY),
      slot: () => ({ granted: false, cap: 1, failed: [] }),
    });
    expect(s.action).toEqual({ type: 'none' });
    expect(s.status?.provisioned).toMatchObject({
      reason: 'ReplacementPending',
      message: expect.stringContaining('rotation due (spec.rotation.whenCoolingDownOn)'),
    });
  });

  it('not due: nothing happens', () => {
    const s = managed(proxy('Managed', 2), pilot());
    expect(s.status?.replacement).toBeUndefined();
    expect(s.needsSlot).toBeUndefined();
  });

  it('a drain it began runs on (and keeps its message) once the cooldowns end, with maxAgeSeconds off', () => {
    const draining = proxy('Managed', 2, 'Draining');
    draining.status!.conditions![0]!.message = `${WHY}: draining since …`;
    draining.status!.replacement = { cause: 'Rotation', startedAt: ago(100) };
    const s = managed(draining, pilot());
    expect(s.status?.provisioned).toMatchObject({ reason: 'Draining', message: `${WHY}: draining since …` });
    expect(s.events).toEqual([]);
    expect(rotationClock(draining, 'i-1', pilot())).toEqual(expect.objectContaining({ kind: 'draining' }));
    draining.status!.replacement.startedAt = ago(400);
    expect(managed(draining, pilot()).action).toEqual({ type: 'delete', providerIDs: ['i-1'] });
  });

  it('without the policy a drain is not kept alive by bans alone (maxAgeSeconds off, rotatesOnBans false)', () => {
    expect(rotationClock(proxy('Managed'), 'i-1', { ...pilot(), rotatesOnBans: false })).toEqual({
      kind: 'off',
    });
  });
});

describe('an External proxy banned widely: its owner is told', () => {
  it('due: Provisioned reason RotationDue and a Warning Event', () => {
    const s = externalStep(proxy('External', 2, 'External'), ok, pilot(WHY));
    expect(s.action).toEqual({ type: 'none' });
    expect(s.status?.provisioned).toMatchObject({
      status: 'True',
      reason: 'RotationDue',
      message: expect.stringContaining(WHY),
    });
    expect(s.events).toEqual([
      expect.objectContaining({
        type: 'Warning',
        reason: 'RotationDue',
        message: expect.stringContaining('its owner must give it a new IP'),
      }),
    ]);
  });

  it('not due: back to External, no Event', () => {
    const s = externalStep(proxy('External', 2, 'RotationDue'), ok, pilot());
    expect(s.status?.provisioned).toMatchObject({ reason: 'External' });
    expect(s.events).toEqual([]);
  });
});

describe('which proxies the timer looks at for bans', () => {
  it.each<[string, Proxy, boolean]>([
    ['no policy', proxy('Managed'), false],
    ['a Ready Managed proxy with the policy', proxy('Managed', 2), true],
    ['an External proxy with the policy', proxy('External', 2, 'External'), true],
  ])('%s', (_n, p, expected) => {
    expect(wantsBanCheck(p)).toBe(expected);
  });

  it('the up clock is the Provisioned turn to True', () => {
    expect(upSince(proxy('Managed'))).toBe(NOW - 3600_000);
  });
});
