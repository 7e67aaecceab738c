import {
  groupExplainsFleet,
  holdAfterLift,
  MIN_TARGET_GROUP_UNHEALTHY,
  repairHold,
  sharesFor,
  tallyByProbeURL,
  targetGroup,
  teamWithin,
  unhealthyAllowed,
  type HoldMemory,
  type ProbeURLShare,
  type RepairHold,
  type RepairHoldInputs,
  type Share,
  type TargetReading,
} from '../../handlers/repair-hold.js';
import { decide } from './decide.js';
import { SPEC_HASH_ANNOTATION } from '../../crds/proxy-types.js';
import type { Instance } from '../../providers/contract.js';
import { ago, NOW, stateMachineProxy } from './state-machine-proxy.js';

// Issue 44 item 2: a shared cause never replaces the fleet. The decision, as a table.

/** One namespace: its part of every share is the whole share (as before teams were judged). */
const oneTeam = (s: { fleet: Share; group: Share }) => ({ ...s, team: { fleet: s.fleet, group: s.group } });
const base: RepairHoldInputs = {
  provider: 'mock',
  namespace: 'crawl',
  probeURL: 'https://target.example/generate_204',
  target: { kind: 'reachable' },
  ...oneTeam({ fleet: { unhealthy: 1, total: 20 }, group: { unhealthy: 1, total: 20 } }),
  maxUnhealthyPercent: 20,
};
/** The whole fleet probes this proxy's target: the group is the fleet. */
const whole = (unhealthy: number, total = 20) =>
  oneTeam({ fleet: { unhealthy, total }, group: { unhealthy, total } });
/** A group of `total` (`unhealthy` of them Unhealthy) in a healthy provider of 100. */
const team = (unhealthy: number, total: number) =>
  oneTeam({ fleet: { unhealthy, total: 100 }, group: { unhealthy, total } });

const outcome = (hold: RepairHold) => (hold.kind === 'go' ? 'go' : hold.reason);

