import { CoreV1Api, type V1ConfigMap } from '@kubernetes/client-node';
import { testKubeConfig, uniqueName } from '../harness/kube.js';

// Proves the module-system choice end to end: the ESM-only client-node 2.x, loaded as a native
// ES module under jest, talks TLS + bearer token to the real API server.
const core = testKubeConfig().makeApiClient(CoreV1Api);
const namespace = uniqueName('client-node');

beforeAll(() => core.createNamespace({ body: { metadata: { name: namespace } } }));
afterAll(() => core.deleteNamespace({ name: namespace }));

describe('@kubernetes/client-node against the test control plane', () => {
  it('lists namespaces, including the built-in ones and this suite’s own', async () => {
    const names = (await core.listNamespace()).items.map((n) => n.metadata?.name);
    expect(names).toEqual(expect.arrayContaining(['default', 'kube-system', namespace]));
  });

  it('creates a ConfigMap and reads it back', async () => {
    const body: V1ConfigMap = { metadata: { name: 'greeting' }, data: { hello: 'world' } };
    await core.createNamespacedConfigMap({ namespace, body });
    const read = await core.readNamespacedConfigMap({ namespace, name: 'greeting' });
    expect(read.data).toEqual({ hello: 'world' });
  });
});
