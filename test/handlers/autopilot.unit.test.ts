import {
  externalStep,
  providerErrorStep,
  replacementPendingStep,
  unhealthyClock,
  unhealthyGrace,
  type Autopilot,
  type HealthVerdict,
  type Observation,
  type Step,
} from '../../handlers/proxy-state-machine.js';
import { decide } from './decide.js';
import {
  countedFor,
  outOfService,
  ReplacementBudget,
  type BudgetView,
  type SlotKind,
} from '../../handlers/replacement-budget.js';
import type { CacheReader, KubeObject } from '../../framework/index.js';
import {
  CONDITION_HEALTHY,
  CONDITION_PROVISIONED,
  SPEC_HASH_ANNOTATION,
  type Condition,
  type Proxy,
  type ProxyPhase,
  type ProxyStatus,
} from '../../crds/proxy-types.js';
import type { Instance } from '../../providers/contract.js';
import { ago, NOW, stateMachineInstance, stateMachineProxy } from './state-machine-proxy.js';

// Issue 24: the budget holds under failure (item 4) and dead proxies are replaced (item 1).

const pilot = (unhealthyAfterSeconds: number): Autopilot => ({ now: NOW, unhealthyAfterSeconds });

interface Opts {
  phase?: ProxyPhase;
  hash?: string;
  provisioned?: string;
  /** Healthy condition: status, reason and how long ago it last transitioned. */
  healthy?: { status: 'True' | 'False'; reason: string; sinceSeconds: number };
  replacement?: ProxyStatus['replacement'];
  mode?: 'Managed' | 'External';
  unhealthyAfterSeconds?: number;
}

function proxy(o: Opts = {}): Proxy {
  const conditions: Condition[] = [];
  if (o.provisioned)
    conditions.push({
      type: CONDITION_PROVISIONED,
      status: 'True',
      reason: o.provisioned,
      message: '',
      lastTransitionTime: ago(3600),
    });
  if (o.healthy)
    conditions.push({
      type: CONDITION_HEALTHY,
      status: o.healthy.status,
      reason: o.healthy.reason,
      message: 'm',
      lastTransitionTime: ago(o.healthy.sinceSeconds),
    });
  const external = o.mode === 'External';
  return stateMachineProxy({
    annotations: { [SPEC_HASH_ANNOTATION]: o.hash ?? 'h1' },
    spec: {
      mode: o.mode ?? 'Managed',
      ...(external ? { endpoint: { host: '10.0.0.7', port: 3128 }, provider: undefined } : {}),
      rotation:
        o.unhealthyAfterSeconds === undefined ? {} : { unhealthyAfterSeconds: o.unhealthyAfterSeconds },
    },
    status: {
      phase: o.phase,
      providerID: external ? undefined : 'i-1',
      ip: '10.0.0.7',
      observedGeneration: 1,
      conditions,
      ...(o.replacement ? { replacement: o.replacement } : {}),
    },
  });
}

const instance = (state: Instance['state'] = 'Running'): Instance => stateMachineInstance(state);
const found = (state: Instance['state'] = 'Running'): Observation => ({
  kind: 'found',
  instance: instance(state),
});
const next = (s: Step) => (s.next.kind === 'requeue' ? `requeue ${s.next.seconds}` : s.next.kind);
const refused: HealthVerdict = {
  healthy: false,
  latencyMillis: 0,
  reason: 'ConnectionRefused',
  message: 'm',
  checkedAt: NOW,
};

