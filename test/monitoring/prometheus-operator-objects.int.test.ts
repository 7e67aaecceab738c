// The objects of dist/monitoring/prometheus-operator.yaml against the Prometheus Operator's
// own CRDs (vendored in prometheus-operator-crds/): a dry-run server-side apply with strict
// field validation, as for every other manifest (test/charts/dry-run.int.test.ts).
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApiextensionsV1Api } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { MONITORING_CHART, MONITORING_DIR } from '../../charts/app.js';
import { OPERATOR_NAMESPACE } from '../../charts/names.js';
import { distObjects, type Manifest } from '../charts/manifests.js';
import { ServerSideApply } from '../charts/server-side-apply.js';
import { testKubeConfig } from '../harness/kube.js';

const CRDS = fileURLToPath(new URL('./prometheus-operator-crds/', import.meta.url));
const kc = testKubeConfig();
const api = new ServerSideApply(kc, 'proxy-operator-monitoring-test');
const objects = await distObjects(`${MONITORING_DIR}/${MONITORING_CHART}.yaml`);

beforeAll(async () => {
  const extensions = kc.makeApiClient(ApiextensionsV1Api);
  for (const file of (await readdir(CRDS)).filter((f) => f.endsWith('.yaml'))) {
    const crd = parse(await readFile(join(CRDS, file), 'utf8')) as Manifest;
    await api.apply(crd);
    for (let tries = 0; ; tries++) {
      const current = await extensions.readCustomResourceDefinition({ name: crd.metadata.name });
      if (current.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
      if (tries > 300) throw new Error(`${crd.metadata.name} not Established`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  await api.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: OPERATOR_NAMESPACE } });
}, 120_000);

describe(`dist/${MONITORING_DIR}/${MONITORING_CHART}.yaml with the Prometheus Operator's CRDs`, () => {
  it('holds a PrometheusRule, a ServiceMonitor and the dashboard ConfigMap', () => {
    expect(objects.map((o) => o.kind).sort()).toEqual(['ConfigMap', 'PrometheusRule', 'ServiceMonitor']);
  });

  it.each(objects.map((o) => [o.kind, o.metadata.name, o] as const))(
    'the API server accepts %s %s whole (server-side apply, dry run, strict field validation)',
    async (_kind, _name, object) => {
      const applied = await api.apply(object, { dryRun: true });
      if ('spec' in object) expect(applied.spec).toEqual(object.spec);
      else expect(applied.data).toEqual(object.data);
    },
  );

  it('a control: a ServiceMonitor with a misspelt field is refused, naming it', async () => {
    const monitor = objects.find((o) => o.kind === 'ServiceMonitor')!;
    const bad = { ...monitor, spec: { ...(monitor.spec as object), endpoint: [] } };
    await expect(api.apply(bad, { dryRun: true })).rejects.toThrow(/endpoint/);
  });
});
