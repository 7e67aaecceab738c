import { downWhen, twoProbeSites } from './probe-site.js';
import { DEAD_IP, Killable } from './killable-provider.js';
import {
  condition,
  eventually,
  everyProxy,
  isReady,
  managedSpec,
  operatorSuite,
} from './operator-fixture.js';

// A repair hold is judged on the failures nothing explains yet. One provider, two teams of 5
// proxies, each team probing its own site. Site A goes down for everyone: A's proxies are held
// by the direct check (ProbeTargetUnreachable). Meanwhile one of B's proxies really dies. Its
// site answers directly and through the 4 other B proxies, so it is replaced after its grace:
// A's proxies, already explained by their down target, do not make the provider look hit by a
// shared cause (they once held it as FleetUnhealthy for as long as A was down).

const PER_TEAM = 5;
const GRACE = 5;
const deletes: string[] = [];
let aDown = false;
const sites = twoProbeSites(downWhen(() => aDown));

let provider: Killable;
const suite = operatorSuite('repair-beside-down-target', {
  providers: (mock) => ({ mock: (provider = new Killable(mock, deletes)) }),
  settings: {
    replaceUnhealthyAfterSeconds: GRACE,
    repairHoldUnhealthyPercent: 20,
    maxUnavailable: { default: { kind: 'percent', value: 25 }, byProvider: {} },
    driftCheckSeconds: 1,
  },
});
const { api } = suite;
const teamA = Array.from({ length: PER_TEAM }, (_, i) => `team-a-${i}`);
const teamB = Array.from({ length: PER_TEAM }, (_, i) => `team-b-${i}`);

describe('a repair hold counts only failures nothing explains yet', () => {
  it("one team's probe target down does not hold the repair of another team's dead proxy", async () => {
    const base = managedSpec(suite.target);
    const spec = (probeURL: string) => ({ ...base, healthCheck: { ...base.healthCheck, probeURL } });
    await Promise.all([
      ...teamA.map((n) => api.create(n, { spec: spec(sites.urlA) })),
      ...teamB.map((n) => api.create(n, { spec: spec(sites.urlB) })),
    ]);
    const ready = await everyProxy(api, [...teamA, ...teamB], 'all Ready', isReady, 90_000);
    const instances = new Map(ready.map((p) => [p.metadata.name, p.status!.providerID!]));

    aDown = true;
    await provider.kill(instances.get(teamB[0])!);

    // Team A: held by the direct check (its site is down for the operator too).
    await everyProxy(
      api,
      teamA,
      'team A held: its site fails directly',
      (p) =>
        condition(p, 'Provisioned')?.reason === 'RepairHeld' &&
        (condition(p, 'Provisioned')?.message ?? '').includes(
          `the probe target ${sites.urlA} fails when the operator checks it directly`,
        ),
      45_000,
    );
    // Team B's dead proxy: replaced after its grace, Ready on a new instance, A still down.
    const replaced = await eventually(
      "team B's dead proxy replaced and Ready on a new instance",
      async () => {
        const p = await api.get(teamB[0]);
        return deletes.includes(instances.get(teamB[0])!) && isReady(p) && p.status?.ip !== DEAD_IP
          ? p
          : undefined;
      },
      60_000,
    );
    expect(replaced.status?.replacement).toBeUndefined();
    expect(aDown).toBe(true);
    expect(deletes).toEqual([instances.get(teamB[0])]);
    for (const p of await Promise.all(teamA.map((n) => api.get(n)))) {
      expect(p.status?.providerID).toBe(instances.get(p.metadata.name));
      expect(condition(p, 'Provisioned')?.reason).toBe('RepairHeld');
    }

    // Site A comes back: its proxies recover on their own instances.
    aDown = false;
    const back = await everyProxy(api, teamA, 'team A Ready again', isReady, 45_000);
    for (const p of back) expect(p.status?.providerID).toBe(instances.get(p.metadata.name));
    expect(deletes).toEqual([instances.get(teamB[0])]);
  }, 240_000);
});
