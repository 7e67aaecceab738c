// What an upstream's answer means for the lease book and for the client: the decisions of
// docs/gateway.md ("Failures"), pure so a table test states them.
import type { GatewayReport } from './ports.js';

/** How an attempt through one upstream ended before anything reached the client. */
export type ConnectVerdict =
  /** The tunnel is up: hand it to the client. */
  | { kind: 'tunnel' }
  /** The upstream could not carry it (its own refusal): report unreachable, try another proxy. */
  | { kind: 'retry'; report: 'unreachable' }
  /** The site is down (the upstream answered 502): the target's failure; the client gets 502. */
  | { kind: 'site_down' };

/** An upstream's answer to our CONNECT. 502 is the upstream saying the site is unreachable. */
export function connectVerdict(status: number): ConnectVerdict {
  if (status >= 200 && status < 300) return { kind: 'tunnel' };
  if (status === 502) return { kind: 'site_down' };
  return { kind: 'retry', report: 'unreachable' };
}

export interface StatusCodes {
  /** Site statuses reported `banned` for the target (default 403). */
  banned: ReadonlySet<number>;
  /** Site statuses reported `rate_limited` (default 429, 503 with Retry-After is the caller's choice). */
  rateLimited: ReadonlySet<number>;
}

export type ResponseVerdict =
  /** Pass it to the client; report nothing. */
  | { kind: 'pass' }
  /** Pass it to the client and report it for the target. */
  | { kind: 'report'; report: Exclude<GatewayReport, 'unreachable'>; retryAfterSeconds?: number }
  /** The upstream itself refused us (407: its credentials): not the site's answer; retry elsewhere. */
  | { kind: 'retry'; report: 'unreachable' };

/**
 * A plain-HTTP answer through an upstream. A 407 can only be the upstream's own (sites do not
 * send it). Retry-After is honoured as seconds or an HTTP date relative to `nowMs`.
 */
export function responseVerdict(
  status: number,
  retryAfter: string | undefined,
  codes: StatusCodes,
  nowMs: number,
): ResponseVerdict {
  if (status === 407) return { kind: 'retry', report: 'unreachable' };
  const banned = codes.banned.has(status);
  const limited = codes.rateLimited.has(status);
  if (!banned && !limited) return { kind: 'pass' };
  const seconds = retryAfterSeconds(retryAfter, nowMs);
  return {
    kind: 'report',
    report: limited ? 'rate_limited' : 'banned',
    ...(seconds === undefined ? {} : { retryAfterSeconds: seconds }),
  };
}

/** Retry-After as whole seconds (delta-seconds or an HTTP-date); undefined when absent or unparseable. */
export function retryAfterSeconds(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d{1,9}$/.test(text)) return Number(text);
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, Math.ceil((at - nowMs) / 1000));
}

/**
 * Where an attempt through an upstream failed: before the request could leave for it (the
 * guard refused its address, the connection was refused or timed out), or once it was on its
 * way, when the upstream may have forwarded it to the site.
 */
export type FailurePoint = 'before_sending' | 'after_sending';

/** RFC 9110 9.2.2: the methods whose repetition has the effect of one request. */
const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

export function isIdempotent(method: string): boolean {
  return IDEMPOTENT_METHODS.has(method);
}

/**
 * Whether a failed attempt's request may be sent again through another upstream: always
 * before it was sent; after, only an idempotent method (a POST sent twice may be two orders).
 */
export function mayResend(method: string, point: FailurePoint): boolean {
  return point === 'before_sending' || isIdempotent(method);
}
