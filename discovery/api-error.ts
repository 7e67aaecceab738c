// The one error shape every non-2xx response carries: {error, message}. `error` is a stable
// machine-readable code; `message` names what was wrong for the human reading it.
import type { Response } from 'express';

export const API_ERROR_CODES = [
  'invalid_request',
  'invalid_json',
  'unauthorized',
  'not_found',
  'lease_not_found',
  'proxy_not_found',
  'method_not_allowed',
  'request_timeout',
  'no_match',
  'all_busy',
  'all_cooling_down',
  'payload_too_large',
  'unsupported_media_type',
  'headers_too_large',
  'store_unavailable',
  'outcome_unknown',
  'too_many_requests',
  'lease_quota',
  'cooldown_quota',
  'report_quota',
  'book_queue_full',
  'internal',
] as const;

export type ApiErrorCode = (typeof API_ERROR_CODES)[number];

export interface ApiErrorBody {
  error: ApiErrorCode;
  message: string;
}

/** A client mistake detected by our own validation; the error middleware renders it. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: ApiErrorCode,
    message: string,
    /** Sent as Retry-After (seconds) when set. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export function sendError(res: Response, status: number, code: ApiErrorCode, message: string): void {
  sendJSON(res, status, errorBody(code, message));
}

/**
 * 429 too_many_requests with Retry-After: the wait in whole seconds, at least 1 (the shortest
 * HTTP can say), which the message names.
 */
export function sendTooManyRequests(
  res: Response,
  waitMs: number,
  message: (seconds: number) => string,
): void {
  const seconds = Math.max(1, Math.ceil(waitMs / 1000));
  res.setHeader('Retry-After', String(seconds));
  sendError(res, 429, 'too_many_requests', message(seconds));
}

/**
 * Writes a JSON answer directly (express's res.json re-parses and re-formats the content
 * type and checks freshness on every call: measurable on the lease path). Headers already
 * set on `res` (Allow, WWW-Authenticate, Connection) are kept.
 */
export function sendJSON(res: Response, status: number, body: unknown): void {
  const json = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': typeof json === 'string' ? Buffer.byteLength(json) : json.length,
  });
  res.end(json);
}

export function errorBody(code: ApiErrorCode, message: string): ApiErrorBody {
  return { error: code, message };
}
