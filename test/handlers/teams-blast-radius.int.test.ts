import { createServer, type Server } from 'node:http';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Proxy } from '../../crds/proxy-types.js';
import { ControlPlane } from '../../framework/testing/control-plane.js';
import type { CreateRequest } from '../../providers/contract.js';
import { providerError } from '../../providers/errors.js';
import { MockProvider } from '../../providers/mock/mock-provider.js';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { ProxyApi } from '../crd/proxy-api.js';
import { CONTROL_PLANE_DIR_PREFIX } from '../harness/kube.js';
import { DelegatingProvider, instanceKey, StoppedReportingProvider } from './delegating-provider.js';
import { DEAD_IP, Killable } from './killable-provider.js';
import { listenForProbes } from './probe-site.js';
import {
  condition,
  createNamespace,
  eventsFor,
  eventually,
  everyProxy,
  isReady,
  mockProvider,
  quiet,
  startOperator,
  type RunningOperator,
} from './operator-fixture.js';

// Teams share one fleet: on the operator's side a team is a namespace. One operator watches
// every namespace (on a control plane of this suite's own: the shared one holds the other
// suites' Proxies), with the fleet's flags: --repair-hold-unhealthy-percent 20,
// --max-unavailable 2, a 5 s grace. What one team's trouble may do to another's:
//
// 1. Team A's site refuses A's proxies (403 through them, 204 to the operator directly): all 5
//    Unhealthy, 5 of the provider's 10. Team B's one dead proxy was held as FleetUnhealthy
//    (more than 20 % of the provider) for as long as A's site refused A. B's own 4 other
//    proxies are Ready: the cause does not reach B, so its dead proxy is replaced; A's stay
//    held. B's rollout of a new image goes on meanwhile (A's Unhealthy proxies took B's slots).
//    A cause that reaches B too (every B proxy dying) still holds B.
// 2. Team A's rollout of a bad image fails permanently (2 failed replacements hold A's 2
//    slots). Team B's rollout waited behind them (ReplacementBlocked, naming A's proxies, which
//    B can neither see nor fix) for as long as A left them. Now A's failures block A only, and
//    nothing B is shown names a proxy of A.
// 3. The provider reports 6 of team A's instances Stopped at once (its zone's maintenance):
//    held, none deleted (ProviderReportsInstancesDead). Team B's one instance reported Stopped
//    beside them (7 of the provider's 11) was held with them; B's other 4 are fine, so it is
//    replaced alone.

const GRACE = 5;
const CAP = 2;
const PER_TEAM = 5;

/** The mock, with deletes recorded; an image named "bad" is refused for good (a hopeless create). */
class BadImage extends DelegatingProvider {
  override async create(req: CreateRequest, signal?: AbortSignal): Promise<string> {
    if (req.placement.image === 'bad')
      throw providerError('Permanent', 'image "bad" does not exist', {
        provider: 'rollouts',
        operation: 'create',
      });
    return this.inner.create(req, signal);
  }
}

let cp: ControlPlane;
let kc: KubeConfig;
let op: RunningOperator;
let refusing = false;
let siteA: Server;
let siteB: Server;
let urlA = '';
let urlB = '';
const deletes: string[] = [];
const mock = mockProvider();
const rolloutsMock = new MockProvider('rollouts', { provisioningSeconds: 0.3, serveTraffic: true }, quiet);
const killable = new Killable(mock, deletes);
const stopDeletes: string[] = [];
const stopsMock = new MockProvider('stops', { provisioningSeconds: 0.3, serveTraffic: true }, quiet);
const stops = new StoppedReportingProvider(stopsMock, stopDeletes);

function spec(provider: string, probeURL: string, image = 'squid-1') {
  return {
    mode: 'Managed',
    provider,
    placement: { zone: 'local-a', machineType: 'small', image },
    attributes: { geo: 'local' },
    healthCheck: {
      probeURL,
      intervalSeconds: 2,
      timeoutSeconds: 1,
      failureThreshold: 1,
      successThreshold: 1,
    },
  };
}

const names = (team: string, n = PER_TEAM) => Array.from({ length: n }, (_, i) => `${team}-${i}`);
const provisioned = (p: Proxy) => condition(p, 'Provisioned');

