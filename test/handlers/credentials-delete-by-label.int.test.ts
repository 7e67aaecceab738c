import { CoreV1Api, Watch } from '@kubernetes/client-node';
import type { Proxy } from '../../crds/proxy-types.js';
import { condition, eventually, managedSpec, operatorSuite } from './operator-fixture.js';

// docs/security.md: "delete [the Secret] to have new ones generated ... paced and no outage".
// An SRE rotating the whole fleet after a leak deletes every credentials Secret by the label
// the docs give them (kubectl delete secret -l crawl.example.com/proxy-credentials=true). The
// operator's immutable copies of the credentials the instances were created with carry another
// value of that label, so they stay, and each instance keeps serving with its own until its
// replacement: at most the cap out of service at once. (When the copies went too, every
// instance was probed and leased with new credentials it answers 407: 6 of 6 out at once.)

const COUNT = 6;
const CAP = 1;
const suite = operatorSuite('delete-by-label', {
  settings: { maxUnavailable: { default: { kind: 'count', value: CAP }, byProvider: {} } },
});
const { api, kc, namespace } = suite;
const core = kc.makeApiClient(CoreV1Api);
const names = Array.from({ length: COUNT }, (_, i) => `px-${i}`);

it('deleting the credentials Secrets by their documented label is a paced rotation, not an outage', async () => {
  const base = managedSpec(suite.target);
  const spec = {
    ...base,
    healthCheck: { ...base.healthCheck, intervalSeconds: 3, timeoutSeconds: 2, failureThreshold: 2 },
  };
  await Promise.all(names.map((n) => api.create(n, { spec })));
  const TAG = 'crawl.example.com/credentials-in-use';
  const tagsBefore = await eventually(
    'all Ready',
    async () => {
      const ps = await Promise.all(names.map((n) => api.get(n)));
      return ps.every((p) => p.status?.phase === 'Ready' && p.metadata.annotations?.[TAG])
        ? new Map(ps.map((p) => [p.metadata.name, p.metadata.annotations![TAG]]))
        : undefined;
    },
    90_000,
  );
  const leasable = new Map<string, boolean>();
  let maxOut = 0;
  const watching = await new Watch(kc).watch(
    `/apis/crawl.example.com/v1alpha1/namespaces/${namespace}/proxies`,
    {},
    (_t, p: Proxy) => {
      leasable.set(
        p.metadata.name,
        p.status?.phase === 'Ready' && condition(p, 'Healthy')?.status === 'True',
      );
      maxOut = Math.max(maxOut, [...leasable.values()].filter((x) => !x).length);
    },
    () => {},
  );
  try {
    await eventually('watch sees all', async () => (leasable.size === COUNT ? true : undefined));
    await core.deleteCollectionNamespacedSecret({
      namespace,
      labelSelector: 'crawl.example.com/proxy-credentials=true',
    });
    await new Promise((r) => setTimeout(r, 25_000));
  } finally {
    watching.abort();
  }
  expect(maxOut).toBeLessThanOrEqual(CAP);
  // And the rotation happens: every proxy Ready again, its instance made with new credentials.
  await eventually(
    'every proxy rotated and Ready',
    async () => {
      const ps = await Promise.all(names.map((n) => api.get(n)));
      return ps.every(
        (p) =>
          p.status?.phase === 'Ready' && p.metadata.annotations?.[TAG] !== tagsBefore.get(p.metadata.name),
      )
        ? true
        : undefined;
    },
    150_000,
  );
}, 360_000);
