// What the discovery API reads proxies from. The API owns this interface; the handlers layer
// implements it over the informer cache, tests over a plain array. Nothing here knows about
// Kubernetes.

/** DI token for the ProxyCatalog implementation. */
export const PROXY_CATALOG = Symbol('ProxyCatalog');

/** One proxy as the discovery API sees it: a flattened, read-only view of a Proxy resource. */
export interface ProxyRecord {
  /** namespace/name: stable across replacements, unlike the IP. */
  id: string;
  /** Empty until the proxy has an address; such a proxy is listed but never leased. */
  ip: string;
  port: number;
  attributes: Record<string, string>;
  phase: string;
  healthy: boolean;
  latencyMillis: number;
  /** Concurrent lease cap; 0 means list-only, never leased. */
  maxLeases: number;
}

export interface ProxyCatalog {
  /** The current proxies. Called on every request, so it must be a cheap cache read. */
  list(): ProxyRecord[];
}