beforeAll(async () => {
  // The mock's instances connect from their own loopback addresses, never 127.0.0.1 (the
  // operator's direct check does): "through a proxy" is visible to the site.
  siteA = createServer((req, res) => {
    if (refusing && req.socket.remoteAddress !== '127.0.0.1') {
      res.writeHead(403).end();
      return;
    }
    res.writeHead(204).end();
  });
  siteB = createServer((_req, res) => res.writeHead(204).end());
  urlA = await listenForProbes(siteA);
  urlB = await listenForProbes(siteB);
  cp = await ControlPlane.start({ dirPrefix: CONTROL_PLANE_DIR_PREFIX });
  kc = cp.kubeConfig();
  await installProxyCrd(kc, 60_000);
  for (const ns of ['team-a', 'team-b', 'roll-a', 'roll-b', 'dead-a', 'dead-b'])
    await createNamespace(kc, ns);
  const providers = { mock: killable, rollouts: new BadImage(rolloutsMock), stops };
  op = await startOperator(kc, providers, undefined, {
    replaceUnhealthyAfterSeconds: GRACE,
    repairHoldUnhealthyPercent: 20,
    maxUnavailable: { default: { kind: 'count', value: CAP }, byProvider: {} },
    driftCheckSeconds: 1,
  });
}, 180_000);

afterAll(async () => {
  await op?.stop();
  await mock.close();
  await rolloutsMock.close();
  await stopsMock.close();
  for (const s of [siteA, siteB]) {
    s?.closeAllConnections();
    await new Promise((resolve) => s?.close(resolve));
  }
  await cp?.stop();
});

