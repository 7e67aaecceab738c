import { CoreV1Api, Watch } from '@kubernetes/client-node';
import type { Proxy } from '../../crds/proxy-types.js';
import { condition, eventually, fastHealthCheck, managedSpec, operatorSuite } from './operator-fixture.js';

// Issue 11 item 6: rotating a cloud-init Secret shared by many proxies replaces them a few at a
// time (--max-unavailable), the others waiting with a visible reason.
const COUNT = 10;
const CAP = 2;
const suite = operatorSuite('paced', {
  settings: { maxUnavailable: { default: { kind: 'count', value: CAP }, byProvider: {} } },
});
const { api, kc, namespace } = suite;
const core = kc.makeApiClient(CoreV1Api);

function secret(version: string) {
  return {
    metadata: { name: 'shared-init', labels: { 'crawl.example.com/cloud-init': 'true' } },
    stringData: { 'user-data': `#cloud-config\n# ${version}\n` },
  };
}

describe('mass replacement is paced', () => {
  it(`${COUNT} proxies sharing a Secret: at no moment of the rotation are more than ${CAP} unleasable`, async () => {
    await core.createNamespacedSecret({ namespace, body: secret('v1') });
    // Three failed probes take a proxy out: the subject is the rollout's pace. With one, a
    // serving proxy whose single probe timed out (1 s) on a loaded machine was a third
    // unleasable one, replaced at once as already out of service (a full run: 3 of 10, cap 2).
    const spec = managedSpec(suite.target, {
      cloudInit: { secretRef: { name: 'shared-init', key: 'user-data' } },
      healthCheck: { ...fastHealthCheck(suite.target), failureThreshold: 3 },
    });
    await Promise.all(Array.from({ length: COUNT }, (_, i) => api.create(`px-${i}`, { spec })));
    const before = new Map<string, string>();
    await eventually(`all ${COUNT} Ready`, async () => {
      for (let i = 0; i < COUNT; i++) {
        const p = await api.get(`px-${i}`);
        if (p.status?.phase !== 'Ready') return undefined;
        before.set(p.metadata.name, p.status.providerID!);
      }
      return true;
    });

    // Every status the API server stores, as a crawler's discovery API would see it.
    const leasable = new Map<string, boolean>();
    const waited = new Set<string>();
    let maxUnleasable = 0;
    const watching = await new Watch(kc).watch(
      `/apis/crawl.example.com/v1alpha1/namespaces/${namespace}/proxies`,
      {},
      (_type, p: Proxy) => {
        const ok = p.status?.phase === 'Ready' && condition(p, 'Healthy')?.status === 'True';
        leasable.set(p.metadata.name, ok);
        if (condition(p, 'Provisioned')?.reason === 'ReplacementPending') waited.add(p.metadata.name);
        maxUnleasable = Math.max(maxUnleasable, [...leasable.values()].filter((x) => !x).length);
      },
      () => {},
    );
    try {
      await eventually('the watch sees every proxy', async () =>
        leasable.size === COUNT ? true : undefined,
      );
      await core.replaceNamespacedSecret({ namespace, name: 'shared-init', body: secret('v2') });
      await eventually(
        'every proxy replaced and Ready',
        async () => {
          for (let i = 0; i < COUNT; i++) {
            const p = await api.get(`px-${i}`);
            if (p.status?.phase !== 'Ready' || p.status.providerID === before.get(`px-${i}`))
              return undefined;
          }
          return true;
        },
        240_000,
      );
    } finally {
      watching.abort();
    }
    process.stdout.write(
      `[paced] cap ${CAP}: at most ${maxUnleasable} of ${COUNT} unleasable at once; ${waited.size} waited with ReplacementPending\n`,
    );
    expect(maxUnleasable).toBeGreaterThan(0);
    expect(maxUnleasable).toBeLessThanOrEqual(CAP);
    expect(waited.size).toBeGreaterThanOrEqual(COUNT - CAP);
  }, 300_000);
});
