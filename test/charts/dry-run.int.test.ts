import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { KUSTOMIZATION_FILE } from '../../charts/app.js';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import { distObjects, type Manifest } from './manifests.js';
import { ServerSideApply } from './server-side-apply.js';

// Every object of every committed manifest file, kustomization aside: a new chart is covered
// the day its file lands in dist/.
const DIST = fileURLToPath(new URL('../../dist/', import.meta.url));
const files = readdirSync(DIST)
  .filter((f) => f.endsWith('.yaml') && f !== KUSTOMIZATION_FILE)
  .sort();
const objects: [string, Manifest][] = [];
for (const file of files) for (const o of await distObjects(file)) objects.push([file, o]);

const kc = testKubeConfig();
const api = new ServerSideApply(kc, 'proxy-operator-dry-run-test');
// Samples name no namespace, like anything meant for `kubectl apply -n <yours>`.
const samplesNamespace = uniqueName('samples');
const namespaces = objects.filter(([, o]) => o.kind === 'Namespace').map(([, o]) => o);

beforeAll(async () => {
  // Proxies need their CRD, and a dry-run create still needs a real namespace to land in.
  await installProxyCrd(kc);
  for (const ns of [...namespaces, namespaceObject(samplesNamespace)]) await api.apply(ns);
});

function namespaceObject(name: string): Manifest {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name } };
}

describe('the committed manifests', () => {
  it('cover the CRDs, the operator and the samples', () => {
    expect(files).toEqual(
      expect.arrayContaining(['crds.yaml', 'operator.yaml', 'network-policy.yaml', 'samples.yaml']),
    );
  });

  // Issue 12 item 8: the API server keeps the Squid policy as written (named port, both peers).
  it('network-policy.yaml: the Squid NetworkPolicy survives the dry run whole', async () => {
    const [, policy] = objects.find(
      ([file, o]) => file === 'network-policy.yaml' && o.kind === 'NetworkPolicy',
    )!;
    const applied = await api.apply(policy, { dryRun: true });
    expect(applied.spec).toEqual(policy.spec);
  });

  it.each(
    objects.map(
      ([file, o]) => [file, o.kind, `${o.metadata.namespace ?? ''}/${o.metadata.name}`, o] as const,
    ),
  )(
    '%s: the API server accepts %s %s (server-side apply, dry run, strict field validation)',
    async (_file, _kind, _name, object) => {
      const applied = await api.apply(object, { dryRun: true, namespace: samplesNamespace });
      expect(applied.kind).toBe(object.kind);
      expect(applied.metadata.name).toBe(object.metadata.name);
    },
  );
});

describe('the dry run itself', () => {
  // Controls: the acceptances above mean something only if a bad manifest would be refused.
  const proxy = (spec: Record<string, unknown>): Manifest => ({
    apiVersion: 'crawl.example.com/v1alpha1',
    kind: 'Proxy',
    metadata: { name: 'control' },
    spec,
  });

  it.each<[string, Manifest, string]>([
    [
      'an unknown field',
      proxy({ mode: 'Managed', provider: 'mock', prot: 3128 }),
      '.spec.prot: field not declared in schema',
    ],
    [
      'a CRD validation rule',
      proxy({ mode: 'Managed' }),
      'spec.provider is required when spec.mode is Managed',
    ],
    [
      'a typo in a built-in kind',
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'control' }, dta: {} },
      '.dta: field not declared in schema',
    ],
  ])('refuses a manifest that breaks %s', async (_what, object, message) => {
    await expect(api.apply(object, { dryRun: true, namespace: samplesNamespace })).rejects.toThrow(message);
  });
});
