import { DeadInstanceCensus } from '../../handlers/dead-instance-census.js';
import {
  deadInstanceHold,
  deadShare,
  MIN_INSTANCES_DEAD,
  type DeadShare,
  type ServingView,
} from '../../handlers/dead-instance-hold.js';
import { REPAIR_HOLD_REASONS, type RepairHold } from '../../handlers/repair-hold.js';
import type { Step } from '../../handlers/proxy-state-machine.js';
import type { CacheReader, KubeObject } from '../../framework/index.js';
import {
  CONDITION_HEALTHY,
  CONDITION_PROVISIONED,
  SPEC_HASH_ANNOTATION,
  type Proxy,
} from '../../crds/proxy-types.js';
import type { Instance, InstanceState, Provider } from '../../providers/contract.js';
import { decide } from './decide.js';
import { ago, NOW, stateMachineInstance, stateMachineProxy } from './state-machine-proxy.js';

// A provider reporting most of its instances Stopped/Terminated at once deleted every one of
// them at once. Deleting is irreversible: many serving proxies reported dead at once hold, on
// the repair hold's percentage (and at least 3); a few are still replaced at once.

describe('how many serving proxies the provider reports dead', () => {
  const serving = (id: string, phase = 'Ready'): ServingView => ({ providerID: id, phase });
  it.each<[string, ServingView[], string[], DeadShare]>([
    ['the asker alone, the listing agreeing', [serving('a'), serving('b')], ['a'], { dead: 1, total: 2 }],
    [
      'the asker counts though the listing is older than its death',
      [serving('a'), serving('b')],
      [],
      { dead: 1, total: 2 },
    ],
    [
      '6 of 8 listed dead',
      ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((i) => serving(i)),
      ['a', 'b', 'c', 'd', 'e', 'f'],
      { dead: 6, total: 8 },
    ],
    [
      'Unhealthy proxies serve (judged by the probes)',
      [serving('a', 'Unhealthy'), serving('b', 'Unhealthy')],
      ['a', 'b'],
      { dead: 2, total: 2 },
    ],
    [
      'Pending, Provisioning or Failed ones never served: left out',
      [
        serving('a'),
        serving('b', 'Provisioning'),
        serving('c', 'Failed'),
        { providerID: undefined, phase: 'Pending' },
      ],
      ['a', 'b', 'c'],
      { dead: 1, total: 1 },
    ],
    [
      "dead instances of no serving proxy (an orphan, another operator's) are not counted",
      [serving('a'), serving('b')],
      ['a', 'x', 'y', 'z'],
      { dead: 1, total: 2 },
    ],
    ['an asker not serving yet still counts itself', [serving('b')], ['a'], { dead: 1, total: 2 }],
  ])('%s', (_n, proxies, dead, want) => {
    expect(deadShare(proxies, new Set(dead), 'a')).toEqual(want);
  });
});

describe('the dead-instance hold: many reported dead at once hold, a few are replaced', () => {
  it.each<[string, DeadShare, number, RepairHold['kind']]>([
    ['1 of 8 dead: replaced at once', { dead: 1, total: 8 }, 20, 'go'],
    ['2 of 8 (25 %, over 20 %, but under 3): replaced', { dead: 2, total: 8 }, 20, 'go'],
    [`${MIN_INSTANCES_DEAD} of 8 (over 20 %): held`, { dead: 3, total: 8 }, 20, 'hold'],
    ['6 of 8: held', { dead: 6, total: 8 }, 20, 'hold'],
    ['8 of 8: held', { dead: 8, total: 8 }, 20, 'hold'],
    ['3 of 3 (a small fleet all dead): held', { dead: 3, total: 3 }, 20, 'hold'],
    ['20 of 100 (not more than 20 %): replaced', { dead: 20, total: 100 }, 20, 'go'],
    ['21 of 100: held', { dead: 21, total: 100 }, 20, 'hold'],
    ["6 of 8 at 80 %: replaced (the flag is the repair hold's)", { dead: 6, total: 8 }, 80, 'go'],
    ['7 of 8 at 80 %: held', { dead: 7, total: 8 }, 80, 'hold'],
    ['8 of 8 at 100 %: off', { dead: 8, total: 8 }, 100, 'go'],
  ])('%s', (_n, share, percent, want) => {
    expect(deadInstanceHold({ provider: 'mock', share, maxUnhealthyPercent: percent }).kind).toBe(want);
  });

  it('names its reason (a closed one, in the metric), the count and what to check', () => {
    const hold = deadInstanceHold({
      provider: 'mock',
      share: { dead: 6, total: 8 },
      maxUnhealthyPercent: 20,
    });
    expect(hold).toMatchObject({ kind: 'hold', reason: 'ProviderReportsInstancesDead' });
    expect(REPAIR_HOLD_REASONS).toContain('ProviderReportsInstancesDead');
    if (hold.kind !== 'hold') throw new Error('held');
    expect(hold.message).toContain('reports 6 of its 8 serving proxies');
    expect(hold.message).toMatch(/console and status page/);
  });
});

