import { downWhen, twoProbeSites } from './probe-site.js';
import { Watch } from '@kubernetes/client-node';
import type { Proxy } from '../../crds/proxy-types.js';
import { DeleteRecordingProvider } from './delegating-provider.js';
import { condition, everyProxy, isReady, managedSpec, operatorSuite } from './operator-fixture.js';

// Two teams share one provider, each probing its own site. Team A's site goes down: its 3
// proxies turn Unhealthy, held by the direct check (ProbeTargetUnreachable). Team B then rolls
// out a new image to its 4 proxies (--max-unavailable 2). A tester found B's rollout frozen
// for as long as A's site was down: a rollout slot counted A's Unhealthy proxies as out of
// service, 3 of a cap of 2, so every B proxy waited (ReplacementPending) though nothing of B's
// was out. Failures explained by their own target (it fails directly) say nothing of B's
// rollout, as the repair hold already rules; B's rollout goes on, still 2 at a time.

const CAP = 2;
const deletes: string[] = [];
let aDown = false;
const sites = twoProbeSites(downWhen(() => aDown));

const suite = operatorSuite('rollout-beside-down-target', {
  providers: (mock) => ({ mock: new DeleteRecordingProvider(mock, deletes) }),
  settings: {
    replaceUnhealthyAfterSeconds: 5,
    repairHoldUnhealthyPercent: 20,
    maxUnavailable: { default: { kind: 'count', value: CAP }, byProvider: {} },
    driftCheckSeconds: 1,
  },
});
const { api, kc, namespace } = suite;
const teamA = ['team-a-0', 'team-a-1', 'team-a-2'];
const teamB = ['team-b-0', 'team-b-1', 'team-b-2', 'team-b-3'];

/** Between instances, or on a new one not yet seen Ready (status.replacement is cleared on Ready). */
const replacing = (p: Proxy) => p.status?.phase === 'Provisioning' || p.status?.replacement !== undefined;

describe("one team's down site does not freeze another team's rollout", () => {
  it(`team A held by its down site; team B's new image rolls out, ${CAP} at a time`, async () => {
    const base = managedSpec(suite.target);
    const spec = (probeURL: string) => ({ ...base, healthCheck: { ...base.healthCheck, probeURL } });
    await Promise.all([
      ...teamA.map((n) => api.create(n, { spec: spec(sites.urlA) })),
      ...teamB.map((n) => api.create(n, { spec: spec(sites.urlB) })),
    ]);
    const ready = await everyProxy(api, [...teamA, ...teamB], 'all Ready', isReady, 90_000);
    const first = new Map(ready.map((p) => [p.metadata.name, p.status!.providerID!]));

    aDown = true;
    await everyProxy(
      api,
      teamA,
      'team A held: its site fails directly',
      (p) => condition(p, 'Provisioned')?.reason === 'RepairHeld',
      45_000,
    );

    const state = new Map<string, boolean>();
    let maxReplacing = 0;
    const watching = await new Watch(kc).watch(
      `/apis/crawl.example.com/v1alpha1/namespaces/${namespace}/proxies`,
      {},
      (_t, p: Proxy) => {
        state.set(p.metadata.name, replacing(p));
        maxReplacing = Math.max(maxReplacing, [...state.values()].filter(Boolean).length);
      },
      () => {},
    );
    try {
      for (const n of teamB) await api.patchSpec(n, { placement: { ...base.placement, image: 'squid-2' } });
      await everyProxy(
        api,
        teamB,
        'team B on new instances and Ready, team A still down',
        (p) => isReady(p) && p.status?.providerID !== first.get(p.metadata.name),
        60_000,
      ).catch(async (err: Error) => {
        // What team B waits on, in the failure (it was ReplacementPending, counting team A).
        const waits = (await Promise.all(teamB.map((n) => api.get(n)))).map(
          (p) => `${p.metadata.name}: ${condition(p, 'Provisioned')?.message}`,
        );
        throw new Error(`${err.message}\n${waits.join('\n')}`);
      });
    } finally {
      watching.abort();
    }
    process.stdout.write(
      `[rollout-beside-down-target] cap ${CAP}: at most ${maxReplacing} being replaced at once; ${deletes.length} deletes\n`,
    );
    expect(aDown).toBe(true);
    expect(maxReplacing).toBeLessThanOrEqual(CAP);
    // Team A's proxies kept their instances: held, not replaced.
    expect(deletes.sort()).toEqual(teamB.map((n) => first.get(n)).sort());
    for (const p of await Promise.all(teamA.map((n) => api.get(n)))) {
      expect(p.status?.providerID).toBe(first.get(p.metadata.name));
      expect(condition(p, 'Provisioned')?.reason).toBe('RepairHeld');
    }
  }, 240_000);
});
