import { isProxyHost } from '../crds/endpoint-host.js';
import type { Proxy } from '../crds/proxy-types.js';

export function proxyKey(p: Proxy): string {
  return `${p.metadata.namespace}/${p.metadata.name}`;
}

/** Where the proxy listens: External from its endpoint, Managed from status.ip and spec.port. */
export function proxyEndpoint(p: Proxy): { host: string; port: number } | undefined {
  if (p.spec.mode === 'External')
    return p.spec.endpoint ? { host: p.spec.endpoint.host, port: p.spec.endpoint.port } : undefined;
  return p.status?.ip ? { host: p.status.ip, port: p.spec.port } : undefined;
}

export function proxyAddress(p: Proxy): string {
  const e = proxyEndpoint(p);
  return e ? `${e.host}:${e.port}` : '';
}

/**
 * The endpoint discovery may hand out: the declared one, if its host names exactly one address
 * (the CRD's host rule; objects stored before it and addresses a provider reports may not).
 */
export function servedEndpoint(p: Proxy): { host: string; port: number } | undefined {
  const e = proxyEndpoint(p);
  return e && isProxyHost(e.host) ? e : undefined;
}