describe('who holds a replacement slot (item 4)', () => {
  const view = (key: string, phase: ProxyPhase, replacing = false): BudgetView => ({ key, phase, replacing });
  type Held = { replacing: string[]; unhealthy: string[]; unverified: string[]; failed: string[] };
  it.each<[string, BudgetView[], Held]>([
    [
      'Ready and Pending hold nothing',
      [view('a', 'Ready'), view('b', 'Pending')],
      { replacing: [], unhealthy: [], unverified: [], failed: [] },
    ],
    [
      'a Failed proxy that never served holds nothing (a new proxy with a bad image)',
      [view('a', 'Failed')],
      { replacing: [], unhealthy: [], unverified: [], failed: [] },
    ],
    [
      'a Failed replacement keeps its slot until a person acts or the spec changes',
      [view('a', 'Failed', true)],
      { replacing: ['a'], unhealthy: [], unverified: [], failed: ['a'] },
    ],
    [
      'Provisioning is in flight, Unhealthy is out of service',
      [view('a', 'Provisioning', true), view('b', 'Unhealthy')],
      { replacing: ['a'], unhealthy: ['b'], unverified: [], failed: [] },
    ],
    [
      'a replacement Unhealthy since its new instance came up is not verified yet',
      [view('a', 'Unhealthy', true), view('b', 'Unhealthy')],
      { replacing: [], unhealthy: ['a', 'b'], unverified: ['a'], failed: [] },
    ],
  ])('%s', (_n, views, want) => {
    const oos = outOfService(views);
    expect({
      replacing: [...oos.replacing].sort(),
      unhealthy: [...oos.unhealthy].sort(),
      unverified: [...oos.unverified].sort(),
      failed: [...oos.failed].sort(),
    }).toEqual(want);
  });

  const oos = outOfService([
    view('f', 'Failed', true),
    view('u', 'Unhealthy'),
    view('p', 'Provisioning'),
    view('v', 'Unhealthy', true),
  ]);
  it.each<[string, SlotKind, string[], string, string[]]>([
    ['a rollout counts everything out of service', 'rollout', [], 'x', ['f', 'p', 'u', 'v']],
    [
      'a repair counts only replacements in flight (dead proxies do not block each other)',
      'repair',
      [],
      'u',
      ['f', 'p'],
    ],
    [
      'a held rollout counts replacements in flight and not yet verified (held proxies do not block each other)',
      'held-rollout',
      [],
      'u',
      ['f', 'p', 'v'],
    ],
    ['grants not yet in the cache count', 'repair', ['g'], 'x', ['f', 'g', 'p']],
    ['the asking proxy never counts itself', 'rollout', [], 'f', ['p', 'u', 'v']],
  ])('%s', (_n, kind, grants, key, want) => {
    expect([...countedFor(kind, oos, grants, key)].sort()).toEqual(want);
  });

  it('a budget over a fleet with two failed replacements and cap 2 grants no rollout and names them', () => {
    const objects = [
      ['a', 'Failed', true],
      ['b', 'Failed', true],
      ['c', 'Ready', false],
      ['d', 'Ready', false],
    ].map(
      ([name, phase, replacing]) =>
        ({
          metadata: { name, namespace: 'ns' },
          spec: { mode: 'Managed', provider: 'mock', healthCheck: { probeURL: 'https://target.example/' } },
          status: {
            phase,
            ...(replacing ? { replacement: { cause: 'SpecChanged', startedAt: NOW.toISOString() } } : {}),
          },
        }) as unknown as Proxy,
    );
    const cache: CacheReader = {
      get: () => undefined,
      onChange: () => () => {},
      list: <T extends KubeObject>() => objects as unknown as T[],
    };
    const budget = new ReplacementBudget({ default: { kind: 'count', value: 2 }, byProvider: {} });
    expect(budget.tryAcquire('ns/c', 'mock', cache)).toEqual({
      granted: false,
      inFlight: 2,
      cap: 2,
      failed: ['ns/a', 'ns/b'],
    });
  });
});

