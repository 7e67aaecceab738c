// Issue 25 item 6: a new term starts clean. A replica that leads, loses the Lease, and leads
// again must not act on the verdicts of its first term: the fleet changed while it followed.
import { CoordinationV1Api } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { freePort } from '../../framework/testing/control-plane.js';
import { KubeClient } from '../../framework/utils/kube-client.js';
import { createProxyOperator } from '../../handlers/proxy-operator.js';
import { DEFAULT_HANDLER_SETTINGS } from '../../handlers/settings.js';
import { ProviderSet } from '../../providers/registry.js';
import type { Operator } from '../../framework/index.js';
import type { Proxy } from '../../crds/proxy-types.js';
import { PROXY_KIND } from '../../handlers/kinds.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import { TestForwardProxy } from '../health/forward-proxy.js';
import {
  condition,
  eventsFor,
  eventually,
  fastHealthCheck,
  LOOPBACK_EXTERNAL,
  quiet,
  suiteSetup,
} from './operator-fixture.js';
import type { ProxyApi } from '../crd/proxy-api.js';
import type { LocalTarget } from '../../cmd/demo/local-target.js';

const kc = testKubeConfig();
const client = new KubeClient(kc);
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
      externalEndpoints: LOOPBACK_EXTERNAL,
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

/**
 * Hands the Lease to `identity`: the holder sees another holder at its next renewal and steps
 * down; `identity` finds itself the holder and renews. Raw JSON: client-node's Lease type
 * would send renewTime with millisecond precision, which the API server refuses for MicroTime.
 */
async function handLeaseTo(identity: string): Promise<void> {
  const path = `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${leaseName}`;
  const lease = await client.request<{ spec: Record<string, unknown> }>('GET', path);
  lease.spec = {
    ...lease.spec,
    holderIdentity: identity,
    renewTime: new Date().toISOString().replace('Z', '000Z'),
  };
  await client.request('PUT', path, { body: lease });
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
        // Probes of a black hole last 3 s: replica-b needs one to see the proxy dead.
        healthCheck: { ...fastHealthCheck(target), intervalSeconds: 4, timeoutSeconds: 3 },
      },
    });
    // Term 1 of replica-a: the proxy is Ready on its verdict.
    await eventually('Ready under replica-a', async () =>
      (await api.get('exit-1')).status?.phase === 'Ready' ? true : undefined,
    );

    // replica-b takes over; the proxy stops answering; replica-b writes it Unhealthy.
    await handLeaseTo('replica-b');
    await eventually('replica-a to step down', async () => (a.isLeader() ? undefined : true), 20_000);
    // Black-holed: every probe takes its whole timeout, so a new term's first verdict comes
    // seconds after that term's first reconcile, which has only the board to go by.
    proxy.mode = 'black-hole';
    const unhealthy = await eventually('Unhealthy under replica-b', async () => {
      const p = await api.get('exit-1');
      return p.status?.phase === 'Unhealthy' ? p : undefined;
    });
    expect(condition(unhealthy, 'Healthy')?.reason).toBe('ProxyTimeout');
    const readyEvents = async () =>
      (await eventsFor(kc, namespace, 'exit-1'))
        .filter((e) => e.reason === 'Ready')
        .reduce((n, e) => n + ((e as { count?: number }).count ?? 1), 0);
    const readyBefore = await readyEvents();

    // Nobody leads for a moment, and the fleet changes meanwhile (a GitOps edit of the
    // proxy's attributes): the next leader's first reconcile of it comes before any probe.
    await handLeaseTo('nobody');
    await eventually('replica-b to step down', async () => (b.isLeader() ? undefined : true), 20_000);
    await api.patchSpec('exit-1', { attributes: { geo: 'moved' } });
    await eventually('replica-a to see the edit', async () =>
      a.cache.get<Proxy>(PROXY_KIND, namespace, 'exit-1')?.spec.attributes?.geo === 'moved'
        ? true
        : undefined,
    );

    // Back to replica-a. Its first term's verdict said healthy; the proxy is dead now.
    await handLeaseTo('replica-a');
    await eventually('replica-a to lead again', async () => (a.isLeader() ? true : undefined), 20_000);
    const seen: Array<Proxy['status']> = [];
    const until = Date.now() + 10_000; // past the new term's first probes
    while (Date.now() < until) {
      seen.push((await api.get('exit-1')).status);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(seen.map((s) => s?.phase)).not.toContain('Ready');
    expect(seen.at(-1)?.phase).toBe('Unhealthy');
    expect(await readyEvents()).toBe(readyBefore);
  }, 120_000);
});
