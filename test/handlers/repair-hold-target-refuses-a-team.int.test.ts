import { twoProbeSites } from './probe-site.js';
import { DeleteRecordingProvider } from './delegating-provider.js';
import {
  condition,
  eventsOnceThere,
  eventually,
  everyProxy,
  isReady,
  managedSpec,
  operatorSuite,
} from './operator-fixture.js';

// A probe target that refuses one team's proxies holds that team's repairs, though the team is
// a small part of its provider. 20 proxies on one provider: 16 probe site B, 4 (one team)
// probe site A. Site A starts answering 403 to requests through the proxies (it blocks their
// addresses) and keeps answering the operator directly. Every proxy probing A failed together:
// the cause is the target, and new instances would be refused too. Held (TargetGroupUnhealthy)
// past the grace, nothing deleted; once A lets them in again they are Ready on their own
// instances. (4 of 20 is not more than 20% of the provider: the provider-wide rule alone once
// replaced all 4 at the same moment, and their replacements came up Unhealthy too.)

const GRACE = 5;
const deletes: string[] = [];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let blockProxies = false;
// The mock's instances connect from their own loopback addresses, never 127.0.0.1 (the
// operator's direct check does): "through a proxy" is visible to the site.
const sites = twoProbeSites((req, res) => {
  if (blockProxies && req.socket.remoteAddress !== '127.0.0.1') {
    res.writeHead(403).end();
    return;
  }
  res.writeHead(204).end();
});

const suite = operatorSuite('repair-hold-target-refuses-team', {
  providers: (mock) => ({ mock: new DeleteRecordingProvider(mock, deletes) }),
  settings: {
    replaceUnhealthyAfterSeconds: GRACE,
    repairHoldUnhealthyPercent: 20,
    maxUnavailable: { default: { kind: 'percent', value: 25 }, byProvider: {} },
    driftCheckSeconds: 1,
  },
});
const { api, kc, namespace } = suite;
const team = Array.from({ length: 4 }, (_, i) => `team-a-${i}`);
const others = Array.from({ length: 16 }, (_, i) => `other-${i}`);

async function heldCount(reason: string): Promise<number> {
  const m = await suite.op.registry.getSingleMetric('proxy_operator_repairs_held')?.get();
  return m?.values.filter((v) => v.labels.reason === reason).reduce((a, v) => a + v.value, 0) ?? 0;
}

describe('a repair hold judges each probe target on its own', () => {
  it('a site refusing one team of 4 (of 20) through the proxies holds the team past its grace; none replaced', async () => {
    const base = managedSpec(suite.target);
    const spec = (probeURL: string) => ({ ...base, healthCheck: { ...base.healthCheck, probeURL } });
    await Promise.all([
      ...team.map((n) => api.create(n, { spec: spec(sites.urlA) })),
      ...others.map((n) => api.create(n, { spec: spec(sites.urlB) })),
    ]);
    const ready = await everyProxy(api, [...team, ...others], 'all 20 Ready', isReady, 90_000);
    const instances = new Map(ready.map((p) => [p.metadata.name, p.status!.providerID!]));

    blockProxies = true;
    await everyProxy(api, team, 'the team Unhealthy', (p) => p.status?.phase === 'Unhealthy', 30_000);
    const held = await everyProxy(
      api,
      team,
      'the team held (TargetGroupUnhealthy)',
      (p) => condition(p, 'Provisioned')?.reason === 'RepairHeld',
      30_000,
    );
    expect(await heldCount('TargetGroupUnhealthy')).toBe(team.length);
    const message = condition(held[0], 'Provisioned')!.message;
    expect(message).toContain(
      `of provider mock's proxies probing ${new URL(sites.urlA).origin} are Unhealthy at once`,
    );
    expect(message).toContain('though it answers the operator directly');
    await eventsOnceThere(kc, namespace, team[0], 'RepairHeld');

    // Well past the grace: still held, nothing deleted, every proxy on its first instance.
    const since = Math.max(...held.map((p) => Date.parse(condition(p, 'Healthy')!.lastTransitionTime)));
    await sleep(Math.max(0, since + (GRACE + 6) * 1000 - Date.now()));
    expect(deletes).toEqual([]);
    for (const p of await Promise.all([...team, ...others].map((n) => api.get(n)))) {
      expect(p.status?.providerID).toBe(instances.get(p.metadata.name));
      expect(p.status?.replacement).toBeUndefined();
    }
    for (const p of await Promise.all(others.map((n) => api.get(n)))) expect(isReady(p)).toBe(true);

    // The site lets the proxies in again: the team recovers on its own instances.
    blockProxies = false;
    await everyProxy(api, team, 'the team Ready again', isReady, 30_000);
    await eventually('no repair held', async () =>
      (await heldCount('TargetGroupUnhealthy')) === 0 ? true : undefined,
    );
    expect(deletes).toEqual([]);
  }, 240_000);
});
