import { validateProbeTarget, type ProbeTarget } from '../health/index.js';

/**
 * Why the prober could not use this target, or undefined: the engine's own validation, plus
 * the two URLs the prober builds — the proxy's (`http://host:port`, an IPv6 host in brackets)
 * and the probe URL, which needs a host.
 */
export function probeTargetProblem(target: ProbeTarget): string | undefined {
  try {
    validateProbeTarget(target);
  } catch (err) {
    return (err as Error).message;
  }
  const host = target.host.includes(':') && !target.host.startsWith('[') ? `[${target.host}]` : target.host;
  if (!URL.canParse(`http://${host}:${target.port}`))
    return `the proxy address ${host}:${target.port} is not a usable URL host and port`;
  if (new URL(target.probeURL).hostname === '') return `probeURL ${target.probeURL} has no host`;
  return undefined;
}
