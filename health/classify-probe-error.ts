import { ProbeReason } from './probe-reason.js';

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
  // Undici wraps socket errors in `cause`; bounded walk in case of a cycle.
  while (current && typeof current === 'object' && out.length < 8) {
    out.push(current as ErrorLike);
    current = (current as ErrorLike).cause;
  }
  return out;
}

const TUNNEL_STATUS = /Proxy response \((\d{3})\) !== 200/;
/** undici's own error for a 407 to a request sent to the proxy without a tunnel (http targets). */
const PROXY_AUTH_REQUIRED = /Proxy Authentication Required \(407\)/;

/** The status the proxy answered CONNECT with, when that is why the probe failed. */
export function tunnelStatusOf(err: unknown): number | undefined {
  const match = chain(err)
    .map((e) => TUNNEL_STATUS.exec(e.message ?? ''))
    .find(Boolean);
  return match ? Number(match[1]) : undefined;
}

/**
 * Maps whatever undici threw to a condition reason. `timedOut` is decided by the caller
 * (its deadline signal fired), because an abort surfaces as a generic AbortError/TimeoutError.
 */
export function classifyProbeError(err: unknown, timedOut: boolean): ClassifiedFailure {
  const errors = chain(err);
  const codes = new Set(errors.map((e) => e.code).filter((c): c is string => typeof c === 'string'));
  const detail = errors
    .map((e) => [e.code, e.message].filter(Boolean).join(' '))
    .filter(Boolean)
    .join(': ');
  const has = (...c: string[]): boolean => c.some((x) => codes.has(x));

  if (
    timedOut ||
    has('UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT')
  ) {
    return { reason: ProbeReason.ProxyTimeout, message: `probe timed out${detail ? ` (${detail})` : ''}` };
  }
  if (has('ECONNREFUSED')) {
    return { reason: ProbeReason.ConnectionRefused, message: `proxy refused the connection: ${detail}` };
  }
  if (has('ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH')) {
    return { reason: ProbeReason.ProxyUnreachable, message: `proxy unreachable: ${detail}` };
  }
  const tunnelStatus = errors.map((e) => TUNNEL_STATUS.exec(e.message ?? '')).find(Boolean);
  if (tunnelStatus?.[1] === '407' || errors.some((e) => PROXY_AUTH_REQUIRED.test(e.message ?? ''))) {
    return {
      reason: ProbeReason.ProxyAuthenticationRequired,
      message: 'proxy answered 407 Proxy Authentication Required: its credentials are missing or wrong',
    };
  }
  if (tunnelStatus) {
    return {
      reason: ProbeReason.TunnelFailed,
      message: `proxy answered CONNECT with ${tunnelStatus[1]} (it cannot reach the target)`,
    };
  }
  if (
    has('UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE', 'UND_ERR_PRX_TLS') ||
    errors.some((e) => e.name === 'ProxyConnectionError')
  ) {
    return {
      reason: ProbeReason.TunnelFailed,
      message: `proxy closed the connection before the target answered: ${detail}`,
    };
  }
  return { reason: ProbeReason.ProbeError, message: detail || String(err) };
}
