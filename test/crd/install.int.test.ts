import { ApiextensionsV1Api } from '@kubernetes/client-node';
import { request, Agent } from 'undici';
import { PROXY_CRD_NAME } from '../../crds/proxy-crd.js';
import { GROUP, KIND, PLURAL, SHORT_NAME, VERSION } from '../../crds/proxy-types.js';
import { testKubeConfig } from '../harness/kube.js';
import { installProxyCrd } from './install-proxy-crd.js';

const kc = testKubeConfig();

beforeAll(() => installProxyCrd(kc));

describe('the Proxy CRD from dist/crds.yaml', () => {
  it('installs and becomes Established with its names accepted', async () => {
    const crd = await kc
      .makeApiClient(ApiextensionsV1Api)
      .readCustomResourceDefinition({ name: PROXY_CRD_NAME });
    const conditions = Object.fromEntries((crd.status?.conditions ?? []).map((c) => [c.type, c.status]));
    expect(conditions).toMatchObject({ Established: 'True', NamesAccepted: 'True' });
    expect(crd.status?.acceptedNames).toMatchObject({
      kind: KIND,
      plural: PLURAL,
      shortNames: [SHORT_NAME],
      categories: ['crawl'],
    });
  });

  it('publishes the field descriptions `kubectl explain proxy.spec.healthCheck` reads (OpenAPI v3)', async () => {
    const cluster = kc.getCurrentCluster()!;
    const ca = Buffer.from(cluster.caData!, 'base64').toString();
    const token = kc.getCurrentUser()!.token!;
    const dispatcher = new Agent({ connect: { ca } });
    try {
      // The OpenAPI controller publishes a new CRD's schema shortly after it is Established.
      const deadline = Date.now() + 60_000;
      let healthCheck: SchemaDoc | undefined;
      while (!healthCheck && Date.now() < deadline) {
        healthCheck = await publishedHealthCheckSchema(
          `${cluster.server}/openapi/v3/apis/${GROUP}/${VERSION}`,
          token,
          dispatcher,
        );
        if (!healthCheck) await new Promise((r) => setTimeout(r, 500));
      }
      expect(healthCheck?.description).toMatch(/probes the proxy/);
      expect(healthCheck?.properties?.timeoutSeconds?.description).toMatch(/less than intervalSeconds/);
    } finally {
      await dispatcher.close();
    }
  });
});

interface SchemaDoc {
  description?: string;
  properties?: Record<string, SchemaDoc>;
}

async function publishedHealthCheckSchema(
  url: string,
  token: string,
  dispatcher: Agent,
): Promise<SchemaDoc | undefined> {
  const res = await request(url, { dispatcher, headers: { authorization: `Bearer ${token}` } });
  if (res.statusCode !== 200) {
    await res.body.dump();
    return undefined;
  }
  const doc = (await res.body.json()) as { components?: { schemas?: Record<string, SchemaDoc> } };
  const proxy = Object.entries(doc.components?.schemas ?? {}).find(([key]) =>
    key.endsWith(`.${VERSION}.${KIND}`),
  )?.[1];
  return proxy?.properties?.spec?.properties?.healthCheck;
}