describe("one team's trouble does not hold another team's repairs", () => {
  it("team A's site refusing A's 5 proxies (half the provider) does not hold team B's one dead proxy; B all dying does", async () => {
    const a = new ProxyApi(kc, 'team-a');
    const b = new ProxyApi(kc, 'team-b');
    const teamA = names('a');
    const teamB = names('b');
    await Promise.all([
      ...teamA.map((n) => a.create(n, { spec: spec('mock', urlA) })),
      ...teamB.map((n) => b.create(n, { spec: spec('mock', urlB) })),
    ]);
    const ready = [
      ...(await everyProxy(a, teamA, 'team A Ready', isReady, 90_000)),
      ...(await everyProxy(b, teamB, 'team B Ready', isReady, 90_000)),
    ];
    const first = new Map(
      ready.map((p) => [`${p.metadata.namespace}/${p.metadata.name}`, p.status!.providerID!]),
    );

    refusing = true;
    await killable.kill(first.get('team-b/b-0')!);
    await everyProxy(
      a,
      teamA,
      'team A held',
      (p) => p.status?.phase === 'Unhealthy' && provisioned(p)?.reason === 'RepairHeld',
      45_000,
    );
    const replaced = await eventually(
      "team B's dead proxy replaced and Ready on a new instance",
      async () => {
        const p = await b.get('b-0');
        return deletes.includes(first.get('team-b/b-0')!) && isReady(p) && p.status?.ip !== DEAD_IP
          ? p
          : undefined;
      },
      60_000,
    ).catch(async (err: Error) => {
      // What held it, in the failure (it was FleetUnhealthy, counting team A).
      throw new Error(`${err.message}\nb-0: ${provisioned(await b.get('b-0'))?.message}`);
    });
    expect(replaced.status?.replacement).toBeUndefined();
    expect(refusing).toBe(true);
    expect(deletes).toEqual([first.get('team-b/b-0')]);
    for (const p of await Promise.all(teamA.map((n) => a.get(n)))) {
      expect(p.status?.providerID).toBe(first.get(`team-a/${p.metadata.name}`));
      expect(provisioned(p)?.reason).toBe('RepairHeld');
      // Held as the site's doing (TargetGroupUnhealthy), not the provider's (B's proxies are fine).
      expect(provisioned(p)?.message).toContain(`proxies probing ${new URL(urlA).origin} are Unhealthy`);
    }

    // B rolls out a new image while A is still refused: A's 5 Unhealthy proxies (nothing
    // explains them: A's site answers directly) once took B's 2 slots for as long as it lasted.
    const before = new Map(
      (await Promise.all(teamB.map((n) => b.get(n)))).map((p) => [p.metadata.name, p.status!.providerID!]),
    );
    for (const n of teamB)
      await b.patchSpec(n, { placement: { zone: 'local-a', machineType: 'small', image: 'squid-2' } });
    await everyProxy(
      b,
      teamB,
      "team B's rollout done, team A still refused",
      (p) =>
        isReady(p) &&
        p.status?.providerID !== before.get(p.metadata.name) &&
        p.status?.replacement === undefined,
      90_000,
    ).catch(async (err: Error) => {
      const waits = (await Promise.all(teamB.map((n) => b.get(n)))).map(
        (p) => `${p.metadata.name}: ${provisioned(p)?.reason} ${provisioned(p)?.message}`,
      );
      throw new Error(`${err.message}\n${waits.join('\n')}`);
    });
    const rolled = [first.get('team-b/b-0'), ...teamB.map((n) => before.get(n))].sort();
    expect(deletes.sort()).toEqual(rolled);
    expect(refusing).toBe(true);

    // Now every B proxy dies too: the cause reaches B, and B is held (none replaced).
    const now = await Promise.all(teamB.map((n) => b.get(n)));
    for (const p of now) await killable.kill(p.status!.providerID!);
    const heldB = await everyProxy(
      b,
      teamB,
      'team B held: FleetUnhealthy',
      (p) =>
        provisioned(p)?.reason === 'RepairHeld' && (provisioned(p)?.message ?? '').includes('more than 20%'),
      45_000,
    );
    const since = Math.max(...heldB.map((p) => Date.parse(condition(p, 'Healthy')!.lastTransitionTime)));
    await new Promise((r) => setTimeout(r, Math.max(0, since + (GRACE + 6) * 1000 - Date.now())));
    expect(deletes.sort()).toEqual(rolled);
    for (const p of await Promise.all(teamB.map((n) => b.get(n)))) {
      expect(provisioned(p)?.reason).toBe('RepairHeld');
      // Both teams failing: the provider's reason (FleetUnhealthy), not B's site's.
      expect(provisioned(p)?.message).toContain("of provider mock's proxies are Unhealthy at once");
      // What B is shown names no namespace but its own.
      expect(provisioned(p)?.message).not.toContain('team-a');
    }
  }, 240_000);
});

describe("one team's failed replacements do not block another team's rollout", () => {
  it("team A's bad image fails 2 (its cap's worth) and blocks A's third; team B's rollout goes on, naming nothing of A's", async () => {
    const site = urlB;
    const a = new ProxyApi(kc, 'roll-a');
    const b = new ProxyApi(kc, 'roll-b');
    const teamA = names('a', 3);
    const teamB = names('b', 3);
    await Promise.all([
      ...teamA.map((n) => a.create(n, { spec: spec('rollouts', site) })),
      ...teamB.map((n) => b.create(n, { spec: spec('rollouts', site) })),
    ]);
    await everyProxy(a, teamA, 'roll-a Ready', isReady, 90_000);
    const readyB = await everyProxy(b, teamB, 'roll-b Ready', isReady, 90_000);
    const firstB = new Map(readyB.map((p) => [p.metadata.name, p.status!.providerID!]));

    for (const n of teamA)
      await a.patchSpec(n, { placement: { zone: 'local-a', machineType: 'small', image: 'bad' } });
    const failedNames = (ps: Proxy[]) =>
      ps
        .map((p) => `roll-a/${p.metadata.name}`)
        .sort()
        .join(', ');
    // A proxy blocked after the first failure names the second at its next slot poll.
    const splitA = await eventually(
      `roll-a: ${CAP} failed replacements, 1 blocked, naming them`,
      async () => {
        const ps = await Promise.all(teamA.map((n) => a.get(n)));
        const failed = ps.filter((p) => p.status?.phase === 'Failed');
        const blocked = ps.filter((p) => provisioned(p)?.reason === 'ReplacementBlocked');
        const named = blocked.every((p) => provisioned(p)?.message?.includes(failedNames(failed)));
        return failed.length === CAP && blocked.length === 1 && named ? { failed, blocked } : undefined;
      },
      60_000,
    );
    // A is shown its own failures by name.
    expect(provisioned(splitA.blocked[0])?.message).toContain(failedNames(splitA.failed));

    for (const n of teamB)
      await b.patchSpec(n, { placement: { zone: 'local-a', machineType: 'small', image: 'squid-2' } });
    await everyProxy(
      b,
      teamB,
      'roll-b on new instances and Ready, roll-a still failed',
      // A new revision is a new instance (named by Proxy and revision).
      (p) =>
        isReady(p) &&
        p.status?.providerID !== firstB.get(p.metadata.name) &&
        provisioned(p)?.reason === 'InstanceRunning' &&
        p.status?.replacement === undefined,
      60_000,
    ).catch(async (err: Error) => {
      const waits = (await Promise.all(teamB.map((n) => b.get(n)))).map(
        (p) => `${p.metadata.name}: ${provisioned(p)?.reason} ${provisioned(p)?.message}`,
      );
      throw new Error(`${err.message}\n${waits.join('\n')}`);
    });
    // Nothing B was shown (its Events: ReplacementPending while it waited its turn) names A's.
    for (const n of teamB)
      for (const e of await eventsFor(kc, 'roll-b', n)) expect(e.message ?? '').not.toContain('roll-a');
    const stillA = await Promise.all(teamA.map((n) => a.get(n)));
    expect(stillA.filter((p) => p.status?.phase === 'Failed')).toHaveLength(CAP);
  }, 180_000);
});

