import type { ProbeTarget } from '../health/index.js';
import type { Proxy } from '../crds/proxy-types.js';
import type { ProxyCredentials } from '../providers/contract.js';
import { proxyEndpoint, proxyKey } from './proxy-address.js';

/** A proxy's probe target, or undefined while it has no address or is being deleted. */
export function probeTargetOf(p: Proxy, credentials?: ProxyCredentials): ProbeTarget | undefined {
  if (p.metadata.deletionTimestamp) return undefined;
  const endpoint = proxyEndpoint(p);
  if (!endpoint) return undefined;
  const hc = p.spec.healthCheck;
  return {
    key: proxyKey(p),
    host: endpoint.host,
    port: endpoint.port,
    probeURL: hc.probeURL,
    intervalSeconds: hc.intervalSeconds,
    timeoutSeconds: hc.timeoutSeconds,
    failureThreshold: hc.failureThreshold,
    successThreshold: hc.successThreshold,
    expectedStatusCodes: hc.expectedStatusCodes,
    ...(hc.exitIPURL === undefined ? {} : { exitIPURL: hc.exitIPURL }),
    ...(p.spec.mode === 'Managed' && p.status?.providerID ? { instance: p.status.providerID } : {}),
    // An External endpoint is its author's choice: connect only where the providers config allows.
    ...(p.spec.mode === 'External' ? { guarded: true } : {}),
    ...(credentials
      ? { credentials: { username: credentials.username, password: credentials.password } }
      : {}),
  };
}

/**
 * Where an exit IP was read: the address and the instance behind it. A reading taken through
 * another instance (even at the same address) says nothing of this one.
 */
export function exitIPSource(target: Pick<ProbeTarget, 'host' | 'port' | 'instance'>): string {
  return `${target.host}:${target.port}@${target.instance ?? ''}`;
}

/** Equal targets need no upsert: the engine keeps its counters. */
export function sameTarget(a: ProbeTarget, b: ProbeTarget): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
