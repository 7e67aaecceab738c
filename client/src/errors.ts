// What a failed call throws. A server answer becomes a DiscoveryApiError carrying the
// server's stable code; a call that never got an answer becomes a timeout or transport error.
// An abort through the caller's own AbortSignal rethrows the signal's reason unchanged.
import type { ApiErrorCode, NoLeaseCode } from './types.js';

/** The base of every error this client throws itself. */
export class DiscoveryError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The server answered non-2xx with `{error, message}`. */
export class DiscoveryApiError extends DiscoveryError {
  constructor(
    /** The HTTP status. */
    readonly status: number,
    /** The server's stable code, e.g. `all_busy`. */
    readonly code: ApiErrorCode,
    /** The server's message, naming what was wrong. */
    readonly serverMessage: string,
    /** `METHOD /path` of the call. */
    readonly call: string,
    /** The answer's Retry-After in seconds (a 409 all_cooling_down says when the first cooldown ends). */
    readonly retryAfterSeconds?: number,
  ) {
    super(`${call}: ${status} ${code}: ${serverMessage}`);
  }
}

/** The call did not complete within its timeout (connect, headers and body together). */
export class DiscoveryTimeoutError extends DiscoveryError {
  constructor(
    readonly call: string,
    readonly timeoutMs: number,
  ) {
    super(`${call}: no answer within ${timeoutMs} ms`);
  }
}

/** No usable answer: the connection failed, or the server answered something that is not the API. */
export class DiscoveryTransportError extends DiscoveryError {
  constructor(
    readonly call: string,
    message: string,
    cause?: unknown,
  ) {
    super(`${call}: ${message}`, { cause });
  }
}

const NO_LEASE_CODES: readonly string[] = [
  'no_match',
  'all_busy',
  'all_cooling_down',
] satisfies NoLeaseCode[];

/** True for the 409 answers of POST /v1/leases: nothing was leasable (and why, in `code`). */
export function isNoLease(err: unknown): err is DiscoveryApiError & { code: NoLeaseCode } {
  return err instanceof DiscoveryApiError && NO_LEASE_CODES.includes(err.code);
}

/** True when the server no longer knows the lease (expired, released or never existed). */
export function isLeaseGone(err: unknown): boolean {
  return err instanceof DiscoveryApiError && err.code === 'lease_not_found';
}
