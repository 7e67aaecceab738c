// The Proxies of one crawl's fleet in the operator (bench:crawl and its matrix): a namespace
// of External Proxies, one per forward proxy, probed through a loopback target.
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { createProxy } from './bench-proxies.js';

export async function createProxies(
  kc: KubeConfig,
  namespace: string,
  endpoints: { host: string; port: number }[],
  probeURL: string,
) {
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  const api = kc.makeApiClient(CustomObjectsApi);
  for (const [i, endpoint] of endpoints.entries()) {
    await createProxy(api, namespace, `proxy-${i}`, {
      mode: 'External',
      endpoint,
      maxLeases: 5,
      attributes: { run: namespace },
      healthCheck: { probeURL },
    });
  }
}
