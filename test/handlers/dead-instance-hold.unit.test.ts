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
import type { Proxy } from '../../crds/proxy-types.js';
import type { Instance, InstanceState, Provider } from '../../providers/contract.js';
import { decide } from './decide.js';
import {
  NOW,
  readyStateMachineProxy,
  stateMachineInstance,
  stateMachineProxy,
} from './state-machine-proxy.js';

// A provider reporting most of its instances Stopped/Terminated at once deleted every one of
// them at once. Deleting is irreversible: many serving proxies reported dead at once hold, on
// the repair hold's percentage (and at least 3); a few are still replaced at once.

/** One namespace: its part of the share is the whole share (as before teams were judged). */
const oneTeam = (dead: number, total: number): DeadShare => ({ dead, total, team: { dead, total } });

describe('how many serving proxies the provider reports dead', () => {
  const serving = (id: string, phase = 'Ready', namespace = 'crawl'): ServingView => ({
    providerID: id,
    phase,
    namespace,
  });
  it.each<[string, ServingView[], string[], DeadShare]>([
    ['the asker alone, the listing agreeing', [serving('a'), serving('b')], ['a'], oneTeam(1, 2)],
    [
      'the asker counts though the listing is older than its death',
      [serving('a'), serving('b')],
      [],
      oneTeam(1, 2),
    ],
    [
      '6 of 8 listed dead',
      ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((i) => serving(i)),
      ['a', 'b', 'c', 'd', 'e', 'f'],
      oneTeam(6, 8),
    ],
    [
      'Unhealthy proxies serve (judged by the probes)',
      [serving('a', 'Unhealthy'), serving('b', 'Unhealthy')],
      ['a', 'b'],
      oneTeam(2, 2),
    ],
    [
      'Pending, Provisioning or Failed ones never served: left out',
      [
        serving('a'),
        serving('b', 'Provisioning'),
        serving('c', 'Failed'),
        { providerID: undefined, phase: 'Pending', namespace: 'crawl' },
      ],
      ['a', 'b', 'c'],
      oneTeam(1, 1),
    ],
    [
      "dead instances of no serving proxy (an orphan, another operator's) are not counted",
      [serving('a'), serving('b')],
      ['a', 'x', 'y', 'z'],
      oneTeam(1, 2),
    ],
    ['an asker not serving yet still counts itself', [serving('b')], ['a'], oneTeam(1, 2)],
    [
      "two namespaces: the asker's part is its namespace's proxies",
      [serving('a'), serving('b'), serving('x', 'Ready', 'other'), serving('y', 'Unhealthy', 'other')],
      ['a', 'x', 'y'],
      { dead: 3, total: 4, team: { dead: 1, total: 2 } },
    ],
  ])('%s', (_n, proxies, dead, want) => {
    expect(deadShare(proxies, new Set(dead), 'a', 'crawl')).toEqual(want);
  });
});

