import { ProbeReason } from './probe-reason.js';
import { ClosedEarlyError, TunnelRefusedError } from './proxy-wire.js';

export interface ClassifiedFailure {
  reason: ProbeReason;
  message: string;
}

interface ErrorLike {
  name?: string;
  code?: string;
  message?: string;
  cause?: unknown;
}

function chain(err: unknown): ErrorLike[] {
  const out: ErrorLike[] = [];
  let current: unknown = err;
  // Wrapped errors carry the socket's in `cause`; bounded walk in case of a cycle.
  while (current && typeof current === 'object' && out.length < 8) {
    out.push(current as ErrorLike);
    current = (current as ErrorLike).cause;
  }
  return out;
}

/** The status the proxy answered CONNECT with, when that is why the probe failed. */
export function tunnelStatusOf(err: unknown): number | undefined {
  return chain(err).find((e): e is TunnelRefusedError => e instanceof TunnelRefusedError)?.status;
}

/**
 * Maps what a probe's sockets failed with (proxy-wire.ts's errors and Node's socket codes) to
 * a condition reason. `timedOut` is decided by the caller (its deadline fired): the deadline
 * destroys the sockets, so the error itself only says "closed".
 */
export function classifyProbeError(err: unknown, timedOut: boolean): ClassifiedFailure {
  const errors = chain(err);
  const codes = new Set(errors.map((e) => e.code).filter((c): c is string => typeof c === 'string'));
  const detail = errors
    .map((e) => [e.code, e.message].filter(Boolean).join(' '))
    .filter(Boolean)
    .join(': ');
  const has = (...c: string[]): boolean => c.some((x) => codes.has(x));

  const refused = errors.find((e) => e.code === 'ERR_PROBE_ADDRESS_REFUSED');
  if (refused) return { reason: ProbeReason.EndpointRefused, message: refused.message ?? 'endpoint refused' };
  if (timedOut || has('ETIMEDOUT')) {
    return { reason: ProbeReason.ProxyTimeout, message: `probe timed out${detail ? ` (${detail})` : ''}` };
  }
  if (has('ECONNREFUSED')) {
    return { reason: ProbeReason.ConnectionRefused, message: `proxy refused the connection: ${detail}` };
  }
  if (has('ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH')) {
    return { reason: ProbeReason.ProxyUnreachable, message: `proxy unreachable: ${detail}` };
  }
  const tunnelStatus = tunnelStatusOf(err);
  if (tunnelStatus === 407) {
    return {
      reason: ProbeReason.ProxyAuthenticationRequired,
      message: 'proxy answered 407 Proxy Authentication Required: its credentials are missing or wrong',
    };
  }
  if (tunnelStatus !== undefined) {
    return {
      reason: ProbeReason.TunnelFailed,
      message: `proxy answered CONNECT with ${tunnelStatus} (it cannot reach the target)`,
    };
  }
  if (has('ECONNRESET', 'EPIPE') || errors.some((e) => e instanceof ClosedEarlyError)) {
    return {
      reason: ProbeReason.TunnelFailed,
      message: `proxy closed the connection before the target answered: ${detail}`,
    };
  }
  return { reason: ProbeReason.ProbeError, message: detail || String(err) };
}
