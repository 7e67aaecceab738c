// The gateway's UpstreamGuard (gateway/ports.ts) on the providers config's endpoint rule
// (providers/endpoint-ranges.ts) and the health engine's guarded lookup (health/): the rule
// that keeps probes off inside addresses keeps the gateway's connections off them too.
import { guardedLookup, type Resolve } from '../health/index.js';
import type { UpstreamGuard } from '../gateway/ports.js';
import { endpointCheck, type ExternalEndpointSettings } from '../providers/endpoint-ranges.js';

/** `resolve` is dns.lookup but in a test, which answers for names of its own. */
export function gatewayGuard(settings: ExternalEndpointSettings, resolve?: Resolve): UpstreamGuard {
  const check = endpointCheck(settings);
  const refusal = (host: string): string | undefined => check(host)?.message;
  return { refusal, lookup: guardedLookup(refusal, resolve) };
}