describe("one team's instances reported dead do not hold another team's", () => {
  it("6 of team A's reported Stopped are held, none deleted; team B's one beside them is replaced alone", async () => {
    const a = new ProxyApi(kc, 'dead-a');
    const b = new ProxyApi(kc, 'dead-b');
    const teamA = names('a', 6);
    const teamB = names('b', 5);
    await Promise.all([
      ...teamA.map((n) => a.create(n, { spec: spec('stops', urlB) })),
      ...teamB.map((n) => b.create(n, { spec: spec('stops', urlB) })),
    ]);
    const ready = [
      ...(await everyProxy(a, teamA, 'dead-a Ready', isReady, 90_000)),
      ...(await everyProxy(b, teamB, 'dead-b Ready', isReady, 90_000)),
    ];
    const first = new Map(
      ready.map((p) => [`${p.metadata.namespace}/${p.metadata.name}`, p.status!.providerID!]),
    );
    const keyOf = async (key: string) => instanceKey(await stopsMock.get(first.get(key)!));
    stops.stopped = new Set(
      await Promise.all([...teamA.map((n) => keyOf(`dead-a/${n}`)), keyOf('dead-b/b-0')]),
    );

    const replaced = await eventually(
      "team B's instance reported Stopped replaced",
      async () => {
        const p = await b.get('b-0');
        return stopDeletes.includes(first.get('dead-b/b-0')!) && isReady(p) ? p : undefined;
      },
      60_000,
    ).catch(async (err: Error) => {
      throw new Error(`${err.message}\nb-0: ${provisioned(await b.get('b-0'))?.message}`);
    });
    expect(replaced.status?.replacement).toBeUndefined();
    const heldA = await everyProxy(
      a,
      teamA,
      'team A held: ProviderReportsInstancesDead',
      (p) => provisioned(p)?.reason === 'RepairHeld',
      30_000,
    );
    for (const p of heldA) {
      expect(p.status?.providerID).toBe(first.get(`dead-a/${p.metadata.name}`));
      // 7 of 11 while B's was reported too, 6 of 10 or 11 while and once it was replaced (a
      // proxy being replaced is not serving); all 6 of A's own.
      expect(provisioned(p)?.message).toMatch(
        /reports [67] of its 1[01] serving proxies.*6 of namespace dead-a's 6/,
      );
      expect(provisioned(p)?.message).not.toContain('dead-b');
    }
    expect(stopDeletes).toEqual([first.get('dead-b/b-0')]);
  }, 240_000);
});
