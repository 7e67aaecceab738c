// The one error shape every non-2xx response carries: {error, message}. `error` is a stable
// machine-readable code; `message` names what was wrong for the human reading it.
import type { Response } from 'express';

export type ApiErrorCode =
  | 'invalid_request'
  | 'invalid_json'
  | 'unauthorized'
  | 'not_found'
  | 'lease_not_found'
  | 'method_not_allowed'
  | 'no_match'
  | 'all_busy'
  | 'all_cooling_down'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'internal';

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
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export function sendError(res: Response, status: number, code: ApiErrorCode, message: string): void {
  const body: ApiErrorBody = { error: code, message };
  res.status(status).json(body);
}
