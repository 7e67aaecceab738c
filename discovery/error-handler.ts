// The discovery API's last handler: every error becomes a JSON answer with a closed code; a
// client's mistake keeps its 4xx and never becomes a 500, and a store outage is a 503 that says
// whether the write may have been applied.
import type { ErrorRequestHandler } from 'express';
import type { Logger } from 'pino';
import { StoreUnavailableError } from '../book/store-unavailable.js';
import { ApiError, sendError, type ApiErrorCode } from './api-error.js';

/** Renders errors as JSON; a client's mistake keeps its 4xx status and never becomes a 500. */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, next) => {
    if (res.headersSent) return next(err);
    if (err instanceof ApiError) {
      if (err.retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(err.retryAfterSeconds));
      return sendError(res, err.status, err.code, err.message);
    }
    if (err instanceof StoreUnavailableError) {
      // The store logs the outage once. Its cause stays in the log: the Redis client's text
      // names the store's address, which no crawler needs to see.
      logger.debug({ err: err.message, method: req.method, path: req.path }, 'lease store unavailable');
      res.setHeader('Retry-After', String(err.retryAfterSeconds));
      // A write that reached the store unanswered may still be applied: the answer says so.
      if (err.mayHaveApplied && req.method !== 'GET' && req.method !== 'HEAD') {
        return sendError(
          res,
          503,
          'outcome_unknown',
          `the lease store did not answer: this call may have been applied or may still be; ` +
            `retry it with the same Idempotency-Key after ${err.retryAfterSeconds} s to get its one outcome`,
        );
      }
      return sendError(
        res,
        503,
        'store_unavailable',
        `the lease store is unavailable; nothing was changed; retry after ${err.retryAfterSeconds} s`,
      );
    }
    const status = clientErrorStatus(err);
    if (status !== undefined) {
      // express raises these itself, e.g. a path parameter that is not valid percent-encoding.
      const code: ApiErrorCode = 'invalid_request';
      return sendError(res, status, code, err instanceof Error ? err.message : String(err));
    }
    logger.error({ err, method: req.method, path: req.path }, 'discovery request failed');
    sendError(res, 500, 'internal', 'internal error');
  };
}

function clientErrorStatus(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const status =
    (err as { status?: unknown; statusCode?: unknown }).status ??
    (err as { statusCode?: unknown }).statusCode;
  return typeof status === 'number' && status >= 400 && status < 500 ? status : undefined;
}
