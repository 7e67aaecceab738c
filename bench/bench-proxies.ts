// The one way the benches write a Proxy: the CRD's group, version and kind filled in, the spec
// as a user writes it (the API server applies the defaults).
import type { CustomObjectsApi } from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION, type HealthCheckSpec, type ProxySpec } from '../crds/proxy-types.js';

/** A spec as written: only the mode and the probe URL are required, the API server defaults the rest. */
export type WrittenProxySpec = Partial<Omit<ProxySpec, 'healthCheck'>> &
  Pick<ProxySpec, 'mode'> & { healthCheck: Partial<HealthCheckSpec> & Pick<HealthCheckSpec, 'probeURL'> };

export async function createProxy(
  api: CustomObjectsApi,
  namespace: string,
  name: string,
  spec: WrittenProxySpec,
): Promise<void> {
  await api.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace,
    plural: PLURAL,
    body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'Proxy', metadata: { name, namespace }, spec },
  });
}
