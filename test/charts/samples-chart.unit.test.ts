import type { V1ConfigMap, V1Secret } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { DEPLOYED_CHARTS, SAMPLES_CHART, kustomizationYaml } from '../../charts/app.js';
import { GCP_SAMPLE_PROVIDERS_CONFIGMAP } from '../../charts/samples-chart.js';
import { CLOUD_INIT_SECRET_LABEL, type ProxySpec } from '../../crds/proxy-types.js';
import { builtinProviderRegistry } from '../../providers/builtin.js';
import { chartObjects, find } from './manifests.js';

const samples = chartObjects().get(SAMPLES_CHART)!;
const spec = (name: string) => find(samples, 'Proxy', name).spec as Partial<ProxySpec>;
const proxies = samples.filter((o) => o.kind === 'Proxy');
const gcpProviders = builtinProviderRegistry().parse(
  (find(samples, 'ConfigMap', GCP_SAMPLE_PROVIDERS_CONFIGMAP) as unknown as V1ConfigMap).data![
    'providers.yaml'
  ],
  'providers.yaml',
);

describe('the samples', () => {
  it.each<[string, Partial<ProxySpec>]>([
    ['proxy-mock-sample', { mode: 'Managed', provider: 'mock' }],
    ['proxy-gcp-sample', { mode: 'Managed', provider: 'gcp-eu' }],
    ['proxy-kubernetes-sample', { mode: 'Managed', provider: 'kubernetes' }],
    ['proxy-external-sample', { mode: 'External' }],
  ])('include %s (%o)', (name, expected) => {
    expect(spec(name)).toEqual(expect.objectContaining(expected));
  });

  it('name only providers the sample providers config defines', () => {
    const names = gcpProviders.map((e) => e.name);
    for (const p of proxies.filter((x) => (x.spec as ProxySpec).mode === 'Managed')) {
      expect([p.metadata.name, names]).toEqual([
        p.metadata.name,
        expect.arrayContaining([(p.spec as ProxySpec).provider]),
      ]);
    }
  });

  it('define named gcp instances per region in a providers config the operator accepts', () => {
    expect(gcpProviders.filter((e) => e.type === 'gcp').map((e) => e.name)).toEqual(['gcp-eu', 'gcp-us']);
  });

  it('give the gcp Proxy every placement field the gcp provider requires', () => {
    expect(spec('proxy-gcp-sample').placement).toEqual({
      zone: expect.any(String),
      machineType: expect.any(String),
      image: expect.stringMatching(/^projects\/.+\/images\//),
    });
  });

  describe('the cloud-init Secret of the gcp Proxy', () => {
    const ref = spec('proxy-gcp-sample').cloudInit!.secretRef!;
    const secret = find(samples, 'Secret', ref.name) as unknown as V1Secret;
    const userData = secret.stringData?.[ref.key] ?? '';
    const cloudConfig = parse(userData) as { packages?: string[]; runcmd?: string[] };

    it(`carries the label ${CLOUD_INIT_SECRET_LABEL}: "true" (the operator sees no other Secret)`, () => {
      expect(secret.metadata!.labels).toEqual({ [CLOUD_INIT_SECRET_LABEL]: 'true' });
    });

    it('lives in the namespace of the Proxy (both take the namespace of kubectl apply)', () => {
      expect([
        secret.metadata!.namespace,
        find(samples, 'Proxy', 'proxy-gcp-sample').metadata.namespace,
      ]).toEqual([undefined, undefined]);
    });

    it('holds cloud-config user-data that installs and starts Squid', () => {
      expect(userData.startsWith('#cloud-config\n')).toBe(true);
      expect(cloudConfig.packages).toContain('squid');
      expect(cloudConfig.runcmd).toEqual(
        expect.arrayContaining([expect.stringMatching(/systemctl (re)?start squid/)]),
      );
    });
  });
});

describe('dist/kustomization.yaml', () => {
  const kustomization = parse(kustomizationYaml()) as { kind: string; resources: string[] };

  it('deploys the CRDs, then the operator', () => {
    expect(kustomization.kind).toBe('Kustomization');
    expect(kustomization.resources).toEqual(DEPLOYED_CHARTS.map((c) => `${c}.yaml`));
  });

  it('leaves the samples out', () => {
    expect(kustomization.resources).not.toContain(`${SAMPLES_CHART}.yaml`);
  });
});
