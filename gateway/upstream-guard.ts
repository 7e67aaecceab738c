// Whether and how the gateway may connect to an upstream: an External (guarded) upstream is
// checked against the providers config's endpoint rule before every new connection, on the
// address connected to, as the health engine's probes are (docs/security.md).
import { isIP, type LookupFunction } from 'node:net';
import type { Upstream, UpstreamGuard } from './ports.js';

/** The code of the error UpstreamGuard.lookup calls back with for a refused address. */
export const UPSTREAM_REFUSED_CODE = 'ERR_PROBE_ADDRESS_REFUSED';

/**
 * What a client is told of a refused endpoint: the refusal names the proxy's host and the
 * address it resolved to, which only the gateway's log may show (clients never see an upstream
 * proxy's address; docs/gateway.md).
 */
export const REFUSAL_SHOWN_TO_CLIENTS =
  "endpoint refused by the providers config's address rule (the gateway's log names the address)";

export type UpstreamConnect =
  /** Never connected to: why. */
  | { kind: 'refused'; message: string }
  /** Connect; a guarded name resolves through `lookup`. */
  | { kind: 'connect'; lookup?: LookupFunction };

export function upstreamConnect(upstream: Upstream, guard: UpstreamGuard | undefined): UpstreamConnect {
  if (upstream.guarded !== true) return { kind: 'connect' };
  // Never an unchecked connection to an External endpoint, as the prober refuses one.
  if (guard === undefined)
    return {
      kind: 'refused',
      message: 'endpoint refused: no address rule is configured for guarded upstreams',
    };
  const why = guard.refusal(upstream.host);
  if (why !== undefined) return { kind: 'refused', message: `endpoint refused: ${why}` };
  return isIP(upstream.host) === 0 ? { kind: 'connect', lookup: guard.lookup } : { kind: 'connect' };
}

export function isUpstreamRefusal(err: NodeJS.ErrnoException): boolean {
  return err.code === UPSTREAM_REFUSED_CODE;
}