describe('repairHold: may an Unhealthy proxy past its grace be replaced now?', () => {
  it.each<[string, Partial<RepairHoldInputs>, string]>([
    ['one dead proxy of 20, the target answering directly: repair', {}, 'go'],
    ['4 of 20 Unhealthy (20%, not more): repair', whole(4), 'go'],
    ['5 of 20 Unhealthy (more than 20%): hold, the fleet looks hit by one cause', whole(5), 'FleetUnhealthy'],
    ['20 of 20 Unhealthy: hold', whole(20), 'FleetUnhealthy'],
    [
      'the target fails directly, one proxy Unhealthy: hold, the proxy is not the cause',
      { target: { kind: 'unreachable', message: 'connect ECONNREFUSED' } },
      'ProbeTargetUnreachable',
    ],
    [
      'the target fails directly and the fleet is down: the direct check names the cause',
      { target: { kind: 'unreachable', message: 'timeout' }, ...whole(20) },
      'ProbeTargetUnreachable',
    ],
    [
      'the target not checked yet (a new term): hold until it is',
      { target: { kind: 'unknown' } },
      'ProbeTargetUnchecked',
    ],
    [
      'the target inside, never fetched directly (providers config external:): the counting rules decide, one dead proxy repaired',
      { target: { kind: 'refused', message: 'endpoint refused: 127.0.0.1 is in the loopback range' } },
      'go',
    ],
    [
      'the target inside, never fetched directly, the fleet down: the provider rule holds',
      { target: { kind: 'refused', message: 'endpoint refused' }, ...whole(20) },
      'FleetUnhealthy',
    ],
    ['a fleet of 1, its one proxy dead: repair (at least one may be)', whole(1, 1), 'go'],
    ['a fleet of 2, both dead: hold (the provider rule)', whole(2, 2), 'FleetUnhealthy'],
    ['the rules off (100%): 20 of 20 repaired', { ...whole(20), maxUnhealthyPercent: 100 }, 'go'],
    ['the rules off (100%): a whole team of 4 repaired', { ...team(4, 4), maxUnhealthyPercent: 100 }, 'go'],
    ['0%: still one at a time', { ...whole(1), maxUnhealthyPercent: 0 }, 'go'],
    ['0%: two at once hold', { ...whole(2), maxUnhealthyPercent: 0 }, 'FleetUnhealthy'],
    [
      'the provider and the group both over: the provider-wide rule names it (a provider outage)',
      whole(10),
      'FleetUnhealthy',
    ],
  ])('%s', (_what, change, want) => {
    expect(outcome(repairHold({ ...base, ...change }))).toBe(want);
  });

  // The group rule: the proxies probing one target (its origin), judged alone, so a target
  // refusing one team holds the team however small a part of the provider it is; and at least
  // MIN_TARGET_GROUP_UNHEALTHY (3) Unhealthy, so a small group's dead proxies are repaired.
  it.each<[string, Partial<RepairHoldInputs>, string]>([
    ['a group of 1, its proxy dead: repair', team(1, 1), 'go'],
    ['a group of 2, one dead: repair', team(1, 2), 'go'],
    ['a group of 2, both dead: repair (two deaths at once happen; fewer than 3)', team(2, 2), 'go'],
    ['a group of 3, 2 dead: repair (fewer than 3)', team(2, 3), 'go'],
    ['a group of 3, all dead: hold', team(3, 3), 'TargetGroupUnhealthy'],
    ['a team of 4 of 100, all failed together: hold', team(4, 4), 'TargetGroupUnhealthy'],
    [
      'a team of 4 of 20 (20%: the provider rule alone let it go), all failed: hold',
      oneTeam({ fleet: { unhealthy: 4, total: 20 }, group: { unhealthy: 4, total: 4 } }),
      'TargetGroupUnhealthy',
    ],
    ['a group of 5, one dead: repair', team(1, 5), 'go'],
    ['a group of 10, 2 dead (20%): repair', team(2, 10), 'go'],
    ['a group of 10, 3 dead (30%, 3): hold', team(3, 10), 'TargetGroupUnhealthy'],
    ['a group of 20, 4 dead (20%): repair', team(4, 20), 'go'],
    ['a group of 20, 5 dead: hold', team(5, 20), 'TargetGroupUnhealthy'],
    ['a team of 20 of 100, all dead: hold', team(20, 20), 'TargetGroupUnhealthy'],
    ['at 50%: a group of 10, 5 dead: repair', { ...team(5, 10), maxUnhealthyPercent: 50 }, 'go'],
    [
      'at 50%: a group of 10, 6 dead: hold',
      { ...team(6, 10), maxUnhealthyPercent: 50 },
      'TargetGroupUnhealthy',
    ],
  ])('%s', (_what, change, want) => {
    expect(outcome(repairHold({ ...base, ...change }))).toBe(want);
  });

  // Teams share a provider; a team is a namespace. A counting rule holds a proxy only if its
  // namespace's part of the share is over the percentage too (teamWithin: no floor of one, so
  // a part too small to allow one proxy follows the wider verdict). Found from outside: team
  // A's site refusing A's 5 proxies (5 of 10) held team B's one dead proxy as FleetUnhealthy.
  /** A provider (or group) share, and the asking proxy's namespace's part of it, as [unhealthy, total]. */
  const split = (
    fleet: [number, number],
    mine: [number, number],
    group: [number, number] = mine,
    mineInGroup: [number, number] = group,
  ) => ({
    fleet: { unhealthy: fleet[0], total: fleet[1] },
    group: { unhealthy: group[0], total: group[1] },
    team: {
      fleet: { unhealthy: mine[0], total: mine[1] },
      group: { unhealthy: mineInGroup[0], total: mineInGroup[1] },
    },
  });
  it.each<[string, Partial<RepairHoldInputs>, string]>([
    ["B's one dead of 5, A's 5 refused by A's site (6 of 10): repair B's", split([6, 10], [1, 5]), 'go'],
    ["B's one dead of 15, A's 5 refused (6 of 20): repair B's", split([6, 20], [1, 15]), 'go'],
    [
      "A's own proxies in that case (5 of its 5, all probing A's site): held as the site's doing",
      split([6, 10], [5, 5], [5, 5], [5, 5]),
      'TargetGroupUnhealthy',
    ],
    ['the provider down: every team over, B 5 of 5: hold', split([10, 10], [5, 5]), 'FleetUnhealthy'],
    ['the provider down: a team of 2, both dead: hold', split([12, 12], [2, 2]), 'FleetUnhealthy'],
    [
      'a team of 4 (too few for 20% to allow one), 1 dead, the provider over: follows the provider, hold',
      split([6, 10], [1, 4]),
      'FleetUnhealthy',
    ],
    [
      'a team of 1, dead, the provider over: follows the provider, hold',
      split([6, 10], [1, 1]),
      'FleetUnhealthy',
    ],
    ['a team of 10, 2 dead (20%), the provider over: repair', split([8, 20], [2, 10]), 'go'],
    ['a team of 10, 3 dead (30%), the provider over: hold', split([8, 20], [3, 10]), 'FleetUnhealthy'],
    [
      'the team over but the provider not: the team share alone holds nothing',
      split([3, 100], [3, 5], [3, 100], [3, 5]),
      'go',
    ],
    [
      "one site probed by two teams refuses A's 10: B's one dead of its 10 there is repaired",
      split([11, 40], [1, 20], [11, 20], [1, 10]),
      'go',
    ],
    [
      'that site refusing both teams: B 4 of its 10 there: hold (the group)',
      split([14, 40], [4, 20], [14, 20], [4, 10]),
      'TargetGroupUnhealthy',
    ],
    [
      'a team of 3 probing that site, 1 dead: too few to judge apart, follows the group: hold',
      split([11, 100], [1, 3], [11, 13], [1, 3]),
      'TargetGroupUnhealthy',
    ],
    [
      'at 50%: a team of 2, 1 dead, the provider over: repair',
      { ...split([6, 10], [1, 2]), maxUnhealthyPercent: 50 },
      'go',
    ],
    ['the rules off (100%)', { ...split([10, 10], [5, 5]), maxUnhealthyPercent: 100 }, 'go'],
  ])('%s', (_what, change, want) => {
    expect(outcome(repairHold({ ...base, ...change }))).toBe(want);
  });

  // Which reason, when both counting rules hold: the one the evidence names. Found from
  // outside: team A's site refusing A's 5 proxies (403 through them, 204 directly) held them as
  // FleetUnhealthy, and its runbook sent the SRE to the provider's network; B's 5 proxies,
  // probing elsewhere, were fine. The group's reason when the rest of the provider is within
  // the percentage (groupExplainsFleet), else the provider's.
  it.each<[string, Partial<RepairHoldInputs>, string]>([
    [
      "A's site refuses A's 5, B's 5 elsewhere all Ready: the site",
      split([5, 10], [5, 5]),
      'TargetGroupUnhealthy',
    ],
    [
      "the same with one of B's dead by chance (1 of 5, within): still the site",
      split([6, 10], [5, 5]),
      'TargetGroupUnhealthy',
    ],
    [
      'one team, its 10 of 20 probing one site refused, the other 10 (other sites) Ready: the site',
      oneTeam({ fleet: { unhealthy: 10, total: 20 }, group: { unhealthy: 10, total: 10 } }),
      'TargetGroupUnhealthy',
    ],
    ["the rest over too (B's 2 of 5 dead at once): the provider", split([7, 10], [5, 5]), 'FleetUnhealthy'],
    ['the provider down, both teams failing: the provider', split([10, 10], [5, 5]), 'FleetUnhealthy'],
    [
      'the rest too few for the percentage to allow one (1 of 3 dead): the provider',
      split([6, 8], [5, 5]),
      'FleetUnhealthy',
    ],
    [
      'no proxy outside the group (the whole provider probes one site): nothing tells, the provider',
      whole(10),
      'FleetUnhealthy',
    ],
    [
      'the group under 3 Unhealthy (no group hold): the provider, whatever the rest',
      oneTeam({ fleet: { unhealthy: 2, total: 4 }, group: { unhealthy: 2, total: 2 } }),
      'FleetUnhealthy',
    ],
  ])('%s', (_what, change, want) => {
    expect(outcome(repairHold({ ...base, ...change }))).toBe(want);
  });

  it.each<[string, Share, Share, number, boolean]>([
    ['the rest 0 of 5', { unhealthy: 5, total: 10 }, { unhealthy: 5, total: 5 }, 20, true],
    ['the rest 1 of 5 (20 %)', { unhealthy: 6, total: 10 }, { unhealthy: 5, total: 5 }, 20, true],
    ['the rest 2 of 5', { unhealthy: 7, total: 10 }, { unhealthy: 5, total: 5 }, 20, false],
    ['the rest 1 of 3 (no floor of one)', { unhealthy: 6, total: 8 }, { unhealthy: 5, total: 5 }, 20, false],
    ['the rest 0 of 1', { unhealthy: 5, total: 6 }, { unhealthy: 5, total: 5 }, 20, true],
    ['no rest', { unhealthy: 5, total: 5 }, { unhealthy: 5, total: 5 }, 20, false],
    ['the rest 1 of 2 at 50 %', { unhealthy: 6, total: 7 }, { unhealthy: 5, total: 5 }, 50, true],
  ])('groupExplainsFleet: %s', (_what, fleet, group, percent, want) => {
    expect(groupExplainsFleet(fleet, group, percent)).toBe(want);
  });

  it.each<[number, number, number, boolean]>([
    [20, 1, 5, true],
    [20, 2, 5, false],
    [20, 1, 4, false],
    [20, 1, 1, false],
    [20, 0, 1, true],
    [20, 4, 20, true],
    [50, 1, 2, true],
    [0, 1, 100, false],
  ])(
    'at %i%%, %i Unhealthy of a namespace of %i: within on its own %s',
    (percent, unhealthy, total, want) => {
      expect(teamWithin({ unhealthy, total }, percent)).toBe(want);
    },
  );

  it('the messages name the cause and the flag, and carry no counts (one status write per hold)', () => {
    const fleet = repairHold({ ...base, ...whole(5) });
    expect(fleet).toMatchObject({ kind: 'hold' });
    expect(fleet.kind === 'hold' && fleet.message).toBe(
      "repair held: more than 20% of provider mock's proxies are Unhealthy at once, namespace crawl's too (or too few of them to judge apart) (--repair-hold-unhealthy-percent; proxies whose probe target fails directly not counted): a shared cause is likelier than that many dead proxies",
    );
    const group = repairHold({ ...base, ...team(4, 4) });
    expect(group.kind === 'hold' && group.message).toBe(
      "repair held: more than 20% (and at least 3) of provider mock's proxies probing https://target.example are Unhealthy at once, namespace crawl's too (or too few of them to judge apart) (--repair-hold-unhealthy-percent), though it answers the operator directly: the target refusing them is likelier than that many dead proxies, and it would refuse new instances too",
    );
    expect(repairHold({ ...base, ...team(5, 5) })).toEqual(group);
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

  it('a group needs at least 3 Unhealthy', () => {
    expect(MIN_TARGET_GROUP_UNHEALTHY).toBe(3);
  });
});

describe('targetGroup: proxies share a target by its origin', () => {
  it.each([
    ['https://site.example/generate_204', 'https://site.example'],
    ['https://site.example/other?q=1', 'https://site.example'],
    ['https://SITE.example:443/x', 'https://site.example'],
    ['https://site.example:8443/x', 'https://site.example:8443'],
    ['http://site.example/x', 'http://site.example'],
    ['http://127.0.0.1:4001/generate_204', 'http://127.0.0.1:4001'],
    ['http://127.0.0.1:4002/generate_204', 'http://127.0.0.1:4002'],
    ['not a url', 'not a url'],
  ])('%s: %s', (url, want) => {
    expect(targetGroup(url)).toBe(want);
  });
});

describe('sharesFor: the counts each rule judges, failures already explained left out', () => {
  const A = 'https://a.example/generate_204';
  const A2 = 'https://a.example/status';
  const B = 'https://b.example/generate_204';
  const C = 'https://c.example/generate_204';
  const readings =
    (down: readonly string[], unknown: readonly string[] = []) =>
    (url: string): TargetReading =>
      down.includes(url)
        ? { kind: 'unreachable', message: 'connect ECONNREFUSED' }
        : unknown.includes(url)
          ? { kind: 'unknown' }
          : { kind: 'reachable' };
  const s = (probeURL: string, unhealthy: number, total: number, namespace = 'crawl'): ProbeURLShare => ({
    probeURL,
    namespace,
    unhealthy,
    total,
  });

  it.each<
    [
      string,
      ProbeURLShare[],
      string,
      (url: string) => TargetReading,
      { fleet: [number, number]; group: [number, number] },
    ]
  >([
    [
      'nothing down: the provider counts all, the group its own URL',
      [s(A, 2, 5), s(B, 1, 5)],
      B,
      readings([]),
      { fleet: [3, 10], group: [1, 5] },
    ],
    [
      "another team's target down: its proxies leave both counts (the two-teams outage)",
      [s(A, 5, 5), s(B, 1, 5)],
      B,
      readings([A]),
      { fleet: [1, 5], group: [1, 5] },
    ],
    [
      'two pages of one site are one group',
      [s(A, 2, 3), s(A2, 2, 2), s(B, 0, 15)],
      A,
      readings([]),
      { fleet: [4, 20], group: [4, 5] },
    ],
    [
      "one page of the site down directly: that page's proxies leave the group, the other page's stay",
      [s(A, 3, 3), s(A2, 1, 4), s(B, 0, 13)],
      A2,
      readings([A]),
      { fleet: [1, 17], group: [1, 4] },
    ],
    [
      'an unchecked target still counts (the safe side)',
      [s(A, 4, 4), s(B, 1, 16)],
      B,
      readings([], [A]),
      { fleet: [5, 20], group: [1, 16] },
    ],
    [
      'every other target down: the group and the provider are what is left',
      [s(A, 5, 5), s(C, 5, 5), s(B, 2, 10)],
      B,
      readings([A, C]),
      { fleet: [2, 10], group: [2, 10] },
    ],
  ])('%s', (_what, byURL, probeURL, target, want) => {
    const { fleet, group } = sharesFor(byURL, probeURL, target, 'crawl');
    expect({ fleet: [fleet.unhealthy, fleet.total], group: [group.unhealthy, group.total] }).toEqual(want);
  });

  it('the two reproductions end-to-end: the dead B proxy is repaired, the refused team held', () => {
    // 5 A proxies, their target down; 5 B proxies, one dead.
    const twoTeams = sharesFor([s(A, 5, 5), s(B, 1, 5)], B, readings([A]), 'crawl');
    expect(outcome(repairHold({ ...base, probeURL: B, ...twoTeams }))).toBe('go');
    // 4 A proxies refused through the proxies (A answers directly), 16 B proxies fine.
    const refused = sharesFor([s(A, 4, 4), s(B, 0, 16)], A, readings([]), 'crawl');
    expect(outcome(repairHold({ ...base, probeURL: A, ...refused }))).toBe('TargetGroupUnhealthy');
    // The provider-wide outage: every proxy of every target Unhealthy, the targets up directly.
    const outage = sharesFor([s(A, 4, 4), s(B, 16, 16)], B, readings([]), 'crawl');
    expect(outcome(repairHold({ ...base, probeURL: B, ...outage }))).toBe('FleetUnhealthy');
  });

  it("splits each share by namespace: the asking proxy's team is its part of the provider and of the group", () => {
    const shares = sharesFor(
      [s(A, 5, 5, 'team-a'), s(B, 1, 5, 'team-b'), s(A2, 1, 3, 'team-b'), s(C, 3, 3, 'team-b')],
      B,
      readings([C]),
      'team-b',
    );
    expect(shares).toEqual({
      fleet: { unhealthy: 7, total: 13 },
      group: { unhealthy: 1, total: 5 },
      team: { fleet: { unhealthy: 2, total: 8 }, group: { unhealthy: 1, total: 5 } },
    });
  });
});

describe("tallyByProbeURL: the budget's cache tally, per probe URL and namespace", () => {
  it('counts proxies and Unhealthy ones per URL and namespace, in first-seen order', () => {
    expect(
      tallyByProbeURL([
        { probeURL: 'a', namespace: 'x', unhealthy: true },
        { probeURL: 'b', namespace: 'x', unhealthy: false },
        { probeURL: 'a', namespace: 'x', unhealthy: false },
        { probeURL: 'a', namespace: 'y', unhealthy: true },
      ]),
    ).toEqual([
      { probeURL: 'a', namespace: 'x', unhealthy: 1, total: 2 },
      { probeURL: 'b', namespace: 'x', unhealthy: 0, total: 1 },
      { probeURL: 'a', namespace: 'y', unhealthy: 1, total: 1 },
    ]);
    expect(tallyByProbeURL([])).toEqual([]);
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
