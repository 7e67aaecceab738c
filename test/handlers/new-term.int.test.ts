// Issue 25 item 6: a new term starts clean. A replica that leads, loses the Lease, and leads
// again must not act on the verdicts of its first term: the fleet changed while it followed.
import { CoordinationV1Api } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { freePort } from '../../framework/testing/control-plane.js';
import { createProxyOperator } from '../../handlers/proxy-operator.js';
import { DEFAULT_HANDLER_SETTINGS } from '../../handlers/settings.js';
import { ProviderSet } from '../../providers/registry.js';
import type { Operator } from '../../framework/index.js';
import type { Proxy } from '../../crds/proxy-types.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import { TestForwardProxy } from '../health/forward-proxy.js';
import { condition, eventsFor, eventually, fastHealthCheck, quiet, suiteSetup } from './operator-fixture.js';
import type { ProxyApi } from '../crd/proxy-api.js';
import type { LocalTarget } from '../../cmd/demo/local-target.js';

const kc = testKubeConfig();
const namespace = uniqueName('new-term');
const leaseName = 'new-term-leader';
let api: ProxyApi;
let target: LocalTarget;
let proxy: TestForwardProxy;
const replicas: Operator[] = [];

async function replica(identity: string): Promise<Operator> {
  const operator = createProxyOperator({
    kubeConfig: kc,
    providers: new ProviderSet(new Map()),
    settings: {
      ...DEFAULT_HANDLER_SETTINGS,
      healthSyncSeconds: 0.2,
      discovery: { ...DEFAULT_HANDLER_SETTINGS.discovery, host: '127.0.0.1', port: await freePort() },
    },
    logger: quiet,
    registry: new Registry(),
    leaderElection: { namespace, name: leaseName, identity },
    handlers: undefined,
    shutdownGraceSeconds: 1,
    namespace,
  });
  await operator.start();
  replicas.push(operator);
  return operator;
}

/** Hands the Lease to `identity` as a rolling update would; the holder steps down at its next renewal. */
async function handLeaseTo(identity: string): Promise<void> {
  const leases = kc.makeApiClient(CoordinationV1Api);
  const lease = await leases.readNamespacedLease({ name: leaseName, namespace });
  lease.spec = { ...lease.spec, holderIdentity: identity, renewTime: new Date() };
  await leases.replaceNamespacedLease({ name: leaseName, namespace, body: lease });
}

async function leader(): Promise<string | undefined> {
  const lease = await kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: leaseName, namespace });
  return lease.spec?.holderIdentity ?? undefined;
}

beforeAll(async () => {
  ({ api, target } = await suiteSetup(kc, namespace));
  proxy = await TestForwardProxy.start('healthy');
}, 120_000);

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.stop()));
  await proxy?.close();
  await target?.close();
});

describe('a replica that leads again starts its term clean', () => {
  it('leads, loses the Lease, the proxy dies meanwhile, leads again: it never writes the dead proxy Ready', async () => {
    const a = await replica('replica-a');
    await eventually('replica-a to lead', async () => ((await leader()) === 'replica-a' ? true : undefined));
    const b = await replica('replica-b');
    await api.create('exit-1', {
      spec: {
        mode: 'External',
        endpoint: { host: '127.0.0.1', port: proxy.port },
        healthCheck: { ...fastHealthCheck(target), intervalSeconds: 1 },
      },
    });
    // Term 1 of replica-a: the proxy is Ready on its verdict.
    await eventually('Ready under replica-a', async () =>
      (await api.get('exit-1')).status?.phase === 'Ready' ? true : undefined,
    );

    // replica-b takes over; the proxy loses its egress; replica-b writes it Unhealthy.
    await handLeaseTo('replica-b');
    await eventually('replica-a to step down', async () => (a.isLeader() ? undefined : true), 20_000);
    proxy.mode = 'cannot-egress';
    const unhealthy = await eventually('Unhealthy under replica-b', async () => {
      const p = await api.get('exit-1');
      return p.status?.phase === 'Unhealthy' ? p : undefined;
    });
    expect(condition(unhealthy, 'Healthy')?.reason).toBe('TunnelFailed');
    const readyEvents = async () =>
      (await eventsFor(kc, namespace, 'exit-1'))
        .filter((e) => e.reason === 'Ready')
        .reduce((n, e) => n + ((e as { count?: number }).count ?? 1), 0);
    const readyBefore = await readyEvents();

    // Back to replica-a. Its first term's verdict said healthy; the proxy is dead now.
    await handLeaseTo('replica-a');
    await eventually('replica-a to lead again', async () =>
      a.isLeader() && !b.isLeader() ? true : undefined,
    );
    const seen: Array<Proxy['status']> = [];
    const until = Date.now() + 5_000; // five probe intervals of the new term
    while (Date.now() < until) {
      seen.push((await api.get('exit-1')).status);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(seen.map((s) => s?.phase)).not.toContain('Ready');
    expect(seen.at(-1)?.phase).toBe('Unhealthy');
    expect(await readyEvents()).toBe(readyBefore);
  }, 120_000);
});
