import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { freePort } from '../../../framework/testing/control-plane.js';
import { KubernetesProvider } from '../../../providers/kubernetes/kubernetes-provider.js';
import { startForwardProxy, type ForwardProxy } from '../../../providers/mock/forward-proxy.js';
import { testKubeConfig, uniqueName } from '../../harness/kube.js';
import { DeleteRecordingProvider } from '../../handlers/delegating-provider.js';
import {
  condition,
  eventually,
  everyProxy,
  isReady,
  managedSpec,
  operatorSuite,
  quiet,
} from '../../handlers/operator-fixture.js';

// The kubernetes provider's mass eviction: a node drained under memory pressure evicts most of
// the proxies' Pods at once (phase Failed, reason Evicted), which the provider reports
// Terminated. Deleting them is irreversible for the IPs' standing, and many at once is one
// cause (a node's trouble, a drain), so 4 of 6 evicted are held (RepairHeld,
// ProviderReportsInstancesDead) and nothing is deleted; once an SRE deletes two of the evicted
// Pods (they are re-created) 2 of 4 serving are dead, fewer than 3, and those two are replaced.
// No kubelet runs: the test plays it, starting a real forward proxy for each new Pod on an
// address of its own and writing the Pod's status.

const COUNT = 6;
const EVICTED = 4;
const kc = testKubeConfig();
const pods = uniqueName('evicted-pods');
const deletes: string[] = [];
const suite = operatorSuite('mass-eviction', {
  providers: () => ({
    kubernetes: new DeleteRecordingProvider(
      new KubernetesProvider('kubernetes', { namespace: pods, image: 'ubuntu/squid' }, quiet, kc),
      deletes,
    ),
  }),
  settings: { driftCheckSeconds: 1, repairHoldUnhealthyPercent: 20 },
});
const { api } = suite;
const core = kc.makeApiClient(CoreV1Api);
const names = Array.from({ length: COUNT }, (_, i) => `px-${i}`);

let port = 0;
/** The forward proxy serving each started Pod, by Pod UID. */
const serving = new Map<string, ForwardProxy>();
let nextAddress = 1;
let kubelet: ReturnType<typeof setInterval> | undefined;
let starting = Promise.resolve();

/** Starts every Pod not started yet: a forward proxy on its own address, the Pod Running and Ready there. */
async function playKubelet(): Promise<void> {
  const list = await core.listNamespacedPod({ namespace: pods });
  for (const pod of list.items) {
    const uid = pod.metadata!.uid!;
    const phase = pod.status?.phase;
    if (serving.has(uid) || (phase && phase !== 'Pending') || pod.metadata?.deletionTimestamp) continue;
    const host = `127.0.67.${nextAddress++}`;
    serving.set(uid, await startForwardProxy({ host, port }));
    await setStatus(pod, {
      phase: 'Running',
      podIP: host,
      conditions: [{ type: 'Ready', status: 'True' }],
    });
  }
}

async function setStatus(pod: V1Pod, status: V1Pod['status']): Promise<void> {
  const fresh = await core.readNamespacedPod({ namespace: pods, name: pod.metadata!.name! });
  fresh.status = status;
  await core.replaceNamespacedPodStatus({ namespace: pods, name: pod.metadata!.name!, body: fresh });
}

/** The node evicts the Pod: its container is gone (the forward proxy closes), its phase Failed. */
async function evict(providerID: string): Promise<void> {
  const name = providerID.slice(providerID.indexOf('/') + 1);
  const pod = await core.readNamespacedPod({ namespace: pods, name });
  await serving.get(pod.metadata!.uid!)?.close();
  serving.delete(pod.metadata!.uid!);
  // Not started again by the kubelet's loop: it starts Pending Pods only.
  await setStatus(pod, {
    phase: 'Failed',
    reason: 'Evicted',
    message: 'The node was low on resource: memory. Threshold quantity: 100Mi, available: 12Mi.',
  });
}

async function heldCount(): Promise<number> {
  const m = await suite.op.registry.getSingleMetric('proxy_operator_repairs_held')?.get();
  return (
    m?.values
      .filter((v) => v.labels.reason === 'ProviderReportsInstancesDead')
      .reduce((a, v) => a + v.value, 0) ?? 0
  );
}

beforeAll(async () => {
  port = await freePort();
  await core.createNamespace({ body: { metadata: { name: pods } } });
  kubelet = setInterval(() => {
    starting = starting.then(playKubelet).catch((err: Error) => {
      process.stdout.write(`[kubelet] ${err.message}\n`);
    });
  }, 300);
});

afterAll(async () => {
  clearInterval(kubelet);
  await starting;
  await Promise.all([...serving.values()].map((p) => p.close()));
});

describe('the kubernetes provider: a mass eviction', () => {
  it(`${EVICTED} of ${COUNT} proxy Pods evicted at once: none deleted, all held; 2 deleted by hand: the other 2 replaced`, async () => {
    await Promise.all(
      names.map((n) =>
        api.create(n, { spec: { ...managedSpec(suite.target), provider: 'kubernetes', port } }),
      ),
    );
    const ready = await everyProxy(api, names, 'all Ready', isReady, 90_000).catch(async (err: Error) => {
      const ps = await Promise.all(names.map((n) => api.get(n)));
      throw new Error(
        `${err.message}\n${ps.map((p) => `${p.metadata.name} ${p.status?.phase} ${p.status?.ip} ${JSON.stringify(p.status?.conditions?.map((c) => [c.type, c.reason, c.message]))}`).join('\n')}`,
      );
    });
    const first = new Map(ready.map((p) => [p.metadata.name, p.status!.providerID!]));
    const evicted = names.slice(0, EVICTED);
    for (const n of evicted) await evict(first.get(n)!);

    await eventually(
      `the ${EVICTED} evicted held`,
      async () => {
        if (deletes.length > 0)
          throw new Error(`deleted ${deletes.join(', ')} while ${EVICTED} of ${COUNT} were evicted`);
        const ps = await Promise.all(evicted.map((n) => api.get(n)));
        return ps.every((p) => condition(p, 'Provisioned')?.reason === 'RepairHeld') ? ps : undefined;
      },
      45_000,
    );
    // Several requeues (5 s) later: still held, nothing deleted, the others serving.
    await new Promise((r) => setTimeout(r, 8_000));
    expect(deletes).toEqual([]);
    for (const n of evicted) {
      const p = await api.get(n);
      expect(p.status?.providerID).toBe(first.get(n));
      expect(condition(p, 'Provisioned')?.message).toMatch(
        new RegExp(
          `provider kubernetes reports ${EVICTED} of its ${COUNT} serving proxies' instances stopped or terminated at once`,
        ),
      );
    }
    for (const n of names.slice(EVICTED)) expect(isReady(await api.get(n))).toBe(true);
    expect(await heldCount()).toBe(EVICTED);

    // The runbook's way out: delete evicted Pods a few at a time. Two deleted by hand are
    // re-created; the other two are then 2 of the 4 serving, fewer than 3: replaced.
    for (const n of evicted.slice(0, 2)) {
      const id = first.get(n)!;
      await core.deleteNamespacedPod({ namespace: pods, name: id.slice(id.indexOf('/') + 1) });
    }
    await everyProxy(
      api,
      names,
      'every proxy Ready on a running Pod',
      (p) => isReady(p) && condition(p, 'Provisioned')?.reason === 'InstanceRunning',
      90_000,
    );
    expect(deletes.sort()).toEqual(
      evicted
        .slice(2)
        .map((n) => first.get(n))
        .sort(),
    );
    expect(await heldCount()).toBe(0);
  }, 240_000);
});
