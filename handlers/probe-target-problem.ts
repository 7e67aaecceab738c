import { HOST_RULE_TEXT, isProxyHost, probeURLHostIsLiteral } from '../crds/endpoint-host.js';
import { validateProbeTarget, type ProbeTarget } from '../health/index.js';

/**
 * Why the prober could not use this target, or undefined: the engine's own validation, plus
 * the two URLs the prober builds — the proxy's (`http://host:port`, an IPv6 host in brackets)
 * and the probe URL, which needs a host — and the CRD's host rule, which a URL parser does not
 * enforce: it reads 127.0.0.010 as 127.0.0.8 and would probe another address than the one
 * discovery hands out (objects stored before the rule, addresses a provider reports).
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
  if (!isProxyHost(target.host))
    return `the proxy host ${JSON.stringify(target.host)} is not ${HOST_RULE_TEXT}`;
  if (new URL(target.probeURL).hostname === '') return `probeURL ${target.probeURL} has no host`;
  if (!probeURLHostIsLiteral(target.probeURL))
    return `probeURL ${target.probeURL} has a numeric host a URL parser reads as another IPv4 address`;
  if (target.exitIPURL !== undefined && new URL(target.exitIPURL).hostname === '')
    return `exitIPURL ${target.exitIPURL} has no host`;
  if (target.exitIPURL !== undefined && !probeURLHostIsLiteral(target.exitIPURL))
    return `exitIPURL ${target.exitIPURL} has a numeric host a URL parser reads as another IPv4 address`;
  return undefined;
}