describe('a replacement is recorded from its start until Ready (item 4)', () => {
  it.each<[string, Proxy, Observation, string | undefined]>([
    ['a serving proxy whose spec changed', proxy({ phase: 'Ready', hash: 'h0' }), found(), 'SpecChanged'],
    [
      'a serving proxy whose instance died',
      proxy({ phase: 'Unhealthy' }),
      found('Terminated'),
      'InstanceDead',
    ],
    [
      'a serving proxy whose instance vanished',
      proxy({ phase: 'Ready' }),
      { kind: 'not-found' },
      'InstanceGone',
    ],
    [
      'a proxy that never served (still Provisioning)',
      proxy({ phase: 'Provisioning', hash: 'h0' }),
      found(),
      undefined,
    ],
  ])('%s', (_n, p, observation, cause) => {
    const step = decide({ proxy: p, desiredHash: 'h1', observation, autopilot: pilot(0) });
    expect(step.status?.replacement?.cause).toBe(cause);
    expect(step.startsReplacement).toBe(cause);
    if (cause) expect(step.status?.replacement?.startedAt).toBe(NOW.toISOString());
  });

  it('an existing record is kept (not restarted) while the replacement goes on', () => {
    const p = proxy({
      phase: 'Provisioning',
      provisioned: 'Replacing',
      replacement: { cause: 'SpecChanged', startedAt: ago(60) },
    });
    const step = decide({
      proxy: p,
      desiredHash: 'h1',
      observation: { kind: 'not-found' },
      autopilot: pilot(0),
    });
    // Not restarted (its start and cause stay, the metric is not counted again); the old
    // instance's end is noted, so what runs next is known to be its replacement.
    expect(step.status?.replacement).toEqual({
      cause: 'SpecChanged',
      startedAt: ago(60),
      oldInstanceGoneAt: NOW.toISOString(),
    });
    expect(step.startsReplacement).toBeUndefined();
    // Our own delete finishing is no disappearance.
    expect(step.events.map((e) => e.reason)).not.toContain('InstanceGone');
    expect(step.status?.provisioned?.reason).toBe('Replacing');
  });

  it('is cleared once the new instance is Ready, and kept while it is Unhealthy', () => {
    const p = proxy({ phase: 'Provisioning', replacement: { cause: 'SpecChanged', startedAt: ago(60) } });
    const ready = decide({
      proxy: p,
      desiredHash: 'h1',
      observation: found(),
      verdict: { ...refused, healthy: true, reason: 'ProbeSucceeded' },
      autopilot: pilot(0),
    });
    expect(ready.status?.phase).toBe('Ready');
    expect(ready.status?.replacement).toBeNull();
    const sick = decide({
      proxy: p,
      desiredHash: 'h1',
      observation: found(),
      verdict: refused,
      autopilot: pilot(0),
    });
    expect(sick.status?.phase).toBe('Unhealthy');
    expect(sick.status?.replacement).toBeUndefined();
  });

  it.each<[string, Proxy, string, RegExp]>([
    [
      'a failed replacement keeps its slot',
      proxy({ phase: 'Provisioning', replacement: { cause: 'SpecChanged', startedAt: ago(9) } }),
      'ReplacementFailed',
      /holds one of provider mock's --max-unavailable slots/,
    ],
    [
      'a new proxy that fails holds nothing',
      proxy({ phase: 'Provisioning' }),
      'ProvisioningFailed',
      /^bad image$/,
    ],
  ])('a permanent create failure: %s', (_n, p, reason, message) => {
    const step = providerErrorStep({
      proxy: p,
      deleting: false,
      failure: { provider: 'mock', operation: 'create', kind: 'Permanent', message: 'bad image' },
    });
    expect(step.status).toMatchObject({ phase: 'Failed', provisioned: { reason } });
    expect(step.status?.provisioned?.message).toMatch(message);
    // status.replacement is left as stored: it is what keeps the slot.
    expect(step.status?.replacement).toBeUndefined();
    expect(step.events).toEqual([expect.objectContaining({ type: 'Warning', reason })]);
    expect(next(step)).toBe('permanent');
  });
});

describe('proxies waiting for a slot say whether the rollout is blocked (item 4)', () => {
  const inputs = {
    proxy: proxy({
      phase: 'Ready',
      hash: 'h0',
      healthy: { status: 'True', reason: 'ProbeSucceeded', sinceSeconds: 60 },
    }),
    desiredHash: 'h1',
    observation: { kind: 'found' as const, instance: instance() },
  };
  it.each<[string, readonly string[], string, 'Normal' | 'Warning', RegExp]>([
    [
      'slots held by replacements in flight: pending',
      [],
      'ReplacementPending',
      'Normal',
      /once fewer than 2/,
    ],
    [
      'slots held by failed replacements: blocked, naming them',
      ['ns/a', 'ns/b'],
      'ReplacementBlocked',
      'Warning',
      /rollout blocked at provider mock: the replacements of ns\/a, ns\/b failed permanently/,
    ],
  ])('%s', (_n, failed, reason, type, message) => {
    const step = replacementPendingStep(inputs, { cap: 2, failed });
    expect(step.action.type).toBe('none');
    expect(step.status).toMatchObject({ phase: 'Ready', provisioned: { status: 'True', reason } });
    expect(step.status?.provisioned?.message).toMatch(message);
    expect(step.events).toEqual([{ type, reason, message: step.status?.provisioned?.message }]);
    expect(next(step)).toBe('requeue 5');
  });
});

