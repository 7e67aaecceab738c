import type { ProviderErrorKind } from '../errors.js';
import { isNetworkError } from '../network-errors.js';
import type { GcpOperation } from './compute-api.js';

/** What a failed Compute call means to the provider: a taxonomy kind, or "it already exists". */
export type GcpErrorMeaning = ProviderErrorKind | 'AlreadyExists';

/** gRPC status codes google-gax uses (0–16). */
const GRPC = {
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

/** Operation error codes meaning "no capacity or quota right now": retry slowly. */
const CAPACITY_CODES = new Set([
  'QUOTA_EXCEEDED',
  'ZONE_RESOURCE_POOL_EXHAUSTED',
  'ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS',
]);
/** Operation error codes for Google-side hiccups: the insert may simply be retried. */
const TRANSIENT_OPERATION_CODES = new Set(['INTERNAL_ERROR', 'SERVICE_UNAVAILABLE', 'RATE_LIMIT_EXCEEDED']);

interface ErrorShape {
  code?: unknown;
  status?: unknown;
  httpStatusCode?: unknown;
  response?: { status?: unknown };
  message?: unknown;
  details?: unknown;
  reason?: unknown;
  /** The legacy error list (v5/v6 raw HTTP errors): [{ reason, message, domain }]. */
  errors?: unknown;
}

function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

/** The HTTP status, from wherever this library version put it. */
export function httpStatusOf(err: ErrorShape): number | undefined {
  const code = num(err.code);
  return (
    num(err.httpStatusCode) ??
    (num(err.status) !== undefined && num(err.status)! >= 100 ? num(err.status) : undefined) ??
    num(err.response?.status) ??
    (code !== undefined && code >= 100 ? code : undefined)
  );
}

function textOf(err: ErrorShape): string {
  const legacy = Array.isArray(err.errors)
    ? err.errors.flatMap((e: { reason?: unknown; message?: unknown } | null) => [e?.reason, e?.message])
    : [];
  return [err.message, err.details, err.reason, ...legacy].filter((v) => typeof v === 'string').join(' ');
}

/**
 * GCP's 400 for a call on an instance with an operation in flight (a delete of a STOPPING
 * VM, a second delete): reason resourceNotReady, message "The resource '…' is not ready".
 */
const RESOURCE_NOT_READY = /resourceNotReady|The resource '[^']*' is not ready/;

/**
 * Classifies an error thrown by a Compute call (see the table in docs/decisions/0029-the-built-in-providers.md).
 * Unknown shapes are Transient: retrying with backoff is harmless, failing a Proxy for a
 * shape we never saw is not.
 */
export function classifyGcpError(
  error: unknown,
  op: 'insert' | 'get' | 'delete' | 'list' | 'operation',
): GcpErrorMeaning {
  if (typeof error !== 'object' || error === null) return 'Transient';
  const err = error as ErrorShape;
  const http = httpStatusOf(err);
  const grpc = num(err.code) !== undefined && num(err.code)! <= 16 ? num(err.code) : undefined;
  const text = textOf(err);

  if (isNetworkError(err)) return 'Transient';
  if (http === 404 || (http === undefined && grpc === GRPC.NOT_FOUND)) return 'NotFound';
  // v7 reports HTTP 409 as gRPC ABORTED, so the HTTP status decides.
  if (http === 409 || (http === undefined && grpc === GRPC.ALREADY_EXISTS)) {
    return op === 'insert' ? 'AlreadyExists' : 'Transient';
  }
  if (/ZONE_RESOURCE_POOL_EXHAUSTED|QUOTA_EXCEEDED/.test(text)) return 'QuotaExceeded';
  if (http === 429 || /rateLimitExceeded|userRateLimitExceeded/i.test(text)) return 'Transient';
  if (http === 403 && /quota/i.test(text)) return 'QuotaExceeded';
  if (http === 401 || (http === undefined && grpc === GRPC.UNAUTHENTICATED)) return 'Transient';
  // Not ready *yet*: the operation in flight finishes by itself.
  if (RESOURCE_NOT_READY.test(text)) return 'Transient';
  if (http === 400 || http === 403 || http === 422) return 'Permanent';
  if (http !== undefined && http >= 500) return 'Transient';
  if (http === undefined && (grpc === GRPC.INVALID_ARGUMENT || grpc === GRPC.PERMISSION_DENIED))
    return 'Permanent';
  if (http === undefined && grpc === GRPC.RESOURCE_EXHAUSTED) return 'QuotaExceeded';
  return 'Transient';
}

/** The failure recorded on a finished zone operation, if any: codes and messages joined. */
export function operationFailure(op: GcpOperation): { kind: ProviderErrorKind; message: string } | undefined {
  const errors = op.error?.errors ?? [];
  if (op.status !== 'DONE' || errors.length === 0) return undefined;
  const codes = errors.map((e) => e.code ?? 'UNKNOWN');
  const message = errors.map((e) => `${e.code ?? 'UNKNOWN'}: ${e.message ?? ''}`.trim()).join('; ');
  if (codes.some((c) => CAPACITY_CODES.has(c))) return { kind: 'QuotaExceeded', message };
  if (codes.every((c) => TRANSIENT_OPERATION_CODES.has(c))) return { kind: 'Transient', message };
  return { kind: 'Permanent', message };
}