describe('the state machine keeps an instance reported dead while the hold says so', () => {
  const proxy = stateMachineProxy({
    annotations: { [SPEC_HASH_ANNOTATION]: 'h1' },
    status: {
      phase: 'Ready',
      providerID: 'i-1',
      ip: '10.0.0.7',
      observedGeneration: 1,
      conditions: [
        {
          type: CONDITION_PROVISIONED,
          status: 'True',
          reason: 'InstanceRunning',
          message: '',
          lastTransitionTime: ago(600),
        },
        {
          type: CONDITION_HEALTHY,
          status: 'True',
          reason: 'ProbeSucceeded',
          message: 'm',
          lastTransitionTime: ago(600),
        },
      ],
    },
  });
  const held = deadInstanceHold({ provider: 'mock', share: { dead: 6, total: 8 }, maxUnhealthyPercent: 20 });
  const step = (state: InstanceState, deadHold?: RepairHold): Step =>
    decide({
      proxy,
      desiredHash: 'h1',
      observation: { kind: 'found', instance: stateMachineInstance(state) },
      autopilot: { now: NOW, unhealthyAfterSeconds: 60 },
      deadHold,
    });
  const summary = (s: Step) => ({
    action: s.action.type,
    reason: s.status?.provisioned?.reason,
    held: s.repairHeld,
    starts: s.startsReplacement,
  });
  it.each<[string, InstanceState, RepairHold | undefined, ReturnType<typeof summary>]>([
    [
      'Stopped, held: kept, RepairHeld',
      'Stopped',
      held,
      { action: 'none', reason: 'RepairHeld', held: 'ProviderReportsInstancesDead', starts: undefined },
    ],
    [
      'Terminated, held: kept, RepairHeld',
      'Terminated',
      held,
      { action: 'none', reason: 'RepairHeld', held: 'ProviderReportsInstancesDead', starts: undefined },
    ],
    [
      'Stopped, the hold says go: replaced',
      'Stopped',
      { kind: 'go' },
      { action: 'delete', reason: 'Replacing', held: undefined, starts: 'InstanceDead' },
    ],
    [
      'Stopped, no hold asked: replaced (as before)',
      'Stopped',
      undefined,
      { action: 'delete', reason: 'Replacing', held: undefined, starts: 'InstanceDead' },
    ],
    [
      'Running again, a stale hold: served on',
      'Running',
      held,
      { action: 'none', reason: 'InstanceRunning', held: undefined, starts: undefined },
    ],
  ])('%s', (_n, state, deadHold, want) => {
    expect(summary(step(state, deadHold))).toEqual(want);
  });

  it('the held message says the instance is kept, with a Warning Event', () => {
    const s = step('Stopped', held);
    expect(s.status?.provisioned?.message).toMatch(/reports 6 of its 8 .*; instance i-1 is kept$/);
    expect(s.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'RepairHeld' })]);
  });
});

describe('the census: one listing per provider, read again when it does not show the asker dead', () => {
  const proxyOn = (name: string, id: string): Proxy => {
    const p = stateMachineProxy({
      status: { phase: 'Ready', providerID: id, ip: '10.0.0.1', observedGeneration: 1 },
    });
    return { ...p, metadata: { ...p.metadata, name, uid: name } };
  };
  const ids = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
  const cache = {
    list: () => ids.map((id) => proxyOn(`p-${id}`, id)) as KubeObject[],
  } as unknown as CacheReader;
  let dead = new Set<string>();
  let lists = 0;
  const api = {
    listByTag: () => {
      lists++;
      return Promise.resolve(
        ids.map((id) => stateMachineInstance(dead.has(id) ? 'Stopped' : 'Running', { id })),
      );
    },
  } as unknown as Provider;
  const provider = { name: 'mock', api, ownerID: 'o' };
  const ask = (census: DeadInstanceCensus, id: string) =>
    census
      .hold(provider, { ...stateMachineInstance('Stopped'), id } as Instance, cache, 20)
      .then((h) => h.kind);

  it("six dying one after another inside a listing's age: the first is alone, the others are held", async () => {
    const census = new DeadInstanceCensus(() => 0);
    dead = new Set(['a']);
    expect(await ask(census, 'a')).toBe('go');
    dead = new Set(['a', 'b', 'c', 'd', 'e', 'f']);
    expect(await Promise.all(['b', 'c', 'd', 'e', 'f'].map((id) => ask(census, id)))).toEqual(
      Array(5).fill('hold'),
    );
    expect(lists).toBeLessThanOrEqual(6);
    const before = lists;
    expect(await ask(census, 'c')).toBe('hold');
    expect(lists).toBe(before); // the listing shows it dead: no new list
  });

  it('a listing that fails is not kept', async () => {
    const census = new DeadInstanceCensus(() => 0);
    const failing = {
      ...provider,
      api: { listByTag: () => Promise.reject(new Error('503')) } as unknown as Provider,
    };
    await expect(census.hold(failing, stateMachineInstance('Stopped'), cache, 20)).rejects.toThrow('503');
    dead = new Set(['i-1']);
    expect(await census.hold(provider, stateMachineInstance('Stopped'), cache, 20)).toEqual({ kind: 'go' });
  });
});