describe('the dead-instance hold: many reported dead at once hold, a few are replaced', () => {
  it.each<[string, DeadShare, number, RepairHold['kind']]>([
    ['1 of 8 dead: replaced at once', oneTeam(1, 8), 20, 'go'],
    ['2 of 8 (25 %, over 20 %, but under 3): replaced', oneTeam(2, 8), 20, 'go'],
    [`${MIN_INSTANCES_DEAD} of 8 (over 20 %): held`, oneTeam(3, 8), 20, 'hold'],
    ['6 of 8: held', oneTeam(6, 8), 20, 'hold'],
    ['8 of 8: held', oneTeam(8, 8), 20, 'hold'],
    ['3 of 3 (a small fleet all dead): held', oneTeam(3, 3), 20, 'hold'],
    ['20 of 100 (not more than 20 %): replaced', oneTeam(20, 100), 20, 'go'],
    ['21 of 100: held', oneTeam(21, 100), 20, 'hold'],
    ["6 of 8 at 80 %: replaced (the flag is the repair hold's)", oneTeam(6, 8), 80, 'go'],
    ['7 of 8 at 80 %: held', oneTeam(7, 8), 80, 'hold'],
    ['8 of 8 at 100 %: off', oneTeam(8, 8), 100, 'go'],
  ])('%s', (_n, share, percent, want) => {
    expect(
      deadInstanceHold({ provider: 'mock', namespace: 'crawl', share, maxUnhealthyPercent: percent }).kind,
    ).toBe(want);
  });

  // Teams share a provider; a team is a namespace. As the repair hold: a share over the
  // percentage holds a dead instance only if its namespace's part is over too (teamWithin: a
  // part too small for the percentage to allow one follows the provider). Found from outside:
  // team A's 6 instances stopped (its zone's maintenance) held team B's one dead instance of 10.
  const split = (provider: [number, number], mine: [number, number]): DeadShare => ({
    dead: provider[0],
    total: provider[1],
    team: { dead: mine[0], total: mine[1] },
  });
  it.each<[string, DeadShare, number, RepairHold['kind']]>([
    ["B's one dead of 10, A's 6 of 6 stopped (7 of 16): replace B's", split([7, 16], [1, 10]), 20, 'go'],
    ["B's one dead of 5, A's 6 stopped (7 of 11): replace B's", split([7, 11], [1, 5]), 20, 'go'],
    ["A's own in that case (6 of its 6): held", split([7, 16], [6, 6]), 20, 'hold'],
    ['every team hit (an account suspended), B 5 of 5: held', split([11, 11], [5, 5]), 20, 'hold'],
    ['a team of 10, 2 dead (20 %), the provider over: replaced', split([8, 20], [2, 10]), 20, 'go'],
    ['a team of 10, 3 dead (30 %), the provider over: held', split([8, 20], [3, 10]), 20, 'hold'],
    [
      'a team of 4 (too few for 20 % to allow one), 1 dead, the provider over: follows it, held',
      split([7, 10], [1, 4]),
      20,
      'hold',
    ],
    ['a team of 1, dead, the provider over: follows it, held', split([7, 7], [1, 1]), 20, 'hold'],
    ['the team over but the provider not: nothing held', split([3, 100], [3, 5]), 20, 'go'],
    ['at 50 %: a team of 2, 1 dead, the provider over: replaced', split([8, 10], [1, 2]), 50, 'go'],
    ['the hold off (100 %)', split([11, 11], [5, 5]), 100, 'go'],
  ])('%s', (_n, share, percent, want) => {
    expect(
      deadInstanceHold({ provider: 'mock', namespace: 'team-b', share, maxUnhealthyPercent: percent }).kind,
    ).toBe(want);
  });

  it('names its reason (a closed one, in the metric), the count and what to check', () => {
    const hold = deadInstanceHold({
      provider: 'mock',
      namespace: 'crawl',
      share: oneTeam(6, 8),
      maxUnhealthyPercent: 20,
    });
    expect(hold).toMatchObject({ kind: 'hold', reason: 'ProviderReportsInstancesDead' });
    expect(REPAIR_HOLD_REASONS).toContain('ProviderReportsInstancesDead');
    if (hold.kind !== 'hold') throw new Error('held');
    expect(hold.message).toContain('reports 6 of its 8 serving proxies');
    expect(hold.message).toContain("6 of namespace crawl's 8");
    expect(hold.message).toMatch(/console and status page/);
  });
});

describe('the state machine keeps an instance reported dead while the hold says so', () => {
  const proxy = readyStateMachineProxy();
  const held = deadInstanceHold({
    provider: 'mock',
    namespace: 'ns',
    share: oneTeam(6, 8),
    maxUnhealthyPercent: 20,
  });
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
  const proxyOn = (name: string, id: string, namespace = 'ns'): Proxy => {
    const p = stateMachineProxy({
      status: { phase: 'Ready', providerID: id, ip: '10.0.0.1', observedGeneration: 1 },
    });
    return { ...p, metadata: { ...p.metadata, name, uid: name, namespace } };
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
      .hold(provider, { ...stateMachineInstance('Stopped'), id } as Instance, 'ns', cache, 20)
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

  it("counts the asker's namespace apart: another team's mass stop does not hold its lone dead instance", async () => {
    // 'ns' has a..h; 'other' has 5 more, one of them (o1) dead; 6 of ns's 8 stopped.
    const others = ['o1', 'o2', 'o3', 'o4', 'o5'];
    const two = {
      list: () => [
        ...ids.map((id) => proxyOn(`p-${id}`, id)),
        ...others.map((id) => proxyOn(id, id, 'other')),
      ],
    } as unknown as CacheReader;
    dead = new Set(['a', 'b', 'c', 'd', 'e', 'f', 'o1']);
    const census = new DeadInstanceCensus(() => 0);
    const own = (id: string) => ({ ...stateMachineInstance('Stopped'), id }) as Instance;
    expect((await census.hold(provider, own('o1'), 'other', two, 20)).kind).toBe('go');
    expect((await census.hold(provider, own('a'), 'ns', two, 20)).kind).toBe('hold');
  });

  it('a listing that fails is not kept', async () => {
    const census = new DeadInstanceCensus(() => 0);
    const failing = {
      ...provider,
      api: { listByTag: () => Promise.reject(new Error('503')) } as unknown as Provider,
    };
    await expect(census.hold(failing, stateMachineInstance('Stopped'), 'ns', cache, 20)).rejects.toThrow(
      '503',
    );
    dead = new Set(['i-1']);
    expect(await census.hold(provider, stateMachineInstance('Stopped'), 'ns', cache, 20)).toEqual({
      kind: 'go',
    });
  });
});