describe('the Unhealthy grace (item 1)', () => {
  it.each<[string, Proxy, number, string]>([
    ['the proxy field wins', proxy({ unhealthyAfterSeconds: 60 }), 900, '60'],
    ['0 on the proxy turns it off whatever the fleet says', proxy({ unhealthyAfterSeconds: 0 }), 900, '0'],
    ['unset takes the fleet default', proxy(), 900, '900'],
  ])('%s', (_n, p, fleet, want) => {
    expect(String(unhealthyGrace(p, fleet))).toBe(want);
  });

  const unhealthy = (since: number) =>
    proxy({
      phase: 'Unhealthy',
      healthy: { status: 'False', reason: 'ConnectionRefused', sinceSeconds: since },
    });
  it.each<[string, Proxy, 'True' | 'False', string, Autopilot | undefined, string]>([
    ['no policy', unhealthy(999), 'False', 'ConnectionRefused', undefined, 'off'],
    ['grace 0 is off', unhealthy(999), 'False', 'ConnectionRefused', pilot(0), 'off'],
    ['healthy is off', unhealthy(999), 'True', 'ProbeSucceeded', pilot(60), 'off'],
    [
      'an invalid probe target is a spec mistake, not a dead proxy',
      unhealthy(999),
      'False',
      'InvalidProbeTarget',
      pilot(60),
      'off',
    ],
    [
      'unhealthy for 20 of 60 s waits 40 s more',
      unhealthy(20),
      'False',
      'ConnectionRefused',
      pilot(60),
      'waiting 40',
    ],
    [
      'just turned unhealthy starts the clock now',
      proxy({ phase: 'Ready' }),
      'False',
      'ConnectionRefused',
      pilot(60),
      'waiting 60',
    ],
    ['unhealthy for 61 of 60 s is due', unhealthy(61), 'False', 'ConnectionRefused', pilot(60), 'due 61'],
  ])('%s', (_n, p, status, reason, autopilot, want) => {
    const c = unhealthyClock(p, { status, reason: reason as 'ConnectionRefused', message: 'm' }, autopilot);
    expect(
      c.kind === 'waiting' ? `waiting ${c.seconds}` : c.kind === 'due' ? `due ${c.forSeconds}` : 'off',
    ).toBe(want);
  });

  it('a Managed proxy past its grace is replaced with a repair slot, an Event and the metric cause', () => {
    const step = decide({
      proxy: unhealthy(61),
      desiredHash: 'h1',
      observation: found(),
      verdict: refused,
      autopilot: pilot(60),
    });
    expect(step.action).toEqual({ type: 'delete', providerIDs: ['i-1'] });
    expect(step.needsSlot).toBe('repair');
    expect(step.startsReplacement).toBe('Unhealthy');
    expect(step.status).toMatchObject({
      phase: 'Provisioning',
      provisioned: { reason: 'Replacing' },
      replacement: { cause: 'Unhealthy', startedAt: NOW.toISOString() },
    });
    expect(step.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'ReplacingUnhealthy' })]);
    expect(step.events[0].message).toMatch(
      /unhealthy \(ConnectionRefused\) since .* longer than .* \(60 s\)/,
    );
  });

  it('within its grace it stays Unhealthy and looks again when the grace ends', () => {
    const step = decide({
      proxy: unhealthy(20),
      desiredHash: 'h1',
      observation: found(),
      verdict: refused,
      autopilot: pilot(60),
    });
    expect(step.action.type).toBe('none');
    expect(step.status?.phase).toBe('Unhealthy');
    expect(next(step)).toBe('requeue 40');
  });

  it('a replacement that is Unhealthy too is not replaced again (one repair per Ready)', () => {
    const p = proxy({
      phase: 'Unhealthy',
      healthy: { status: 'False', reason: 'ConnectionRefused', sinceSeconds: 999 },
      replacement: { cause: 'Unhealthy', startedAt: ago(2000) },
    });
    const step = decide({
      proxy: p,
      desiredHash: 'h1',
      observation: found(),
      verdict: refused,
      autopilot: pilot(60),
    });
    expect(step.action.type).toBe('none');
    expect(next(step)).toBe('steady');
  });

  it('a repair waiting for a slot keeps its instance and says so', () => {
    const step = replacementPendingStep(
      {
        proxy: unhealthy(61),
        desiredHash: 'h1',
        observation: { kind: 'found', instance: instance() },
        verdict: refused,
      },
      { cap: 1, failed: [] },
      'repair',
    );
    expect(step.status).toMatchObject({ phase: 'Unhealthy', provisioned: { reason: 'ReplacementPending' } });
    expect(step.status?.provisioned?.message).toMatch(
      /^unhealthy too long: .* fewer than 1 of provider mock's replacements are in flight/,
    );
  });

  it('an External proxy past its grace is never touched: a condition message and an Event only', () => {
    const p = proxy({
      mode: 'External',
      phase: 'Unhealthy',
      healthy: { status: 'False', reason: 'ConnectionRefused', sinceSeconds: 61 },
    });
    const step = externalStep(p, refused, pilot(60));
    expect(step.action.type).toBe('none');
    expect(step.status?.phase).toBe('Unhealthy');
    expect(step.status?.provisioned).toMatchObject({ reason: 'External' });
    expect(step.status?.provisioned?.message).toMatch(
      /never replaces an External proxy: its owner must fix or remove it/,
    );
    expect(step.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'UnhealthyExternal' })]);
    const within = externalStep(
      {
        ...p,
        status: {
          ...p.status,
          conditions: proxy({
            mode: 'External',
            healthy: { status: 'False', reason: 'ConnectionRefused', sinceSeconds: 10 },
          }).status?.conditions,
        },
      },
      refused,
      pilot(60),
    );
    expect(within.events).toEqual([]);
    expect(next(within)).toBe('requeue 50');
  });
});
